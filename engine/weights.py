"""Loading a stage's weights from the GGUF: quantized matrices as QuantTensor, norms as float tensors."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.config import ModelConfig
from engine.errors import ModelFileError
from engine.gguf_file import GGUFFile
from engine.quant import QuantTensor


@dataclass
class DeltaNetWeights:
    """A gated delta net block's mixer (qwen35, qwen3next): projections, the causal conv and the decay
    parameters. The conv's input is q and k (key heads) then v (value heads): from qkv (with z from
    gate), or from qkvz, which holds q, k, v and z side by side per key head (older qwen3next files).
    beta and alpha likewise: two matrices, or ba with both side by side per key head."""
    conv: torch.Tensor        # [conv channels, kernel]
    dt_bias: torch.Tensor     # [value heads]
    a: torch.Tensor           # [value heads], -exp(A_log) as the file stores it
    norm: torch.Tensor        # [head size]
    out: QuantTensor
    qkv: QuantTensor | None = None
    gate: QuantTensor | None = None
    qkvz: QuantTensor | None = None
    beta: QuantTensor | None = None
    alpha: QuantTensor | None = None
    ba: QuantTensor | None = None
    qkv_gate: object | None = None       # qkv|gate and beta|alpha stacked where they can be (stack_packed)
    beta_alpha: object | None = None


@dataclass
class LayerWeights:
    attn_norm: torch.Tensor
    wq: QuantTensor | None = None       # None in a gated delta net block (delta_net instead)
    wk: QuantTensor | None = None
    wv: QuantTensor | None = None
    wo: QuantTensor | None = None
    ffn_norm: torch.Tensor | None = None
    delta_net: DeltaNetWeights | None = None
    shexp_gate: QuantTensor | None = None      # qwen35moe, qwen3next: the shared expert's sigmoid gate, [1, d]
    w_gate: QuantTensor | None = None
    w_up: QuantTensor | None = None
    w_down: QuantTensor | None = None
    q_norm: torch.Tensor | None = None
    k_norm: torch.Tensor | None = None
    post_attn_norm: torch.Tensor | None = None
    post_ffw_norm: torch.Tensor | None = None
    router: QuantTensor | None = None
    gate_exps: QuantTensor | None = None
    up_exps: QuantTensor | None = None
    down_exps: QuantTensor | None = None
    bq: torch.Tensor | None = None     # glm4moe: q, k, v biases
    bk: torch.Tensor | None = None
    bv: torch.Tensor | None = None
    bqkv: torch.Tensor | None = None   # the three side by side (the GPU block's q|k|v kernel adds them)
    exp_probs_b: torch.Tensor | None = None    # sigmoid routing: added to the scores to select experts
    gate_shexp: QuantTensor | None = None      # shared experts (glm4moe), run on every row
    up_shexp: QuantTensor | None = None
    down_shexp: QuantTensor | None = None
    shexp_gate_up: object | None = None        # gate_shexp|up_shexp stacked, as gate_up
    qkv: object | None = None          # wq|wk|wv side by side: GPU engine.kernels.packed.Packed, CPU fast mode
    gate_up: object | None = None      # engine.cpu_int4.Int4Stack; w_gate|w_up likewise; the matrices are views


def stack_packed(mats: list[QuantTensor]):
    """Repacked matrices with the same type, K and code order stacked along N (one kernel launch reads them all);
    each matrix then holds a view of its rows. None where any of them keeps its GGUF form. On CPU in
    the fast mode, int4 matrices likewise (engine.cpu_int4.Int4Stack: one call instead of several)."""
    if all(m.int4 is not None for m in mats):
        from engine import cpu_int4

        both = cpu_int4.stack([m.int4 for m in mats])
        return cpu_int4.Int4Stack(both, [m.shape[0] for m in mats]) if both is not None else None
    if any(m.packed is None for m in mats) or len({(m.qtype, m.shape[-1], m.packed.mma) for m in mats}) > 1:
        return None
    from engine.kernels.packed import cat

    both = cat([m.packed for m in mats])
    a = 0
    for m in mats:
        m.packed = both.rows(a, a + m.shape[0])
        a += m.shape[0]
    return both


def linears(mats: list[QuantTensor], stack, h: torch.Tensor, rows: int, alone: bool = False) -> list[torch.Tensor]:
    """Each matrix's product with h (the tile's `rows`): from one call where engine.weights.stack_packed
    stacked them (int4 on a CPU, the streaming layout on a GPU; each column's bits are its own
    matrix's either way), else a call each (alone: QuantTensor.linear's)."""
    from engine.cpu_int4 import Int4Stack

    if isinstance(stack, Int4Stack):
        return list(stack.split_linear(h, rows, mats[0].compute_dtype))
    if stack is not None:
        from engine.kernels import stream_matmul

        y = stream_matmul.linear(h.to(mats[0].compute_dtype).contiguous(), stack)
        return list(y.split([m.shape[0] for m in mats], -1))
    return [m.linear(h, rows, alone=alone) for m in mats]


@dataclass
class HeadWeights:
    output_norm: torch.Tensor
    output: QuantTensor


@dataclass
class DrafterWeights:
    """The MTP (nextn) layer: a full block plus the projection that joins embedding and hidden state."""
    block: LayerWeights
    eh_proj: QuantTensor
    enorm: torch.Tensor
    hnorm: torch.Tensor
    head_norm: torch.Tensor
    head: QuantTensor | None          # None: shares the trunk's output head
    embed: QuantTensor | None         # None: shares token_embd


class WeightLoader:
    def __init__(self, gf: GGUFFile, cfg: ModelConfig, compute_dtype: torch.dtype):
        self.gf, self.cfg, self.dtype = gf, cfg, compute_dtype

    def has(self, name: str) -> bool:
        return name in self.gf.tensors

    def matrix(self, name: str, device, dense: bool = True, row: bool = False, gemm: bool = True,
               head: bool = False) -> QuantTensor:
        """A weight matrix on `device`. On CPU (dense=True) its working form is made now, so load time
        is honest and the first window does not pay for it: in bfloat16 (the fast mode) int4 groups where
        the type allows (engine.cpu_int4), else a dequantized copy; on a GPU (dense=True) it is repacked
        into the streaming layout where a kernel reads it (engine.kernels.packed)."""
        if name not in self.gf.tensors:
            raise ModelFileError(self.gf.path, f"missing tensor {name!r}")
        try:
            qt = QuantTensor.from_gguf(self.gf, name, device=device, compute_dtype=self.dtype)
            if row:     # a [d] vector as a one-row matrix
                qt = QuantTensor(qt.data, qt.qtype, (1, qt.shape[-1]), qt.compute_dtype)
            if dense and qt.device.type == "cpu" and self.dtype == torch.bfloat16 and qt.to_int4(gemm, head):
                if not qt.q8:                   # (a Q8_0 head's form is the file's pages themselves)
                    self.gf.release(name)       # the file's pages of it leave resident memory
            elif dense and qt.device.type == "cpu":
                for m in ([qt] if len(qt.shape) == 2 else [qt.expert(e) for e in range(qt.shape[0])]):
                    m.dense_weight()
            elif dense:
                qt.repack()
            return qt
        except ModelFileError:
            raise
        except Exception as e:  # UnsupportedQuantError and friends: name the file
            raise ModelFileError(self.gf.path, f"tensor {name!r}: {e}") from None

    def vector(self, name: str, device) -> torch.Tensor:
        return self.matrix(name, "cpu", dense=False).dequantize().float().reshape(-1).to(device)

    def layer(self, i: int, device) -> LayerWeights:
        p = f"blk.{i}."
        opt_v = lambda n: self.vector(p + n, device) if self.has(p + n) else None  # noqa: E731
        ffn_norm = self.cfg.ffn_norm_name             # post_attention_norm in glm4moe and the hybrids
        lw = LayerWeights(
            attn_norm=self.vector(p + "attn_norm.weight", device), ffn_norm=self.vector(p + ffn_norm, device),
            post_attn_norm=None if ffn_norm.startswith("post_attention") else opt_v("post_attention_norm.weight"),
            post_ffw_norm=opt_v("post_ffw_norm.weight"),
        )
        if self.cfg.is_recurrent(i):
            lw.delta_net = self.delta_net(p, device)
        else:
            lw.wq, lw.wk = self.matrix(p + "attn_q.weight", device), self.matrix(p + "attn_k.weight", device)
            lw.wv, lw.wo = self.matrix(p + "attn_v.weight", device), self.matrix(p + "attn_output.weight", device)
            lw.q_norm, lw.k_norm = opt_v("attn_q_norm.weight"), opt_v("attn_k_norm.weight")
            lw.bq, lw.bk, lw.bv = opt_v("attn_q.bias"), opt_v("attn_k.bias"), opt_v("attn_v.bias")
            if lw.bq is not None:
                lw.bqkv = torch.cat((lw.bq, lw.bk, lw.bv))
            lw.qkv = stack_packed([lw.wq, lw.wk, lw.wv])
        if self.cfg.layer_is_moe(i):
            lw.router = self.matrix(p + "ffn_gate_inp.weight", device, gemm=False)     # tiles of its real rows
            lw.gate_exps = self.matrix(p + "ffn_gate_exps.weight", device)
            lw.up_exps = self.matrix(p + "ffn_up_exps.weight", device)
            lw.down_exps = self.matrix(p + "ffn_down_exps.weight", device)
            lw.exp_probs_b = opt_v("exp_probs_b.bias")
            # the shared expert's gate as a one-row matrix: its product with a tile goes through the
            # row-invariant linear (on a GPU a torch matrix-vector product's bits depend on the row count)
            if self.has(p + "ffn_gate_inp_shexp.weight"):
                lw.shexp_gate = self.matrix(p + "ffn_gate_inp_shexp.weight", device, row=True, gemm=False)
            if self.cfg.shexp_ff:
                lw.gate_shexp = self.matrix(p + "ffn_gate_shexp.weight", device)
                lw.up_shexp = self.matrix(p + "ffn_up_shexp.weight", device)
                lw.down_shexp = self.matrix(p + "ffn_down_shexp.weight", device)
                lw.shexp_gate_up = stack_packed([lw.gate_shexp, lw.up_shexp])
        else:
            lw.w_gate = self.matrix(p + "ffn_gate.weight", device)
            lw.w_up = self.matrix(p + "ffn_up.weight", device)
            lw.w_down = self.matrix(p + "ffn_down.weight", device)
            lw.gate_up = stack_packed([lw.w_gate, lw.w_up])
        return lw

    def delta_net(self, p: str, device) -> DeltaNetWeights:
        opt_m = lambda n: self.matrix(p + n, device) if self.has(p + n) else None  # noqa: E731
        v = lambda n: self.vector(p + n, device)  # noqa: E731
        conv = self.matrix(p + "ssm_conv1d.weight", "cpu", dense=False).dequantize().float()
        w = DeltaNetWeights(conv=conv.reshape(self.cfg.ssm_conv_dim, self.cfg.ssm_conv).to(device),
                            dt_bias=v("ssm_dt.bias"), a=v("ssm_a"), norm=v("ssm_norm.weight"),
                            out=self.matrix(p + "ssm_out.weight", device), qkv=opt_m("attn_qkv.weight"),
                            gate=opt_m("attn_gate.weight"), beta=opt_m("ssm_beta.weight"),
                            alpha=opt_m("ssm_alpha.weight"), ba=opt_m("ssm_ba.weight"))
        if w.qkv is None or w.gate is None:
            w.qkv = w.gate = None
            w.qkvz = self.matrix(p + "ssm_in.weight", device)       # a missing tensor: named by matrix()
        if w.beta is None or w.alpha is None:
            w.beta = w.alpha = None
            w.ba = self.matrix(p + "ssm_ba.weight", device)
        if w.qkv is not None:
            w.qkv_gate = stack_packed([w.qkv, w.gate])
        if w.beta is not None:
            w.beta_alpha = stack_packed([w.beta, w.alpha])
        return w

    def embedding(self, device) -> QuantTensor:
        return self.matrix("token_embd.weight", device, dense=False)   # rows are decoded as looked up

    def head(self, device) -> HeadWeights:
        name = "token_embd.weight" if self.cfg.tied_embeddings else "output.weight"
        return HeadWeights(self.vector("output_norm.weight", device), self.matrix(name, device, gemm=False, head=True))

    def drafter(self, device) -> DrafterWeights | None:
        if self.cfg.n_mtp <= 0:
            return None
        i = self.cfg.n_layers
        p = f"blk.{i}.nextn."
        opt_m = lambda n, **kw: self.matrix(p + n, device, **kw) if self.has(p + n) else None  # noqa: E731
        return DrafterWeights(
            block=self.layer(i, device), eh_proj=self.matrix(p + "eh_proj.weight", device),
            enorm=self.vector(p + "enorm.weight", device), hnorm=self.vector(p + "hnorm.weight", device),
            head_norm=self.vector(p + "shared_head_norm.weight", device),
            head=opt_m("shared_head_head.weight", gemm=False, head=True), embed=opt_m("embed_tokens.weight"))
