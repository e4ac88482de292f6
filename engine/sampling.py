"""Sampling: the target's pick at one row.

A seeded draw uses a uniform number keyed by (seed, absolute position) only, so the same request
gives the same tokens whatever else runs and however the tokens were grouped into windows; a draft
is accepted exactly when it equals this pick.
"""
from __future__ import annotations

from collections import Counter

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


def pick(logits: torch.Tensor, p: SamplingParams, counts: Counter | None, position: int) -> tuple[int, float]:
    """The target's token at `position` from one row of logits [V] (float32, CPU).

    Returns (token, its probability under the final distribution; 1.0 for greedy)."""
    logits = apply_penalties(logits, p, counts) if counts else logits
    if is_greedy(p):
        return int(torch.argmax(logits)), 1.0
    x = logits.double()
    if p.top_k > 0 and p.top_k < x.shape[0]:
        vals, idx = torch.topk(x, p.top_k)          # sorted descending
    else:
        vals, idx = torch.sort(x, descending=True, stable=True)
    probs = torch.softmax(vals / p.temperature, dim=0)
    keep = probs.shape[0]
    if p.top_p < 1.0:
        cum = torch.cumsum(probs, 0)
        keep = min(keep, int(torch.searchsorted(cum, torch.tensor([p.top_p], dtype=cum.dtype))[0]) + 1)
    if p.min_p > 0.0:
        keep = min(keep, max(1, int((probs >= p.min_p * probs[0]).sum())))
    probs = probs[:keep] / probs[:keep].sum()
    u = keyed_uniform(p.seed, position)
    cum = torch.cumsum(probs, 0)
    j = min(int(torch.searchsorted(cum, torch.tensor([u], dtype=cum.dtype), right=True)[0]), keep - 1)
    return int(idx[j]), float(probs[j])


def pick_rows(logits: torch.Tensor, p: SamplingParams, history: list[int], positions: list[int],
              proposals: list[int]) -> list[int]:
    """Picks at the rows of one slot's window. Row i sees the history plus proposals[:i], i.e. exactly
    what it would have seen had the proposals before it been accepted one by one."""
    if is_greedy(p) and not has_penalties(p):
        return torch.argmax(logits, dim=-1).tolist()      # where the logits are: one int per row travels
    logits = logits.cpu()                                 # seeded sampling and penalties run on the host
    counts = Counter(history) if has_penalties(p) else None
    out = []
    for i, position in enumerate(positions):
        if i and counts is not None:
            counts[proposals[i - 1]] += 1
        out.append(pick(logits[i], p, counts, position)[0])
    return out
