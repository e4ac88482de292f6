"""What decode windows cost, measured through the loaded pipeline on the scratch slot (its values are never
read), without the scheduler's host work: `strata bench --window-costs` (the cost of a window by its rows and
by part: where drafts can pay).

A window's parts are timed by what its last stage does after the layers: one value of the hidden states to
the host (the stages' layers; a GPU stage's decode graph also runs the head on the last stage), the picks
(the head's greedy pick of every row, to the host), then the drafter (its layer over the window's rows and
the rest of a chain of the draft depth from one row a slot). Each is wall time a window over rounds of windows sent one after another (the first
round left out), so the host's part of a window is in it.
"""
from __future__ import annotations

import time

import torch

from engine.pipeline import Rows

ROUNDS = 3            # measured rounds (after one round to warm up)
PARTS = ("trunk", "pick", "draft")


def round_seconds(pipeline, drafter, windows: list[tuple[int, int]], depth: int, scratch: int,
                  rounds: int = ROUNDS, part: str = "draft") -> float:
    """Wall seconds a round takes where each group sends one window of (rows, chains) (decode rows; the
    drafter's chains of `depth` from that many of them) and sends its next as soon as the last one is back
    (the first round left out). part: what the last stage does after the layers (PARTS: nothing, the
    picks, the picks and the drafter)."""
    room = pipeline.stages[0].ctx - depth - 1       # positions on the scratch slot

    def go(n: int, chains: int):
        rows = Rows.build([0] * n, [scratch] * n, [i % room for i in range(n)], pipeline.tiles, scratch,
                          is_prompt=[False] * n)

        def finish(hidden, logits_of):
            if part == "trunk":                   # (waits for the layers: one value to the host)
                return hidden[-1:, :1].cpu()
            picks = logits_of(list(range(n))).argmax(dim=-1)
            if part == "draft" and drafter is not None and depth:
                drafter.dry_run(hidden, chains, depth, room)
            return picks.cpu()
        return pipeline.submit(rows, finish)

    with torch.inference_mode():
        futs = [go(*w) for w in windows]
        for i, f in enumerate(futs):              # the warm-up round
            f.result()
            futs[i] = go(*windows[i])
        t0 = time.perf_counter()
        for r in range(rounds):
            for i, f in enumerate(futs):
                f.result()
                if r < rounds - 1:
                    futs[i] = go(*windows[i])
        return (time.perf_counter() - t0) / rounds


def by_rows(pipeline, drafter, rows: list[int], depth: int, scratch: int) -> dict[str, list[float]]:
    """Milliseconds a window of each row count takes, cumulatively by part (PARTS; "draft", with the
    drafter's chains of `depth` from one row in depth + 1, only where there is a drafter and a depth)."""
    out: dict[str, list[float]] = {p: [] for p in PARTS if p != "draft" or (drafter is not None and depth)}
    for n in rows:
        for p in out:
            window = (n, max(1, n // (depth + 1)))
            out[p].append(round_seconds(pipeline, drafter, [window], depth, scratch, part=p) * 1e3)
    return out
