"""Write a copy of a GGUF file with more tensors and some metadata changed, or a file of a few tensors
(mtp-train's outputs).

Every key keeps its GGUF type (read with gguf's GGUFReader) and every original tensor its bytes; new
tensors are written as F32 (vectors) or quantized with gguf's own quantizer. The copy is written to a
'.partial' name and renamed into place only when complete.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

import numpy as np
from gguf import GGUFReader, GGUFValueType, GGUFWriter
from gguf.constants import GGMLQuantizationType as Q
from gguf.quants import quantize

from engine.gguf_file import read_gguf

if TYPE_CHECKING:
    import torch

SKIP_KEYS = ("GGUF.", "general.architecture")      # the header's own fields; the writer adds the architecture


@contextmanager
def partial_writer(out: Path, arch: str) -> Iterator[GGUFWriter]:
    """A GGUFWriter on OUT.partial, renamed to OUT when the block completes (removed if it fails)."""
    tmp = out.with_name(out.name + ".partial")
    w = GGUFWriter(tmp, arch)
    try:
        yield w
        w.close()
        os.replace(tmp, out)
    except BaseException:
        w.close()
        tmp.unlink(missing_ok=True)
        raise


def _encoded(t: torch.Tensor, qtype: Q) -> tuple[np.ndarray, Q]:
    a = t.detach().float().cpu().numpy()
    if a.ndim == 1 or qtype == Q.F32:
        return a.astype(np.float32), Q.F32
    return quantize(a, qtype), qtype


def write_with(src, out, tensors: dict[str, torch.Tensor], qtype: Q = Q.Q8_0,
               set_keys: dict[str, tuple[object, GGUFValueType]] | None = None) -> Path:
    """Copy `src` to `out` adding `tensors` (name -> torch-order tensor) and setting `set_keys`."""
    src, out = Path(src), Path(out)
    reader, gf = GGUFReader(src), read_gguf(src)
    arch = gf.metadata["general.architecture"]
    set_keys = dict(set_keys or {})
    with partial_writer(out, arch) as w:
        for key, field in reader.fields.items():
            if key.startswith(SKIP_KEYS) or key in set_keys:
                continue
            main, sub = field.types[0], (field.types[-1] if field.types[0] == GGUFValueType.ARRAY else None)
            w.add_key_value(key, field.contents(), main, sub)
        for key, (value, vtype) in set_keys.items():
            w.add_key_value(key, value, vtype)
        new = {name: _encoded(t, qtype) for name, t in tensors.items()}
        plan = [(name, info.torch_shape, info.qtype, info.nbytes) for name, info in gf.tensors.items()]
        plan += [(name, tuple(tensors[name].shape), q, a.nbytes) for name, (a, q) in new.items()]
        for name, shape, q, nbytes in plan:
            w.add_tensor_info(name, tuple(shape), np.dtype(np.float32), nbytes, raw_dtype=q)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        fout = w.fout[0]
        w.write_padding(fout, fout.tell())
        for name, _, _, nbytes in plan:
            data = new[name][0].tobytes() if name in new else gf.raw(name).tobytes()
            fout.write(data)
            fout.write(bytes(-nbytes % w.data_alignment))
    return out


def write_tensors(out, arch: str, tensors: dict[str, torch.Tensor], qtype: Q = Q.Q8_0,
                  keys: dict[str, tuple[object, GGUFValueType]] | None = None) -> Path:
    """A GGUF holding only `tensors` and `keys` (an MTP layer file beside its model)."""
    out = Path(out)
    with partial_writer(out, arch) as w:
        for key, (value, vtype) in (keys or {}).items():
            w.add_key_value(key, value, vtype)
        for name, t in tensors.items():
            a, q = _encoded(t, qtype)
            w.add_tensor(name, a, raw_dtype=None if q == Q.F32 else q)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
    return out
