"""CUDA graphs for a stage's forward over one tile.

A tile always has the same number of rows and every kernel in the stage forward reads its bounds on
the device, so one captured graph per stage replays any tile: copy the tile's hidden states, slots and
positions into the graph's input buffers, replay, and read the output buffer. This takes the Python
and launch overhead of a few hundred kernels out of every decode step.
"""
from __future__ import annotations

import torch


class TileGraph:
    def __init__(self, forward, n_rows: int, n_embd: int, scratch_slot: int, device: torch.device):
        self.x = torch.zeros((n_rows, n_embd), dtype=torch.float32, device=device)
        self.slot_pos = torch.zeros((2, n_rows), dtype=torch.long, device=device)   # one copy per replay
        self.slot_pos[0] = scratch_slot
        self.slot, self.pos = self.slot_pos[0], self.slot_pos[1]
        with torch.cuda.device(device):
            stream = torch.cuda.Stream(device)          # capture needs a side stream
            stream.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(stream):
                forward(self.x, self.slot, self.pos)    # warm-up: compiles kernels, makes lazy buffers
                stream.synchronize()
                self.graph = torch.cuda.CUDAGraph()
                # thread-local mode: another thread's CUDA calls during a capture do not break it
                self.graph.capture_begin(capture_error_mode="thread_local")
                try:
                    self.out = forward(self.x, self.slot, self.pos)
                finally:
                    self.graph.capture_end()
            torch.cuda.current_stream(device).wait_stream(stream)

    def run(self, x: torch.Tensor, slot: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        self.x.copy_(x, non_blocking=True)
        self.slot_pos.copy_(torch.stack((slot, pos)), non_blocking=True)
        self.graph.replay()
        return self.out.clone()
