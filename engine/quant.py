"""Quantized GGUF weights: exact torch dequantization and `QuantTensor`.

`dequantize` reproduces `gguf.quants.dequantize` bit for bit (same float operations in the same
order), on any torch device. `QuantTensor` keeps a tensor in its GGUF form and offers the three
uses a model has for it: whole-tensor dequantization, embedding rows, and a row-invariant linear.
"""
from __future__ import annotations

import warnings
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as QT

from engine import cpu_gemm, quant_iquants as iq, quant_kquants as kq
from engine.errors import EngineError
from engine.quant_kquants import bit_planes, f16_field

LINEAR_TILE = 16            # CPU linear runs on tiles of exactly this many rows (see QuantTensor.linear)
CHUNK_ELEMENTS = 1 << 20    # dequantize this many values at a time to bound temporary memory


class UnsupportedQuantError(EngineError):
    """A tensor type this engine cannot decode; the loader adds the file name."""

    def __init__(self, qtype):
        self.qtype = qtype
        name = getattr(qtype, "name", str(qtype))
        supported = ", ".join(t.name for t in DECODERS)
        super().__init__(f"quant type {name} is not supported (supported: {supported})")


def nibbles(qs: torch.Tensor) -> torch.Tensor:
    """(n, 16) bytes -> (n, 32) values: all low nibbles, then all high nibbles (ggml's order)."""
    return torch.cat([qs & 0x0F, qs >> 4], dim=-1)


def fifth_bits(qh: torch.Tensor) -> torch.Tensor:
    """(n, 4) bytes of a little-endian u32 -> (n, 32) values: bit j of the word, shifted to 0x10."""
    return bit_planes(qh, 8).transpose(1, 2).reshape(-1, 32) << 4


def decode_f32(blocks: torch.Tensor) -> torch.Tensor:
    return blocks.view(torch.float32)


def decode_f16(blocks: torch.Tensor) -> torch.Tensor:
    return blocks.view(torch.float16).float()


def decode_bf16(blocks: torch.Tensor) -> torch.Tensor:
    return blocks.view(torch.bfloat16).float()


def decode_q4_0(blocks: torch.Tensor) -> torch.Tensor:
    return f16_field(blocks, 0) * (nibbles(blocks[:, 2:18]).float() - 8)


def decode_q4_1(blocks: torch.Tensor) -> torch.Tensor:
    return f16_field(blocks, 0) * nibbles(blocks[:, 4:20]).float() + f16_field(blocks, 2)


def decode_q5_0(blocks: torch.Tensor) -> torch.Tensor:
    q = nibbles(blocks[:, 6:22]) | fifth_bits(blocks[:, 2:6])
    return f16_field(blocks, 0) * (q.float() - 16)


def q5_1_parts(blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Q5_1 blocks -> (d, m float32 (n, 1); q uint8 (n, 32))."""
    return f16_field(blocks, 0), f16_field(blocks, 2), nibbles(blocks[:, 8:24]) | fifth_bits(blocks[:, 4:8])


def decode_q5_1(blocks: torch.Tensor) -> torch.Tensor:
    d, m, q = q5_1_parts(blocks)
    return d * q.float() + m


def decode_q8_0(blocks: torch.Tensor) -> torch.Tensor:
    return blocks[:, 2:34].view(torch.int8).float() * f16_field(blocks, 0)


DECODERS: dict[QT, Callable[[torch.Tensor], torch.Tensor]] = {
    QT.F32: decode_f32, QT.F16: decode_f16, QT.BF16: decode_bf16,
    QT.Q4_0: decode_q4_0, QT.Q4_1: decode_q4_1, QT.Q5_0: decode_q5_0, QT.Q5_1: decode_q5_1,
    QT.Q8_0: decode_q8_0, QT.Q2_K: kq.decode_q2_k, QT.Q3_K: kq.decode_q3_k,
    QT.Q4_K: kq.decode_q4_k, QT.Q5_K: kq.decode_q5_k, QT.Q6_K: kq.decode_q6_k,
    **{QT[name]: decode for name, decode in iq.DECODERS.items()},
}


def check_supported(qtype) -> QT:
    if qtype not in DECODERS:
        raise UnsupportedQuantError(qtype)
    return QT(qtype)


def dequantize(raw: torch.Tensor, qtype, n_elements: int) -> torch.Tensor:
    """GGUF bytes (uint8, on any device) -> a new float32 1-D tensor of n_elements values."""
    qtype = check_supported(qtype)
    decode = DECODERS[qtype]
    block, type_size = GGML_QUANT_SIZES[qtype]
    n_blocks = n_elements // block
    if n_elements % block or raw.numel() < n_blocks * type_size:
        raise ValueError(f"{n_elements} {qtype.name} values need {n_blocks * type_size} bytes in whole "
                         f"blocks of {block}; got {raw.numel()} bytes")
    blocks = raw.reshape(-1)[: n_blocks * type_size].reshape(n_blocks, type_size)
    out = torch.empty(n_elements, dtype=torch.float32, device=raw.device)
    step = max(1, CHUNK_ELEMENTS // block)
    for start in range(0, n_blocks, step):
        part = blocks[start:start + step]
        out[start * block:(start + part.shape[0]) * block] = decode(part).reshape(-1)
    return out


def numpy_as_torch(array: np.ndarray) -> torch.Tensor:
    """Zero-copy torch view of a (possibly read-only, memory-mapped) numpy array; never write to it."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not writable.*")
        return torch.from_numpy(array)


