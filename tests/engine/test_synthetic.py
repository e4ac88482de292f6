"""Synthetic GGUF models: structure, metadata, tokenizer, weight statistics, determinism."""
from __future__ import annotations

import dataclasses
import hashlib

import numpy as np
import pytest
from gguf import GGUFReader
from gguf.constants import GGMLQuantizationType as Q, GGUFValueType as V
from gguf.quants import dequantize

from engine import synthetic
from engine.errors import ConfigError
from engine.gguf_file import read_gguf
from engine.model_files import default_model_path
from engine.synthetic import ARCHS, QTYPES, SHAPES, make_model
from engine.synthetic_shapes import layout

MTP = 2
ATTN = ["attn_norm", "attn_q", "attn_k", "attn_v", "attn_output"]
DENSE_FFN = ["ffn_norm", "ffn_gate", "ffn_up", "ffn_down"]
MOE_FFN = ["ffn_norm", "ffn_gate_inp", "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"]
BLOCK = {
    "llama": ATTN + DENSE_FFN,
    "qwen3": ATTN + ["attn_q_norm", "attn_k_norm"] + DENSE_FFN,
    "qwen3moe": ATTN + ["attn_q_norm", "attn_k_norm"] + MOE_FFN,
    "gemma3": ATTN + ["attn_q_norm", "attn_k_norm", "post_attention_norm"] + DENSE_FFN + ["post_ffw_norm"],
}
GLM_ATTN = ATTN + ["post_attention_norm"]          # glm4moe's FFN input norm; q/k/v biases besides
GLM_BIASES = ["attn_q", "attn_k", "attn_v"]
GLM_MOE = MOE_FFN[1:] + ["ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp"]


HY_ATTN = ATTN + ["attn_q_norm", "attn_k_norm"]
HY_DELTA = ["attn_norm", "attn_qkv", "attn_gate", "ssm_conv1d", "ssm_beta", "ssm_alpha", "ssm_norm", "ssm_out"]
HY_DELTA_NEXT = ["attn_norm", "ssm_in", "ssm_ba", "ssm_conv1d", "ssm_norm", "ssm_out"]     # qwen3next's older layout
HY_MOE = MOE_FFN[1:] + ["ffn_gate_inp_shexp", "ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp"]


def block_names(arch: str, bid: int) -> list[str]:
    """Tensor names of block bid after 'blk.N.', with their suffixes."""
    if arch in ("qwen35", "qwen35moe", "qwen3next"):   # every 3rd trunk block (and the nextn block) has attention
        delta = bid < 6 and (bid + 1) % SHAPES["tiny"].attn_interval != 0
        ffn = ["post_attention_norm"] + (HY_MOE if arch != "qwen35" else DENSE_FFN[1:])
        mixer = (HY_DELTA_NEXT if arch == "qwen3next" else HY_DELTA) if delta else HY_ATTN
        names = [n + ".weight" for n in mixer + ffn]
        return names + (["ssm_dt.bias", "ssm_a"] if delta else [])
    if arch != "glm4moe":
        return [n + ".weight" for n in BLOCK[arch]]
    ffn = DENSE_FFN[1:] if bid < SHAPES["tiny"].dense_lead else GLM_MOE
    biases = GLM_BIASES + (["exp_probs_b"] if bid >= SHAPES["tiny"].dense_lead else [])
    return [n + ".weight" for n in GLM_ATTN + ffn] + [n + ".bias" for n in biases]
NEXTN = ["nextn.eh_proj", "nextn.enorm", "nextn.hnorm", "nextn.shared_head_norm"]


def is_f32(name: str) -> bool:
    """Norms (incl. nextn enorm/hnorm), biases, the MoE router and the delta net's conv and decay
    rates are always F32."""
    return name.endswith(("norm.weight", ".bias", ".ssm_a", "ssm_conv1d.weight")) or "ffn_gate_inp" in name


