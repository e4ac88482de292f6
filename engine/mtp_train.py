"""Training an MTP (nextn) layer for a model that has none, by self-distillation (`strata mtp-train`).

The layer is exactly what engine.drafts.MtpDrafter runs: row t joins enorm(embedding of the token at
t+1) and hnorm(the trunk's last hidden state at t) through eh_proj, runs one decoder block of the
trunk's own kind (its attention causal over the layer's earlier rows, rope at t), and predicts the
token at t+2 through shared_head_norm and the trunk's output head. Here it is a float32 torch module
built from the same engine.layers functions (their torch forms on every device: autograd needs them),
so the trained weights mean the same thing there.

Targets are the model's own: over sequences the model generated, the trunk's logits at t+1 are the
distribution of the token at t+2; the layer learns them (cross-entropy to the teacher's top-k
probabilities, renormalised), for its first proposal and for the next one it chains on its own output. Acceptance on held-out rows: how often the layer's greedy pick is the
trunk's greedy pick, which is what a first proposal needs to be kept under greedy decoding.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from engine.config import ModelConfig
from engine.errors import ConfigError
from engine.layers import apply_rope, glu, rope_tables, torch_rms_norm as rms_norm

TRAINABLE_ARCHS = ("llama", "qwen3")
TOP_K = 32                     # teacher probabilities kept per row


@dataclass
class Rows:
    """Training rows of one sequence: the trunk's hidden state at t, the token at t+1, and the teacher's
    top-k distribution of the token at t+2 (ids and probabilities), for t in 0..n-3."""
    hidden: torch.Tensor       # [n, d] float32
    next_ids: torch.Tensor     # [n] long
    top_ids: torch.Tensor      # [n, k] long
    top_p: torch.Tensor        # [n, k] float32


def teacher_rows(tokens: list[int], hidden: torch.Tensor, logits: torch.Tensor, k: int = TOP_K) -> Rows:
    """Rows from one sequence's trunk outputs (hidden [n, d] before the output norm, logits [n, V]): the
    teacher's top k made where the logits are, the rows kept on the host."""
    n = len(tokens)
    p, ids = torch.softmax(logits[1:n - 1].float(), dim=-1).topk(k, dim=-1)
    return Rows(hidden[:n - 2].float().cpu().clone(), torch.tensor(tokens[1:n - 1]), ids.cpu(),
                (p / p.sum(-1, keepdim=True)).cpu())


