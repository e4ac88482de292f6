"""Fast GGUF reader over a memory map.

`gguf.GGUFReader` builds a Python object per vocabulary entry (6 s for SmolLM2, 30 s for Gemma on
a 2-core machine). This reader parses the header itself, keeps numeric arrays as numpy views of the
map, and leaves tensor data in the map until a stage asks for it. Type ids, block sizes and names
come from the `gguf` package so there is one source of truth for the format.
"""
from __future__ import annotations

import mmap
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType

from engine.errors import ModelFileError

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32

_SCALAR = {
    GGUFValueType.UINT8: "<u1", GGUFValueType.INT8: "<i1", GGUFValueType.UINT16: "<u2",
    GGUFValueType.INT16: "<i2", GGUFValueType.UINT32: "<u4", GGUFValueType.INT32: "<i4",
    GGUFValueType.FLOAT32: "<f4", GGUFValueType.BOOL: "<u1", GGUFValueType.UINT64: "<u8",
    GGUFValueType.INT64: "<i8", GGUFValueType.FLOAT64: "<f8",
}


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]          # GGUF order: shape[0] is the innermost (contiguous) dimension
    qtype: GGMLQuantizationType
    offset: int                     # absolute byte offset in the file
    nbytes: int

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def torch_shape(self) -> tuple[int, ...]:
        """Row-major shape (outermost first), as torch and numpy see it."""
        return tuple(reversed(self.shape))


