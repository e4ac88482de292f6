"""Sampling: greedy, temperature, top-k, top-p, min-p, penalties; draws keyed by (seed, position)."""
from __future__ import annotations

from collections import Counter

import pytest
import torch

from engine.messages import SamplingParams
from engine.sampling import apply_penalties, keyed_uniform, pick, pick_rows


def logits_from(probs: list[float]) -> torch.Tensor:
    return torch.tensor(probs, dtype=torch.float32).log()


def test_keyed_uniform_depends_only_on_seed_and_position():
    assert keyed_uniform(7, 100) == keyed_uniform(7, 100)
    draws = {keyed_uniform(7, p) for p in range(1000)}
    assert len(draws) == 1000 and all(0.0 <= u < 1.0 for u in draws)
    assert keyed_uniform(7, 5) != keyed_uniform(8, 5)
    assert abs(sum(draws) / 1000 - 0.5) < 0.05


def test_greedy_takes_the_first_maximum():
    assert pick(torch.tensor([0.0, 3.0, 3.0, 1.0]), SamplingParams(), None, 0) == (1, 1.0)


def test_filters_limit_the_candidates():
    lg = logits_from([0.5, 0.3, 0.15, 0.05])
    seen = lambda sp: {pick(lg, sp, None, p)[0] for p in range(400)}  # noqa: E731
    assert seen(SamplingParams(temperature=1.0, seed=1)) == {0, 1, 2, 3}
    assert seen(SamplingParams(temperature=1.0, top_k=2, seed=1)) == {0, 1}
    assert seen(SamplingParams(temperature=1.0, top_p=0.7, seed=1)) == {0, 1}
    assert seen(SamplingParams(temperature=1.0, min_p=0.5, seed=1)) == {0, 1}
    assert seen(SamplingParams(temperature=0.05, seed=1)) == {0}


def test_sampled_frequencies_follow_the_distribution():
    lg = logits_from([0.6, 0.3, 0.1])
    counts = Counter(pick(lg, SamplingParams(temperature=1.0, seed=3), None, p)[0] for p in range(3000))
    assert abs(counts[0] / 3000 - 0.6) < 0.04 and abs(counts[2] / 3000 - 0.1) < 0.03


def test_penalties():
    lg = torch.tensor([2.0, -1.0, 0.5])
    out = apply_penalties(lg, SamplingParams(repetition_penalty=2.0), Counter({0: 1, 1: 1}))
    assert out.tolist() == [1.0, -2.0, 0.5]
    out = apply_penalties(lg, SamplingParams(presence_penalty=0.5, frequency_penalty=0.25), Counter({2: 2}))
    assert out.tolist() == [2.0, -1.0, 0.5 - 0.5 - 0.5]
    # a strong repetition penalty turns greedy away from the repeated token
    assert pick(torch.tensor([2.0, 1.5]), SamplingParams(repetition_penalty=2.0), Counter({0: 1}), 0)[0] == 1


def test_rows_of_a_window_see_the_proposals_before_them():
    """Row i's penalties count proposals[:i], exactly as if they had been accepted one by one."""
    sp = SamplingParams(repetition_penalty=10.0)
    lg = torch.tensor([[1.0, 0.9, 0.0]] * 3)
    picks = pick_rows(lg, sp, history=[2], positions=[5, 6, 7], proposals=[0, 1])
    assert picks == [0, 1, 0]     # row 1 sees token 0 penalised; row 2 sees 0 and 1 penalised: 0.1 vs 0.09
    alone = [pick(lg[0], sp, Counter([2]), 5)[0], pick(lg[1], sp, Counter([2, 0]), 6)[0],
             pick(lg[2], sp, Counter([2, 0, 1]), 7)[0]]
    assert picks == alone


def full_sort_pick(logits: torch.Tensor, p: SamplingParams, position: int) -> int:
    """The sampling order written plainly: every token sorted, then the cuts, then the draw."""
    probs = torch.softmax(logits.float() * (1.0 / p.temperature), dim=0)
    vals, idx = torch.sort(probs, descending=True, stable=True)
    cum = torch.cumsum(vals.double(), 0)
    keep = len(vals)
    if p.top_p < 1.0:
        keep = min(keep, int((cum < p.top_p).sum()) + 1)
    if p.min_p > 0.0:
        keep = min(keep, max(1, int((vals.double() >= p.min_p * float(vals[0])).sum())))
    mass = 1.0 if p.top_p == 1.0 and p.min_p == 0.0 else float(cum[keep - 1])
    u = keyed_uniform(p.seed, position)
    return int(idx[min(int((cum[:keep] <= u * mass).sum()), keep - 1)])


