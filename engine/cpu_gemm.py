"""The CPU fast mode's own kernels (engine/native/): the prompt-tile matmul (int4_prompt_gemm.c: int4 matrices
in torch's packed layout dequantized once per call into bfloat16 panels and multiplied with AVX512-BF16 dot
products), the decode-tile matmul on the same layout (int4_rows.c), the Q8_0 head (q8_0_rows.c: a head's
rows read straight from the file's Q8_0 blocks), Q6_K decode tiles (q6_k_rows.c: the file's blocks, where
prompt tiles multiply a dense copy), the tiles' attention (prompt_attention.c, called through
engine/cpu_attention.py), every CPU stage's RMSNorm (rows_norm.c) and a stage's dense blocks over a decode tile in
one call (decode_layers.c, engine/cpu_layers.py).

torch's int4 CPU kernel unpacks the weights again for every few rows; on the 2-core machine (AMD EPYC,
AVX512-BF16, 2026-12-04, `tests/cpu/bench_prompt_gemm.py`) it makes 72-82 GFLOP/s at 128 rows on two-part
matrices (Q8_0, Q5_0, Q5_1) and 154-170 on one-part ones, this kernel 309-384. Decode tiles (fewer than
MIN_TILE rows) run int4_rows.c: the codes multiplied as 4-bit integers in bfloat16 pairs, each 32-value
group's scale and zero applied once to its sum (STRATA_CPU_ROWS=0: torch's kernel).

The weights it multiplies are the int4 kernel's values rounded to bfloat16 (as the activations already
are), so prompt rows and decode rows see a matrix rounded differently; each kind always runs the same
kernel, and this one gives a row the same bits at any row count and thread count, so the exactness rules
hold as with torch's kernel.

A Q8_0 head (Gemma 3's tied embedding, the default model's) keeps the file's blocks: 1.0625 bytes a value
against 1.25 as two int4 parts, and no copy (the file's mapped pages are the weights); its kernel gives each
row's logits the same bits at any row and thread count, as torch's kernel does.

The shared object is built from the C sources with the system's C compiler at first use (about a second)
into the user cache, keyed by a hash of the sources; a bundled build next to them is used where there is
one (the installer's). No compiler, no AVX512-BF16, or STRATA_CPU_GEMM=0: torch's kernel runs instead (and
heads are int4 parts again).
It is built with -fopenmp and loaded after torch, so its parallel loop runs on torch's OpenMP runtime and
thread team (the process keeps one team per thread, engine/cpu_thread.py).
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import platformdirs
import torch
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as QT

NATIVE = Path(__file__).parent / "native"
SOURCES = [NATIVE / "int4_prompt_gemm.c", NATIVE / "q8_0_rows.c", NATIVE / "rows_norm.c", NATIVE / "q6_k_rows.c",
           NATIVE / "prompt_attention.c", NATIVE / "int4_rows.c", NATIVE / "decode_attention.c",
           NATIVE / "decode_layers.c"]
HEADERS = [NATIVE / "kernel_math.h"]     # included by the sources: part of the build's hash
FLAGS = ["-O3", "-ffp-contract=off", "-fPIC", "-shared", "-fopenmp"]   # (no product fused into a sum unless
                                                                        # written so), in the hash too
BLOCK_N = 64                    # columns the kernel takes at a time (torch's packing block)
MIN_TILE = 32                   # tiles of at least this many rows (prompt tiles) use it; decode tiles never
ROWS_KERNEL = os.environ.get("STRATA_CPU_ROWS", "1") != "0"   # decode tiles on int4_rows.c (0: torch's kernel)

_lib: ctypes.CDLL | None = None
_why = ""
_tried = False
_lock = threading.Lock()


def _library_path() -> Path:
    bundled = NATIVE / "strata_cpu.so"
    if bundled.exists():
        return bundled
    made_of = b"".join(p.read_bytes() for p in SOURCES + HEADERS) + " ".join(FLAGS).encode()
    tag = hashlib.sha256(made_of).hexdigest()[:16]
    return Path(platformdirs.user_cache_dir("strata-studio")) / "native" / f"strata_cpu-{tag}.so"


def build(target: Path) -> None:
    """The shared object from SOURCES at target (here at first use, or packaging/build.sh for the installer)."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise RuntimeError("no C compiler (cc or gcc) on PATH")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=target.parent)
    os.close(fd)
    try:
        done = subprocess.run([cc, *FLAGS, "-o", tmp, *map(str, SOURCES)],
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{cc} failed: {done.stderr.strip()[-400:]}")
        os.replace(tmp, target)          # another process building the same file at once is harmless
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _load() -> ctypes.CDLL | None:
    global _lib, _why, _tried
    with _lock:
        if _tried:
            return _lib
        _tried = True
        if os.environ.get("STRATA_CPU_GEMM", "1") == "0":
            _why = "off (STRATA_CPU_GEMM=0)"
            return None
        try:
            path = _library_path()
            if not path.exists():
                build(path)
            lib = ctypes.CDLL(str(path))
            if not lib.strata_int4_gemm_supported():
                _why = "this CPU lacks AVX512-BF16"
                return None
            fn = lib.strata_int4_gemm
            fn.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
                           ctypes.c_int64, ctypes.c_int, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int]
            fn.restype = ctypes.c_int
            fn = lib.strata_int4_rows
            fn.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
                           ctypes.c_int64, ctypes.c_int, ctypes.c_void_p, ctypes.c_int64]
            fn.restype = ctypes.c_int
            fn = lib.strata_q8_0_matmul
            fn.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64,
                           ctypes.c_void_p]
            fn.restype = ctypes.c_int
            fn = lib.strata_q6_k_matmul
            fn.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64,
                           ctypes.c_void_p]
            fn.restype = ctypes.c_int
            fn = lib.strata_rms_norm
            fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                           ctypes.c_float]
            fn.restype = ctypes.c_int
            for fn in (lib.strata_prompt_attention, lib.strata_decode_attention):     # engine/cpu_attention.py
                fn.argtypes = [ctypes.c_void_p, *[ctypes.c_int64] * 5, ctypes.c_int, ctypes.c_void_p,
                               ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
                               ctypes.c_int64, ctypes.c_float, ctypes.c_void_p]
                fn.restype = ctypes.c_int
            fn = lib.strata_decode_layers                                               # engine/cpu_layers.py
            fn.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                           ctypes.c_void_p, ctypes.c_void_p]
            fn.restype = ctypes.c_int
            _lib = lib
        except (OSError, RuntimeError, AttributeError, subprocess.SubprocessError) as e:  # (Attribute: stale build)
            _why = f"unavailable ({e})"
            print(f"strata: the CPU kernels are {_why}; torch's int4 kernel runs instead", file=sys.stderr)
        return _lib


