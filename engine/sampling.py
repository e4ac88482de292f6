"""Sampling: the target's pick at one row.

A seeded draw uses a uniform number keyed by (seed, absolute position) only, so the same request
gives the same tokens whatever else runs and however the tokens were grouped into windows; a draft
is accepted exactly when it equals this pick.
"""
from __future__ import annotations

import math
from collections import Counter

import numpy as np
import torch

from engine.messages import SamplingParams

_MASK64 = (1 << 64) - 1


def _splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def keyed_uniform(seed: int, position: int) -> float:
    """A uniform number in [0, 1) that depends only on (seed, position)."""
    return (_splitmix64(_splitmix64(seed & _MASK64) ^ position) >> 11) / float(1 << 53)


def is_greedy(p: SamplingParams) -> bool:
    return p.temperature <= 0.0


def has_penalties(p: SamplingParams) -> bool:
    return p.repetition_penalty != 1.0 or p.presence_penalty != 0.0 or p.frequency_penalty != 0.0


def host_picks(p: SamplingParams) -> bool:
    """The host must make the picks: penalties need the history's counts, a grammar its matcher."""
    return has_penalties(p) or bool(p.grammar)


def argmax_pick(p: SamplingParams) -> bool:
    """The pick is the logits' argmax (greedy, no penalties, no grammar): it can be made where the logits are."""
    return is_greedy(p) and not host_picks(p)


def apply_penalties(logits: torch.Tensor, p: SamplingParams, counts: Counter) -> torch.Tensor:
    if not counts or not has_penalties(p):
        return logits
    ids = torch.tensor(list(counts.keys()), dtype=torch.long)
    n = torch.tensor(list(counts.values()), dtype=logits.dtype)
    v = logits[ids]
    if p.repetition_penalty != 1.0:
        v = torch.where(v > 0, v / p.repetition_penalty, v * p.repetition_penalty)
    v = v - p.presence_penalty - p.frequency_penalty * n
    out = logits.clone()
    out[ids] = v
    return out


_STEP = 2.0 ** -8      # candidates: the tokens within this factor of the most likely one, widened by it


def _head(probs: np.ndarray, below: float) -> tuple[np.ndarray, np.ndarray]:
    """The entries of `probs` at or above `below` in sampling order (descending, ties by index) and their
    indices: a first stretch of that order, since every entry it leaves out is smaller than one it keeps."""
    idx = np.flatnonzero(probs >= below)
    # one sort of unique 64-bit keys, the complement of the probability's bits (float32, >= +0) above the
    # index: the same order as a stable argsort of -probs, 6x faster on 49K candidates here (numpy's SIMD
    # sort; a flat row took 3.5 ms a draw)
    bits = (probs[idx] + np.float32(0.0)).view(np.uint32)
    key = ((np.uint32(0xFFFFFFFF) - bits).astype(np.uint64) << np.uint64(32)) | idx.astype(np.uint64)
    idx = (np.sort(key) & np.uint64(0xFFFFFFFF)).astype(np.int64)
    return probs[idx], idx


def _usable(z: torch.Tensor) -> torch.Tensor:
    """Scaled logits a draw can use: where some are +inf (an extreme penalty or temperature) they share
    the mass; NaN counts as -inf; where all are -inf, every token alike."""
    if math.isfinite(float(z.sum())):     # every entry finite (a sum that overflows takes the long way)
        return z
    top = torch.isposinf(z)
    if bool(top.any()):
        return torch.where(top, 0.0, float("-inf")).to(z.dtype)
    z = torch.nan_to_num(z, nan=float("-inf"), neginf=float("-inf"))
    return torch.zeros_like(z) if bool(torch.isneginf(z).all()) else z


