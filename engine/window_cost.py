"""What decode windows cost, measured through the loaded pipeline on the scratch slot (its values are never
read), without the scheduler's host work: `strata bench --window-costs` (the cost of a window by its rows and
by part: where drafts can pay).

A window's parts are timed by what its last stage does after the layers: one value of the hidden states to
the host (the stages' layers; a GPU stage's decode graph also runs the head on the last stage), the picks
(the head's greedy pick of every row, to the host), then the drafter (its layer over the window's rows and
the rest of a chain of the draft depth from one row a slot). Each is wall time a window over windows sent
one after another (the first left out), so the host's part of a window is in it.
"""
from __future__ import annotations

import time

import torch

from engine.pipeline import Rows

ROUNDS = 3            # measured windows of each kind (after one to warm up)
PARTS = ("trunk", "pick", "draft")


def window_seconds(pipeline, drafter, n: int, chains: int, depth: int, scratch: int, part: str,
                   rounds: int = ROUNDS) -> float:
    """Wall seconds a window of n decode rows takes, each sent as soon as the last one is back (the first
    left out). part: what the last stage does after the layers (PARTS: one value to the host, the picks, the
    picks and the drafter's chains of `depth` from `chains` of the rows)."""
    room = pipeline.stages[0].ctx - depth - 1       # positions on the scratch slot
    rows = Rows.build([0] * n, [scratch] * n, [i % room for i in range(n)], pipeline.tiles, scratch,
                      is_prompt=[False] * n)

    def finish(hidden, logits_of):
        if part == "trunk":                       # (waits for the layers: one value to the host)
            return hidden[-1:, :1].cpu()
        picks = logits_of(list(range(n))).argmax(dim=-1)
        if part == "draft" and drafter is not None and depth:
            drafter.dry_run(hidden, chains, depth, room)
        return picks.cpu()

    with torch.inference_mode():
        pipeline.submit(rows, finish).result()    # the warm-up window
        t0 = time.perf_counter()
        for _ in range(rounds):
            pipeline.submit(rows, finish).result()
        return (time.perf_counter() - t0) / rounds


def by_rows(pipeline, drafter, rows: list[int], depth: int, scratch: int) -> dict[str, list[float]]:
    """Milliseconds a window of each row count takes, cumulatively by part (PARTS; "draft", with the
    drafter's chains of `depth` from one row in depth + 1, only where there is a drafter and a depth)."""
    out: dict[str, list[float]] = {p: [] for p in PARTS if p != "draft" or (drafter is not None and depth)}
    for n in rows:
        for p in out:
            out[p].append(window_seconds(pipeline, drafter, n, max(1, n // (depth + 1)), depth, scratch, p) * 1e3)
    return out
