"""A synthetic model whose next token is the token L positions back (L = trunk layers): the text
repeats with period L + 1, and the only way to the right token is attention to the right earlier row.

The residual stream has two halves of D = head_dim features: T holds the token's own code (and one
constant feature), C holds a copied code. Each trunk layer moves C one position: head A attends to
the row one position back (RoPE-relative: its query is the constant key turned by one position's
angles) and adds that row's C (layer 0: its T); head B attends to the row itself and subtracts its
own C. After layer l, C(t) = T(t - l - 1), so after L layers the head (which reads C only) picks
x_{t+1} = x_{t-L}; every layer's attention and every cached K/V row matters, on every stage. The
nextn (MTP) layer does the same in one hop: its row t carries the embedding of x_{t+1} and attends
to its own row t - L, so it proposes x_{t+2} = x_{t+1-L}, exactly what the target picks: acceptance
near 1, and a wrong attention output, KV row or RoPE position changes the tokens.

The matrices are 0 / +-1 / one constant column, so quantization keeps them almost exact; the codes
are random directions of D - 1 features, so the copied token's logit stands clear of the other 49k.
The output norm sets the logit scale so that seeded sampling really samples (p(copy) ~0.9 at
temperature 0.8: some draws leave the pattern, which then copies them) while greedy picks stay apart.
"""
from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import numpy as np

from engine.errors import ConfigError
from engine.synthetic import _resolve
from engine.synthetic_counting import write_designed_model
from engine.synthetic_shapes import SHAPES, check, layout

ARCHS = ("llama", "qwen3", "qwen3moe")
# Two heads of D features, d_model = 2 D; the copy period is n_layer + 1.
SHAPES_INDUCTION = {
    "tiny": replace(SHAPES["tiny"], n_layer=4, d_model=128, n_head=2, n_head_kv=2, head_dim=64),
    "small": replace(SHAPES["small"], n_layer=6, d_model=256, n_head=2, n_head_kv=2, head_dim=128,
                     ffn=256, expert_ffn=64),
}
CONST = 4.0          # the constant feature; code features are clipped below it, so Q8_0 stores it exactly
CODE_CLIP = 3.9
MARGIN = 30.0        # attention logit of the wanted row minus that of any other row (nats)
LOGIT_SCALE = 13.0   # copied token's logit over an unrelated token's, at temperature 1
DRAFT_SCALE = 30.0   # the drafter is surer, so its chains are not cut by --spec-min-p
SMALL_STD = 0.002    # FFN weights: present and exercised, but too small to matter


def _rope_vectors(D: int, base: float, offset: int, neox: bool, max_delta: int) -> tuple[np.ndarray, np.ndarray, float]:
    """(query, key, sigma): unit-rms vectors whose RoPE dot product peaks at a distance of `offset`
    positions, and the scale sigma (for both) that gives every other distance MARGIN nats less."""
    half = D // 2
    theta = base ** (-np.arange(half) * 2.0 / D)
    rho2 = theta / theta.sum() * D                      # high frequencies weigh most; sum = D (rms 1)
    delta = np.arange(-offset, max_delta + 1)
    delta = delta[delta != 0]
    penalty = (rho2 * (1 - np.cos(np.outer(delta, theta)))).sum(1).min()
    sigma = float(np.sqrt(MARGIN * np.sqrt(D) / penalty))
    rho = np.sqrt(rho2)
    qa, qb = rho * np.cos(theta * offset), -rho * np.sin(theta * offset)
    q, k = np.zeros(D), np.zeros(D)
    ia, ib = (np.arange(half), np.arange(half) + half) if neox else (np.arange(0, D, 2), np.arange(1, D, 2))
    q[ia], q[ib], k[ia] = qa, qb, rho
    return q.astype(np.float32), k.astype(np.float32), sigma