def available() -> bool:
    return _load() is not None


def describe() -> str:
    """For the effective configuration: which kernels run prompt tiles, decode rows, a Q8_0 head and Q6_K
    decode rows."""
    from engine import cpu_attention, cpu_layers      # (they import this module)

    if available():
        return ("prompt tiles on the AVX512-BF16 kernels (weights rounded to bfloat16; attention "
                + ("too" if cpu_attention.ENABLED else "on torch's path, STRATA_CPU_ATTN=0")
                + "), int4 decode rows on " + ("the project's kernel" if ROWS_KERNEL else "torch's, STRATA_CPU_ROWS=0")
                + ", a Q8_0 head and Q6_K decode rows on the file's blocks"
                + (", dense blocks' decode tiles in one call" if cpu_layers.ENABLED else ""))
    return f"prompt tiles on torch's int4 kernel (the AVX512-BF16 kernel: {_why})"


def usable(n: int, tile: int) -> bool:
    """Whether a matrix of n rows multiplied on tiles of `tile` rows runs here (decided by the tile's size,
    never by how many of its rows are real)."""
    return tile >= MIN_TILE and n % BLOCK_N == 0 and available()


def matmul(x: torch.Tensor, packed: torch.Tensor, sz: torch.Tensor, n: int, parts: int,
           f32: bool = False) -> torch.Tensor:
    """bfloat16 x [M, K] (contiguous) @ W.T -> bfloat16 [M, n]; W in torch's int4 CPU layout, `parts` int4
    parts side by side along K (the same x for both). f32: the float32 sums before their rounding (tests)."""
    m, k = x.shape
    if not (x.dtype == torch.bfloat16 and x.is_contiguous() and packed.is_contiguous() and sz.is_contiguous()):
        raise ValueError("cpu_gemm.matmul needs contiguous bfloat16 x and contiguous weights")
    if packed.numel() != n * k * parts // 2 or sz.shape != (k * parts // 32, n, 2):
        raise ValueError(f"packed weights {tuple(packed.shape)}, {tuple(sz.shape)} do not fit n={n}, k={k}, parts={parts}")
    y = torch.empty((m, n), dtype=torch.float32 if f32 else torch.bfloat16)
    if m and _load().strata_int4_gemm(x.data_ptr(), m, k, packed.data_ptr(), sz.data_ptr(), n, parts,
                                      y.data_ptr(), n, int(f32)) != 0:
        raise MemoryError("the CPU prompt kernel could not allocate its panels")
    return y


