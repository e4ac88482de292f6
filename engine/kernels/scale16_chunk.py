"""The prompt kernels' values of the types with a scale per 16 values, laid out as [BN, 8, 32].

Q6_K's and Q3_K's int8 codes (kind 8), and Q6_K's 6-bit and Q2_K's 2-bit planes (kinds 10, 12:
engine.kernels.packed) keep a scale per 16 values. engine.kernels.stream_matmul._chunk_weights builds
their 256-value chunk here as [BN, 8, 32] directly: each 32 values' two scales are loaded once each and a
select by the value's half picks one (STRATA_PROMPT_W32=1, the default), instead of as [BN, 16, 16] (one
scale load per 16, not per value: a per-value scale load overflowed the pipelined tensor-core kernel's
shared memory on the H100) reshaped to [BN, 8, 32]. The same values, bit for bit (each one's float
arithmetic is the same); 2.1-2.2x faster 128-row tiles on an H100 (stream_matmul.PROMPT_W32). Q3_K's
3-bit planes (kind 13) stay [BN, 16, 16]: built here they ran 2.4x slower.
"""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def scale16_values(codes, scales, sub, nn, okn, c, K, KIND: tl.constexpr):
    """Weight rows nn's ([BN, 1, 1], int64; okn their mask) values in 256-value chunk c, float32 [BN, 8,
    32]: value c * 256 + 32 g + j, with engine.quant's formulas."""
    g = tl.arange(0, 8)[None, :, None]
    j = tl.arange(0, 32)[None, None, :]
    h = j // 16                                  # which 16 of the 32 (its scale)
    j16 = j % 16
    q4 = 2 * (g % 2) + h                         # the 16's place in its 64-value unit
    ml = 0.0
    if KIND == 8:                                # int8 codes, a float32 scale per 16
        kk = c * 256 + g * 32 + j
        q = tl.load(codes + nn * K + kk, mask=okn & (kk < K), other=0).to(tl.float32)
        at = scales + nn * (K // 16) + c * 16 + 2 * g
        sok = okn & (c * 16 + 2 * g < K // 16)
        d = tl.where(h == 0, tl.load(at, mask=sok, other=0.0), tl.load(at + 1, mask=sok, other=0.0))
    elif KIND == 10:                             # Q6_K's 6-bit planes: 48 bytes per 64 values
        unit = codes + nn * (K // 64 * 48) + (c * 4 + g // 2) * 48
        lo = tl.load(unit + j, mask=okn, other=0).to(tl.int32)
        hi = tl.load(unit + 32 + j16, mask=okn, other=0).to(tl.int32)
        u = ((lo >> (4 * (g % 2))) & 15) | (((hi >> (2 * q4)) & 3) << 4)
        q = ((u ^ 32) - 32).to(tl.float32)
        at = sub.to(tl.pointer_type(tl.int8), bitcast=True) + nn * (K // 16) + c * 16 + 2 * g
        sc = tl.where(h == 0, tl.load(at, mask=okn, other=0), tl.load(at + 1, mask=okn, other=0))
        d = tl.load(scales + nn * (K // 256) + c, mask=okn, other=0.0).to(tl.float32) * sc.to(tl.float32)
    else:                                        # Q2_K's planes: d sc q - dmin m, (sc | m << 4) a byte per 16
        cb = tl.load(codes + nn * (K // 4) + (c * 4 + g // 2) * 16 + j16, mask=okn, other=0).to(tl.int32)
        q = ((cb >> (2 * q4)) & 3).to(tl.float32)
        at = sub.to(tl.pointer_type(tl.uint8), bitcast=True) + nn * (K // 16) + c * 16 + 2 * g
        sm = tl.where(h == 0, tl.load(at, mask=okn, other=0), tl.load(at + 1, mask=okn, other=0)).to(tl.int32)
        sb = nn * (K // 256) + c
        d = tl.load(scales + sb * 2, mask=okn, other=0.0).to(tl.float32) * (sm & 15).to(tl.float32)
        ml = tl.load(scales + sb * 2 + 1, mask=okn, other=0.0).to(tl.float32) * (sm >> 4).to(tl.float32)
    return d * q - ml
