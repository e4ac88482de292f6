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

from engine import window_cost

ACCEPT = 0.7          # the acceptance per draft position assumed where the two depths differ


def expected_tokens(depth: int, accept: float = ACCEPT) -> float:
    """A slot's tokens a window at this draft depth: the current token's pick and each proposal kept."""
    return sum(accept ** i for i in range(depth + 1))


def choose(pipeline, drafter, parallel: int, n_groups: int, serial_depth: int, piped_depth: int,
           scratch: int) -> tuple[int, str]:
    """(groups, note): 1 (serial batch MTP at serial_depth) or n_groups (piped at piped_depth), whichever
    makes more tokens a second in the measured rounds, and a line that says which and why."""
    per = parallel // n_groups
    serial = window_cost.round_seconds(pipeline, drafter, [(parallel * (serial_depth + 1), parallel)], serial_depth,
                                       scratch)
    piped = window_cost.round_seconds(pipeline, drafter, [(per * (piped_depth + 1), per)] * n_groups, piped_depth,
                                      scratch)
    rate_s = parallel * expected_tokens(serial_depth) / serial
    rate_p = parallel * expected_tokens(piped_depth) / piped
    g = n_groups if rate_p > rate_s else 1
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
