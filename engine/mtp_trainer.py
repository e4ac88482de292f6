"""The training loop of `strata mtp-train`: teacher rows from the trunk, AdamW on the nextn layer,
checkpoints to resume from, held-out acceptance, and the GGUF with the trained layer."""
from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Callable

import torch
from gguf import GGUFValueType
from gguf.constants import GGMLQuantizationType as Q

from engine.gguf_append import write_tensors, write_with
from engine.loader import LoadedModel
from engine.model_files import MTP_BASE_BYTES
from engine.mtp_train import BLOCK_TENSORS, NextnLayer, Rows, cross_entropy, real_rows, teacher_rows
from engine.quant import QuantTensor

WARMUP = 20


def dense(model: LoadedModel, name: str) -> torch.Tensor:
    """A tensor of the model's file, dequantized to float32 (torch order)."""
    return QuantTensor.from_gguf(model.gf, name).dequantize().float()


def new_layer(model: LoadedModel) -> NextnLayer:
    """A nextn layer started from the trunk's last block (eh_proj passes the hidden half through)."""
    cfg = model.cfg
    last = f"blk.{cfg.n_layers - 1}."
    init = {n: dense(model, last + n + ".weight") for n in BLOCK_TENSORS if last + n + ".weight" in model.gf.tensors}
    embed = dense(model, "token_embd.weight")
    head = embed if cfg.tied_embeddings else dense(model, "output.weight")
    return NextnLayer(cfg, embed, head, init)


def collect(model: LoadedModel, sequences: list[list[int]], on_one: Callable[[], None] = lambda: None) -> list[Rows]:
    """Teacher rows of each sequence from one trunk pass over it."""
    out = []
    for tokens in sequences:
        out.append(model.pipeline.score_hidden(tokens, then=lambda h, lg: teacher_rows(tokens, h, lg)))
        on_one()
    return out


def lr_at(step: int, steps: int, lr: float) -> float:
    if step < WARMUP:
        return lr * (step + 1) / WARMUP
    return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - WARMUP) / max(1, steps - WARMUP))))


@torch.no_grad()
def held_out(layer: NextnLayer, rows: list[Rows], batch: int = 16) -> tuple[float, float, float]:
    """(mean loss of the first proposal, share of rows whose first proposal is the trunk's greedy pick,
    the same share for the second proposal, chained on the first) over held-out rows (`batch` sequences
    run together)."""
    n = loss = hits = hits2 = n2 = 0.0
    for i in range(0, len(rows), batch):
        hidden, next_ids, top_ids, top_p, lens = layer.padded(rows[i:i + batch])
        lg1, lg2 = layer(hidden, next_ids, chain=True)
        real, real2 = real_rows(lens, lg1.shape[1]), real_rows(lens - 1, lg2.shape[1])
        loss += (cross_entropy(lg1, top_ids, top_p) * real).sum().item()
        hits += ((lg1.argmax(-1) == top_ids[..., 0]) & real).sum().item()
        hits2 += ((lg2.argmax(-1) == top_ids[:, 1:, 0]) & real2).sum().item()
        n, n2 = n + lens.sum().item(), n2 + (lens - 1).sum().item()
    return loss / max(n, 1), hits / max(n, 1), hits2 / max(n2, 1)


def train(layer: NextnLayer, train_rows: list[Rows], steps: int, lr: float, ckpt: Path, batch: int = 4,
          on_step: Callable[[int, float, float], None] = lambda s, l, a: None, save_every: int = 50) -> None:
    """AdamW over `steps` steps of `batch` sequences each, resuming from `ckpt` where it exists; the
    checkpoint is written every `save_every` steps and at the end."""
    opt = torch.optim.AdamW(layer.w.parameters(), lr=lr, weight_decay=0.0)
    start = 0
    if ckpt.exists():
        state = torch.load(ckpt, weights_only=True, map_location="cpu")
        layer.w.load_state_dict(state["layer"])
        opt.load_state_dict(state["opt"])
        start = int(state["step"])
    rng = random.Random(start)
    for step in range(start, steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, steps, lr)
        opt.zero_grad()
        ce, hit = layer.loss(rng.sample(train_rows, min(batch, len(train_rows))), chain=True)
        ce.backward()
        opt.step()
        on_step(step + 1, ce.item(), hit)
        if (step + 1) % save_every == 0 or step + 1 == steps:
            torch.save({"step": step + 1, "layer": layer.w.state_dict(), "opt": opt.state_dict()}, ckpt)


def export(model: LoadedModel, layer: NextnLayer, out: Path, qtype: Q = Q.Q8_0, sidecar: bool = False) -> Path:
    """The model's file plus the trained layer as block n_layers, with block_count and nextn_predict_layers;
    or (sidecar) the layer alone with those keys and the size of the file it was trained for, to be read
    beside that file (engine.model_files.mtp_sidecar)."""
    cfg, arch = model.cfg, model.cfg.arch
    keys = {f"{arch}.block_count": (cfg.n_layers + 1, GGUFValueType.UINT32),
            f"{arch}.nextn_predict_layers": (1, GGUFValueType.UINT32)}
    if not sidecar:
        return write_with(model.gf.path, out, layer.tensors(cfg.n_layers), qtype, keys)
    keys |= {f"{arch}.embedding_length": (cfg.n_embd, GGUFValueType.UINT32),
             MTP_BASE_BYTES: (Path(model.gf.path).stat().st_size, GGUFValueType.UINT64),
             "general.name": (f"MTP layer for {Path(model.gf.path).name}", GGUFValueType.STRING)}
    return write_tensors(out, arch, layer.tensors(cfg.n_layers), qtype, keys)