class _Builder:
    def __init__(self, arch: str, s, seed: int):
        self.arch, self.s, self.D, self.d = arch, s, s.head_dim, s.d_model
        self.qk_norm = arch != "llama"
        self.rng = np.random.default_rng(seed)

    def codes(self, vocab: int) -> np.ndarray:
        c = self.rng.standard_normal((vocab, self.D - 1)).astype(np.float32)
        c *= np.sqrt(self.D - 1) / np.linalg.norm(c, axis=1, keepdims=True)
        return np.clip(c, -CODE_CLIP, CODE_CLIP)

    def rms(self, with_copy: bool) -> float:
        """RMS of a residual row: T (code + constant), plus C when a copy is there."""
        return float(np.sqrt(((1 + with_copy) * (self.D - 1) + CONST ** 2) / self.d))

    def attention(self, bid: int) -> dict[str, np.ndarray]:
        """Block bid's attention: trunk layer l moves C one row; the nextn block copies T from L rows back."""
        D, d, L = self.D, self.d, self.s.n_layer
        trunk = bid < L
        offset = 1 if trunk else L
        src = D if trunk and bid > 0 else 0            # head A reads C (layers 1..) or T (layer 0, nextn)
        two = trunk and bid > 0                        # head B: subtract the row's own C
        r = self.rms(with_copy=two)
        q_a, k, sigma = _rope_vectors(D, self.s.rope_base, offset, self.qk_norm, self.s.context)
        q_b, _, _ = _rope_vectors(D, self.s.rope_base, 0, self.qk_norm, self.s.context)
        gain = 1.0 if self.qk_norm else sigma          # qwen3: the q/k norms carry sigma instead
        norm = np.ones(d, np.float32)
        norm[D - 1] = r / CONST                        # the constant feature reaches q/k as exactly 1
        norm[2 * D - 1] = 0.0
        wq, wk = np.zeros((2 * D, d), np.float32), np.zeros((2 * D, d), np.float32)
        wv, wo = np.zeros((2 * D, d), np.float32), np.zeros((d, 2 * D), np.float32)
        wq[:D, D - 1], wq[D:, D - 1] = gain * q_a, gain * q_b
        wk[:D, D - 1] = wk[D:, D - 1] = gain * k
        j = np.arange(D - 1)
        wv[j, src + j] = 1.0
        wo[D + j, j] = r                               # undo the norm: C gets the attended row's code
        if two:
            wv[D + j, D + j] = 1.0
            wo[D + j, D + j] = -r
        out = {"attn_norm": norm, "attn_q": wq, "attn_k": wk, "attn_v": wv, "attn_output": wo}
        if self.qk_norm:
            out["attn_q_norm"] = out["attn_k_norm"] = np.full(D, sigma, np.float32)
        return out

    def tensor(self, name: str, rows: tuple[int, ...], role: str, codes: np.ndarray) -> np.ndarray:
        D, d = self.D, self.d
        if name == "token_embd.weight":
            e = np.zeros((len(codes), d), np.float32)
            e[:, :D - 1], e[:, D - 1] = codes, CONST
            return e
        if name == "output.weight":
            h = np.zeros((len(codes), d), np.float32)
            h[:, D:2 * D - 1] = codes
            return h
        if name == "output_norm.weight":
            return np.full(d, LOGIT_SCALE * self.rms(True) / (D - 1), np.float32)
        parts = name.split(".")
        bid, kind = int(parts[1]), ".".join(parts[2:-1])
        if kind == "nextn.eh_proj":                    # keep the embedding half of [enorm(e), hnorm(h)]
            return np.concatenate([np.eye(d, dtype=np.float32), np.zeros((d, d), np.float32)], axis=1)
        if kind == "nextn.enorm":                      # enorm(e) = e
            return np.full(d, self.rms(False), np.float32)
        if kind == "nextn.shared_head_norm":
            return np.full(d, DRAFT_SCALE * self.rms(True) / (D - 1), np.float32)
        att = self.attention(bid) if kind.startswith("attn_") else {}
        if kind in att:
            return att[kind]
        if role == "norm":
            return np.ones(rows, np.float32)
        return (self.rng.standard_normal(rows) * SMALL_STD).astype(np.float32)


def make_induction_model(out: str | os.PathLike, arch: str = "llama", shape: str = "tiny", mtp: int = 1,
                         qtype: str = "Q8_0", seed: int = 0) -> Path:
    """Write the copy model (x_{t+1} = x_{t-L}) of `arch` to `out`. shape: 'tiny' (d_model 128, 4 layers,
    15 MB at Q8_0) or 'small' (256, 6 layers); mtp: 0 or 1 nextn layer. The pattern holds at Q8_0, Q5_0,
    Q4_0, Q4_1 and F16 (measured: the same drafts accepted on every one)."""
    if arch not in ARCHS:
        raise ConfigError(f"the induction model is made for {', '.join(ARCHS)}, not {arch!r}")
    if shape not in SHAPES_INDUCTION or mtp not in (0, 1):
        raise ConfigError(f"the induction model takes shape {' or '.join(SHAPES_INDUCTION)} and mtp 0 or 1")
    _, s, q = _resolve(arch, SHAPES_INDUCTION[shape], qtype)
    check(arch, s, mtp)
    b = _Builder(arch, s, seed)
    specs = layout(arch, s, mtp)
    codes = b.codes(next(sp.shape[1] for sp in specs if sp.name == "token_embd.weight"))
    return write_designed_model(out, arch, f"{shape}-induction", s, mtp, q, seed, specs,
                                lambda sp: b.tensor(sp.name, tuple(reversed(sp.shape)), sp.role, codes))
