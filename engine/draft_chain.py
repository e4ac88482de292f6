"""Chained draft windows: a window with MTP drafts whose successor is queued on the device, like a chained
greedy window's (engine.pipeline, engine.scheduler).

Without it a draft window cannot chain: its verdict and the drafter's next proposals go to the host before
the next window can be built, so the device idles for the host's part of every window. Measured on an H100
(2026-12-05, `REAL=1 SPECS="2 4" bash tests/gpu/run_chain_drafts.sh`: the default model with its trained
layer, code prompt, one stream, 512 tokens, two processes each): --spec 4 at 1,227 / 1,155 tok/s chained
against 951 / 951 on the host (2.0-2.1 ms a window against 2.6), --spec 2 at 1,063 / 947 against 803 / 869.
Then the stage thread's ~70 eager launches for the verdict and the drafter left the device idle for a third
of each window; with that work in one graph (engine.draft_graph.DraftWindow) --spec 3 / 4 run at 1,870 /
1,781 tok/s there (1.20 / 1.38 ms a window, 2.25 / 2.47 tokens) against 1,301 without drafts, and where the
layer predicts worse the guard (engine.draft_guard) decides.
Here the last stage queues the window's verdict (each slot's kept count from the device's greedy picks),
the drafter over the window's rows and its chain from each slot's last kept row on the device
(engine.drafts.MtpDrafter.on_device), and the next window embeds those tokens at those positions
(Rows.picks and Rows.next_pos) without waiting; the host learns each window's picks, kept counts and the
next window's rows from one copy per window, one window late.

Only greedy picks (argmax: no sampling, no penalties), MTP proposals alone (no prompt lookup, no replay),
one decode row plus proposals per slot, models without delta net state rings, and stages whose decode
tiles take device positions (a GPU stage's graphs, or a CPU stage). Tokens never depend on it: every
proposal is verified against the target's own pick, as on the host.
"""
from __future__ import annotations

import os

import torch

from engine.graphs import on_device
from engine.window import SlotRows, SlotVerdict, verdict


def chain_drafts_mode() -> bool:
    """STRATA_CHAIN_DRAFTS: 1 (default: draft windows chain where windows chain), 0 (they never do)."""
    return os.environ.get("STRATA_CHAIN_DRAFTS", "1") != "0"


def can_chain_drafts(pipeline, drafter, conv_kernel: int) -> bool:
    """Whether this pipeline's draft windows can chain: windows chain (Pipeline.chain), the drafter is an
    MTP layer that takes device positions (its graphs on a GPU, or a CPU's eager passes), and the last
    stage's decode tiles take them too."""
    if not (chain_drafts_mode() and pipeline.chain and drafter is not None and not conv_kernel
            and hasattr(drafter, "on_device")):
        return False
    stage = pipeline.stages[-1]
    if stage.device.type == "cpu":
        return drafter.device.type == "cpu"
    return drafter.graphs is not None and all(stage.graphed(n) for n in pipeline.tiles.decode_sizes())


def chains_drafts(pipeline, drafter, plan, conv_kernel: int) -> bool:
    """Whether this engine's draft windows chain: can_chain_drafts, with MTP proposals alone and no
    --spec-min-p (a chain proposes its full depth; the min_p cut is the host drafter's)."""
    return can_chain_drafts(pipeline, drafter, conv_kernel) and plan.source == "mtp" and plan.min_p <= 0