def tiled(x: torch.Tensor, mm: Callable[[torch.Tensor], torch.Tensor], n_out: int, dtype: torch.dtype,
          tile: int) -> torch.Tensor:
    """mm(rows) for x's rows ([..., K] -> [..., n_out]) computed on zero-padded tiles of exactly `tile`
    rows (in `dtype`), so each row's result does not depend on how many rows the call has or what they
    hold. A call of exactly one tile needs no padding: mm still gets a fresh buffer, as a padded tile is."""
    lead, k = x.shape[:-1], x.shape[-1]
    rows = x.reshape(-1, k)
    converted = rows.dtype != dtype
    rows = rows.to(dtype)
    m = rows.shape[0]
    if m == 0:
        return rows.new_zeros(*lead, n_out)
    if m == tile:                 # a converted copy is already a fresh contiguous buffer
        fresh = rows if converted and rows.is_contiguous() else rows.clone(memory_format=torch.contiguous_format)
        return mm(fresh).reshape(*lead, n_out)
    padded = rows.new_zeros(-(-m // tile) * tile, k)
    padded[:m] = rows
    out = torch.cat([mm(t) for t in padded.split(tile)])
    return out[:m].reshape(*lead, n_out)


def tiled_linear(x: torch.Tensor, weight: torch.Tensor, tile: int = LINEAR_TILE) -> torch.Tensor:
    """x @ weight.T on fixed tiles (`tiled`)."""
    return tiled(x, lambda t: F.linear(t, weight), weight.shape[0], weight.dtype, tile)


class QuantTensor:
    """A GGUF tensor kept quantized (`data`: uint8, one row of blocks per innermost row).

    CPU: `linear` keeps a dequantized copy in the compute dtype after first use (torch's CPU matmul
    needs dense weights); the quantized bytes, a view of the file's memory map, stay the source of
    truth. CUDA: `linear` runs Triton kernels that dequantize on the fly; types without a kernel are
    dequantized once to the compute dtype and run through the same fixed-tile Triton GEMM.
    """

    def __init__(self, data: torch.Tensor, qtype, shape: tuple[int, ...], compute_dtype=torch.float32):
        self.qtype = check_supported(qtype)
        self.shape = tuple(shape)
        self.compute_dtype = compute_dtype
        block, type_size = GGML_QUANT_SIZES[self.qtype]
        if self.shape[-1] % block:
            raise ValueError(f"{self.qtype.name} rows of {self.shape[-1]} values are not whole blocks of {block}")
        self.data = data.reshape(-1, self.shape[-1] // block * type_size)
        self.packed = None              # engine.kernels.packed.Packed once repacked for a GPU (then data is None)
        self.int4 = None                # engine.cpu_int4.Int4Weight: the CPU fast mode's form
        self.q8 = False                 # the fast mode's Q8_0 head: data (the file's blocks) is its form
        self._dense: torch.Tensor | None = None
        self._experts: dict[int, QuantTensor] = {}

    @classmethod
    def from_gguf(cls, gf, name: str, device="cpu", compute_dtype=torch.float32) -> QuantTensor:
        info = gf.tensors[name]
        check_supported(info.qtype)
        data = numpy_as_torch(gf.raw(name))
        if torch.device(device).type != "cpu":
            data = data.to(device)
        return cls(data, info.qtype, info.torch_shape, compute_dtype)

    @classmethod
    def of_packed(cls, p, compute_dtype) -> QuantTensor:
        """A 2-D matrix held only in the streaming layout (engine.kernels.packed.Packed p)."""
        qt = cls(p.codes.new_empty((0,)), p.qtype, (p.n, p.k), compute_dtype)
        qt.packed, qt.data = p, None
        return qt

    @property
    def nbytes(self) -> int:
        if self.int4 is not None:
            return self.int4.nbytes
        if any(e.int4 is not None for e in self._experts.values()):      # an expert stack kept as int4 experts
            return sum(e.nbytes for e in self._experts.values())
        return self.packed.nbytes if self.packed is not None else self.data.numel()

    @property
    def device(self) -> torch.device:
        return self.packed.codes.device if self.packed is not None else self.data.device

    def repack(self, on_cpu: bool = False) -> bool:
        """On a GPU, replace the GGUF bytes by the streaming layout (engine.kernels.packed) where a
        kernel reads it; the values stay bit-identical. False where this tensor keeps its GGUF form.
        on_cpu: also on CPU tensors (tests run the GPU kernels there under the Triton interpreter)."""
        from engine.kernels import packed

        if self.packed is not None:
            return True
        if (self.device.type != "cuda" and not on_cpu) or len(self.shape) not in (2, 3) \
                or not packed.supports(self.qtype, self.shape[-1]):
            return False
        # a Q4_K matrix (not an expert stack) in the tensor-core decode kernel's order where that kernel runs
        mma = packed.MMA_Q4K and self.device.type == "cuda" and len(self.shape) == 2 \
            and self.qtype == QT.Q4_K and self.shape[0] % 16 == 0
        self.packed = packed.pack(self.data, self.qtype, self.shape[-1], mma)  # an expert stack: experts' rows in turn
        self.data = None
        self._experts.clear()
        return True

    def to_int4(self, gemm: bool = True, head: bool = False) -> bool:
        """CPU fast mode: keep this matrix as int4 groups (engine.cpu_int4) instead of a dense copy;
        False where the type or shape has no int4 form. gemm: its prompt tiles may run on engine.cpu_gemm
        (Int4Weight.gemm; never an expert's). head: a Q8_0 head keeps the file's blocks where
        engine.cpu_gemm's kernel runs (QuantTensor.q8)."""
        from engine import cpu_int4

        if len(self.shape) == 3 and self.device.type == "cpu" and cpu_int4.supports(self.qtype, self.shape[1:]):
            return all(self.expert(e).to_int4(False) for e in range(self.shape[0]))     # each expert its own
        if self.device.type != "cpu" or not cpu_int4.supports(self.qtype, self.shape):
            return False
        if head and cpu_gemm.q8_head(self.qtype, self.shape):
            self.q8 = True
            return True
        self.int4 = cpu_int4.from_gguf(self.data, self.qtype, *self.shape)
        self.int4.gemm = gemm
        return True

    def __repr__(self) -> str:
        return f"QuantTensor({self.qtype.name}, shape={self.shape}, device={self.device})"

    def dequantize(self) -> torch.Tensor:
        """A new dense tensor in the compute dtype and torch shape."""
        if self.packed is not None:
            from engine.kernels.packed import unpack

            return unpack(self.packed).reshape(self.shape).to(self.compute_dtype)
        n = self.data.shape[0] * self.shape[-1]
        return dequantize(self.data, self.qtype, n).reshape(self.shape).to(self.compute_dtype)

    def rows(self, ids: torch.Tensor) -> torch.Tensor:
        """Embedding lookup: rows `ids` (any shape) -> ids.shape + (cols,), decoding only those rows."""
        cols = self.shape[-1]
        flat = ids.reshape(-1).to(self.device)
        if self._dense is not None:
            picked = self._dense.reshape(-1, cols)[flat]
        elif self.packed is not None:
            picked = self.dense_weight().reshape(-1, cols)[flat]
        else:
            picked = dequantize(self.data[flat], self.qtype, flat.numel() * cols).to(self.compute_dtype)
        return picked.reshape(*ids.shape, cols)

    def linear(self, x: torch.Tensor, tile: int = LINEAR_TILE, n_dev: torch.Tensor | None = None,
               alone: bool = False) -> torch.Tensor:
        """x[..., in] @ W.T -> [..., out] in the compute dtype (f32 or bf16), row-invariant: a row's
        result is bit-identical whatever the other rows hold and however many there are. On CPU the
        rows run on zero-padded tiles of exactly `tile` rows (the caller keeps it fixed per row kind);
        the CUDA kernels are row-invariant at any row count (n_dev: a device scalar, the count of real
        rows; the decode kernel computes only those). alone: a CPU decode tile's rows, each given the
        bits of a 1-row tile (int4 matrices at any row count; a dense copy one row per call)."""
        if len(self.shape) != 2:
            raise ValueError(f"linear needs a 2-D weight, this one is {self.shape}")
        if self.device.type == "cuda":
            return self.triton_linear(x, n_dev)
        if self.q8:
            return cpu_gemm.q8_matmul(x, self.data, self.shape[0]).reshape(*x.shape[:-1], -1).to(self.compute_dtype)
        if self.data is not None and self.compute_dtype == torch.bfloat16 and \
                cpu_gemm.q6_k_rows(self.qtype, self.shape, tile):      # a decode tile: the file's blocks
            return cpu_gemm.q6_k_matmul(x, self.data, self.shape[0]).reshape(*x.shape[:-1], -1).to(self.compute_dtype)
        if self.int4 is not None:
            from engine import cpu_int4

            return cpu_int4.linear(x, self.int4, tile).to(self.compute_dtype)
        if alone and x[..., 0].numel() > 1:
            rows = x.reshape(-1, x.shape[-1])
            out = torch.cat([tiled_linear(rows[i:i + 1], self.dense_weight(), 1) for i in range(rows.shape[0])])
            return out.reshape(*x.shape[:-1], out.shape[-1])
        return tiled_linear(x, self.dense_weight(), tile)

    def expert(self, e: int) -> QuantTensor:
        """Expert e of a (n_expert, out, in) stack, as a 2-D QuantTensor sharing this one's bytes."""
        if len(self.shape) != 3:
            raise ValueError(f"expert() needs a 3-D expert stack, this one is {self.shape}")
        if not 0 <= e < self.shape[0]:
            raise IndexError(f"expert {e} out of range (this stack has {self.shape[0]})")
        if e not in self._experts:
            out = self.shape[1]
            if self.packed is not None:         # a view of the repacked stack's planes
                one = QuantTensor.of_packed(self.packed.rows(e * out, (e + 1) * out), self.compute_dtype)
            else:
                one = QuantTensor(self.data[e * out:(e + 1) * out], self.qtype, self.shape[1:], self.compute_dtype)
            self._experts[e] = one
        return self._experts[e]

    def dense_weight(self) -> torch.Tensor:
        """The cached dequantized weight (compute dtype), made at first use."""
        if self._dense is None:
            self._dense = self.dequantize()
        return self._dense

    def triton_linear(self, x: torch.Tensor, n_dev: torch.Tensor | None = None) -> torch.Tensor:
        """`linear` through the Triton kernels (what CUDA tensors use; on CPU only under TRITON_INTERPRET)."""
        from engine.kernels import quant_matmul as qm

        lead, k = x.shape[:-1], x.shape[-1]
        rows = x.reshape(-1, k).to(self.compute_dtype).contiguous()
        if self.packed is not None:
            from engine.kernels import stream_matmul

            out = stream_matmul.linear(rows, self.packed, n_dev)
        elif self.qtype in qm.KERNEL_TYPES:
            out = qm.quant_linear(rows, self.data, self.qtype)
        else:
            out = qm.dense_linear(rows, self.dense_weight())
        return out.reshape(*lead, self.shape[0])
