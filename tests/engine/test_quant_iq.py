"""The i-quants (IQ4_NL ... IQ1_M): engine.quant_iquants against `gguf.quants.dequantize`, bit for bit,
on raw random blocks (every bit pattern, NaN / inf / subnormal scales included), on synthetic tensors
through the chunked QuantTensor path, and on the tensors of a mixed file written by make-model; plus
the GPU fallback (no Triton kernel: the dense copy), make-model's types and type maps, the mix that
`inspect` and the model picker show, and a tensor type the engine cannot decode named in one line.
"""
from __future__ import annotations

import dataclasses
import importlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from gguf import quants
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as QT

from engine import quant
from engine.errors import ConfigError
from engine.gguf_file import read_gguf
from engine.model_info import DECODABLE, model_info
from engine.quant import DECODERS, QuantTensor, dequantize
from engine.synthetic import QTYPES, SHAPES, _random_blocks, make_model
from engine.synthetic_iq import IQ_TYPES, MIX

# One small llama (2 layers, rows of 256 and 512) holding every i-quant beside K types, as files
# people download mix them: the tensors named here get these types, every other matrix IQ3_S.
ALL_IQ_MAP = {
    "blk.0.attn_q.weight": "IQ4_NL", "blk.0.attn_k.weight": "IQ4_XS", "blk.0.attn_v.weight": "Q4_K",
    "blk.0.attn_output.weight": "IQ3_XXS", "blk.0.ffn_gate.weight": "IQ2_XXS", "blk.0.ffn_up.weight": "IQ2_XS",
    "blk.0.ffn_down.weight": "IQ2_S", "blk.1.attn_q.weight": "IQ1_S", "blk.1.attn_k.weight": "IQ1_M",
    "output.weight": "Q6_K",
}
SMALL2 = dataclasses.replace(SHAPES["small"], n_layer=2)


def make_all_iq(path):
    return make_model("llama", SMALL2, path, qtype="IQ3_S", qtype_map=ALL_IQ_MAP)


@pytest.fixture(scope="module")
def all_iq(tmp_path_factory):
    return make_all_iq(tmp_path_factory.mktemp("iq") / "llama-all-iq.gguf")


def assert_same_bits(ours: torch.Tensor, ref: np.ndarray) -> None:
    """Bit-identical float32 values; NaN where gguf has NaN (the payload is not compared)."""
    ours = ours.reshape(-1).numpy()
    ref = np.asarray(ref, dtype=np.float32).reshape(-1)
    assert ours.dtype == np.float32 and ours.shape == ref.shape
    nan = np.isnan(ref)
    assert np.array_equal(np.isnan(ours), nan)
    same = ours[~nan].view(np.uint32) == ref[~nan].view(np.uint32)
    assert same.all(), f"{(~same).sum()} values differ, first at {np.flatnonzero(~same)[0]}"


def gguf_dequantize(raw: np.ndarray, qtype) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):
        return quants.dequantize(raw, qtype)


# ---- the decoders ------------------------------------------------------------------------

def test_every_iq_type_is_decoded_and_named_without_torch():
    assert set(IQ_TYPES) <= set(DECODERS)
    assert {t.name for t in DECODERS} == DECODABLE   # engine.model_info's torch-free copy


@pytest.mark.parametrize("qtype", IQ_TYPES, ids=lambda t: t.name)
def test_random_bytes_match_gguf(qtype):
    """Every bit pattern: NaN, inf and subnormal f16 scales, every grid index and sign."""
    block, size = GGML_QUANT_SIZES[qtype]
    raw = np.random.default_rng(int(qtype)).integers(0, 256, 777 * size, dtype=np.uint8)
    ours = dequantize(torch.from_numpy(raw), qtype, 777 * block)
    assert_same_bits(ours, gguf_dequantize(raw, qtype))