def test_partial_sort_draws_what_a_full_sort_draws():
    """pick sorts only the candidates the cut and the draw need: the same token as sorting all of them,
    for peaked, flat and tied distributions, with every filter, at draws near 0 and near 1."""
    g = torch.Generator().manual_seed(0)
    rows = [torch.randn(5000, generator=g) * s for s in (0.5, 2.0, 8.0)]
    rows.append(torch.randint(0, 4, (3000,), generator=g).float())          # many exact ties
    rows.append(torch.round(torch.randn(4000, generator=g) * 8) / 2)        # some ties among the first
    rows.append(torch.zeros(300))                                           # all tied
    params = [SamplingParams(temperature=t, top_p=tp, min_p=mp, seed=s)
              for t, tp, mp, s in [(1.0, 1.0, 0.0, 1), (0.8, 0.95, 0.0, 2), (1.3, 0.5, 0.0, 3),
                                   (1.0, 1.0, 0.05, 4), (0.7, 0.9, 0.1, 5), (2.0, 0.999, 0.0, 6)]]
    drawn = set()
    for lg in rows:
        for sp in params:
            for position in range(40):
                got = pick(lg, sp, None, position)[0]
                assert got == full_sort_pick(lg, sp, position), (sp, position)
                drawn.add(got)
    assert len(drawn) > 100


def test_draws_from_logits_with_infinities_and_nans():
    """An extreme penalty or temperature can make logits infinite: +inf tokens share the mass, NaN counts
    as -inf, and all -inf leaves every token alike (no error, no NaN probabilities)."""
    inf, nan = float("inf"), float("nan")
    for sp in (SamplingParams(temperature=1.0, seed=2), SamplingParams(temperature=1.0, top_p=0.5, seed=2),
               SamplingParams(temperature=1.0, top_k=3, seed=2), SamplingParams(temperature=1.0, min_p=0.2, seed=2)):
        both = {pick(torch.tensor([1.0, inf, 0.5, inf, -inf]), sp, None, p)[0] for p in range(200)}
        assert both <= {1, 3}
        assert {pick(torch.tensor([nan, 2.0, nan, 1.0]), sp, None, p)[0] for p in range(200)} <= {1, 3}
        assert {pick(torch.full((4,), -inf), sp, None, p)[0] for p in range(200)} <= {0, 1, 2, 3}
    assert len({pick(torch.tensor([1.0, inf, 0.5, inf]), SamplingParams(temperature=1.0, seed=2), None, p)[0]
                for p in range(200)}) == 2


def test_a_windows_verdicts_are_each_slots_own():
    """verdicts() picks a whole window with one transfer (greedy rows' argmax together, the other rows'
    logits copied once): each slot gets what its own verdict would give, whatever the other slots are."""
    from engine.window import SlotRows, verdict, verdicts

    g = torch.Generator().manual_seed(4)
    parts = [SlotRows(0, 0, 10, 1, True, [5, 7], [1, 2]),              # greedy, two proposals
             SlotRows(1, 3, 4, 6, False),                              # a prompt chunk: no picks
             SlotRows(2, 9, 20, 1, True, [3], [4, 4]),                 # sampled
             SlotRows(3, 11, 8, 1, True, [], [6]),                     # greedy with a penalty
             SlotRows(4, 12, 30, 1, True, [9, 9])]                     # greedy
    params = [SamplingParams(), SamplingParams(), SamplingParams(temperature=0.9, top_p=0.9, seed=3),
              SamplingParams(repetition_penalty=1.3), SamplingParams()]
    n = sum(len(sr.pick_rows) for sr in parts)
    logits = torch.randn(n, 50, generator=g) * 3
    logits[:3, 5] += 20                                                # slot 0's first proposal is kept
    keep = [True, False, True, False, False]                            # return_logits: slots 0 and 2
    got = verdicts(parts, logits, params, keep)
    at = 0
    for sr, p, v, kept in zip(parts, params, got, keep):
        k = len(sr.pick_rows)
        alone = verdict(sr, logits[at:at + k], p)
        assert (v.picks, v.kept, v.n_valid_rows, v.hidden_rows) == \
            (alone.picks, alone.kept, alone.n_valid_rows, alone.hidden_rows)
        assert torch.equal(v.logits, logits[at:at + k]) if kept else v.logits is None
        at += k
    assert got[0].kept >= 2 and got[1].picks == [] and len(got[2].picks) == 2