def expected_names(arch: str, mtp: int, own_head: bool = False) -> set[str]:
    names = {"token_embd", "output_norm"} | ({"output"} if arch != "gemma3" else set())
    for bid in range(6 + mtp):
        if bid >= 6:
            extra = NEXTN + (["nextn.embed_tokens", "nextn.shared_head_head"] if own_head else [])
            names |= {f"blk.{bid}.{t}" for t in extra}
    return {n + ".weight" for n in names} | {f"blk.{bid}.{t}" for bid in range(6 + mtp) for t in block_names(arch, bid)}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(arch, mtp) -> path of a tiny Q8_0 model."""
    d = tmp_path_factory.mktemp("synthetic")
    return {(a, m): make_model(a, "tiny", d / f"{a}-{m}.gguf", mtp=m) for a in ARCHS for m in (0, MTP)}


@pytest.fixture(scope="module")
def default_meta():
    return read_gguf(default_model_path()).metadata


@pytest.mark.parametrize("mtp", [0, MTP])
@pytest.mark.parametrize("arch", ARCHS)
def test_tensor_names_shapes_types(tiny, arch, mtp):
    g = read_gguf(tiny[arch, mtp])
    assert set(g.tensors) == expected_names(arch, mtp)
    t = g.tensors
    assert t["token_embd.weight"].shape == (64, 49152)
    a = 2 if arch in ("qwen35", "qwen35moe", "qwen3next") else 0       # hybrids: blocks 0 and 1 are delta nets
    assert t[f"blk.{a}.attn_q.weight"].shape == ((64, 128) if a else (64, 64))     # qwen35: q and its gate
    assert t[f"blk.{a}.attn_k.weight"].shape == (64, 32)
    assert t[f"blk.{a}.attn_output.weight"].shape == (64, 64)
    if a:                     # 2 key heads and 4 value heads of 16: conv over q, k, v = 128 channels
        qkv = ("ssm_in", 192) if arch == "qwen3next" else ("attn_qkv", 128)      # qwen3next: z beside them
        assert t[f"blk.0.{qkv[0]}.weight"].shape == (64, qkv[1]) and t["blk.0.ssm_conv1d.weight"].shape == (4, 128)
        assert t["blk.0.ssm_out.weight"].shape == (64, 64) and t["blk.0.ssm_a"].shape == (4,)
    if arch in ("qwen3moe", "qwen35moe", "qwen3next"):
        assert t["blk.0.ffn_gate_inp.weight"].shape == (64, 8)
        assert t["blk.0.ffn_gate_exps.weight"].shape == (64, 32, 8)
        assert t["blk.0.ffn_down_exps.weight"].shape == (32, 64, 8)
    else:
        assert t["blk.0.ffn_down.weight"].shape == (128, 64)
    if arch == "glm4moe":               # block 0 dense, then experts beside one shared expert
        assert t["blk.1.ffn_gate_exps.weight"].shape == (64, 32, 8)
        assert t["blk.1.ffn_down_shexp.weight"].shape == (32, 64)
        assert t["blk.1.exp_probs_b.bias"].shape == (8,) and t["blk.0.attn_k.bias"].shape == (32,)
    elif arch != "llama":
        assert t[f"blk.{a}.attn_q_norm.weight"].shape == (16,)
    if mtp:
        assert t[f"blk.{6 + MTP - 1}.nextn.eh_proj.weight"].shape == (128, 64)
    for name, info in t.items():
        assert info.qtype == (Q.F32 if is_f32(name) else Q.Q8_0), name


@pytest.mark.parametrize("mtp", [0, MTP])
@pytest.mark.parametrize("arch", ARCHS)
def test_metadata(tiny, arch, mtp):
    m = read_gguf(tiny[arch, mtp]).metadata
    assert m["general.architecture"] == arch
    expect = {"vocab_size": 49152, "block_count": 6 + mtp, "embedding_length": 64, "feed_forward_length": 128,
              "context_length": 4096, "attention.head_count": 4, "attention.head_count_kv": 2,
              "rope.dimension_count": {"glm4moe": 8, "qwen35": 4, "qwen35moe": 4, "qwen3next": 4}.get(arch, 16)}
    if arch != "llama":
        expect |= {"attention.key_length": 16, "attention.value_length": 16}
    if arch in ("qwen3moe", "glm4moe", "qwen35moe", "qwen3next"):
        expect |= {"expert_count": 8, "expert_used_count": 2, "expert_feed_forward_length": 32}
    if arch in ("qwen35", "qwen35moe", "qwen3next"):
        expect |= {"full_attention_interval": 3, "ssm.conv_kernel": 4, "ssm.state_size": 16, "ssm.group_count": 2,
                   "ssm.time_step_rank": 4, "ssm.inner_size": 64}
    if arch == "glm4moe":
        expect |= {"expert_shared_count": 1, "leading_dense_block_count": 1, "expert_gating_func": 2,
                   "expert_weights_norm": True, "expert_weights_scale": 2.5}
    if arch == "gemma3":
        expect["attention.sliding_window"] = 16
    if mtp:
        expect["nextn_predict_layers"] = mtp
    for key, value in expect.items():
        assert m[f"{arch}.{key}"] == value, key
    assert m[f"{arch}.rope.freq_base"] == 10000.0
    assert m[f"{arch}.attention.layer_norm_rms_epsilon"] > 0
    assert ("llama.nextn_predict_layers" in m) == (arch == "llama" and mtp > 0)
    assert m["general.file_type"] == 7  # MOSTLY_Q8_0


@pytest.mark.parametrize("arch", ARCHS)
def test_tokenizer_is_the_default_models(tiny, default_meta, arch):
    m = read_gguf(tiny[arch, 0]).metadata
    keys = {k for k in default_meta if k.startswith("tokenizer.")}
    assert keys == {k for k in m if k.startswith("tokenizer.")}
    for key in keys:
        assert np.array_equal(m[key], default_meta[key]) if isinstance(m[key], np.ndarray) else m[key] == default_meta[key]
    assert len(m["tokenizer.ggml.tokens"]) == m[f"{arch}.vocab_size"] == 49152


# GGUFReader's types of the default model's tokenizer keys (written out: reading them takes seconds).
TOKENIZER_TYPES = {
    **{f"tokenizer.ggml.{k}": [V.BOOL] for k in ("add_space_prefix", "add_bos_token")},
    **{f"tokenizer.ggml.{k}": [V.STRING] for k in ("model", "pre")},
    **{f"tokenizer.ggml.{k}_token_id": [V.UINT32] for k in ("bos", "eos", "unknown", "padding")},
    "tokenizer.ggml.tokens": [V.ARRAY, V.STRING], "tokenizer.ggml.merges": [V.ARRAY, V.STRING],
    "tokenizer.ggml.token_type": [V.ARRAY, V.INT32], "tokenizer.chat_template": [V.STRING],
}


@pytest.mark.parametrize("arch", ARCHS)
def test_gguf_reader_agrees(tiny, arch):
    """The gguf package reads the MTP file (a superset of the plain one) exactly as read_gguf does."""
    path = tiny[arch, MTP]
    reader, ours = GGUFReader(path), read_gguf(path)
    got = {t.name: (tuple(int(x) for x in t.shape), t.tensor_type) for t in reader.tensors}
    assert got == {n: (i.shape, i.qtype) for n, i in ours.tensors.items()}
    types = {k: list(f.types) for k, f in reader.fields.items() if k.startswith("tokenizer.")}
    assert types == TOKENIZER_TYPES
    name = "blk.2.attn_v.weight"     # block 2 has attention in every arch (hybrids: every 3rd)
    data = next(t for t in reader.tensors if t.name == name).data
    assert np.array_equal(data.reshape(-1).view(np.uint8), ours.raw(name))


def check_values(path, expect_types=None):
    """Every tensor dequantizes to finite values: weights std ~0.02 mean ~0, norms ~1."""
    g = read_gguf(path)
    for name, info in g.tensors.items():
        if expect_types is not None and not is_f32(name):
            assert info.qtype in expect_types, (name, info.qtype)
        x = dequantize(g.raw(name), info.qtype)
        assert x.size == info.n_elements and np.isfinite(x).all(), name
        if name.endswith("norm.weight"):
            assert 0.9 <= x.min() and x.max() <= 1.1, name
        elif name.endswith(("ssm_conv1d.weight", ".ssm_a")):       # a delta net's conv taps, decay rates
            lo, hi = synthetic._RANGES["conv" if name.endswith("weight") else "decay"]
            assert lo <= x.min() and x.max() <= hi and (x.size < 256 or x.std() > (hi - lo) / 8), name
        elif x.size < 256:              # glm4moe's biases: too few values for the statistics
            assert np.abs(x).max() <= synthetic.UNIFORM_HALF_WIDTH, name
        else:
            assert 0.015 < x.std() < 0.025 and abs(x.mean()) < 0.003, (name, x.std(), x.mean())


@pytest.mark.parametrize("arch", ARCHS)
def test_weights_are_finite_and_sane(tiny, arch):
    check_values(tiny[arch, MTP])


@pytest.mark.parametrize("qtype", QTYPES)
def test_every_qtype_without_fallback(tmp_path, qtype):
    """The `small` shape's rows are multiples of 256, so even K-quants are stored as asked."""
    s = dataclasses.replace(SHAPES["small"], n_layer=1)
    path = make_model("qwen3moe", s, tmp_path / "m.gguf", mtp=1, qtype=qtype)
    check_values(path, expect_types={Q[qtype]})


