"""Stage: one device, a contiguous range of layers, and the KV cache of those layers for every slot."""
from __future__ import annotations

import torch

from engine.block import Tile, run_block
from engine.config import ModelConfig
from engine.layers import rms_norm, rope_tables
from engine.weights import WeightLoader


class Stage:
    def __init__(self, index: int, device: str, first: int, end: int, loader: WeightLoader, cfg: ModelConfig,
                 n_slots: int, ctx: int, is_first: bool, is_last: bool, dtype: torch.dtype, on_layer=None):
        self.index, self.device, self.first, self.end = index, torch.device(device), first, end
        self.cfg, self.ctx, self.dtype = cfg, ctx, dtype
        self.scratch_slot = n_slots                     # padding rows write here, nobody reads it
        self.layers = []
        for i in range(first, end):
            self.layers.append(loader.layer(i, self.device))
            if on_layer:
                on_layer(i)
        self.embedding = loader.embedding(self.device) if is_first else None
        self.head = loader.head(self.device) if is_last else None
        shape = (n_slots + 1, ctx, cfg.n_kv_heads, cfg.head_dim)
        self.k = [torch.zeros(shape, dtype=dtype, device=self.device) for _ in self.layers]
        self.v = [torch.zeros(shape, dtype=dtype, device=self.device) for _ in self.layers]
        bases = {cfg.layer_rope_base(i) for i in range(first, end)}
        self.rope = {b: rope_tables(b, cfg.rope_dim, ctx, self.device) for b in bases}

    @property
    def weight_bytes(self) -> int:
        n = sum(lw.nbytes for lw in self.layers)
        if self.embedding is not None:
            n += self.embedding.nbytes
        if self.head is not None and self.head.output is not self.embedding:
            n += self.head.output.nbytes
        return n

    @property
    def kv_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.k + self.v)

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embedding.rows(tokens.to(self.device)).to(self.dtype)
        return x * self.cfg.embed_scale if self.cfg.embed_scale != 1.0 else x

    def forward(self, x: torch.Tensor, tile: Tile) -> torch.Tensor:
        x = x.to(self.device)
        tile = Tile(tile.slot.to(self.device), tile.pos.to(self.device), tile.n_real)
        for j, lw in enumerate(self.layers):
            layer = self.first + j
            x = run_block(lw, self.cfg, layer, x, tile, self.k[j], self.v[j], self.rope[self.cfg.layer_rope_base(layer)])
        return x

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        h = rms_norm(x, self.head.output_norm, self.cfg.norm_eps)
        return self.head.output.linear(h).float()
