"""Seeded sampling on the device: the target's pick at rows of logits that stay where they are.

Why: a sampled row's logits went to the host (a vocabulary of floats a row) and were softmaxed, filtered
and sorted there, one row after another (engine.sampling.pick). On an H200 that cost about 2 ms a row:
the smollm2-135m shape decoded 1,312 tok/s greedy and 353 at temperature 0.8 for one stream, 7,375 and
530 for 32 (tests/gpu/run_merge_fold.sh, 2026-12-04). Here the device makes the same choice from the
row's logits, and one int per row travels.

The choice (engine.sampling.pick's): e = exp(z - max z), z = logits / temperature; the candidates in
descending e, ties by index; cut to the first top_k, to the shortest first stretch whose mass reaches
top_p of the (top-k) candidates' mass, and to those with e >= min_p (at least one); the draw is the first
candidate whose cumulative mass passes u times the kept mass, u keyed by (seed, position) on the host.

How, with no sort: a first stretch of that order is every e above a level plus the first few (by index) of
those equal to it, so each cut and the draw is a search for a level. The level is found by bisection over
e's float32 bits (for e >= 0 their order as integers is the order of the values), each step a pass over
the row: the mass and count of the entries at or above it. Masses are sums in one fixed order (each lane
over the row's blocks in turn, then a fixed tree), and a mass only grows as the level falls, so the search
is well defined. Everything depends on the row alone: its pick is the same whatever rows run beside it.
The host and this kernel can differ where u falls within rounding of a boundary between two candidates;
a device's picks always come from here.

First the few candidates' path, spread over the row's chunks of CHUNK entries (a program each, so a row
is read by many SMs at once): one kernel takes each chunk's maximum, the next each chunk's mass and its
entries with e >= 2^-12 (up to FEW in all); the row's program then lays those side by side in chunk
order, sums the chunks' masses in that order, sorts the candidates in its registers and, where every cut
and the draw falls among them (a peaked row: the usual case), picks from them. Otherwise the bisection
over the row decides it, in that program alone. (With one program a row doing all of it, a peaked row of
Qwen3's 151,936 tokens took 213 us and SmolLM2's 49,152 71 us on an H200: tests/gpu/bench_sample.py,
2026-12-04.)

A row with no finite maximum takes engine.sampling._usable's rules: where some scaled logits are +inf they
share the mass alike, where all are -inf or NaN every token does (e is 1 there, 0 elsewhere). So every row
is picked here, and the picks can stay on the device.
"""
from __future__ import annotations

import os
import sys

import torch
import triton
import triton.language as tl

BLOCK = 2048
CHUNK = 4096                            # a row's chunks (a program each) for its maximum, mass and candidates
CHUNK_BLOCK = 2048                      # the chunk programs' block (CHUNK a multiple of it)
_TOP = tl.constexpr(0x7F800000)         # float32 +inf's bits: above every e (at most 1.0)
_STEPS = tl.constexpr(31)               # bisection steps over [0, _TOP)
_FEW_BITS = tl.constexpr(0x39800000)    # 2^-12: the entries a row's few candidates hold
# the few candidates' path (FEW: at most that many entries with e >= 2^-12, 0: off): they are sorted in one
# program's registers and decide the row when every cut and the draw falls among them, as in a peaked row
FEW = 1024


@triton.jit
def _scaled(row, offs, V, inv_t, m):
    """e = exp(logit * inv_t - m) at offs (0 where the logit is NaN) and its bits, -1 past V. m the row's
    maximum: where it is +inf, e is 1 at the +inf entries and 0 elsewhere; where -inf (no entry above
    -inf), 1 everywhere."""
    z = tl.load(row + offs, mask=offs < V, other=float("-inf")).to(tl.float32) * inv_t
    z = tl.where(z == z, z, float("-inf"))
    e = tl.exp(z - tl.where((m == float("inf")) | (m == float("-inf")), 0.0, m))
    e = tl.where(m == float("inf"), tl.where(z == float("inf"), 1.0, 0.0), tl.where(m == float("-inf"), 1.0, e))
    return e, tl.where(offs < V, e.to(tl.int32, bitcast=True), -1)