def test_k_quant_falls_back_on_rows_of_64(tmp_path):
    g = read_gguf(make_model("llama", "tiny", tmp_path / "k.gguf", qtype="Q4_K"))
    assert g.tensors["blk.0.attn_q.weight"].qtype == Q.Q5_0
    g = read_gguf(make_model("llama", "tiny", tmp_path / "k6.gguf", qtype="Q6_K"))
    assert g.tensors["blk.0.ffn_down.weight"].qtype == Q.Q8_0


def test_mtp_own_head(tmp_path):
    g = read_gguf(make_model("qwen3", "tiny", tmp_path / "h.gguf", mtp=1, mtp_own_head=True))
    assert set(g.tensors) == expected_names("qwen3", 1, own_head=True)
    assert g.tensors["blk.6.nextn.shared_head_head.weight"].shape == (64, 49152)


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_same_seed_same_bytes_whatever_the_thread_count(tmp_path, tiny, monkeypatch):
    monkeypatch.setattr(synthetic, "WORKERS", 1)
    assert digest(make_model("llama", "tiny", tmp_path / "a.gguf")) == digest(tiny["llama", 0])
    assert digest(make_model("llama", "tiny", tmp_path / "b.gguf", seed=1)) != digest(tiny["llama", 0])


def test_progress_reaches_the_total(tmp_path):
    calls = []
    make_model("gemma3", "tiny", tmp_path / "p.gguf", progress=lambda done, total: calls.append((done, total)))
    assert calls and calls[-1][0] == calls[-1][1]
    assert all(a[0] < b[0] for a, b in zip(calls, calls[1:]))


