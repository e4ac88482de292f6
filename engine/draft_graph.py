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

from engine.graphs import TileGraph
from engine.pipeline import TileSizes


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
