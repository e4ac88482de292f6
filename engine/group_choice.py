"""--batch-groups auto where drafts are on over several stages: serial batch MTP (one group, every slot in
each window, the --spec depth) or piped MTP (a group per stage, each group's windows following the others'
through the stages, the --piped-mtp depth), whichever decodes faster in a short run at load.

Which one wins depends on the layout, the devices and the host: piped windows keep every stage busy and hide
one group's host work (verdicts, the drafter's chain, the next window's build) behind the other's kernels,
but each group's window pays the per-window costs once per group; on a GPU a window of half the rows costs
nearly what the whole one does, on a CPU a window's cost grows with its rows. Timing the windows alone
(engine.window_cost, without the scheduler's host work) favoured serial on two stages of one H100 by 30%
where the scheduler's own runs put the two within 2-5% (2026-12-06, tests/gpu/run_window_costs.sh and
run_group_choice.sh), so the choice is made by the scheduler itself: every slot decodes RUN_TOKENS tokens of
FILLER, greedy, drafts every window (no guard), once in each layout (GPU stages: GPU_RUNS times GPU_TOKENS, the
layouts in turn), and the layout with more decode tokens a second is kept. The acceptance is the model's own
on that text. The choice and both figures go into the effective configuration.
"""
from __future__ import annotations

import time

from engine.messages import RequestDone, SamplingParams
from engine.scheduler import Scheduler
from engine.sequence import Sequence
from engine.stats import EngineStats

RUN_TOKENS = 32       # tokens each slot decodes in each layout's run (CPU stages; GPU: GPU_RUNS of GPU_TOKENS,
GPU_TOKENS = 64       # the layouts in turn, the rates averaged: two stages of one H100 put the two layouts within
GPU_RUNS = 2          # 2-8% of each other, and one 32-token run each picked the slower of them there, 2026-12-06)
FILLER = ("The history of the printing press begins in the fifteenth century, when movable type changed how books "
          "were made, how ideas travelled and who could read them.")


def decode_rate(pipeline, groups: list[list[int]], ctx: int, drafter, plan, prompt: list[int],
                conv_kernel: int = 0, tokens: int = RUN_TOKENS) -> tuple[float, float]:
    """(decode tokens a second, tokens a window) when every slot of `groups` decodes `tokens` tokens after
    its own copy of `prompt` (its slot number first, so no two share a prefix), in one scheduler over these
    groups with drafts every window."""
    done: list[RequestDone] = []
    slots = [s for g in groups for s in g]
    sched = Scheduler(pipeline, groups, ctx, drafter, plan, lambda m: done.append(m) if isinstance(m, RequestDone)
                      else None, EngineStats(len(slots)), conv_kernel)
    sched.guard.enabled = False
    room = max(1, ctx - tokens - plan.depth(pipelined=len(groups) > 1) - 2)
    for i in slots:
        ids = ([i] + prompt)[:room]
        sched.add(Sequence(f"groups-measure-{i}", ids, SamplingParams(max_tokens=tokens, ignore_eos=True), set(), None,
                           ctx))
    t0 = time.perf_counter()
    while sched.has_work:
        sched.step()
    wall = time.perf_counter() - t0
    decode = max((d.decode_s for d in done), default=0.0) or wall
    made = sum(max(0, d.completion_tokens - 1) for d in done)     # the first token comes with the prompt
    windows = sum(d.windows for d in done)
    return made / max(decode, 1e-9), sum(d.completion_tokens for d in done) / max(windows, 1)


def choose(pipeline, drafter, plan, parallel: int, n_groups: int, ctx: int, prompt: list[int],
           conv_kernel: int = 0) -> tuple[int, str]:
    """(groups, note): 1 (serial batch MTP) or n_groups (piped), whichever decodes faster in decode_rate's
    run of `prompt` (FILLER's tokens), and a line that says which and why."""
    per = parallel // n_groups
    layouts = [[list(range(parallel))], [list(range(g * per, (g + 1) * per)) for g in range(n_groups)]]
    gpu = all(s.device.type == "cuda" for s in pipeline.stages)
    tokens, runs = (GPU_TOKENS, GPU_RUNS) if gpu else (RUN_TOKENS, 1)
    got = [[0.0, 0.0], [0.0, 0.0]]
    for _ in range(runs):
        for i, groups in enumerate(layouts):
            rate, tpw = decode_rate(pipeline, groups, ctx, drafter, plan, prompt, conv_kernel, tokens)
            got[i][0] += rate / runs
            got[i][1] += tpw / runs
    (serial, tpw_s), (piped, tpw_p) = got
    g = n_groups if piped > serial else 1
    depth_s, depth_p = plan.depth(pipelined=False), plan.depth(pipelined=True)
    chosen = ("serial batch MTP in 1 group" if g == 1 else f"piped MTP in {g} groups" if depth_p
              else f"{g} pipelined groups without drafts")

    def form(depth: int) -> str:
        return f"drafts {depth} deep" if depth else "no drafts"
    times = f", {runs} runs" if runs > 1 else ""
    note = (f"batch-groups auto: {chosen} (measured at load, {parallel} slots decoding {tokens} tokens of a "
            f"filler prompt each{times}: 1 group, {form(depth_s)}, {serial:.0f} tok/s, {tpw_s:.2f} tokens a window; "
            f"{n_groups} groups of {per}, {form(depth_p)}, {piped:.0f} tok/s, {tpw_p:.2f} tokens a window)")
    return g, note
