"""GGUF mutation for the fuzz tests: an independent walk of a GGUF header into named fields, mutations
that name the field they change (so a failing example reads "set kv 'llama.block_count' value to 2**60",
and a saved regression recipe survives a change in the seed file's layout), and a tiny GGUF writer
for files built from scratch.

A recipe (tests/engine/fuzz_cases/*.json) is {"seed": "smol" | "synthetic:ARCH", "mutations": [...]},
each mutation a list: ["set", FIELD, VALUE], ["flip", OFFSET, XOR], ["truncate", LENGTH],
["kv", KEY, VTYPE, VALUE] (a metadata entry replaced, added, or dropped with VTYPE null). A FIELD is
a string such as "header.n_tensors", "kv:llama.block_count:value", "kv:tokenizer.ggml.tokens:count",
"tensor:blk.0.attn_q.weight:dim1" (see walk()).
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

# GGUF value types (gguf.constants.GGUFValueType), spelled out: the walker is independent of the reader.
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
SCALAR_SIZE = {U8: 1, I8: 1, U16: 2, I16: 2, U32: 4, I32: 4, F32: 4, BOOL: 1, U64: 8, I64: 8, F64: 8}
SCALAR_FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<?",
              U64: "<Q", I64: "<q", F64: "<d"}
ARRAY_ELEMENTS_WALKED = 3      # fields of the first few elements of an array; the rest stay as they are


@dataclass(frozen=True)
class Field:
    name: str
    offset: int
    width: int          # bytes: 4 or 8 for integers, 4/8 for floats (float=True), 1/2 for small scalars
    float: bool = False


@dataclass
class Layout:
    fields: list[Field]
    header_end: int     # first byte after the tensor infos (before alignment padding)
    kv_spans: dict[str, tuple[int, int]]    # key -> (first byte of its entry, first byte after it)
    alignment: int
    data_start: int     # the tensor data section (header_end rounded up to the alignment)

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)


def walk(data: bytes) -> Layout:
    """The named fields of a valid GGUF header (v2/v3, little-endian); raises (some exception) on a file
    it cannot follow, never loops over a count the file cannot hold."""
    fields: list[Field] = []
    pos = 0

    def take(fmt: str):
        nonlocal pos
        v = struct.unpack_from(fmt, data, pos)[0]
        pos += struct.calcsize(fmt)
        return v

    def add(name, width, fl=False):
        fields.append(Field(name, pos, width, fl))

    def string(name):
        nonlocal pos
        add(name, 8)
        n = take("<Q")
        s = data[pos:pos + n].decode("utf-8", "replace")
        pos += n
        return s

    def value(vtype: int, name: str, walked: bool = True):
        nonlocal pos
        if vtype == STRING:
            if walked:
                string(name + ":len")
            else:
                pos += 8 + struct.unpack_from("<Q", data, pos)[0]
        elif vtype == ARRAY:
            if walked:
                add(name + ":atype", 4)
            itype = take("<I")
            if walked:
                add(name + ":count", 8)
            count = take("<Q")
            if count * SCALAR_SIZE.get(itype, 8) > len(data) - pos:      # (a mutated file can claim 2**60)
                raise ValueError(f"{name}: {count} items cannot fit")
            if itype in SCALAR_SIZE:
                n = min(count, ARRAY_ELEMENTS_WALKED) if walked else 0
                for i in range(n):
                    value(itype, f"{name}[{i}]")
                pos += (count - n) * SCALAR_SIZE[itype]
                return
            if itype not in (STRING, ARRAY):
                raise ValueError(f"{name}: unknown item type {itype}")
            for i in range(count):
                value(itype, f"{name}[{i}]", walked and i < ARRAY_ELEMENTS_WALKED)
        else:
            size = SCALAR_SIZE[vtype]
            if walked:
                add(name, size, vtype in (F32, F64))
            pos += size

    add("header.magic", 4)
    pos += 4
    add("header.version", 4)
    pos += 4
    add("header.n_tensors", 8)
    n_tensors = take("<Q")
    add("header.n_kv", 8)
    n_kv = take("<Q")
    spans = {}
    alignment = 32
    for _ in range(n_kv):
        start = pos
        key = string("kv-key")
        fields[-1] = Field(f"kv:{key}:keylen", fields[-1].offset, 8)
        add(f"kv:{key}:type", 4)
        vtype = take("<I")
        value(vtype, f"kv:{key}:value" if vtype not in (ARRAY,) else f"kv:{key}")
        spans[key] = (start, pos)
        if key == "general.alignment":
            alignment = struct.unpack_from(SCALAR_FMT[vtype], data, pos - SCALAR_SIZE[vtype])[0]
    for _ in range(n_tensors):
        name = string("tensor-name")
        fields[-1] = Field(f"tensor:{name}:namelen", fields[-1].offset, 8)
        add(f"tensor:{name}:n_dims", 4)
        n_dims = take("<I")
        for d in range(n_dims):
            add(f"tensor:{name}:dim{d}", 8)
            pos += 8
        add(f"tensor:{name}:qtype", 4)
        pos += 4
        add(f"tensor:{name}:offset", 8)
        pos += 8
    return Layout(fields, pos, spans, alignment, -(-pos // alignment) * alignment)


def apply(data: bytes, layout: Layout, mutations) -> bytes:
    """`data` with the mutations applied in order (a field's offset is taken from `layout`)."""
    buf = bytearray(data)
    for m in mutations:
        op = m[0]
        if op == "set":
            f = layout.field(m[1])
            if f.offset + f.width > len(buf):
                continue
            value = m[2]
            if f.float or isinstance(value, float):        # a float into an integer field: its bits
                raw = struct.pack("<d" if f.width == 8 else "<f", float(value))[:f.width].ljust(f.width, b"\0")
            else:
                raw = (int(value) % (1 << (8 * f.width))).to_bytes(f.width, "little")
            buf[f.offset:f.offset + f.width] = raw
        elif op == "flip":
            if m[1] < len(buf):
                buf[m[1]] ^= m[2] or 0xFF
        elif op == "truncate":
            del buf[m[1]:]
        elif op == "kv":                              # ["kv", KEY, VTYPE or None (drop it), VALUE]
            buf = bytearray(replace_kv(bytes(buf), layout, m[1], *m[2:]))
            layout = walk(bytes(buf)) if _parses(buf) else layout
        else:
            raise ValueError(f"unknown mutation {m!r}")
    return bytes(buf)


def _parses(buf) -> bool:
    try:
        walk(bytes(buf))
        return True
    except Exception:  # noqa: BLE001 - a value of another type can make the rest unreadable
        return False


def replace_kv(data: bytes, layout: Layout, key: str, vtype: int | None = None, value=None) -> bytes:
    """The file with metadata `key` given type `vtype` and `value` (added if missing), or dropped when
    vtype is None; the header is re-laid out and the tensor data moved to the new aligned start (tensor
    offsets are relative to it, so they stay right). ARRAY values are [item type, items(, claimed count)]."""
    if key in layout.kv_spans:
        start, end = layout.kv_spans[key]
    else:
        start = end = max((e for _, e in layout.kv_spans.values()), default=24)
    entry = b"" if vtype is None else _str(key) + struct.pack("<I", vtype) + encode_value(vtype, value)
    n_kv = struct.unpack_from("<Q", data, 16)[0] + (vtype is not None) - (key in layout.kv_spans)
    header = data[:16] + struct.pack("<Q", n_kv) + data[24:start] + entry + data[end:layout.header_end]
    alignment = layout.alignment
    if key == "general.alignment":
        ok = isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 1 << 20
        alignment = value if ok else 32
    return header + b"\0" * (-len(header) % alignment) + data[layout.data_start:]


def write_sparse(path: Path, data: bytes, size: int) -> None:
    """`data`, then a hole up to `size` bytes (instant however large: a real model's tensor data is
    not needed to fuzz its header, only the file size the header's offsets are checked against)."""
    with open(path, "wb") as f:
        f.write(data)
        if size > len(data):
            f.truncate(size)


# ---------------------------------------------------------------- a GGUF writer for files from scratch

def _str(s: str | bytes) -> bytes:
    b = s.encode("utf-8", "surrogatepass") if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def encode_value(vtype: int, value) -> bytes:
    if vtype == STRING:
        return _str(value)
    if vtype == ARRAY:                                # (item type, items[, the count to claim])
        itype, items, *claim = value
        return struct.pack("<IQ", itype, claim[0] if claim else len(items)) + b"".join(
            encode_value(itype, v) for v in items)
    if vtype in (F32, F64, BOOL):
        return struct.pack(SCALAR_FMT[vtype], value)
    if vtype in SCALAR_SIZE:                          # any integer, wrapped to the field's width
        width = SCALAR_SIZE[vtype]
        return (int(value) % (1 << (8 * width))).to_bytes(width, "little")
    return b""                                        # an unknown type: no payload


def build(kvs, tensors, data_len: int, version: int = 3, alignment: int = 32, n_tensors=None, n_kv=None) -> bytes:
    """A GGUF file: kvs = [(key, vtype, value)], tensors = [(name, dims, qtype_id, rel_offset)];
    the data section (zeros, `data_len` bytes) starts at the next multiple of `alignment`."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors) if n_tensors is None else n_tensors,
                                len(kvs) if n_kv is None else n_kv)
    for key, vtype, value in kvs:
        out += _str(key) + struct.pack("<I", vtype) + encode_value(vtype, value)
    for name, dims, qtype, rel in tensors:
        out += _str(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", qtype, rel)
    if alignment > 0:
        out += b"\0" * (-len(out) % alignment)
    return out + b"\0" * data_len


def load_recipe(recipe: dict, seeds: dict[str, tuple[bytes, int]]) -> tuple[bytes, int]:
    """(bytes to write, file size) for a recipe; seeds: seed name -> (its leading bytes, its full size):
    write them with write_sparse."""
    data, size = seeds[recipe["seed"]]
    out = apply(data, walk(data), recipe["mutations"])
    for m in recipe["mutations"]:
        if m[0] == "truncate":
            size = min(size, m[1])
    return out[:size], size


def file_size(path: str | os.PathLike) -> int:
    return os.stat(path).st_size