def pick(logits: torch.Tensor, p: SamplingParams, counts: Counter | None, position: int) -> tuple[int, float]:
    """The target's token at `position` from one row of logits [V] (float32, CPU).

    The candidates are the tokens in descending probability (softmax of logits / temperature in float32;
    ties by index), cut by top-k, top-p and min-p; the draw walks their cumulative probability (float64)
    to the keyed uniform. Only as many candidates as the cut and the draw need are sorted: a full sort of
    a 150K vocabulary costs milliseconds per row. Each step works on this row alone, in one thread, so
    the token depends on the row's logits only.
    Returns (token, its probability under the final distribution; 1.0 for greedy)."""
    logits = apply_penalties(logits, p, counts) if counts else logits
    if is_greedy(p):
        return int(torch.argmax(logits)), 1.0
    x = logits.float()
    inv_t = 1.0 / p.temperature
    u = keyed_uniform(p.seed, position)
    n_vocab = x.shape[0]
    if 0 < p.top_k < n_vocab:
        vals, idx = torch.topk(x, p.top_k)          # sorted descending
        return _draw(torch.softmax(_usable(vals.double() * inv_t), dim=0).numpy(), idx.numpy(), p, u, p.top_k, False)
    probs = torch.softmax(_usable(x * inv_t), dim=0).numpy()
    top, scale = float(probs.max()), _STEP
    while True:
        below = top * scale if scale > 2.0 ** -160 else 0.0       # 0: every token
        vals, idx = _head(probs, below)
        got = _draw(vals.astype(np.float64), idx, p, u, n_vocab, p.top_p == 1.0 and p.min_p == 0.0)
        if got is not None:
            return got
        scale *= _STEP


def _draw(vals: np.ndarray, idx: np.ndarray, p: SamplingParams, u: float, n_all: int,
          whole: bool) -> tuple[int, float] | None:
    """The draw over the first len(vals) of n_all candidates in order (float64 probabilities), or None
    when they do not decide it. whole: no filter cuts the candidates, so the kept mass is all of it, 1
    (no sum over the vocabulary)."""
    n = vals.shape[0]
    cum = np.cumsum(vals)
    if whole:                             # the draw needs the cumulative mass past u
        j = int(np.searchsorted(cum, u, side="right"))
        if j == n and n < n_all:
            return None
        j = min(j, n - 1)
        return int(idx[j]), float(vals[j])
    cuts = [n_all] if n == n_all else []
    if p.top_p < 1.0 and cum[-1] >= p.top_p:
        cuts.append(int(np.searchsorted(cum, p.top_p, side="left")) + 1)
    thr = p.min_p * float(vals[0])
    if p.min_p > 0.0 and vals[-1] < thr:
        cuts.append(max(1, int((vals >= thr).sum())))
    if not cuts:
        return None
    keep = min(cuts)
    mass = cum[keep - 1]
    j = min(int(np.searchsorted(cum[:keep], u * mass, side="right")), keep - 1)
    return int(idx[j]), float(vals[j] / mass)


def pick_rows(logits: torch.Tensor, p: SamplingParams, history: list[int], positions: list[int],
              proposals: list[int], constraint=None) -> list[int]:
    """Picks at the rows of one slot's window. Row i sees the history plus proposals[:i], i.e. exactly
    what it would have seen had the proposals before it been accepted one by one. With a constraint
    (engine.grammar) each row's logits are masked by the matcher, which takes each pick while it equals
    the row's proposal and the first that does not; the rows after that (never kept) pick unmasked."""
    if argmax_pick(p):
        return torch.argmax(logits, dim=-1).tolist()      # where the logits are: one int per row travels
    logits = logits.cpu()                                 # seeded sampling, penalties and grammars: the host
    counts = Counter(history) if has_penalties(p) else None
    out, following = [], constraint is not None
    for i, position in enumerate(positions):
        if i and counts is not None:
            counts[proposals[i - 1]] += 1
        row = constraint.mask(logits[i]) if following else logits[i]
        t = pick(row, p, counts, position)[0]
        if following:
            constraint.consume(t)
            following = i < len(proposals) and t == proposals[i]
        out.append(t)
    return out