def cross_entropy(logits: torch.Tensor, top_ids: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """Per row, the cross-entropy of the logits [..., V] to the teacher's top-k distribution."""
    return -(top_p * torch.log_softmax(logits, dim=-1).gather(-1, top_ids)).sum(-1)


def real_rows(lens: torch.Tensor, n: int) -> torch.Tensor:
    """[B, n] True where row t < lens[b] (a sequence's own rows, not padding)."""
    return torch.arange(n, device=lens.device)[None, :] < lens[:, None]


class NextnLayer(nn.Module):
    """The nextn layer for a dense llama / qwen3 trunk, trainable; the embedding and head are frozen."""

    def __init__(self, cfg: ModelConfig, embed: torch.Tensor, head: torch.Tensor, init: dict[str, torch.Tensor]):
        super().__init__()
        if cfg.arch not in TRAINABLE_ARCHS or cfg.is_moe:
            raise ConfigError(f"mtp-train trains a nextn layer for dense {' and '.join(TRAINABLE_ARCHS)} models; "
                              f"this one is {cfg.arch}")
        self.cfg = cfg
        self.register_buffer("embed", embed.float(), persistent=False)     # [V, d]
        self.register_buffer("head", head.float(), persistent=False)       # [V, d]
        d = cfg.n_embd
        self.w = nn.ParameterDict({name: nn.Parameter(t.float().clone()) for name, t in init.items()})
        self.w["eh_proj"] = nn.Parameter(torch.cat((torch.zeros(d, d), torch.eye(d)), dim=1))   # hidden half through
        for name in ("enorm", "hnorm", "shared_head_norm"):
            self.w[name] = nn.Parameter(torch.ones(d))
        self._rope: tuple[torch.Tensor, torch.Tensor] | None = None

    def rope(self, n: int):
        if self._rope is None or self._rope[0].shape[0] < n or self._rope[0].device != self.embed.device:
            self._rope = rope_tables(self.cfg.rope_base, self.cfg.rope_dim, max(n, 256), self.embed.device)
        return self._rope[0][:n], self._rope[1][:n]

    def _joined(self, hidden: torch.Tensor, next_ids: torch.Tensor) -> torch.Tensor:
        c, w = self.cfg, self.w
        e = self.embed[next_ids] * c.embed_scale
        return F.linear(torch.cat((rms_norm(e, w["enorm"], c.norm_eps), rms_norm(hidden, w["hnorm"], c.norm_eps)), -1),
                        w["eh_proj"])

    def _qkv(self, x: torch.Tensor, first_pos: int):
        """Roped q and (kv heads repeated to q heads) k, v of rows x [B, n, d] at positions first_pos,
        first_pos+1, ... of each sequence."""
        c, w = self.cfg, self.w
        b, n = x.shape[:2]
        h = rms_norm(x, w["attn_norm"], c.norm_eps)
        q = F.linear(h, w["attn_q"]).view(b, n, c.n_heads, c.head_dim)
        k = F.linear(h, w["attn_k"]).view(b, n, c.n_kv_heads, c.head_dim)
        v = F.linear(h, w["attn_v"]).view(b, n, c.n_kv_heads, c.head_dim)
        if "attn_q_norm" in w:
            q, k = rms_norm(q, w["attn_q_norm"], c.norm_eps), rms_norm(k, w["attn_k_norm"], c.norm_eps)
        cos, sin = self.rope(first_pos + n)
        cos, sin = cos[first_pos:], sin[first_pos:]
        q, k = apply_rope(q, cos, sin, c.rope_neox), apply_rope(k, cos, sin, c.rope_neox)
        g = c.n_heads // c.n_kv_heads
        return q, k.repeat_interleave(g, dim=2), v.repeat_interleave(g, dim=2)

    def _rest(self, x: torch.Tensor, q, k, v, allowed: torch.Tensor) -> torch.Tensor:
        """The block's output (before shared_head_norm) of rows x [B, n, d] with queries q over keys k /
        values v (allowed: [n, keys], the same for every sequence)."""
        c, w = self.cfg, self.w
        s = torch.einsum("bqhd,bkhd->bhqk", q, k) * c.attn_scale
        a = torch.einsum("bhqk,bkhd->bqhd", torch.softmax(s.masked_fill(~allowed, -math.inf), dim=-1), v)
        x = x + F.linear(a.reshape(*x.shape[:2], -1), w["attn_output"])
        h = rms_norm(x, w["ffn_norm"], c.norm_eps)
        return x + F.linear(glu(F.linear(h, w["ffn_gate"]), F.linear(h, w["ffn_up"]), c.gelu), w["ffn_down"])

    def head_logits(self, g: torch.Tensor) -> torch.Tensor:
        return F.linear(rms_norm(g, self.w["shared_head_norm"], self.cfg.norm_eps), self.head)

    def forward(self, hidden: torch.Tensor, next_ids: torch.Tensor, chain: bool = False):
        """Logits [n, V] of the token at t+2 for rows t = 0..n-1 of one sequence (the drafter's catch-up
        rows); or, given [B, n, d] and [B, n], [B, n, V] for B sequences at once (rows past a shorter
        sequence's end are padding: causal attention keeps them out of its real rows). chain: also the
        logits [(B,) n-1, V] of its next step, as the drafter chains: row t+1 joins the layer's own output
        at t with the token at t+2 and predicts the token at t+3, attending to the catch-up rows' keys at
        positions 0..t and its own."""
        one = hidden.dim() == 2
        if one:
            hidden, next_ids = hidden[None], next_ids[None]
        n, dev = hidden.shape[1], hidden.device
        x1 = self._joined(hidden, next_ids)
        q1, k1, v1 = self._qkv(x1, 0)
        g1 = self._rest(x1, q1, k1, v1, torch.ones(n, n, dtype=torch.bool, device=dev).tril())
        out = [self.head_logits(g1)]
        if chain:
            x2 = self._joined(g1[:, :-1], next_ids[:, 1:])
            q2, k2, v2 = self._qkv(x2, 1)
            m = n - 1
            allowed = torch.cat((torch.ones(m, n, dtype=torch.bool, device=dev).tril(),     # catch-up keys <= t
                                 torch.eye(m, dtype=torch.bool, device=dev)), dim=1)      # and its own
            out.append(self.head_logits(self._rest(x2, q2, torch.cat((k1, k2), 1), torch.cat((v1, v2), 1), allowed)))
        if one:
            out = [o[0] for o in out]
        return tuple(out) if chain else out[0]

    def padded(self, batch: list[Rows]):
        """The batch's rows on the layer's device, each sequence padded with zeros to the longest:
        (hidden [B, n, d], next_ids [B, n], top_ids, top_p [B, n, k], real rows per sequence [B])."""
        dev = self.embed.device                   # rows live on the CPU; the layer where it trains
        pad = lambda ts: torch.nn.utils.rnn.pad_sequence(ts, batch_first=True).to(dev)  # noqa: E731
        return (pad([b.hidden for b in batch]), pad([b.next_ids for b in batch]), pad([b.top_ids for b in batch]),
                pad([b.top_p for b in batch]), torch.tensor([len(b.next_ids) for b in batch], device=dev))

    def loss(self, r: Rows | list[Rows], chain: bool = False) -> tuple[torch.Tensor, float]:
        """(cross-entropy to the teacher's top-k distribution, share of rows whose greedy pick is the
        teacher's) of one sequence's rows, or the mean over a batch of sequences run together (each
        sequence's mean over its rows, as alone): of the first proposal, plus (chain) the second's,
        weighted equally."""
        hidden, next_ids, top_ids, top_p, lens = self.padded([r] if isinstance(r, Rows) else r)
        out = self.forward(hidden, next_ids, chain)
        steps = [(out[0], top_ids, top_p, lens), (out[1], top_ids[:, 1:], top_p[:, 1:], lens - 1)] if chain \
            else [(out, top_ids, top_p, lens)]
        # a padding row's teacher probabilities are zeros: it adds nothing to its sequence's sum
        ce = sum((cross_entropy(lg, ids, p).sum(1) / k.clamp(min=1)).mean() for lg, ids, p, k in steps)
        right = (steps[0][0].argmax(-1) == top_ids[..., 0]) & real_rows(lens, top_ids.shape[1])
        return ce / len(steps), (right.sum(1) / lens).mean().item()

    def tensors(self, block: int) -> dict[str, torch.Tensor]:
        """The trained weights by GGUF tensor name (torch order), for block index `block`."""
        out = {}
        for name, t in self.w.items():
            sub = f"nextn.{name}" if name in ("eh_proj", "enorm", "hnorm", "shared_head_norm") else name
            out[f"blk.{block}.{sub}.weight"] = t.detach().float().contiguous()
        return out


BLOCK_TENSORS = ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm", "attn_k_norm",
                 "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")
