"""Window: the rows one group sends through the stages in one round, and its verdict.

For every slot of the group: the rows it still has to read (a prompt chunk) and, once it has reached
its current token, that token plus up to n proposals. The last stage picks the target's token at
every row that needs one; kept = 1 + the leading proposals equal to the picks before them.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

import torch

from engine.sampling import argmax_pick, host_picks, keyed_uniform, pick_rows

# sampled picks without penalties on the device where the logits are (engine.kernels.sample): "auto" on a
# GPU, "0" never (the host picks, as on a CPU), "1" on every device (a CPU's under the Triton interpreter,
# for tests)
DEVICE_SAMPLING = os.environ.get("STRATA_DEVICE_SAMPLING", "auto")


@dataclass
class SlotRows:
    slot: int
    start: int                 # first row index of this slot in the window
    first_pos: int             # position of the first row
    n_base: int                # rows of already-known tokens (prompt chunk and/or current token)
    decoding: bool             # the base rows end at the current token: picks wanted
    proposals: list[int] = field(default_factory=list)
    history: list[int] = field(default_factory=list)   # tokens before the window (for penalties)
    constraint: object = None                           # the sequence's grammar matcher (engine.grammar)

    @property
    def n_rows(self) -> int:
        return self.n_base + len(self.proposals)

    @property
    def pick_positions(self) -> list[int]:
        """The position of the token each pick row predicts."""
        first = self.first_pos + self.n_base
        return list(range(first, first + 1 + len(self.proposals)))

    @property
    def pick_rows(self) -> list[int]:
        """Window row indices whose pick is wanted: the current token's row and every proposal row."""
        if not self.decoding:
            return []
        first = self.start + self.n_base - 1
        return list(range(first, first + 1 + len(self.proposals)))


@dataclass
class SlotVerdict:
    slot: int
    picks: list[int]           # the target's token after each pick row
    kept: int                  # 1 + accepted proposals (0 for a prompt-only chunk)
    n_valid_rows: int          # rows whose KV stays valid (base rows + accepted proposals)
    hidden_rows: list[int]     # window rows of those valid positions (for the drafter's catch-up)
    logits: torch.Tensor | None = None   # the pick rows' logits, kept only for return_logits requests


def verdicts(parts: list[SlotRows], logits: torch.Tensor, params: list,
             keep: list[bool] | None = None, made=None) -> list[SlotVerdict]:
    """Each slot's verdict from the window's pick-row logits (the slots' pick rows in order; params: each
    slot's sampling; keep: the slots whose verdict carries its pick rows' logits, return_logits requests;
    made: where given, gives every pick row's pick if the device made them already (a chaining window's:
    WindowLogits.picks), else None). One transfer from the device for the window, not one per slot: the
    greedy rows' argmax and the sampled rows' picks made on the device together, the other rows' logits
    (and those kept) copied to the host once."""
    keep = keep or [False] * len(parts)
    picked = made() if made is not None else None
    plain = [picked is not None or not sr.decoding or argmax_pick(p) for sr, p in zip(parts, params)]
    best = []
    if picked is not None:
        best = picked.tolist()
    elif any(plain) and logits.shape[0]:
        best = torch.argmax(logits, dim=-1).tolist()
    drawn = _device_picks(parts, params, plain, logits)
    host = logits.cpu() if any(not g and d is None for g, d in zip(plain, drawn)) or any(keep) else None
    out, at = [], 0
    for sr, p, greedy, picks, kept in zip(parts, params, plain, drawn, keep):
        n = len(sr.pick_rows)
        rows = host[at:at + n] if host is not None else None
        v = verdict(sr, rows, p, best[at:at + n] if greedy else picks)
        v.logits = rows if kept else None
        out.append(v)
        at += n
    return out


def samples_on(device: torch.device) -> bool:
    """Whether sampled picks are made where logits on `device` are (DEVICE_SAMPLING), the sampler having
    run there once (_works)."""
    return (DEVICE_SAMPLING == "1" or (DEVICE_SAMPLING == "auto" and device.type == "cuda")) and _works(device)


_WORKED: set = set()