@pytest.mark.parametrize("qtype", IQ_TYPES, ids=lambda t: t.name)
def test_valid_tensor_in_chunks_matches_gguf(qtype, monkeypatch):
    """A 96 x 1024 tensor of make-model's valid blocks, decoded through QuantTensor in chunks of 4096
    values (rows() too): finite, bit-identical, and of make-model's magnitude."""
    block, size = GGML_QUANT_SIZES[qtype]
    rows, cols = 96, 1024
    raw = _random_blocks(qtype, rows * cols // block, np.random.default_rng(1), 0.01).reshape(rows, -1)
    monkeypatch.setattr(quant, "CHUNK_ELEMENTS", 4096)
    qt = QuantTensor(torch.from_numpy(raw), qtype, (rows, cols))
    dense = qt.dequantize()
    ref = gguf_dequantize(raw, qtype)
    assert ref.shape == (rows, cols) and np.isfinite(ref).all()
    assert_same_bits(dense, ref)
    ids = torch.tensor([[5, 95], [0, 5]])
    assert torch.equal(qt.rows(ids), dense[ids])


def test_mixed_file_tensors_match_gguf(all_iq):
    gf = read_gguf(all_iq)
    seen = set()
    for name, info in gf.tensors.items():
        if info.qtype in IQ_TYPES or name in ALL_IQ_MAP:
            rows = info.n_elements // info.shape[0]
            ref = gguf_dequantize(gf.raw(name).reshape(rows, -1), info.qtype)
            assert_same_bits(QuantTensor.from_gguf(gf, name).dequantize(), ref)
            seen.add(info.qtype)
    assert seen == set(IQ_TYPES) | {QT.Q4_K, QT.Q6_K}
    assert {n: gf.tensors[n].qtype.name for n in ALL_IQ_MAP} == ALL_IQ_MAP


# ---- GPU stages: no Triton kernel for the i-quants yet, so the dense fallback -------------------

@pytest.fixture(scope="module")
def qm():
    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")   # before triton is first imported
    pytest.importorskip("triton")
    return importlib.import_module("engine.kernels.quant_matmul")


@pytest.mark.parametrize("qtype", [QT.IQ4_XS, QT.IQ2_XS, QT.IQ1_M], ids=lambda t: t.name)
def test_gpu_path_falls_back_to_the_dense_copy(qm, monkeypatch, qtype):
    """Types without GPU kernels (IQ2_XS, IQ1_M under STRATA_IQ_TABLES=0 STRATA_IQ2_INT8=0), and IQ4 under
    STRATA_GPU_IQ4=0, keep a dense copy."""
    from engine.kernels import packed

    monkeypatch.setattr(packed, "GPU_IQ4", False)
    monkeypatch.setattr(packed, "IQ2_INT8", False)
    monkeypatch.setattr(packed, "IQ_TABLES", False)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    raw = _random_blocks(qtype, 20, np.random.default_rng(2), 0.01)
    w = QuantTensor(torch.from_numpy(raw).to(device), qtype, (20, 256))
    assert qtype not in qm.KERNEL_TYPES and not packed.supports(qtype, 256)
    assert w.repack(on_cpu=True) is False and w.data is not None
    x = torch.randn(2, 3, 256, generator=torch.Generator().manual_seed(6)).to(device)
    out = w.triton_linear(x)
    assert torch.equal(w.dense_weight().cpu(), torch.from_numpy(gguf_dequantize(raw, qtype)).reshape(20, 256))
    torch.testing.assert_close(out, F.linear(x, w.dequantize()), rtol=1e-4, atol=1e-4 * out.abs().max().item())


# ---- make-model --------------------------------------------------------------------------

def test_make_model_writes_every_iq_type_and_falls_back_on_short_rows(tmp_path):
    assert {t.name for t in IQ_TYPES} <= set(QTYPES)
    g = read_gguf(make_model("llama", "tiny", tmp_path / "t.gguf", qtype="IQ2_XS"))   # rows of 64 and 128
    assert g.tensors["blk.0.attn_q.weight"].qtype == QT.IQ4_NL                          # as llama-quantize
    g = read_gguf(make_model("llama", SMALL2, tmp_path / "m.gguf", qtype="IQ4_XS", qtype_map=MIX))
    types = {n: t.qtype.name for n, t in g.tensors.items()}
    assert types["output.weight"] == "Q6_K" and types["blk.1.attn_v.weight"] == "Q4_K"
    assert types["blk.0.ffn_down.weight"] == "Q4_K" and types["blk.0.attn_q.weight"] == "IQ4_XS"
    assert types["token_embd.weight"] == "IQ4_XS" and types["blk.0.attn_norm.weight"] == "F32"
    assert g.metadata["general.file_type"] == 30   # LLAMA_FTYPE_MOSTLY_IQ4_XS


@pytest.mark.parametrize("qtype", IQ_TYPES, ids=lambda t: t.name)
def test_make_model_iq_weights_have_the_usual_statistics(qtype):
    """Std ~0.02 and mean ~0 over a whole tensor, as for the other types."""
    n_blocks = 16384 // GGML_QUANT_SIZES[qtype][0] * 16
    from engine.synthetic import WEIGHT_STD, _unit_std
    x = gguf_dequantize(_random_blocks(qtype, n_blocks, np.random.default_rng(3), WEIGHT_STD / _unit_std(qtype)), qtype)
    assert np.isfinite(x).all() and 0.017 < x.std() < 0.023 and abs(x.mean()) < 0.002, (x.std(), x.mean())


@pytest.mark.parametrize("bad", ["output.weight=Q8_1", "output.weight", "=Q6_K"])
def test_bad_type_map_is_a_config_error(tmp_path, bad):
    with pytest.raises(ConfigError, match="qtype-map"):
        make_model("llama", "tiny", tmp_path / "x.gguf", qtype="IQ4_NL", qtype_map=bad)
    assert not list(tmp_path.iterdir())


# ---- what inspect and the model picker show ----------------------------------------------

def strata(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def test_make_model_refuses_iq_for_quantized_real_weights(tmp_path):
    """--weights counting / induction quantize real values through gguf, which writes no i-quant."""
    r = strata("make-model", "--arch", "llama", "--weights", "counting", "--qtype", "IQ4_XS",
               "--out", tmp_path / "c.gguf")
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.returncode == 1 and len(lines) == 1 and "cannot write IQ4_XS" in lines[0], r.stderr


def test_inspect_shows_the_mix_and_bits_per_weight(tmp_path):
    path = tmp_path / "mix.gguf"
    r = strata("make-model", "--arch", "llama", "--shape", "small", "--qtype", "IQ3_S", "--mix", "--out", path)
    assert r.returncode == 0, r.stderr
    text = strata("inspect", path).stdout
    line = next(x for x in text.splitlines() if "type mix" in x)
    assert line.split("type mix")[1].strip().startswith("IQ3_S 53% · Q6_K 44% · Q4_K 3.4% · F32"), line
    assert line.endswith("4.85 bits/weight") and "unsupported" not in text
    d = json.loads(strata("inspect", path, "--json").stdout)
    gf = read_gguf(path)
    values = sum(t.n_elements for t in gf.tensors.values())
    assert d["quant_weights"]["IQ3_S"] == sum(t.n_elements for t in gf.tensors.values() if t.qtype == QT.IQ3_S)
    assert sum(d["quant_weights"].values()) == values and list(d["quant_weights"])[0] == "IQ3_S"
    assert d["bits_per_weight"] == pytest.approx(8 * sum(t.nbytes for t in gf.tensors.values()) / values, abs=1e-4)
    assert d["unsupported"] == ""
    info = model_info(gf)
    assert info.quant_mix() == line.split("type mix")[1].strip()


def patch_type(src, dst, tensor: str, type_id: int) -> None:
    """Copy a GGUF, rewriting one tensor's type id (the u32 after its name, dims count and dims)."""
    data = bytearray(src.read_bytes())
    key = len(tensor).to_bytes(8, "little") + tensor.encode()
    at = data.index(key) + len(key)
    n_dims = int.from_bytes(data[at:at + 4], "little")
    at += 4 + 8 * n_dims
    data[at:at + 4] = type_id.to_bytes(4, "little")
    dst.write_bytes(bytes(data))


@pytest.mark.parametrize("type_id,expect", [
    (int(QT.MXFP4), "'blk.0.attn_q.weight': quant type MXFP4 is not supported"),
    (99, "'blk.0.attn_q.weight'")])
def test_undecodable_type_is_named_in_one_line(synthetic, tmp_path, type_id, expect):
    """A Q8_0 tensor's type byte patched to a type gguf knows but this engine does not decode (MXFP4:
    17 bytes per 32 values, fits in the Q8_0 bytes), or to no type at all."""
    path = tmp_path / "patched.gguf"
    patch_type(synthetic("llama"), path, "blk.0.attn_q.weight", type_id)
    r = strata("generate", "--model", path, "--prompt", "x", "--max-tokens", 2)
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.returncode == 1 and len(lines) == 1 and str(path) in lines[0] and expect in lines[0], r.stderr
    assert str(type_id) in lines[0] or "MXFP4" in lines[0]
    r = strata("inspect", path)
    if type_id == 99:   # the header itself cannot be read
        lines = [x for x in r.stderr.splitlines() if x.strip()]
        assert r.returncode == 1 and len(lines) == 1 and expect in lines[0] and "99" in lines[0], r.stderr
    else:               # inspect still describes the file, and names the tensor and the type
        bad = [x for x in r.stdout.splitlines() if "unsupported" in x]
        assert r.returncode == 0 and len(bad) == 1, r.stdout
        assert "tensor 'blk.0.attn_q.weight' is MXFP4, a type this engine cannot decode" in bad[0]
        assert "MXFP4" in next(x for x in r.stdout.splitlines() if "type mix" in x)
        assert model_info(read_gguf(path)).unsupported.startswith("tensor 'blk.0.attn_q.weight' is MXFP4")
