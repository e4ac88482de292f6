"""Where a decode tile's time goes on the GPU: one stage's captured graph replayed under torch.profiler.

    python3 tests/gpu/profile_stage.py MODEL [REAL_ROWS ...] [prompt]

Loads MODEL on cuda:0, then for each count of real rows (default 1 and 8) replays the decode tile's
graph 20 times (the 1-row tile for one row, else the 16-row one): prints the replay time (CUDA events), the GPU time per kernel name (sum over the
replays / 20) and what the kernels leave idle between them (replay time - kernel time). `prompt`: the
prompt tile instead, all rows real, one slot's positions 0, 1, ... (the first tile of a prompt).
TILE=N: decode rows in an N-row tile's graph instead (captured here as the loader captures decode tiles,
with the head), to compare tile sizes at the same real rows.
"""
from __future__ import annotations

import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile

from engine.block import Tile
from engine.loader import load_model
from engine.messages import EngineConfig

REPS = 20
AT = int(os.environ.get("POS", "100"))      # the decode rows' position (POS=6000: a long context)
TILE = int(os.environ.get("TILE", "0"))     # decode rows in a tile of this size (0: the loader's)


@torch.inference_mode()
def main() -> int:
    model = sys.argv[1]
    prompt = "prompt" in sys.argv[2:]
    counts = [int(a) for a in sys.argv[2:] if a != "prompt"] or [1, 8]
    lm = load_model(EngineConfig(model=model, devices="cuda:0", parallel=16, ctx=max(1024, AT + 512)))
    stage = lm.pipeline.stages[0]
    tiles = lm.pipeline.tiles
    for n_real in [tiles.prompt] if prompt else counts:
        rows = tiles.prompt if prompt else (tiles.solo if n_real == 1 and tiles.solo else tiles.decode)
        if TILE and not prompt:
            rows = TILE
            stage.capture(rows, with_logits=True)
        x = torch.randn(rows, lm.cfg.n_embd, device="cuda:0")
        # (slots and positions on the host, as the pipeline gives them: the replay's one input copy)
        slot = torch.zeros(rows, dtype=torch.long) if prompt else torch.arange(rows)
        pos = torch.arange(rows) if prompt else torch.full((rows,), AT)
        tile = Tile(slot, pos, n_real)
        for _ in range(3):
            stage.forward(x, tile)
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(REPS):
            stage.forward(x, tile)
        b.record()
        torch.cuda.synchronize()
        per = a.elapsed_time(b) / REPS * 1e3
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(REPS):
                stage.forward(x, tile)
            torch.cuda.synchronize()
        kern: dict[str, float] = {}
        count: dict[str, int] = {}
        for e in prof.events():
            if e.device_type.name == "CUDA":
                name = e.name[:70]
                kern[name] = kern.get(name, 0.0) + e.device_time / REPS
                count[name] = count.get(name, 0) + 1
        total = sum(kern.values())
        print(f"\n== {'prompt tile: ' if prompt else ''}{n_real} real rows of {rows}: {lm.cfg.n_layers} layers, replay {per:.0f} us, "
              f"kernels {total:.0f} us, "
              f"idle between kernels {per - total:.0f} us, {sum(count.values()) // REPS} kernels per replay")
        for name, us in sorted(kern.items(), key=lambda kv: -kv[1])[:14]:
            print(f"  {us:8.1f} us  {count[name] // REPS:4d}x  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
