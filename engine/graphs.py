"""CUDA graphs for a stage's forward over one tile.

A tile always has the same number of rows and every kernel in the stage forward reads its bounds on
the device, so one captured graph per stage replays any tile: copy the tile's hidden states, slots and
positions into the graph's input buffers, replay, and read the output buffer. This takes the Python
and launch overhead of a few hundred kernels out of every decode step. `forward` returns (hidden,
logits or None): the last stage's decode-tile graph runs the head too.
"""
from __future__ import annotations

import torch


class TileGraph:
    def __init__(self, forward, n_rows: int, n_embd: int, scratch_slot: int, device: torch.device):
        self.x = torch.zeros((n_rows, n_embd), dtype=torch.float32, device=device)
        # slots, positions and (in [2, 0]) the number of real rows: one copy per replay
        self.meta = torch.zeros((3, n_rows), dtype=torch.long, device=device)
        self.meta[0] = scratch_slot
        self.meta[2, 0] = n_rows
        self.slot, self.pos, self.n_real = self.meta[0], self.meta[1], self.meta[2, :1]
        with torch.cuda.device(device):
            stream = torch.cuda.Stream(device)          # capture needs a side stream
            stream.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(stream):
                forward(self.x, self.slot, self.pos, self.n_real)    # warm-up: compiles kernels, makes lazy buffers
                stream.synchronize()
                self.graph = torch.cuda.CUDAGraph()
                # thread-local mode: another thread's CUDA calls during a capture do not break it
                self.graph.capture_begin(capture_error_mode="thread_local")
                try:
                    self.out, self.logits = forward(self.x, self.slot, self.pos, self.n_real)
                finally:
                    self.graph.capture_end()
            torch.cuda.current_stream(device).wait_stream(stream)

    def run(self, x: torch.Tensor, slot: torch.Tensor, pos: torch.Tensor,
            n_real: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(hidden out, the real rows' logits where the graph runs the head, else None), both copies:
        the next replay reuses the graph's buffers."""
        self.x.copy_(x, non_blocking=True)
        count = torch.zeros_like(slot)
        count[0] = n_real
        self.meta.copy_(torch.stack((slot, pos, count)), non_blocking=True)
        self.graph.replay()
        return self.out.clone(), (self.logits[:n_real].clone() if self.logits is not None else None)
