"""What a decode tile's graph costs by its real rows, and what smaller tiles would cost (issue 17: a draft
window's trunk runs 2-5 real rows in the 16-row tile, about 1.7x the 1-row tile on the default model's
shape, H100, 2026-12-05).

    python3 tests/gpu/bench_tile_rows.py MODEL [SIZES]      (SIZES: extra tile sizes to capture, "2,4,8")

Loads MODEL on cuda:0 (no drafts), captures graphs of the extra sizes as the loader captures the decode
tiles (with the head), and times each graph alone (CUDA events, 200 replays) at each real row count it
holds (its n_real input), on the scratch slot at position 0: the matmuls' and row kernels' cost, not
attention's over a long context. Prints us per replay: one line per tile size, one column per real rows.
"""
from __future__ import annotations

import sys

import torch

from engine.core import EngineCore
from engine.messages import EngineConfig, LoadModel
from profile_draft_window import replay_us      # (this script's folder is on the path when run)


def main() -> int:
    model = sys.argv[1]
    extra = [int(s) for s in (sys.argv[2] if len(sys.argv) > 2 else "2,4,8").split(",") if s]
    core = EngineCore(lambda msg: None)
    core.handle(LoadModel(config=EngineConfig(model=model, devices="cuda:0", ctx=2048)))
    stage = core.model.pipeline.stages[-1]
    tiles = core.model.pipeline.tiles
    for n in extra:
        stage.capture(n, with_logits=True)
    sizes = sorted(n for n in stage._graphs if n <= tiles.decode)
    counts = sorted({r for r in (1, 2, 3, 4, 5, 8, 16) if r <= max(sizes)})
    print(f"{model}: decode tile graphs, us per replay by real rows")
    print("tile rows " + "".join(f"{r:>9d}" for r in counts))
    with torch.inference_mode():
        for size in sizes:
            g = stage._graphs[size]
            cells = []
            for r in counts:
                if r > size:
                    cells.append(f"{'':>9s}")
                    continue
                g.meta[2, 0] = r
                cells.append(f"{replay_us(g.graph):9.1f}")
            g.meta[2, 0] = size
            print(f"{size:9d} " + "".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