def _works(device: torch.device) -> bool:
    """Whether engine.kernels.sample runs on `device`: tried once on a small row there. Where it cannot (no
    Triton, a compile or launch error) the host picks from then on, and says so once on stderr."""
    global DEVICE_SAMPLING
    if str(device) in _WORKED:
        return True
    try:
        from engine.kernels import sample
        sample.sample(torch.zeros((1, 8), device=device), torch.tensor([[0.0, 1.0, 0.0, 1.0, 0.0, 0.5]],
                                                                          device=device)).tolist()
    except Exception as e:  # noqa: BLE001 - a kernel that cannot run here: the host picks
        DEVICE_SAMPLING = "0"
        print(f"strata engine: sampling on the device failed ({type(e).__name__}: {e}); the host picks from now on",
              file=sys.stderr, flush=True)
        return False
    _WORKED.add(str(device))
    return True


def pick_params(rows: list[tuple[int, object, int]]) -> torch.Tensor:
    """engine.kernels.sample's params (on the host) for rows of (index into the logits it gets,
    SamplingParams, the position its pick is for); a greedy row's 1 / temperature 0 (its pick is the
    argmax: WindowLogits.picks)."""
    from engine.kernels import sample
    return torch.tensor([sample.row_params(i, p, keyed_uniform(p.seed, q)) if not argmax_pick(p)
                         else [float(i), 0.0, 1.0, 1.0, 0.0, 0.0] for i, p, q in rows], dtype=torch.float32)


def _device_picks(parts: list[SlotRows], params: list, plain: list[bool], logits: torch.Tensor) -> list:
    """Each sampled slot's picks made on the device (engine.kernels.sample), where DEVICE_SAMPLING allows
    and the slot has no penalties (they need its history's counts); None for the others."""
    out: list = [None] * len(parts)
    if not samples_on(logits.device):
        return out
    from engine.graphs import on_device
    from engine.kernels import sample
    rows, slots, at = [], [], 0
    for k, (sr, p, greedy) in enumerate(zip(parts, params, plain)):
        n = len(sr.pick_rows)
        if not greedy and not host_picks(p):
            rows += [(at + i, p, q) for i, q in enumerate(sr.pick_positions)]
            slots.append((k, n))
        at += n
    if not rows:
        return out
    got = sample.sample(logits, on_device(pick_params(rows), logits.device)).tolist()
    i = 0
    for k, n in slots:
        out[k] = got[i:i + n]
        i += n
    return out


def verdict(sr: SlotRows, logits: torch.Tensor | None, params, picks: list[int] | None = None) -> SlotVerdict:
    """Picks at the slot's pick rows (logits in the same order, or the picks made already) and the
    matching prefix of proposals."""
    rows = list(range(sr.start, sr.start + sr.n_base))
    if not sr.decoding:
        return SlotVerdict(sr.slot, [], 0, sr.n_base, rows)
    if picks is None:
        picks = pick_rows(logits, params, sr.history, sr.pick_positions, sr.proposals, sr.constraint)
    kept = 1
    while kept <= len(sr.proposals) and sr.proposals[kept - 1] == picks[kept - 1]:
        kept += 1
    extra = list(range(sr.start + sr.n_base, sr.start + sr.n_base + kept - 1))
    return SlotVerdict(sr.slot, picks, kept, sr.n_base + kept - 1, rows + extra)


def kept_on_device(picks: torch.Tensor, toks: torch.Tensor, at: torch.Tensor | None = None,
                   width: int = 0) -> torch.Tensor:
    """Each slot's kept count on the device (no host wait): picks and toks [n] a window's target picks and
    token ids; slot i checks, in order, the proposals of the rows at[i] (row r's proposal is the token at
    row r + 1, confirmed by r's pick; row n - 1, which has none, pads shorter runs), or, with `width` (every
    slot's run that many rows, in order), its run's rows but the last: 1 + the leading confirmed ones. (The
    `width` form slices where `at` gathers: a chained draft window's graph captures it so on a GPU.)"""
    ok = torch.cat((picks[:-1] == toks[1:], picks.new_zeros(1, dtype=torch.bool)))
    runs = ok.view(-1, width)[:, :-1] if at is None else ok[at]
    return 1 + runs.long().cumprod(dim=1).sum(dim=1)