@triton.jit
def _at_or_above(row, V, inv_t, m, lb, BLOCK: tl.constexpr):
    """(mass, count) of the row's e whose bits are >= lb."""
    mass = tl.zeros((BLOCK,), tl.float32)
    cnt = tl.zeros((BLOCK,), tl.int32)
    for b in range(0, V, BLOCK):
        e, eb = _scaled(row, b + tl.arange(0, BLOCK), V, inv_t, m)
        sel = eb >= lb
        mass += tl.where(sel, e, 0.0)
        cnt += sel.to(tl.int32)
    return tl.sum(mass, axis=0), tl.sum(cnt, axis=0)


@triton.jit
def _level_of_count(row, V, inv_t, m, n, BLOCK: tl.constexpr):
    """The level of the n-th candidate (1-based): the largest bits lb with at least n entries at or above."""
    lo = tl.zeros((), tl.int32)
    hi = lo + _TOP
    for _ in range(_STEPS):
        mid = (lo + hi) // 2
        _, c = _at_or_above(row, V, inv_t, m, mid, BLOCK)
        lo = tl.where(c >= n, mid, lo)
        hi = tl.where(c >= n, hi, mid)
    return lo


@triton.jit
def _level_of_mass(row, V, inv_t, m, target, STRICT: tl.constexpr, BLOCK: tl.constexpr):
    """The largest bits lb whose entries at or above hold more than (STRICT) or at least target."""
    lo = tl.zeros((), tl.int32)
    hi = lo + _TOP
    for _ in range(_STEPS):
        mid = (lo + hi) // 2
        s, _ = _at_or_above(row, V, inv_t, m, mid, BLOCK)
        if STRICT:
            ok = s > target
        else:
            ok = s >= target
        lo = tl.where(ok, mid, lo)
        hi = tl.where(ok, hi, mid)
    return lo


@triton.jit
def _stretch(row, V, inv_t, m, lb, BLOCK: tl.constexpr):
    """At level lb: (its value, mass and count of the entries above it, count of those equal to it)."""
    s_ge, c_ge = _at_or_above(row, V, inv_t, m, lb, BLOCK)
    s_gt, c_gt = _at_or_above(row, V, inv_t, m, lb + 1, BLOCK)
    return lb.to(tl.float32, bitcast=True), s_gt, c_gt, c_ge - c_gt


@triton.jit
def _nth_equal(row, V, inv_t, m, lb, t, BLOCK: tl.constexpr):
    """The index of the t-th entry (1-based, by index) whose bits are lb."""
    seen = tl.zeros((), tl.int32)
    best = seen + V
    for b in range(0, V, BLOCK):
        offs = b + tl.arange(0, BLOCK)
        _, eb = _scaled(row, offs, V, inv_t, m)
        eq = eb == lb
        run = tl.cumsum(eq.to(tl.int32), axis=0) + seen
        best = tl.minimum(best, tl.min(tl.where(eq & (run == t), offs, V), axis=0))
        seen += tl.sum(eq.to(tl.int32), axis=0)
    return best


@triton.jit
def _few_pick(keys, n, V, top_k, top_p, min_p, u, total, FEW: tl.constexpr):
    """The pick from the row's candidates with e >= 2^-12 alone (keys [FEW]: their keys, unsorted, the
    rest the largest key; n: how many the row has), where there are at most FEW of them and they decide it:
    (token, 1), else (0, 0). They are sorted (keys: e's bits descending, then the index) and their masses
    summed in that order."""
    j = tl.arange(0, FEW)
    keys = tl.sort(keys, dim=0)
    e = tl.where(j < n, (0x7FFFFFFF - (keys >> 32)).to(tl.int32).to(tl.float32, bitcast=True), 0.0)
    cum = tl.cumsum(e, axis=0)
    ok = n <= FEW
    keep = tl.zeros((), tl.int32) + V
    mass = total
    if (top_k > 0) & (top_k < V):
        ok = ok & (top_k <= n)
        keep = top_k
        mass = tl.sum(tl.where(j == top_k - 1, cum, 0.0), axis=0)
    if top_p < 1.0:
        first = tl.sum((cum < top_p * mass).to(tl.int32), axis=0)      # the first reaching top_p of it
        ok = ok & (first < n)
        if first + 1 < keep:
            keep = first + 1
            mass = tl.sum(tl.where(j == first, cum, 0.0), axis=0)
    if min_p > 0.0:
        c3 = tl.maximum(tl.sum(((e >= min_p) & (j < n)).to(tl.int32), axis=0), 1)
        ok = ok & ((min_p >= 2.0 ** -12) | (keep <= n))                 # else entries below decide it
        if c3 < keep:
            keep = c3
            mass = tl.sum(tl.where(j == c3 - 1, cum, 0.0), axis=0)
    d = tl.sum((cum <= u * mass).to(tl.int32), axis=0)                # the first passing u * mass
    ok = ok & ((d < n) | (keep <= n))
    pick = tl.minimum(d, keep - 1)
    tok = tl.sum(tl.where(j == pick, (keys & 0xFFFFFFFF).to(tl.int32), 0), axis=0)
    return tl.where(ok, tok, 0), ok.to(tl.int32)


