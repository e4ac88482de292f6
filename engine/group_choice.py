"""--batch-groups auto where drafts are on over several stages: serial batch MTP (one group, every slot in
each window, the --spec depth) or piped MTP (a group per stage, each group's windows following the others'
through the stages, the --piped-mtp depth), whichever the windows measured at load say is faster.

Which one wins depends on the layout and the devices: piped windows keep every stage busy, but each group's
window pays the per-window costs (a GPU graph replay, the head, the drafter's chain) once per group, and on a
GPU a window of half the rows costs nearly what the whole one does; on a CPU a window's cost grows with its
rows. So both are measured, through the pipeline as the scheduler runs them, on the scratch slot: rounds of
one window of every slot's rows against rounds of one window per group, each group's next window sent when
its last one came back; each window's last stage picks its rows (the head) and runs the drafter over them
(its layer over the window's rows, then the rest of a chain of the depth over one row per slot). Tokens a
round: every slot's 1 + a + a^2 + ... + a^depth at an assumed acceptance ACCEPT per position, which cancels
out where both depths are the same. The choice and its figures go into the effective configuration.
"""
from __future__ import annotations

import time

import torch

from engine.pipeline import Rows

ACCEPT = 0.7          # the acceptance per draft position assumed where the two depths differ
ROUNDS = 3            # measured rounds of each layout (after one round to warm up)


def expected_tokens(depth: int, accept: float = ACCEPT) -> float:
    """A slot's tokens a window at this draft depth: the current token's pick and each proposal kept."""
    return sum(accept ** i for i in range(depth + 1))


def round_seconds(pipeline, drafter, groups: list[int], depth: int, scratch: int, rounds: int = ROUNDS) -> float:
    """Wall seconds a round takes where each group (its slot count) sends one window of slots * (depth + 1)
    decode rows and sends its next as soon as the last one is back (the first round left out)."""
    room = pipeline.stages[0].ctx - depth - 1       # positions on the scratch slot (its values are never read)

    def window(slots: int):
        n = slots * (depth + 1)
        pos = [i % room for i in range(n)]
        rows = Rows.build([0] * n, [scratch] * n, pos, pipeline.tiles, scratch, is_prompt=[False] * n)

        def finish(hidden, logits_of):
            picks = logits_of(list(range(n))).argmax(dim=-1)
            if drafter is not None and depth:
                drafter.dry_run(hidden, slots, depth, room)
            return picks.cpu()
        return rows, finish

    def go(slots: int):
        return pipeline.submit(*window(slots))

    futs = [go(s) for s in groups]
    for i, f in enumerate(futs):              # the warm-up round
        f.result()
        futs[i] = go(groups[i])
    t0 = time.perf_counter()
    for r in range(rounds):
        for i, f in enumerate(futs):
            f.result()
            if r < rounds - 1:
                futs[i] = go(groups[i])
    return (time.perf_counter() - t0) / rounds


def choose(pipeline, drafter, parallel: int, n_groups: int, serial_depth: int, piped_depth: int,
           scratch: int) -> tuple[int, str]:
    """(groups, note): 1 (serial batch MTP at serial_depth) or n_groups (piped at piped_depth), whichever
    makes more tokens a second in the measured rounds, and a line that says which and why."""
    with torch.inference_mode():
        serial = round_seconds(pipeline, drafter, [parallel], serial_depth, scratch)
        piped = round_seconds(pipeline, drafter, [parallel // n_groups] * n_groups, piped_depth, scratch)
    rate_s = parallel * expected_tokens(serial_depth) / serial
    rate_p = parallel * expected_tokens(piped_depth) / piped
    g = n_groups if rate_p > rate_s else 1
    per = parallel // n_groups
    assumed = "" if serial_depth == piped_depth else f", {ACCEPT:.0%} of proposals kept assumed"

    def form(depth: int) -> str:
        return f"drafts {depth} deep" if depth else "no drafts"
    chosen = ("serial batch MTP in 1 group" if g == 1 else f"piped MTP in {g} groups" if piped_depth
              else f"{g} pipelined groups without drafts")
    note = (f"batch-groups auto: {chosen}"
            f" (measured at load over {len(pipeline.stages)} stages: 1 group of {parallel} slots, "
            f"{form(serial_depth)}, {serial * 1e3:.2f} ms a window, about {rate_s:.0f} tok/s; {n_groups} groups of "
            f"{per}, {form(piped_depth)}, {piped * 1e3:.2f} ms a round, about {rate_p:.0f} tok/s{assumed})")
    return g, note
