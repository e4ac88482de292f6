"""The MoE decode kernels alone (engine.kernels.moe_gemv) on one layer of a real-shaped file: routing
(torch ops vs the two-launch router) and the pair kernels (gate|up, down) at each configuration of
weight rows per thread (nr), warps and weight rows per x load (xs), for 1, 2 and 8 real rows. Each figure is one launch's time from
20 launches replayed as a CUDA graph (no Python launch cost), and GB/s counts the distinct experts'
bytes the launch must read.

    python3 tests/gpu/bench_moe.py MODEL [LAYER] [--sweep-grouped]

--sweep-grouped: the prompt tile's grouped launches (engine.kernels.moe_grouped) at each block size,
weight rows a program, warps and pipeline stages.
"""
from __future__ import annotations

import sys

import torch

from engine.block import route as torch_route
from engine.config import model_config
from engine.gguf_file import read_gguf
from engine.kernels import dp4a_gemv, moe_gemv, moe_grouped
from engine.weights import WeightLoader

REPS = 20


def timed(fn) -> float:
    """us per call of fn, from a graph of REPS calls replayed 5 times."""
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(REPS):
            fn()
    g.replay()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(5):
        g.replay()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) * 1e3 / (5 * REPS)


@torch.inference_mode()
def main() -> int:
    gf = read_gguf(sys.argv[1])
    cfg = model_config(gf)
    layer = int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2].isdigit() else 0
    lw = WeightLoader(gf, cfg, torch.bfloat16).layer(layer, "cuda:0")
    d, ff, k = cfg.n_embd, lw.gate_exps.shape[1], cfg.n_expert_used
    kept = [s.qtype.name for s in (lw.gate_exps, lw.up_exps, lw.down_exps) if s.packed is None]
    if kept:        # (engine.kernels.packed.PACKED_TYPES): the layer runs engine.block.moe's per-expert loop
        print(f"layer {layer}: expert stacks of type {', '.join(kept)} have no repacked form: no device kernels")
        return 1
    gu_b = (lw.gate_exps.packed.nbytes + lw.up_exps.packed.nbytes) / lw.gate_exps.shape[0]   # one expert's
    dn_b = lw.down_exps.packed.nbytes / lw.down_exps.shape[0]
    print(f"layer {layer}: {lw.gate_exps.shape[0]} experts, top {k}, d {d}, ff {ff}, "
          f"{lw.gate_exps.qtype.name}: gate|up {gu_b / 1e6:.2f} MB, down {dn_b / 1e6:.2f} MB per expert")
    for rows in (1, 2, 8):
        t = 16
        h = torch.randn(t, d, device="cuda:0").to(torch.bfloat16)
        n = torch.tensor([rows], device="cuda:0")
        w, sel = moe_gemv.route(lw, cfg, h, n)
        distinct = len(set(sel[:rows].flatten().tolist()))
        print(f"\n== {rows} real rows ({distinct} distinct experts)")
        print(f"  route: torch ops {timed(lambda: torch_route(lw, cfg, h)):.1f} us, "
              f"two launches {timed(lambda: moe_gemv.route(lw, cfg, h, n)):.1f} us")
        xq = dp4a_gemv.quantize(h)
        gq = dp4a_gemv.buffers(t * k, ff, "cuda:0")
        gu = torch.empty((t * k, 2 * ff), dtype=torch.float32, device="cuda:0")
        y = torch.empty((t * k, d), dtype=torch.float32, device="cuda:0")
        G, U, D = lw.gate_exps.packed, lw.up_exps.packed, lw.down_exps.packed
        for nr, warps, xs in ((1, 4, 1), (2, 4, 1), (4, 4, 1), (4, 8, 1), (8, 4, 1), (2, 4, 2), (4, 4, 2), (1, 4, 2),
                              (2, 8, 2), (8, 1, 1)):
            ka = moe_gemv._pairs(xq, False, n, t, sel, G, U, ff, d, gu, nr, warps, xs)
            kb = moe_gemv._pairs(gq, True, n, t, sel, D, None, d, ff, y, nr, warps, xs)
            a = timed(lambda: moe_gemv._pairs(xq, False, n, t, sel, G, U, ff, d, gu, nr, warps, xs))
            b = timed(lambda: moe_gemv._pairs(gq, True, n, t, sel, D, None, d, ff, y, nr, warps, xs))
            print(f"  nr {nr:2d} warps {warps} xs {xs}: gate|up {a:6.1f} us ({distinct * gu_b / a / 1e3:5.0f} GB/s, "
                  f"{ka.n_regs} regs, {ka.n_spills} spills)   down {b:6.1f} us ({distinct * dn_b / b / 1e3:5.0f} GB/s, "
                  f"{kb.n_regs} regs)")
        print(f"  whole routed(): {timed(lambda: moe_gemv.routed(w, sel, lw, h, n, xq)):.1f} us")
    for t in (128, 512):                 # a prompt tile: torch routing, then the grouped kernels
        h = torch.randn(t, d, device="cuda:0").to(torch.bfloat16)
        n = torch.tensor([t], device="cuda:0")
        w, sel = torch_route(lw, cfg, h)
        distinct = len(set(sel.flatten().tolist()))
        us = timed(lambda: moe_grouped.routed(w, sel, lw, h, n))
        print(f"\n== prompt tile of {t} rows ({distinct} distinct experts): grouped routed() {us:.1f} us "
              f"({distinct * (gu_b + dn_b) / us / 1e3:.0f} GB/s of distinct experts, "
              f"{t / us * 1e6 / cfg.n_layers:,.0f} rows/s over {cfg.n_layers} such layers)")
        if "--sweep-grouped" in sys.argv:
            sweep_grouped(lw, h, w, sel, n, distinct * gu_b, distinct * dn_b)
    return 0