@triton.jit
def _row_of(logits, stride, knobs, r):
    """Row r's logits and 1 / temperature (knobs: (row, 1 / temperature, top_k, top_p, min_p, u) a row)."""
    at = knobs + r * 6
    return logits + tl.load(at).to(tl.int64) * stride, tl.load(at + 1)


@triton.jit
def _chunk_max_kernel(logits, stride, V, knobs, maxes, C, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    """Program (r, c): the largest scaled logit of row r's chunk c (NaN left out)."""
    r = tl.program_id(0)
    c = tl.program_id(1)
    row, inv_t = _row_of(logits, stride, knobs, r)
    mv = tl.full((BLOCK,), float("-inf"), tl.float32)
    for b in range(0, CHUNK, BLOCK):
        offs = c * CHUNK + b + tl.arange(0, BLOCK)
        z = tl.load(row + offs, mask=offs < V, other=float("-inf")).to(tl.float32) * inv_t
        mv = tl.maximum(mv, tl.where(z == z, z, float("-inf")))
    tl.store(maxes + r * C + c, tl.max(mv, axis=0))


@triton.jit
def _row_max(maxes, r, C):
    m = tl.load(maxes + r * C)
    for c in range(1, C):
        m = tl.maximum(m, tl.load(maxes + r * C + c))
    return m


@triton.jit
def _chunk_few_kernel(logits, stride, V, knobs, maxes, masses, counts, scratch, C, CHUNK: tl.constexpr,
                      BLOCK: tl.constexpr, FEW: tl.constexpr):
    """Program (r, c): over row r's chunk c, the mass of e, and its entries with e >= 2^-12: their count and
    (up to FEW, by index) their keys in the chunk's part of scratch."""
    r = tl.program_id(0)
    c = tl.program_id(1)
    row, inv_t = _row_of(logits, stride, knobs, r)
    m = _row_max(maxes, r, C)
    mass = tl.zeros((BLOCK,), tl.float32)
    n = tl.zeros((), tl.int32)
    keys = scratch + (r * C + c).to(tl.int64) * FEW
    for b in range(0, CHUNK, BLOCK):
        offs = c * CHUNK + b + tl.arange(0, BLOCK)
        e, eb = _scaled(row, offs, V, inv_t, m)
        mass += tl.where(eb >= 0, e, 0.0)
        if FEW > 0:
            sel = eb >= _FEW_BITS
            at = tl.cumsum(sel.to(tl.int32), axis=0) - 1 + n
            key = ((0x7FFFFFFF - eb).to(tl.int64) << 32) | offs.to(tl.int64)
            tl.store(keys + at, key, mask=sel & (at < FEW))
            n += tl.sum(sel.to(tl.int32), axis=0)
    tl.store(masses + r * C + c, tl.sum(mass, axis=0))
    tl.store(counts + r * C + c, n)


@triton.jit
def _sample_kernel(logits, stride, V, knobs, out, maxes, masses, counts, scratch, C, BLOCK: tl.constexpr,
                   FEW: tl.constexpr):
    """Program r: row r's pick, from its chunks' maxima, masses and few candidates (the chunk kernels')
    where those decide it, else by bisection over the row."""
    r = tl.program_id(0)
    row, inv_t = _row_of(logits, stride, knobs, r)
    at = knobs + r * 6
    top_k = tl.load(at + 2).to(tl.int32)
    top_p = tl.load(at + 3)
    min_p = tl.load(at + 4)
    u = tl.load(at + 5)
    m = _row_max(maxes, r, C)
    tok = tl.zeros((), tl.int32)
    done = (inv_t == 0).to(tl.int32)         # a greedy row beside sampled ones: its pick is the argmax's
    if FEW > 0:
        if done == 0:
            # the chunks' candidates side by side, in chunk order; their masses summed in that order
            j = tl.arange(0, FEW)
            keys = tl.full((FEW,), 0x7FFFFFFFFFFFFFFF, tl.int64)
            n = tl.zeros((), tl.int32)
            total = tl.zeros((), tl.float32)
            for c in range(0, C):
                cnt = tl.load(counts + r * C + c)
                sel = (j >= n) & (j < n + cnt) & (j - n < FEW)
                got = tl.load(scratch + (r * C + c).to(tl.int64) * FEW + (j - n), mask=sel,
                              other=0x7FFFFFFFFFFFFFFF)
                keys = tl.where(sel, got, keys)
                n += cnt
                total += tl.load(masses + r * C + c)
            tok, done = _few_pick(keys, n, V, top_k, top_p, min_p, u, total, FEW)
    if done == 0:
        total, _ = _at_or_above(row, V, inv_t, m, 0, BLOCK)     # the bisection's masses are sums over the row
        # the candidates kept: the first `keep` in order, of mass `mass`
        keep = tl.zeros((), tl.int32) + V
        mass = total
        if (top_k > 0) & (top_k < V):
            lv, s_gt, c_gt, c_eq = _stretch(row, V, inv_t, m, _level_of_count(row, V, inv_t, m, top_k, BLOCK), BLOCK)
            keep = top_k
            mass = s_gt + (top_k - c_gt).to(tl.float32) * lv
        if top_p < 1.0:
            target = top_p * mass
            lv, s_gt, c_gt, c_eq = _stretch(row, V, inv_t, m, _level_of_mass(row, V, inv_t, m, target, False, BLOCK),
                                            BLOCK)
            t = tl.minimum(tl.maximum(tl.ceil((target - s_gt) / tl.maximum(lv, 1e-38)).to(tl.int32), 1), c_eq)
            if c_gt + t < keep:
                keep = c_gt + t
                mass = s_gt + t.to(tl.float32) * lv
        if min_p > 0.0:
            s_ge, c_ge = _at_or_above(row, V, inv_t, m, min_p.to(tl.int32, bitcast=True), BLOCK)
            if tl.maximum(c_ge, 1) < keep:
                keep = tl.maximum(c_ge, 1)
                mass = tl.where(c_ge > 0, s_ge, 1.0)
        # the draw: the first candidate whose cumulative mass passes u * mass, within the kept ones
        target = u * mass
        lb = _level_of_mass(row, V, inv_t, m, target, True, BLOCK)
        lv, s_gt, c_gt, c_eq = _stretch(row, V, inv_t, m, lb, BLOCK)
        t = tl.minimum(tl.maximum(tl.floor((target - s_gt) / tl.maximum(lv, 1e-38)).to(tl.int32) + 1, 1), c_eq)
        if c_gt + t > keep:                  # past the kept ones (rounding): the last kept one
            lb = _level_of_count(row, V, inv_t, m, keep, BLOCK)
            _, _, c_gt, _ = _stretch(row, V, inv_t, m, lb, BLOCK)
            t = keep - c_gt
        tok = _nth_equal(row, V, inv_t, m, lb, t, BLOCK)
    tl.store(out + r, tok)


def sample(logits: torch.Tensor, params: torch.Tensor) -> torch.Tensor:
    """Picks at rows of logits [N, V] (any float dtype, on the device): params [R, 6] float32 there, a row
    each of (index into logits, 1 / temperature, top_k (0: none), top_p, min_p, keyed uniform u); a row with
    1 / temperature 0 is skipped (token 0: engine.pipeline.WindowLogits.picks takes its argmax).
    Returns the tokens [R] (int32). On a GPU, for up to GRAPH_ROWS rows, one replay of the launches captured
    for that shape (SampleGraph) instead of three launches, where GRAPHS; a graph that cannot be captured
    turns GRAPHS off (said once on stderr) and the launches serve."""
    R = params.shape[0]
    if not R:
        return torch.empty((0,), dtype=torch.int32, device=logits.device)
    if logits.is_cuda and GRAPHS and logits.shape[0] <= GRAPH_ROWS and R <= GRAPH_ROWS:
        key = (logits.device, torch.cuda.current_stream(logits.device).stream_id, tuple(logits.shape), logits.dtype, R,
               CHUNK, CHUNK_BLOCK, BLOCK, FEW)
        g = _GRAPHS.get(key)
        if g is None:
            try:
                g = _GRAPHS[key] = SampleGraph(logits.shape, logits.dtype, R, logits.device)
            except Exception as e:  # noqa: BLE001 - no graph here: the launches serve
                _no_graphs(e)
        if g is not None:
            return g.run(logits, params)
    return _launch(logits, params, *_buffers(R, logits.shape[1], logits.device))


def _buffers(R: int, V: int, device) -> tuple:
    """(out, maxes, masses, counts, scratch) for R rows of a V-wide row: the launches' outputs and scratch."""
    C = triton.cdiv(V, CHUNK)
    return (torch.empty((R,), dtype=torch.int32, device=device),
            torch.empty((R, C), dtype=torch.float32, device=device),
            torch.empty((R, C), dtype=torch.float32, device=device),
            torch.empty((R, C), dtype=torch.int32, device=device),
            torch.empty((R, C, max(FEW, 1)), dtype=torch.int64, device=device))


def _launch(logits, params, out, maxes, masses, counts, scratch) -> torch.Tensor:
    R, V, C = params.shape[0], logits.shape[1], maxes.shape[1]
    args = (logits, logits.stride(0), V, params)
    cb = min(CHUNK_BLOCK, CHUNK)
    _chunk_max_kernel[(R, C)](*args, maxes, C, CHUNK=CHUNK, BLOCK=cb, num_warps=4)
    _chunk_few_kernel[(R, C)](*args, maxes, masses, counts, scratch, C, CHUNK=CHUNK, BLOCK=cb, FEW=FEW,
                              num_warps=4, enable_fp_fusion=False)    # z - max z is 0 at the max: e <= 1
    _sample_kernel[(R,)](*args, out, maxes, masses, counts, scratch, C, BLOCK=BLOCK, FEW=FEW, num_warps=8,
                         enable_fp_fusion=False)
    return out


# Why a graph: Triton's launcher costs tens of us of host time a launch, and the host's part of a chained
# window is what bounds one stream. H200, the default model, T 0.8, one stream (tests/gpu/run_sample_real.sh,
# profile_host.py, 2026-12-04): sample() took 224 us of host time a window with its three launches (the
# device's work about 40 us), its window 1.105 ms against 0.746 greedy. Not yet run on a GPU (the session's
# device time was spent): off until tests/gpu/run_sample_graph.sh has; STRATA_SAMPLE_GRAPHS=1 turns it on.
GRAPHS = os.environ.get("STRATA_SAMPLE_GRAPHS", "0") == "1"
GRAPH_ROWS = 16                          # rows (and logits rows) up to which a shape gets its graph
_GRAPHS: dict = {}


def _no_graphs(e: Exception) -> None:
    global GRAPHS
    GRAPHS = False
    print(f"strata engine: the sampler's graph could not be captured ({type(e).__name__}: {e}); it launches its "
          f"kernels instead", file=sys.stderr, flush=True)


class SampleGraph:
    """sample's launches for logits of one shape and dtype and R rows, captured once (on the stream that
    first asks: each stream has its own, so replays on two streams never share buffers): a call copies the
    logits and params in, replays, and returns a copy of the picks (the next replay reuses the buffer)."""

    def __init__(self, shape: tuple, dtype: torch.dtype, R: int, device: torch.device):
        self.logits = torch.zeros(shape, dtype=dtype, device=device)
        self.params = torch.zeros((R, 6), dtype=torch.float32, device=device)
        self.params[:, 0] = torch.arange(R, dtype=torch.float32, device=device).clamp(max=shape[0] - 1)
        bufs = _buffers(R, shape[1], device)
        stream = torch.cuda.Stream(device)               # a capture needs a side stream
        stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(stream):
            _launch(self.logits, self.params, *bufs)     # compiles the kernels outside the capture
            stream.synchronize()
            self.graph = torch.cuda.CUDAGraph()
            self.graph.capture_begin(capture_error_mode="thread_local")
            try:
                self.out = _launch(self.logits, self.params, *bufs)
            finally:
                self.graph.capture_end()
        torch.cuda.current_stream(device).wait_stream(stream)
        self.bufs = bufs

    def run(self, logits: torch.Tensor, params: torch.Tensor) -> torch.Tensor:
        self.logits.copy_(logits, non_blocking=True)
        self.params.copy_(params, non_blocking=True)
        self.graph.replay()
        return self.out.clone()


def row_params(row: int, p, u: float) -> list[float]:
    """params' row for logits row `row` sampled with SamplingParams p at keyed uniform u."""
    return [float(row), 1.0 / p.temperature, float(p.top_k), p.top_p, p.min_p, u]