def rows_usable(n: int, k: int) -> bool:
    """Whether an int4 matrix [n, k] can run int4_rows.c (whole 64-column packing blocks); engine.cpu_int4
    runs decode tiles on it (fewer than MIN_TILE rows, decided by the tile's size), and the matrices whose
    tiles are a few real rows at any tile."""
    return n % BLOCK_N == 0 and k % 32 == 0 and ROWS_KERNEL and available()


def rows_matmul(x: torch.Tensor, packed: torch.Tensor, sz: torch.Tensor, n: int, parts: int) -> torch.Tensor:
    """bfloat16 x [M, K] (contiguous) @ W.T -> bfloat16 [M, n] on int4_rows.c; W as in `matmul`."""
    m, k = x.shape
    if not (x.dtype == torch.bfloat16 and x.is_contiguous() and packed.is_contiguous() and sz.is_contiguous()):
        raise ValueError("cpu_gemm.rows_matmul needs contiguous bfloat16 x and contiguous weights")
    if packed.numel() != n * k * parts // 2 or sz.shape != (k * parts // 32, n, 2):
        raise ValueError(f"packed weights {tuple(packed.shape)}, {tuple(sz.shape)} do not fit n={n}, k={k}, parts={parts}")
    y = torch.empty((m, n), dtype=torch.bfloat16)
    if m and _load().strata_int4_rows(x.data_ptr(), m, k, packed.data_ptr(), sz.data_ptr(), n, parts,
                                      y.data_ptr(), n) != 0:
        raise MemoryError("the CPU decode-row kernel could not allocate its sums")
    return y


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor | None:
    """RMSNorm of x's rows (float32 out) on rows_norm.c, or None where it does not run (no library, a
    tensor autograd follows, w not float32 of x's last size): the caller's torch path then."""
    if (x.requires_grad or w.requires_grad or w.dtype != torch.float32 or w.dim() != 1
            or w.shape[0] != x.shape[-1] or not w.is_contiguous() or _load() is None):
        return None
    x = x.float().contiguous()
    y = torch.empty_like(x)
    if x.numel():
        _lib.strata_rms_norm(x.data_ptr(), w.data_ptr(), y.data_ptr(), x.numel() // x.shape[-1], x.shape[-1], eps)
    return y


def q8_head(qtype, shape: tuple[int, ...]) -> bool:
    """Whether a head of this type and shape keeps the file's Q8_0 blocks (q8_matmul) in the fast mode."""
    return QT(qtype) == QT.Q8_0 and len(shape) == 2 and shape[-1] % 32 == 0 and available()


def q8_matmul(x: torch.Tensor, blocks: torch.Tensor, n: int) -> torch.Tensor:
    """x [M, K] @ W.T -> float32 [M, n]; W [n, K] as GGUF Q8_0 blocks (bytes, contiguous)."""
    return _blocks_matmul(x, blocks, n, QT.Q8_0, "strata_q8_0_matmul")


def _blocks_matmul(x: torch.Tensor, blocks: torch.Tensor, n: int, qt: QT, kernel: str) -> torch.Tensor:
    """x [M, K] @ W.T -> float32 [M, n] on `kernel`, W [n, K] as the file's blocks of type qt."""
    x = x.reshape(-1, x.shape[-1]).to(torch.bfloat16).contiguous()
    m, k = x.shape
    per, size = GGML_QUANT_SIZES[qt]
    if blocks.numel() != n * (k // per) * size or not blocks.is_contiguous():
        raise ValueError(f"{qt.name} blocks of {blocks.numel()} bytes do not fit n={n}, k={k}")
    y = torch.empty((m, n), dtype=torch.float32)
    if m and getattr(_load(), kernel)(x.data_ptr(), m, k, blocks.data_ptr(), n, y.data_ptr()) != 0:
        raise MemoryError(f"the CPU {qt.name} kernel could not allocate its float32 rows")
    return y


def q6_k_rows(qtype, shape: tuple[int, ...], tile: int) -> bool:
    """Whether a matrix of this type and shape multiplies tiles of `tile` rows on q6_k_matmul: Q6_K decode
    tiles (fewer than MIN_TILE rows) where the kernels run; prompt tiles keep the dense copy's GEMM."""
    return QT(qtype) == QT.Q6_K and len(shape) == 2 and shape[-1] % 256 == 0 and tile < MIN_TILE and available()


def q6_k_matmul(x: torch.Tensor, blocks: torch.Tensor, n: int) -> torch.Tensor:
    """x [M, K] @ W.T -> float32 [M, n]; W [n, K] as GGUF Q6_K blocks (bytes, contiguous)."""
    return _blocks_matmul(x, blocks, n, QT.Q6_K, "strata_q6_k_matmul")