@dataclass
class GGUFFile:
    path: Path
    version: int
    metadata: dict[str, object]
    tensors: dict[str, TensorInfo]
    data_offset: int
    _map: mmap.mmap | None = field(default=None, repr=False)
    _attached: dict[str, "GGUFFile"] = field(default_factory=dict, repr=False)   # tensor -> the file holding it
    sidecar: Path | None = None

    def raw(self, name: str) -> np.ndarray:
        """The tensor's bytes as a read-only uint8 view of the map (no copy)."""
        if name in self._attached:
            return self._attached[name].raw(name)
        info = self.tensors[name]
        return np.frombuffer(self._map, dtype=np.uint8, count=info.nbytes, offset=info.offset)

    def attach(self, side: "GGUFFile", keys: tuple[str, ...]) -> None:
        """Read `side`'s tensors as this file's (an MTP layer trained for this model, kept in its own
        file), with `side`'s values of `keys` (its block and nextn layer counts)."""
        for name, info in side.tensors.items():
            self.tensors[name] = info
            self._attached[name] = side
        self.metadata.update({k: side.metadata[k] for k in keys})
        self.sidecar = side.path

    def release(self, name: str) -> None:
        """Tell the OS the tensor's mapped pages are not needed now (a CPU stage made its own form of
        it): they leave the process's resident memory and are read from the file again if touched."""
        if name in self._attached:
            return self._attached[name].release(name)
        info = self.tensors[name]
        page = mmap.PAGESIZE
        start = -(-info.offset // page) * page
        end = (info.offset + info.nbytes) // page * page
        if self._map is not None and end > start and hasattr(self._map, "madvise"):
            self._map.madvise(mmap.MADV_DONTNEED, start, end - start)

    def get(self, key: str, default=None):
        return self.metadata.get(key, default)

    def close(self) -> None:
        # Views into the map may still be alive (numpy keeps the buffer); let GC close it.
        self._map = None


MAX_DIMS = 4                    # GGML_MAX_DIMS
MAX_NESTING = 2                 # an array of arrays at most (llama.cpp reads none nested)
MAX_ENTRIES = 1_000_000         # keys or tensors in one file: far beyond any real model
MAX_KEY = 65_535                # bytes in a metadata key (real ones are under 100)
MAX_NAME = 256                  # bytes in a tensor name (llama.cpp's limit is 63)
_MIN_KV_BYTES = 8 + 4 + 1       # key length, value type, the smallest value
_MIN_TENSOR_BYTES = 8 + 4 + 4 + 8


class _Cursor:
    """Reads the header; every length and count is checked against the bytes left before anything
    is allocated for it, so a corrupt count (2**60 strings) is refused, not attempted."""
    __slots__ = ("buf", "pos", "path", "end")

    def __init__(self, buf, path):
        self.buf, self.pos, self.path, self.end = buf, 0, path, len(buf)

    def fail(self, problem: str):
        raise ModelFileError(self.path, f"corrupt header at byte {self.pos:,}: {problem}")

    def need(self, n: int) -> None:
        if self.pos + n > self.end:
            raise ModelFileError(self.path, f"truncated header (needs byte {self.pos + n:,}, file has {self.end:,})")

    def count(self, n: int, min_bytes: int, what: str) -> int:
        """`n` items of at least `min_bytes` each must fit in what is left of the file."""
        if n * min_bytes > self.end - self.pos:
            raise ModelFileError(self.path, f"truncated header ({n:,} {what} cannot fit in the "
                                            f"{self.end - self.pos:,} bytes left at byte {self.pos:,})")
        return n

    def u32(self) -> int:
        self.need(4)
        v = int.from_bytes(self.buf[self.pos:self.pos + 4], "little")
        self.pos += 4
        return v

    def u64(self) -> int:
        self.need(8)
        v = int.from_bytes(self.buf[self.pos:self.pos + 8], "little")
        self.pos += 8
        return v

    def string(self, limit: int | None = None, what: str = "") -> str:
        n = self.u64()
        if limit is not None and n > limit:
            self.fail(f"a {what} of {n:,} bytes (at most {limit:,})")
        self.need(n)
        s = bytes(self.buf[self.pos:self.pos + n]).decode("utf-8", errors="replace")
        self.pos += n
        return s

    def value(self, vtype: int, depth: int = 0):
        if vtype == GGUFValueType.STRING:
            return self.string()
        if vtype == GGUFValueType.ARRAY:
            if depth >= MAX_NESTING:
                self.fail("arrays nested too deep")
            itype = self.u32()
            count = self.u64()
            if itype == GGUFValueType.STRING:
                return self.strings(self.count(count, 8, "strings"))
            if itype in _SCALAR:
                dt = np.dtype(_SCALAR[GGUFValueType(itype)])
                self.need(count * dt.itemsize)
                arr = np.frombuffer(self.buf, dtype=dt, count=count, offset=self.pos)
                self.pos += count * dt.itemsize
                return arr.astype(bool) if itype == GGUFValueType.BOOL else arr
            if itype != GGUFValueType.ARRAY:
                self.fail(f"unknown array item type {itype}")
            self.count(count, 12, "arrays")
            return [self.value(itype, depth + 1) for _ in range(count)]
        if vtype not in _SCALAR:
            self.fail(f"unknown metadata value type {vtype}")
        dt = np.dtype(_SCALAR[GGUFValueType(vtype)])
        self.need(dt.itemsize)
        v = np.frombuffer(self.buf, dtype=dt, count=1, offset=self.pos)[0]
        self.pos += dt.itemsize
        return bool(v) if vtype == GGUFValueType.BOOL else v.item()

    def strings(self, count: int) -> list[str]:
        buf, pos, end = self.buf, self.pos, self.end
        out = []
        frm = int.from_bytes
        for _ in range(count):
            if pos + 8 > end:
                raise ModelFileError(self.path, "truncated header (string array runs past the end)")
            n = frm(buf[pos:pos + 8], "little")
            pos += 8
            if pos + n > end:
                raise ModelFileError(self.path, "truncated header (string array runs past the end)")
            out.append(buf[pos:pos + n].tobytes().decode("utf-8", errors="replace"))
            pos += n
        self.pos = pos
        return out


def read_gguf(path: str | os.PathLike) -> GGUFFile:
    """Parse a GGUF file's header and tensor table; raises ModelFileError with a one-line reason."""
    path = Path(path)
    try:
        if not path.exists():
            raise ModelFileError(path, "file not found")
        if path.is_dir():
            raise ModelFileError(path, "is a directory, not a GGUF file")
        size = path.stat().st_size
        if size < 24:
            raise ModelFileError(path, f"not a GGUF file (only {size} bytes)")
        with open(path, "rb") as f:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as e:
        raise ModelFileError(path, f"cannot read: {e.strerror or e}") from None
    buf = memoryview(mm)
    if bytes(buf[:4]) != GGUF_MAGIC:
        raise ModelFileError(path, f"not a GGUF file (starts with {bytes(buf[:4])!r}, expected b'GGUF')")
    cur = _Cursor(buf, path)
    cur.pos = 4
    version = cur.u32()
    if version not in (2, 3):
        swapped = int.from_bytes(version.to_bytes(4, "little"), "big")
        hint = " (a big-endian file: not supported)" if swapped in (2, 3) else ""
        raise ModelFileError(path, f"unsupported GGUF version {version}{hint} (this reader handles 2 and 3)")
    n_tensors, n_kv = cur.u64(), cur.u64()
    if n_tensors > MAX_ENTRIES or n_kv > MAX_ENTRIES:
        raise ModelFileError(path, f"corrupt header (implausible counts: {n_tensors:,} tensors, {n_kv:,} keys)")
    cur.count(n_kv, _MIN_KV_BYTES, "metadata keys")
    metadata: dict[str, object] = {}
    for _ in range(n_kv):
        key = cur.string(MAX_KEY, "metadata key")
        if key in metadata:
            cur.fail(f"metadata key {_short(key)} appears twice")
        metadata[key] = cur.value(cur.u32())
    cur.count(n_tensors, _MIN_TENSOR_BYTES, "tensor entries")
    raw_infos = []
    for _ in range(n_tensors):
        name = cur.string(MAX_NAME, "tensor name")
        n_dims = cur.u32()
        if not 1 <= n_dims <= MAX_DIMS:
            cur.fail(f"tensor {_short(name)} has {n_dims} dimensions (1 to {MAX_DIMS} allowed)")
        shape = tuple(cur.u64() for _ in range(n_dims))
        qtype_id = cur.u32()
        raw_infos.append((name, shape, qtype_id, cur.u64()))
    alignment = _alignment(path, metadata.get("general.alignment", DEFAULT_ALIGNMENT))
    data_offset = (cur.pos + alignment - 1) // alignment * alignment
    tensors: dict[str, TensorInfo] = {}
    for name, shape, qtype_id, rel in raw_infos:
        if name in tensors:
            raise ModelFileError(path, f"tensor {_short(name)} appears twice")
        try:
            qtype = GGMLQuantizationType(qtype_id)
            block, type_size = GGML_QUANT_SIZES[qtype]
        except (ValueError, KeyError):
            raise ModelFileError(path, f"tensor {_short(name)} has unknown quant type id {qtype_id}") from None
        if shape[0] % block:
            raise ModelFileError(path, f"tensor {_short(name)}: rows of {shape[0]:,} values are not a whole number of "
                                       f"{qtype.name} blocks ({block} values each)")
        if rel % alignment:
            raise ModelFileError(path, f"tensor {_short(name)}: data offset {rel:,} is not a multiple of the "
                                       f"alignment {alignment}")
        n = 1
        for d in shape:
            n *= d
        nbytes = n // block * type_size
        off = data_offset + rel
        if off + nbytes > size:
            raise ModelFileError(path, f"truncated: tensor {_short(name)} ends at byte {off + nbytes:,} but the file has {size:,}")
        tensors[name] = TensorInfo(name, shape, qtype, off, nbytes)
    return GGUFFile(path, version, metadata, tensors, data_offset, mm)


def _short(text: str, n: int = 80) -> str:
    """repr of a name from the file, cut to about n characters (a corrupt one can be anything)."""
    r = repr(text)
    return r if len(r) <= n else r[:n - 4] + "...'"


def _alignment(path: Path, value) -> int:
    """general.alignment: a power of two (llama.cpp's rule), 1 byte to 1 MiB."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= 1 << 20 or value & (value - 1):
        raise ModelFileError(path, f"general.alignment {value!r} is not a power of two from 1 to 1 MiB")
    return value