@pytest.mark.parametrize("args", [
    ("mistral", "tiny", "Q8_0"), ("llama", "huge", "Q8_0"), ("llama", "tiny", "Q8_1"),
    ("qwen3moe", "llama-3-8b", "Q8_0"),
])
def test_bad_arguments_raise_config_error_and_leave_no_file(tmp_path, args):
    arch, shape, qtype = args
    with pytest.raises(ConfigError):
        make_model(arch, shape, tmp_path / "x.gguf", qtype=qtype)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("arch,shape,params", [("llama", "llama-3-8b", 7.38e9), ("qwen3moe", "qwen3-30b-a3b", 30.1e9)])
def test_big_shapes_layout(arch, shape, params):
    """The benchmark shapes are not written here (GBs); check their layout only. The parameter counts
    are the real models' with the 49,152-token vocabulary."""
    trunk = layout(arch, SHAPES[shape])
    assert abs(sum(int(np.prod(s.shape)) for s in trunk) / params - 1) < 0.01
    names = {s.name: s.shape for s in layout(arch, SHAPES[shape], mtp=1)}
    if arch == "llama":
        assert names["blk.31.ffn_gate.weight"] == (4096, 14336)
        assert names["blk.0.attn_k.weight"] == (4096, 1024)
    else:
        assert names["blk.47.ffn_down_exps.weight"] == (768, 2048, 128)
        assert names["blk.0.attn_q.weight"] == (2048, 4096)
    assert names[f"blk.{SHAPES[shape].n_layer}.nextn.eh_proj.weight"] == (2 * SHAPES[shape].d_model, SHAPES[shape].d_model)


@pytest.mark.parametrize("arch", ARCHS)
def test_llama_cpp_loads_it(tiny, arch):
    """llama.cpp itself (llama-cpp-python, when installed) loads the plain model and gives finite logits."""
    llama_cpp = pytest.importorskip("llama_cpp")
    llm = llama_cpp.Llama(str(tiny[arch, 0]), n_ctx=64, logits_all=True, verbose=False)
    llm.eval(llm.tokenize(b"Hello world"))
    assert np.isfinite(np.asarray(llm.scores[: llm.n_tokens])).all()