def sweep_grouped(lw, h, w, sel, n, gu_bytes, dn_bytes) -> None:
    """The grouped launches (gate|up, down) alone at each configuration: pairs a block, weight rows a
    program, warps, pipeline stages (0: Triton's default)."""
    t, k = sel.shape
    ne, ff, d = lw.gate_exps.shape[0], lw.gate_exps.shape[1], h.shape[1]
    gu = torch.empty((t * k, 2 * ff), dtype=torch.float32, device=h.device)
    g = torch.randn(t * k, ff, device=h.device).to(torch.bfloat16)
    y = torch.empty((t * k, d), dtype=torch.float32, device=h.device)
    G, U, D = lw.gate_exps.packed, lw.up_exps.packed, lw.down_exps.packed
    for bm, bn, warps, stages in ((32, 32, 4, 0), (64, 64, 4, 0), (64, 64, 4, 2), (64, 64, 4, 3), (64, 64, 4, 4),
                                  (64, 128, 4, 0), (64, 128, 4, 2), (128, 32, 4, 0), (128, 64, 4, 2), (64, 32, 4, 2),
                                  (32, 64, 4, 2), (32, 128, 4, 0)):
        tab = moe_grouped.blocks(sel, ne, n, bm)
        try:
            ka = moe_grouped._grouped(h, False, k, tab, ne, G, U, ff, gu, bm, bn, warps, stages)
            kb = moe_grouped._grouped(g, True, k, tab, ne, D, None, d, y, bm, bn, warps, stages)
            a = timed(lambda: moe_grouped._grouped(h, False, k, tab, ne, G, U, ff, gu, bm, bn, warps, stages))
            b = timed(lambda: moe_grouped._grouped(g, True, k, tab, ne, D, None, d, y, bm, bn, warps, stages))
        except Exception as e:  # noqa: BLE001 - a configuration that does not compile or fit
            print(f"  bm {bm:3d} bn {bn:3d} warps {warps} stages {stages}: {type(e).__name__}: {str(e)[:80]}")
            continue
        print(f"  bm {bm:3d} bn {bn:3d} warps {warps} stages {stages}: gate|up {a:7.1f} us "
              f"({gu_bytes / a / 1e3:5.0f} GB/s, {ka.n_regs} regs, {ka.n_spills} spills)  down {b:7.1f} us "
              f"({dn_bytes / b / 1e3:5.0f} GB/s, {kb.n_regs} regs, {kb.n_spills} spills)")


if __name__ == "__main__":
    sys.exit(main())
