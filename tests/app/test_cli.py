"""The `strata` command on real files: generate, inspect, make-model, and bad input."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFWriter

from engine.gguf_file import read_gguf


def strata(*args, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.slow
def test_generate_json_on_default_model():
    r = strata("generate", "--model", "default", "--prompt", "The capital of France is", "--max-tokens", 6, "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["text"].strip().startswith("Paris")
    assert len(d["token_ids"]) == 6 and d["completion_tokens"] == 6
    assert d["load_s"] > 0 and d["prompt_tok_s"] > 0 and d["decode_tok_s"] > 0


def test_generate_chat_and_text_output(synthetic):
    r = strata("generate", "--model", synthetic("llama"), "--prompt", "hi", "--chat", "--max-tokens", 4)
    assert r.returncode == 0, r.stderr
    assert "decode 4 tok at" in r.stderr and "load" in r.stderr


def test_inspect_reports_the_file(synthetic):
    r = strata("inspect", synthetic("qwen3moe", mtp=1), "--json")
    d = json.loads(r.stdout)
    assert d["architecture"] == "qwen3moe" and d["mtp_layers"] == 1 and d["experts"] == 8
    assert d["tokenizer"] == "gpt2" and d["layers"] == 6 and len(d["layer_bytes"]) == 7
    text = strata("inspect", synthetic("gemma3")).stdout
    assert "gemma3" in text and "sliding window 16" in text and "bytes/layer" in text
    assert d["layer_kinds"] == "6 moe + 1 nextn (moe)" and d["expert_gating"] == "softmax"
    text = strata("inspect", synthetic("glm4moe", mtp=1)).stdout
    assert "blocks         1 dense + 5 moe + 1 nextn (moe)" in text
    assert "experts        8 routed, top-2 by sigmoid, 1 shared" in text
    text = strata("inspect", synthetic("qwen35moe", mtp=1)).stdout
    assert "blocks         2 delta-net + 1 attention + 2 delta-net + 1 attention + 1 nextn (attention); FFN moe" in text


def test_make_model_writes_a_loadable_file(tmp_path):
    out = tmp_path / "m.gguf"
    r = strata("make-model", "--arch", "qwen3", "--shape", "tiny", "--mtp", 1, "--qtype", "Q4_0", "--out", out)
    assert r.returncode == 0, r.stderr
    gf = read_gguf(out)
    assert gf.metadata["qwen3.nextn_predict_layers"] == 1
    assert gf.tensors["blk.0.attn_q.weight"].qtype == GGMLQuantizationType.Q4_0
    r = strata("generate", "--model", out, "--prompt", "x", "--max-tokens", 3, "--json")
    assert r.returncode == 0 and len(json.loads(r.stdout)["token_ids"]) == 3


def _unknown_arch(path):
    w = GGUFWriter(str(path), "mamba")
    w.add_block_count(1)
    w.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    w.write_header_to_file(), w.write_kv_data_to_file(), w.write_tensors_to_file(), w.close()


def _unsupported_quant(src, path):
    gf = read_gguf(src)
    w = GGUFWriter(str(path), "llama")
    for k, v in gf.metadata.items():
        if k.startswith("llama.") or k.startswith("tokenizer.") and not isinstance(v, (list, np.ndarray)):
            w.add_key_value(k, v, _vtype(v))
    for name, t in gf.tensors.items():
        data = gf.raw(name)
        rows = t.n_elements // t.shape[0]
        if name == "blk.0.attn_q.weight":   # declared as MXFP4 (17 bytes per 32 values): valid GGUF, not ours
            w.add_tensor(name, np.zeros((rows, t.shape[0] // 32 * 17), dtype=np.uint8),
                         raw_dtype=GGMLQuantizationType.MXFP4)
        else:
            w.add_tensor(name, np.array(data).reshape(rows, -1).view(np.float32 if t.qtype == 0 else np.uint8),
                         raw_dtype=t.qtype)
    w.write_header_to_file(), w.write_kv_data_to_file(), w.write_tensors_to_file(), w.close()


def _vtype(v):
    from gguf import GGUFValueType
    return {str: GGUFValueType.STRING, bool: GGUFValueType.BOOL, int: GGUFValueType.UINT32,
            float: GGUFValueType.FLOAT32}[type(v)]


@pytest.mark.parametrize("case", ["missing", "not_gguf", "truncated", "unknown_arch", "unsupported_quant"])
def test_bad_model_files_give_one_clear_line(case, tmp_path, synthetic):
    src = synthetic("llama")
    path = tmp_path / f"{case}.gguf"
    expect = {"missing": "file not found", "not_gguf": "not a GGUF file", "truncated": "truncated",
              "unknown_arch": "unknown architecture 'mamba'", "unsupported_quant": "MXFP4 is not supported"}[case]
    if case == "not_gguf":
        path.write_bytes(b"PK\x03\x04 this is a zip file, not a model" * 10)
    elif case == "truncated":
        path.write_bytes(src.read_bytes()[: 3_000_000])
    elif case == "unknown_arch":
        _unknown_arch(path)
    elif case == "unsupported_quant":
        _unsupported_quant(src, path)
    for cmd in (["generate", "--model", path, "--prompt", "x"], ["inspect", path]):
        if case == "unsupported_quant" and cmd[0] == "inspect":
            continue   # inspect only reads the header: the type is known to gguf, just not decodable
        r = strata(*cmd)
        assert r.returncode == 1, (cmd, r.stdout, r.stderr)
        lines = [line for line in r.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
        assert str(path) in lines[0] and expect in lines[0], lines[0]


# ---------------------------------------------------------------- batch-test's verdict per slot

def _outcome(tokens, rows, finish="length", error=""):
    from app.run_requests import Outcome
    from engine.messages import RequestDone

    logits = [np.asarray(r, np.float32).tobytes() for r in rows]
    done = RequestDone(request_id="x", finish_reason=finish, slot=0, error=error, logits=logits)
    return Outcome("x", list(tokens), "", done)


@pytest.mark.parametrize("tokens,rows,finish,want,code", [
    ([1, 2], [[0, 1], [1, 0]], "length", "slot 0: IDENTICAL (2 tokens, logits max|diff| 0)", 0),
    ([1, 2], [[0, 1], [1, 0.0003]], "length",
     "slot 0: LOGITS DIFFER max|diff| 3.0e-04 at token 1 (2 tokens identical)", 2),
    ([1, 3], [[0, 1], [0.5, 0]], "length", "slot 0: DIFFERS at 1 (logits max|diff| 5.0e-01, first at token 1)", 2),
    ([1], [[0, 1]], "length", "slot 0: DIFFERS at 1 (logits max|diff| 0.0e+00)", 2),
    ([], [], "length", "slot 0: EMPTY (0 tokens, reference 2, finish length)", 1),
    ([1, 2], [[0, 1]], "length", "slot 0: ERROR 1 logits rows for 2 tokens", 1),
    ([], [], "error", "slot 0: ERROR boom", 1),
])
def test_batch_test_verdict_line(tokens, rows, finish, want, code):
    """Tokens and the exact float32 pick rows are both compared; empty or errored outputs fail."""
    from app.cmd_batch_test import verdict_line

    ref = _outcome([1, 2], [[0, 1], [1, 0]])
    assert verdict_line(ref, _outcome(tokens, rows, finish, "boom" if finish == "error" else "")) == (want, code)
