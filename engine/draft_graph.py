"""The MTP drafter's passes as CUDA graphs (GPU stages that replay graphs).

Eager, a drafter pass is ~30 kernel launches from Python, and each proposal went to the host before
the next step: on the llama-3-8b shape with an MTP layer and --spec 4, one stream, the drafter took
5.9 ms of an 11.3 ms window while its GPU work was ~1.2 ms (tests/gpu/profile_host.py SPEC=4, H200,
2026-12-01). Here each pass is one replay over a decode tile of the pipeline's sizes (1 or 16 rows;
longer runs in several tiles; padding rows on the drafter's scratch slot): `layer` (token ids, trunk hidden states, slots, positions
-> the layer's output rows), `pick` (layer outputs -> each row's greedy proposal and its probability)
and `step` (both in one), and `chainN` (N steps in one, each at the next position: a chain's steps after
its first proposal, one replay instead of N). Token ids can come from the device, so a chain's proposals
stay there until the drafter copies them all to the host once (engine.drafts.MtpDrafter.advance).
"""
from __future__ import annotations

import torch

from engine.graphs import TileGraph, capture
from engine.layers import rms_norm
from engine.pipeline import TileSizes
from engine.window import kept_on_device


class DraftGraphs:
    def __init__(self, drafter, scratch_slot: int, sizes: TileSizes, chains=()):
        """chains: the chain lengths (draft depth - 1) to capture whole, as `chainN`."""
        self.scratch = scratch_slot
        self.sizes = sizes
        self.graphs: dict[tuple[str, int], TileGraph] = {}
        self.chains = sorted({c for c in chains if c >= 1})
        d = drafter

        def layer(x, tok, slot, pos, n):
            return (d._layer(tok, x, slot, pos, n),)

        def pick(x, _tok, _slot, _pos, n):
            return d._pick(x, n)

        def step(x, tok, slot, pos, n):
            g = d._layer(tok, x, slot, pos, n)
            return (g, *d._pick(g, n))

        def chain(length):
            def body(x, tok, slot, pos, n):
                """`length` steps, each at the next position: each row's proposals and probabilities
                [rows, length]."""
                toks, probs = [], []
                for k in range(length):
                    x = d._layer(tok, x, slot, pos + k, n)
                    tok, p = d._pick(x, n)
                    toks.append(tok)
                    probs.append(p)
                return torch.stack(toks, dim=1), torch.stack(probs, dim=1)
            return body

        bodies = [("layer", layer), ("pick", pick), ("step", step)] + [(f"chain{c}", chain(c)) for c in self.chains]
        with torch.inference_mode():
            for rows in sorted(sizes.decode_sizes()):
                for name, body in bodies:
                    self.graphs[name, rows] = TileGraph(body, rows, d.cfg.n_embd, scratch_slot, d.device)

    def run(self, name: str, x: torch.Tensor, tok, slots: list[int], pos) -> list[torch.Tensor]:
        """The named pass over len(slots) rows, tile by tile: its outputs for those rows (copies).
        tok: token ids (a host list or a device tensor), or None for `pick`; pos: a host list or a device
        tensor (a chained draft window's positions, engine.draft_chain)."""
        if isinstance(tok, list):
            tok = torch.tensor(tok, dtype=torch.long)
        parts = []
        for a, size, m in self.sizes.tiles(len(slots), prompt=False):
            pad = size - m
            slot = torch.tensor(slots[a:a + m] + [self.scratch] * pad, dtype=torch.long)
            p = pos[a:a + m] if isinstance(pos, torch.Tensor) else torch.tensor(pos[a:a + m] + [0] * pad, dtype=torch.long)
            t = None
            if tok is not None:
                t = tok[a:a + m]
                if pad and t.device.type == "cpu":
                    t = torch.cat((t, t.new_zeros(pad)))
            outs = self.graphs[name, size].replay(x[a:a + m], slot, p, m, t)
            parts.append([o[:m].clone() for o in outs])
        return [torch.cat(col) if len(col) > 1 else col[0] for col in zip(*parts)]