class DraftStep:
    """One draft window's device work (run, on the last stage's thread) and what its finish tells the host.
    prev: the window it is chained on (then its rows are prev's next rows: depth + 1 per slot, learnt
    from prev's finish), else the host built it (tokens, positions: its real rows)."""

    def __init__(self, drafter, slots: list[int], lens: list[int], depth: int, prev: DraftStep | None = None,
                 tokens: list[int] | None = None, positions: list[int] | None = None, gaps=None):
        self.drafter, self.slots, self.lens, self.depth, self.prev = drafter, slots, lens, depth, prev
        self.tokens, self.positions, self.gaps = tokens, positions, gaps
        self.starts = [sum(lens[:i]) for i in range(len(lens))]
        self.report: torch.Tensor | None = None     # after run: picks, kept counts, next_at, next rows (device)
        self.slots_dev: torch.Tensor | None = None  # each row's slot, on the device (a chain's steps share it)
        self.next_rows: torch.Tensor | None = None  # after run: the next window's token ids and positions [2, rows]
        self.next_tokens: list[list[int]] = []      # after finish: each slot's next window's tokens
        self.next_at: list[int] = []                # and its first position

    def chained(self) -> DraftStep:
        """The step of the window chained on this one."""
        return DraftStep(self.drafter, self.slots, [self.depth + 1] * len(self.slots), self.depth, prev=self)

    def run(self, hidden: torch.Tensor, logits_of) -> torch.Tensor:
        """Queue the verdict and the drafter (nothing waits for the device): the next window's token ids
        and positions [2, rows], its real rows in order (Rows.picks and Rows.next_pos)."""
        n, k = sum(self.lens), len(self.slots)
        logits = logits_of(list(range(n)))
        dev = logits.device
        if self.prev is None:
            rows = on_device(torch.tensor([self.tokens, self.positions], dtype=torch.long), dev)
        else:
            rows, self.prev.next_rows = self.prev.next_rows, None
            if self.prev.lens == self.lens:
                self.slots_dev = self.prev.slots_dev
        slots = [s for s, m in zip(self.slots, self.lens) for _ in range(m)]
        if self.slots_dev is None:
            self.slots_dev = on_device(slots, dev)
        # a DraftWindow chains width - 1 proposals: only where every slot's rows are this step's depth + 1 (the
        # first window after the guard went deeper carries the fewer proposals of the depth before)
        win = self.drafter.window(self.lens) if all(m == self.depth + 1 for m in self.lens) else None
        with torch.inference_mode():
            if win is not None:
                if self.gaps:
                    self.drafter.catch_up(self.gaps)
                self.report = win.run(hidden, logits, rows, self.slots_dev)
            else:
                picks = torch.argmax(logits, dim=-1)
                out = self.drafter.on_device(hidden, picks, rows[0], slots, rows[1], self.starts,
                                             self.lens, self.depth, self.gaps)
                nxt = (out.at[:, None] + torch.arange(self.depth + 1, device=dev)).reshape(-1)
                self.report = torch.cat((picks, out.kept, out.at, out.tokens.reshape(-1), nxt))
        self.next_rows = self.report[n + 2 * k:].view(2, -1)
        return self.next_rows

    def finish(self, seqs: dict) -> tuple[list[SlotVerdict], dict[int, list[int]], list[SlotRows]]:
        """On the last stage's thread, once the window's own kernels are queued: (verdicts, each slot's
        next proposals, the window's rows as the host now knows them). The one wait for the device."""
        vals = self.report.tolist()
        self.report = None
        n, k, w = sum(self.lens), len(self.slots), self.depth + 1
        picks, kept, self.next_at = vals[:n], vals[n:n + k], vals[n + k:n + 2 * k]
        flat = vals[n + 2 * k:n + 2 * k + k * w]
        self.next_tokens = [flat[i * w:(i + 1) * w] for i in range(k)]
        parts, out = [], []
        for i, (slot, a, m) in enumerate(zip(self.slots, self.starts, self.lens)):
            if self.tokens is not None:
                first, props = self.positions[a], self.tokens[a + 1:a + m]
            else:       # (prev's finish came first: windows finish in order on the last stage's thread)
                first, props = self.prev.next_at[i], self.prev.next_tokens[i][1:]
            sr = SlotRows(slot, a, first, 1, True, props)
            v = verdict(sr, None, seqs[slot].params, picks[a:a + m])
            if v.kept != kept[i]:
                raise RuntimeError(f"chained drafts: the device kept {kept[i]} rows of slot {slot}, the host {v.kept}")
            parts.append(sr)
            out.append(v)
        self.prev = None                            # (a chain holds no older windows)
        return out, {slot: t[1:] for slot, t in zip(self.slots, self.next_tokens)}, parts