def test_a_windows_sampled_picks_made_on_the_device_are_the_hosts(monkeypatch):
    """With the sampled picks made where the logits are (engine.kernels.sample; forced here on the CPU
    under the Triton interpreter), each slot's verdict is what the host's would be: the rows, positions and
    parameters of each slot reach the kernel in order, a slot with penalties is picked on the host, and a
    row with a +inf picks by the host's rules there too."""
    pytest.importorskip("triton")
    from engine import window
    from engine.window import SlotRows, verdict, verdicts

    monkeypatch.setattr(window, "DEVICE_SAMPLING", "1")
    from tests.engine.test_packed import DEV, kernel_module
    if DEV == "cpu":                                     # the interpreter's sort of 1,024 takes minutes
        monkeypatch.setattr(kernel_module("sample"), "FEW", 64)
    g = torch.Generator().manual_seed(5)
    parts = [SlotRows(0, 0, 10, 1, True, [5, 7], [1, 2]),
             SlotRows(1, 3, 4, 6, False),
             SlotRows(2, 9, 20, 1, True, [3], [4, 4]),
             SlotRows(3, 11, 8, 1, True, [], [6]),
             SlotRows(4, 12, 30, 1, True, [9, 9, 2]),
             SlotRows(5, 16, 50, 1, True, [1])]
    params = [SamplingParams(temperature=0.8, seed=1), SamplingParams(),
              SamplingParams(temperature=0.9, top_p=0.9, seed=3), SamplingParams(temperature=1.0, presence_penalty=1.0),
              SamplingParams(temperature=1.2, top_k=5, min_p=0.1, seed=8), SamplingParams(temperature=0.7, seed=2)]
    n = sum(len(sr.pick_rows) for sr in parts)
    logits = torch.randn(n, 50, generator=g) * 3
    logits[:3, 5] += 20                                                # slot 0's first proposal is kept
    logits[-1, 7] = float("inf")                                       # slot 5's second row: +inf alone
    got = verdicts(parts, logits.to(DEV), params)
    at = 0
    for sr, p, v in zip(parts, params, got):
        k = len(sr.pick_rows)
        alone = verdict(sr, logits[at:at + k], p)
        assert (v.picks, v.kept, v.n_valid_rows) == (alone.picks, alone.kept, alone.n_valid_rows)
        at += k
    assert got[0].kept >= 2 and got[5].picks[1] == 7
    calls = []
    monkeypatch.setattr(window, "pick_rows", lambda *a: calls.append(a) or [0] * len(a[3]))
    verdicts(parts, logits.to(DEV), params)
    assert [c[1] for c in calls] == [params[3]]                        # only the penalties went to the host


def test_a_device_sampler_that_cannot_run_leaves_the_picks_to_the_host(monkeypatch, capsys):
    """A kernel that fails where it runs (a compile or launch error) does not fail the window: it is tried
    once before the first use, and the host picks, from then on, and says so once."""
    pytest.importorskip("triton")
    from engine import window
    from engine.kernels import sample
    from engine.window import SlotRows, verdict, verdicts

    monkeypatch.setattr(window, "DEVICE_SAMPLING", "1")
    monkeypatch.setattr(window, "_WORKED", set())

    def broken(*_a):
        raise RuntimeError("no kernel image for this device")
    monkeypatch.setattr(sample, "sample", broken)
    parts = [SlotRows(0, 0, 10, 1, True, [3], [1])]
    params = [SamplingParams(temperature=0.8, seed=1)]
    logits = torch.randn(2, 40, generator=torch.Generator().manual_seed(1))
    assert verdicts(parts, logits, params)[0].picks == verdict(parts[0], logits, params[0]).picks
    assert window.DEVICE_SAMPLING == "0" and "the host picks" in capsys.readouterr().err
