"""Stage: one device, a contiguous range of layers, and the KV cache of those layers for every slot."""
from __future__ import annotations

import os
from dataclasses import replace

import torch

from engine import gdn
from engine.block import Tile, device_experts, one_run, row_count_free, run_blocks
from engine.config import ModelConfig
from engine.graphs import TileGraph, fed_over, on_device
from engine.layers import rms_norm, rope_tables, rotation_tables
from engine.quant import QuantTensor
from engine.weights import DeltaNetWeights, WeightLoader


# a first stage's tile graphs embed the token ids themselves (STRATA_GRAPH_EMBED=0: a gather before each
# replay and a copy into the graph's x, as before; the same bits): a window's host part loses the ids'
# upload, the fed picks' scatter, the gather and the copy
GRAPH_EMBED = os.environ.get("STRATA_GRAPH_EMBED", "1") != "0"


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
        if self.embedding is not None and self.device.type == "cuda":
            self.embedding.dense_weight()      # one gather per window instead of a dequantize (GPU memory is ample)
        self.head = loader.head(self.device) if is_last else None
        shape = (n_slots + 1, ctx, cfg.n_kv_heads, cfg.head_dim)
        self.k, self.v = [], []            # a gated delta net layer keeps its conv and state rings here
        for i in range(first, end):
            kv = lambda: torch.zeros(shape, dtype=dtype, device=self.device)  # noqa: E731
            k, v = gdn.state_buffers(cfg, n_slots + 1, self.device) if cfg.is_recurrent(i) else (kv(), kv())
            self.k.append(k)
            self.v.append(v)
        bases = {cfg.layer_rope_base(i) for i in range(first, end)}
        self.rope = {b: rope_tables(b, cfg.rope_dim, ctx, self.device) for b in bases}
        if self.device.type == "cpu":      # the torch blocks' rotation in fewer calls (engine.layers.rotate)
            self.rope = {b: (*t, *rotation_tables(*t, cfg.rope_neox)) for b, t in self.rope.items()}
        # hybrids: the delta net's torch rows read positions on the host (no graph); its kernel does not
        self.use_graph = self.device.type == "cuda" and (gdn.GPU_ROWS or not any(cfg.recurrent)) \
            and os.environ.get("STRATA_CUDA_GRAPHS", "1") != "0"
        # a CPU stage whose blocks give a tile's real rows, passed alone, the full tile's bits runs the real
        # rows only (the padding rows of a prompt's last tile cost as much as real ones in int4 matmuls)
        self.row_count_free = self.device.type == "cpu" and all(row_count_free(lw) for lw in self.layers)
        # a lone CPU stage's head, one large product the engine's threads wait for, runs on every core
        # (set by the loader; the int4 kernel gives each column the same bits at any thread count.
        # SmolLM2's 49152-row head at one row: 2.2 ms on one of this machine's 2 cores, 1.2 ms on both)
        self.head_threads = 0
        self._decode_layers = False                     # engine.cpu_layers.DecodeLayers, None, or not made yet
        self._graphs: dict[int, TileGraph] = {}        # one per tile size
        # the MTP drafter whose ring of paused positions the last stage's decode graphs fill with each row's
        # hidden state (MtpDrafter.keep_ring, remember_on_device); set before capture
        self.ring_of = None
        self._ring_tiles: set[int] = set()               # tile sizes whose graphs fill it
        self._graphed: dict[int, bool] = {}

    @property
    def rows_free(self) -> bool:
        """Whether any number of decode rows may share a tile here with each row's bits those of the row
        alone: a CPU stage whose blocks run real rows only (row_count_free), with int4 matrices (their
        kernel gives a row the same bits at any row count), the head int4 too; in a decode tile (Tile.per_row)
        a dense matrix (a type without an int4 form: Q6_K's scales per 16 values) and the attention run
        each row alone. The reference mode (a dense head) keeps one decode row per tile."""
        head = self.head is None or self.head.output.int4 is not None or self.head.output.q8
        return self.row_count_free and head and any(
            isinstance(m, QuantTensor) and m.int4 is not None for lw in self.layers for m in vars(lw).values())

    @property
    def weight_bytes(self) -> int:
        """Memory the stage's weights take: the working forms a CPU stage made (int4 groups or dense
        copies), else the quantized bytes. A CPU stage's embedding table is read from the file's mapped
        pages a row at a time (only the rows looked up become resident, and the OS may drop them): not
        counted."""
        tensors = [t for t in (self.embedding, self.head and self.head.output, self.head and self.head.output_norm)
                   if t is not None]
        return sum(layer_weight_bytes(lw) for lw in self.layers) + sum(resident_bytes(t) for t in tensors)

    @property
    def kv_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.k + self.v)

    def embed(self, tokens: torch.Tensor, fed: tuple[list[int], torch.Tensor] | None = None) -> torch.Tensor:
        """The residual stream's rows for token ids (float32). fed: (rows, device token ids) that replace
        those rows' ids (a chained window's picks, never on the host)."""
        x = self.embedding.rows(fed_over(tokens, self.device, fed)).float()      # the residual stream stays float32
        return x * self.cfg.embed_scale if self.cfg.embed_scale != 1.0 else x

    def graphed(self, n_rows: int) -> bool:
        """Whether n-row tiles replay a captured graph: every block's work stays on the device (an MoE
        block's experts are picked on the host where engine.block.device_experts says no)."""
        if n_rows not in self._graphed:
            self._graphed[n_rows] = self.use_graph and all(lw.router is None or device_experts(lw, n_rows)
                                                           for lw in self.layers)
        return self._graphed[n_rows]

    def capture(self, n_rows: int, with_logits: bool = False) -> None:
        """Capture the graph of an n-row tile now (the loader does this for every tile size, one stage
        at a time, before any stage thread runs). with_logits: on the last stage, the graph also runs
        the head on the tile's real rows (decode tiles: one replay gives the window's logits, with no
        eager kernel launches between the graph and the pick), and puts every row's hidden state into the
        drafter's ring where it keeps one (self.ring_of: a paused window's rows then cost no launch from the
        host; the scheduler's kept_at says which rows hold what)."""
        if self.graphed(n_rows) and n_rows not in self._graphs:
            head = with_logits and self.head is not None
            ring = self.ring_of if head else None
            if ring is not None:
                self._ring_tiles.add(n_rows)

            def body(gx, _tok, gs, gp, gn):
                tile = Tile(gs, gp, gx.shape[0], gn)
                h = self._forward(gx, tile)
                if ring is not None:
                    ring.remember_on_device(h, gs, gp)
                return (h, self.logits(h, gn)) if head else (h, None)
            with torch.inference_mode():
                self._graphs[n_rows] = TileGraph(body, n_rows, self.cfg.n_embd, self.scratch_slot, self.device,
                                                 embed=self.embed if self.embedding is not None and GRAPH_EMBED else None)

    def fills_ring(self, n_rows: int) -> bool:
        """Whether an n-row tile's graph puts its rows' hidden states into the drafter's ring (capture)."""
        return n_rows in self._ring_tiles

    def forward(self, x: torch.Tensor, tile: Tile) -> torch.Tensor:
        return self.forward_logits(x, tile)[0]

    def forward_logits(self, x: torch.Tensor | None, tile: Tile, tok: torch.Tensor | None = None,
                       fed=None, fed_pos=None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(hidden out, float32 logits of the tile's real rows where its graph runs the head, else None).
        x None (the first stage): the tile's token ids tok (fed: (rows, device ids) over some of them)
        are embedded here, inside the tile's graph where it has one. fed_pos: (rows, device positions)
        over some of the tile's positions (a chained draft window's, engine.draft_chain)."""
        n = x.shape[0] if x is not None else tok.shape[0]
        if self.graphed(n):
            if n not in self._graphs:
                raise RuntimeError(f"stage {self.index} has no graph for {n}-row tiles (captured: {sorted(self._graphs)})")
            g = self._graphs[n]
            if x is None and g.embed is None:        # (STRATA_GRAPH_EMBED=0: embedded before the graph)
                x, tok, fed = self.embed(tok, fed), None, None
            return g.run(x, tile.slot, tile.pos, tile.n_real, tok, fed, fed_pos)
        x = self.embed(tok, fed) if x is None else x.to(self.device)
        return self._forward(x, Tile(on_device(tile.slot, self.device), fed_over(tile.pos, self.device, fed_pos),
                                     tile.n_real, per_row=tile.per_row)), None

    def _forward(self, x: torch.Tensor, tile: Tile) -> torch.Tensor:
        if tile.per_row and self.decode_layers() is not None:     # a CPU decode tile: its real rows in one call
            n = tile.n_real
            y = self._decode_layers.run(x[:n], tile.slot[:n], tile.pos[:n])
            return y if n == x.shape[0] else torch.cat((y, y.new_zeros(x.shape[0] - n, y.shape[1])))
        if x.shape[0] == 1 and self.device.type == "cpu":     # the row's place read once, not per layer
            tile = replace(tile, at=(int(tile.slot[0]), int(tile.pos[0])))
        elif self.row_count_free and 0 < tile.n_real < x.shape[0]:     # the padding rows left out
            n = tile.n_real
            y = self._forward(x[:n], Tile(tile.slot[:n], tile.pos[:n], n, size=x.shape[0], per_row=tile.per_row))
            return torch.cat((y, y.new_zeros(x.shape[0] - n, y.shape[1])))
        elif self.device.type == "cpu" and not tile.per_row and x.shape[0] > 1:
            tile = replace(tile, run=one_run(tile.slot, tile.pos))
        return run_blocks(self.layers, self.cfg, self.first, x, tile, self.k, self.v,
                          lambda layer: self.rope[self.cfg.layer_rope_base(layer)])

    def decode_layers(self):
        """engine.cpu_layers.DecodeLayers where this stage's decode tiles run their blocks in one C call (made
        at the first decode tile, once the loader has put the weights in their final form), else None."""
        if self._decode_layers is False:
            from engine import cpu_layers

            self._decode_layers = cpu_layers.for_stage(self)
        return self._decode_layers

    def logits(self, x: torch.Tensor, n_dev: torch.Tensor | None = None, rows: int = 0) -> torch.Tensor:
        """float32 logits of x's rows (of its first n_dev rows, a device scalar, on GPU decode tiles;
        the others then hold zeros). A row's logits do not depend on the other rows. rows: on a CPU, the
        head's tile where x holds some rows of a larger tile."""
        h = rms_norm(x, self.head.output_norm, self.cfg.norm_eps)
        if not self.head_threads:
            return self.head.output.linear(h, rows or h.shape[0], n_dev).float()
        threads = torch.get_num_threads()
        torch.set_num_threads(self.head_threads)
        try:
            return self.head.output.linear(h, rows or h.shape[0]).float()
        finally:
            torch.set_num_threads(threads)


# LayerWeights fields whose bytes the matrices' views already count
STACKED = ("qkv", "gate_up", "shexp_gate_up")
STACKED_DELTA_NET = ("qkv_gate", "beta_alpha")      # DeltaNetWeights' (its qkv is a matrix of its own)


def layer_weight_bytes(lw) -> int:
    """What a block's weights hold in memory (engine.model_info.layer_bytes predicts it)."""
    def held(w, stacked) -> list:
        return [v for k, v in vars(w).items() if v is not None and k not in stacked]
    tensors = []
    for t in held(lw, STACKED):
        tensors += held(t, STACKED_DELTA_NET) if isinstance(t, DeltaNetWeights) else [t]
    return sum(resident_bytes(t) for t in tensors)


def resident_bytes(t) -> int:
    if isinstance(t, torch.Tensor):
        return t.numel() * t.element_size()
    if t.data is not None and t.device.type == "cpu" and t._dense is None and t.int4 is None and not t.q8 and not t._experts:
        return 0                                  # the file's mapped bytes, no form of its own
    parts = [t, *t._experts.values()]
    dense = sum(p._dense.numel() * p._dense.element_size() for p in parts if p._dense is not None)
    return dense or t.nbytes