class DraftWindow:
    """A chained draft window's drafter work (engine.draft_chain) in one call, for k slots of `width` rows
    each (the current token, then width - 1 proposals): each slot's kept count from the target's picks,
    the drafter over the window's rows, and its chain of width - 1 proposals from each slot's last kept row.
    On a GPU one CUDA graph replay over the pipeline's decode tiles (the window's rows in one tile, the
    chains in another, padding rows on the drafter's scratch slot; the head runs over the chains' rows
    only, one a slot, not over the window's): before it the same work took ~70 eager
    launches and copies from the stage thread, which left the device idle for a third of every --spec 4
    window on the default model's shape (H100, 2026-12-05, tests/gpu/run_draft_window.sh). On a CPU the
    same body runs eagerly on the real rows alone. run() returns one tensor: the window's picks [n], each
    slot's kept count [k], the next window's first position [k], its token ids [n] and positions [n]."""

    def __init__(self, drafter, k: int, width: int, sizes: TileSizes | None):
        """width >= 2; sizes: the pipeline's tiles on a GPU (captured there; k * width rows must fit one
        decode tile), None on a CPU."""
        d = drafter
        n = k * width
        self.n, self.k, self.width = n, k, width
        graphed = sizes is not None
        tile = sizes.tiles(n, prompt=False)[0][1] if graphed else n
        chain_tile = sizes.tiles(k, prompt=False)[0][1] if graphed else k
        dev = d.device
        self.x = torch.zeros((tile, d.cfg.n_embd), dtype=torch.float32, device=dev)
        self.meta = torch.zeros((4, tile), dtype=torch.long, device=dev)     # slots, token ids, positions, picks
        self.meta[0] = d.scratch_slot
        starts = torch.arange(k, device=dev) * width
        real = torch.tensor([n, k], dtype=torch.long, device=dev) if graphed else None
        pad = chain_tile - k
        n_embd = d.cfg.n_embd

        def body():
            slot, toks, pos, picks = self.meta
            kept = kept_on_device(picks[:n], toks[:n], width=width)
            trunk = self.x if d.trunk_norm is None else rms_norm(self.x, d.trunk_norm, d.cfg.norm_eps)
            n_dev, k_dev = (real[:1], real[1:]) if graphed else (None, None)
            g = d._layer(picks, trunk, slot, pos, n_dev)      # the drafter's KV at every row of the window
            last = starts + kept - 1                   # each slot's last kept row starts its chain
            nxt = pos[last] + 1
            hs = torch.cat((g[last], g.new_zeros(pad, n_embd)))     # the chains' rows (a tile of their own)
            ts, _ = d._pick(hs, k_dev)                 # the head over those alone, not over the window's rows
            cols = [picks[last], ts[:k]]
            if width > 2:
                ss = torch.cat((slot[starts], slot.new_full((pad,), d.scratch_slot)))
                ps = torch.cat((nxt, nxt.new_zeros(pad)))
                for step in range(width - 2):
                    hs = d._layer(ts, hs, ss, ps + step, k_dev)
                    ts, _ = d._pick(hs, k_dev)
                    cols.append(ts[:k])
            nxt_rows = (nxt[:, None] + torch.arange(width, device=dev)).reshape(-1)
            return torch.cat((picks[:n], kept, nxt, torch.stack(cols, dim=1).reshape(-1), nxt_rows))
        self.body = body
        self.graph = None
        if graphed:
            self.graph, self.out = capture(body, dev)

    def run(self, hidden: torch.Tensor, logits: torch.Tensor, rows: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
        """hidden [n, d] the trunk's rows, logits [n, vocab] the target's, rows [2, n] the window's token ids
        and positions, slots [n] each row's slot (device tensors): the report (see the class), a tensor of
        its own."""
        n = self.n
        self.x[:n].copy_(hidden, non_blocking=True)
        torch.argmax(logits, dim=-1, out=self.meta[3, :n])
        self.meta[1:3, :n].copy_(rows, non_blocking=True)
        self.meta[0, :n].copy_(slots, non_blocking=True)
        if self.graph is None:
            return self.body()
        self.graph.replay()
        return self.out.clone()
