"""Loading: from an EngineConfig to stages, pipeline, drafter and tokenizer, plus the effective
configuration that says what really runs and why anything fell back."""
from __future__ import annotations

import ctypes
import importlib.util
import os
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from gguf.constants import GGMLQuantizationType as QT

from engine import cpu_gemm, group_choice, layout
from engine.cpu_thread import lone_cpu, on_compute_thread
from engine.config import STATE_RING, ModelConfig, check_tensor_shapes, model_config
from engine.draft_chain import chains_drafts
from engine.draft_guard import guards
from engine.drafts import MTP_SOURCES, DraftPlan, MtpDrafter, ring_rows
from engine.errors import ConfigError, ModelFileError, OutOfMemoryError
from engine.gguf_file import GGUFFile, read_gguf
from engine.kernels import packed
from engine.messages import EffectiveConfig, EngineConfig, ModelInfo, StageInfo
from engine.model_files import resolve_model, trained_mtp
from engine.pipeline import Pipeline, TileSizes
from engine.quant import UnsupportedQuantError, check_supported
from engine.stage import Stage
from engine.tokenizer import Tokenizer
from engine.model_info import INT4_PARTS, compact_orders, cpu_matrix_bytes, gpu_matrix_bytes, layer_bytes, model_info
from engine.weights import WeightLoader

# STRATA_PROMPT_TILE: a dense model's GPU prompt tile (and chunk) for measuring (tests/gpu/run_prompt_tiles.sh)
# (512 rows: each weight is dequantized once per tile for its rows, engine.kernels.stream_matmul.PROMPT_KERNEL)
_GPU_PROMPT = int(os.environ.get("STRATA_PROMPT_TILE", "512"))
# STRATA_CPU_PROMPT_TILE: the fast CPU mode's prompt tile (and at least its chunk), for measuring. 128: the int4
# kernel does more per weight it unpacks at more rows (this 2-core machine, 2026-12-04, strata bench --streams 1
# --max-tokens 8/16 --prompt-tokens N: Gemma 3 270M at 100 / 400 / 2,000 tokens 297 / 320 / 306 tok/s with
# 32-row tiles, 348 / 393 / 347 with 64, 400 / 391-394 / 368 with 128, 401 at 400 with 256; the default
# model at 400 tokens 397 -> 444 with 128, 432 with 256)
_CPU_PROMPT = int(os.environ.get("STRATA_CPU_PROMPT_TILE", "128"))
TILE_SIZES = {"cpu": TileSizes(prompt=32, decode=1, chunk=64),
              # CPU stages in the fast mode (int4 matrices and head, Stage.rows_free): a window's decode rows
              # (several streams, a slot's proposals) share tiles of up to 8, a lone row keeps its 1-row tile
              "cpu-rows": TileSizes(prompt=_CPU_PROMPT, decode=8, chunk=max(64, _CPU_PROMPT), solo=1),
              "cuda": TileSizes(prompt=_GPU_PROMPT, decode=16, chunk=max(256, _GPU_PROMPT), solo=1),
              # MoE on a GPU: a prompt tile reads every expert it routes to once (engine.kernels.moe_grouped),
              # so larger tiles read them for more rows: 512-row tiles, 512 prompt rows a window
              "cuda-moe": TileSizes(prompt=512, decode=16, chunk=512, solo=1)}


@dataclass
class LoadedModel:
    gf: GGUFFile
    cfg: ModelConfig
    tokenizer: Tokenizer
    pipeline: Pipeline
    drafter: MtpDrafter | None
    plan: DraftPlan
    groups: list[list[int]]
    effective: EffectiveConfig
    info: ModelInfo
    load_seconds: float


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _dtype(config: EngineConfig) -> torch.dtype:
    """Weights' compute dtype (the residual stream is always float32). auto: bfloat16, which on CPU
    stages is the fast mode (int4 weights, engine.cpu_int4); float32 is the reference numerics (dense
    weights, as HF transformers computes)."""
    if config.dtype in DTYPES:
        return DTYPES[config.dtype]
    if config.dtype != "auto":
        raise ConfigError(f"--dtype {config.dtype!r}: use auto, {', '.join(DTYPES)}")
    return torch.bfloat16


def weights_mode(devices: list[str], dtype: torch.dtype, types=()) -> str:
    """What the effective configuration says the stages keep of each matrix (on GPU stages, per quantized
    type among `types`, the model's matrices' types: packed.gpu_form)."""
    cpu = "cpu" in devices
    if cpu and dtype == torch.bfloat16:
        one = ", ".join(t for t, n in INT4_PARTS.items() if n == 1)
        two = ", ".join(t for t, n in INT4_PARTS.items() if n == 2)
        mode = f"CPU: int4 groups with bfloat16 scales where the type allows ({one}; {two} as two int4 parts), " \
               f"else dense bfloat16; {cpu_gemm.describe()} (fast mode; --dtype float32 for the reference numerics)"
    elif cpu:
        mode = f"CPU: dense {str(dtype).replace('torch.', '')} copies" + \
               (" (reference numerics)" if dtype == torch.float32 else "")
    else:
        mode = ""
    if any(d != "cpu" for d in devices):
        forms = ", ".join(f"{t.name} in {packed.gpu_form(t)}" for t in sorted(set(types), key=lambda t: t.name)
                          if t not in (QT.F32, QT.F16, QT.BF16))
        mode += ("; " if mode else "") + "GPU: quantized, repacked for streaming" + (f" ({forms})" if forms else "")
    return mode


def _matrix_types(gf: GGUFFile) -> list:
    """The types of the matrices the stages multiply by (the token embedding only where it is the head too)."""
    tied = "output.weight" not in gf.tensors
    return [t.qtype for name, t in gf.tensors.items() if len(t.shape) > 1 and (tied or name != "token_embd.weight")]


DECODE_KERNELS = ("q4k-mma", "dp4a", "imma", "bf16")


def _decode_kernel(config: EngineConfig, devices: list[str], notes: list[str]) -> str:
    """The matmul every decode and verify row runs on GPU stages, one choice per load (a row's numerics
    then never depend on the others): q4k-mma (Q4_K on int8 tensor cores, 8 rows for about the cost of
    one, its weights repacked in its order; the other types run dp4a: H200, llama-3-8b Q4_K, 0.9x dp4a's
    speed alone, 1.27x at 8 streams), dp4a (int8 dot products on CUDA cores, rows one by one), imma (int8
    tensor cores, 16 rows for about the cost of one) or bf16 (Q4_K dequantized to bfloat16 on tensor
    cores, x unrounded). auto = q4k-mma where every GPU stage can run it (compute capability 8.0+,
    triton with Gluon), else dp4a; $STRATA_DECODE_KERNEL overrides auto (and also takes the float kernels
    gemv / mma, for measuring). Not a function of the layout, since a request's tokens must not depend on
    the slots beside it."""
    if config.decode_kernel not in ("auto", *DECODE_KERNELS):
        raise ConfigError(f"--decode-kernel {config.decode_kernel!r}: use auto, {', '.join(DECODE_KERNELS)}")
    if not any(d.startswith("cuda") for d in devices):
        if config.decode_kernel != "auto":
            notes.append(f"--decode-kernel {config.decode_kernel} applies to GPU stages only: not used")
        return ""
    from engine.kernels import q4k_mma, stream_matmul       # import triton: GPU loads only
    cuda = [torch.device(d) for d in devices if d.startswith("cuda")]
    mma_ok = all(q4k_mma.available(d) for d in cuda)
    kernel = config.decode_kernel
    if kernel == "auto":
        kernel = os.environ.get("STRATA_DECODE_KERNEL", "q4k-mma" if mma_ok else "dp4a")
    if kernel == "q4k-mma" and not mma_ok:
        raise ConfigError("--decode-kernel q4k-mma needs GPUs of compute capability 8.0 or newer and a triton "
                          "with Gluon (3.6+): use dp4a")
    stream_matmul.DECODE_KERNEL = kernel
    packed.MMA_Q4K = kernel == "q4k-mma"          # Q4_K weights repacked in its order as they load
    return kernel


def _keeps_ring(plan: DraftPlan, groups: list[list[int]]) -> bool:
    """Whether the MTP drafter keeps a ring of paused positions (MtpDrafter.keep_ring): where a draft guard
    can pause its drafts (engine.draft_guard.guards); paused windows of decode rows then skip the drafter,
    chained or not (on a CPU stage its layer over every paused window had cost a lone request 8-16% on
    prose and edit prompts, 2026-12-06)."""
    return plan.follows and guards(len(groups))


def _chooses_groups(config: EngineConfig, plan: DraftPlan, groups: list[list[int]], devices: list[str]) -> bool:
    """Whether --batch-groups auto measures serial batch MTP against piped MTP (engine.group_choice): MTP
    drafts in either form (--spec or --piped-mtp) over several stages, where auto made several groups."""
    return (str(config.batch_groups).strip() == "auto" and len(devices) > 1 and len(groups) > 1 and plan.mtp
            and (plan.spec > 1 or plan.piped > 0))


def cpu_threads(devices: list[str], notes: list[str]) -> int:
    """Intra-op threads for each CPU stage's thread; $STRATA_CPU_THREADS overrides. A lone CPU stage
    runs on the compute thread (engine.cpu_thread) on every core. CPU stages beside others share the cores
    less one (the engine's own threads, the tokenizer and the server need one) and run 1 thread each on
    a 2-core machine: there a second OpenMP team makes every team's regions slow (SmolLM2, 2026-12-01:
    a decode step 11 ms with 1 thread against 24-30 ms with 2 on a thread that was not the first)."""
    n_cpu = sum(d == "cpu" for d in devices)
    if not n_cpu:
        return 0
    cores = os.cpu_count() or 1
    threads = int(os.environ.get("STRATA_CPU_THREADS", "0")) or (
        cores if lone_cpu(devices) else max(1, (cores - 1) // n_cpu))
    if n_cpu > 1:
        notes.append(f"{n_cpu} CPU stages share {cores} cores: {threads} thread(s) per stage")
    return threads


def trim_heap() -> None:
    """Give the C heap's freed pages back to the OS (glibc keeps them after the large temporaries a CPU
    stage's load makes, and the process's resident memory would count them); a no-op elsewhere."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def check_quant_types(gf: GGUFFile) -> None:
    """Refuse a file with a tensor type we cannot decode before reading anything else."""
    for t in gf.tensors.values():
        try:
            check_supported(t.qtype)
        except UnsupportedQuantError as e:
            raise ModelFileError(gf.path, f"tensor {t.name!r}: {e}") from None


def _place(gf: GGUFFile, cfg: ModelConfig, config: EngineConfig, devices: list[str], dtype: torch.dtype, ctx: int,
           groups: list[list[int]], plan: DraftPlan, notes: list[str]) -> tuple[list[int], frozenset[str]]:
    """(stage start layers (explicit, or `auto`), the types GPU stages keep in the file's layout), checked
    against each device's free memory.

    Bytes each stage holds: CPU stages keep a dense copy of every matrix in the compute dtype (the file
    stays memory-mapped; the embedding is decoded row by row), GPU stages the quantized bytes, repacked
    for streaming (engine.kernels.packed: larger than the file's for Q6_K, Q5_K, the IQ types...). Where
    that does not fit but the file's own bytes do, the types whose streaming form grows most stay in the
    file's layout, one more at a time until it fits (model_info.compact_orders), as llama.cpp would fit
    them: their matrices then run the slower GGUF-layout kernel, and a note says so. `auto` balances the
    bytes each stage reads per window: the last stage reads the head once per pick row and the MTP layer
    once per catch-up and chain step, so with drafts it takes fewer layers."""
    on_cpu = devices[0] == "cpu"
    orders = [frozenset()] if on_cpu else compact_orders(gf)
    full: list[int] = []                    # the stages' needs with every type repacked (the first attempt)
    for i, keep in enumerate(orders):
        said: list[str] = []                # the notes of the attempt that fits only
        starts, need = _stage_starts(gf, cfg, config, devices, dtype, ctx, groups, plan, said, keep)
        full = full or need
        try:
            layout.check_fits(need, devices)
        except OutOfMemoryError:
            if i == len(orders) - 1:
                raise
            continue
        notes.extend(said)
        if keep:
            more = sum(full) - sum(need)
            notes.append(f"{', '.join(sorted(keep))} matrices stay in the file's layout on the GPU: their streaming "
                         f"form ({more / layout.GiB:.2f} GiB more) does not fit, so they run the slower GGUF-layout "
                         f"kernel (a smaller --ctx / --parallel or another GPU gives them room)")
        return starts, keep
    raise AssertionError("compact_orders gives at least one order")


def _stage_starts(gf: GGUFFile, cfg: ModelConfig, config: EngineConfig, devices: list[str], dtype: torch.dtype,
                  ctx: int, groups: list[list[int]], plan: DraftPlan, notes: list[str],
                  keep: frozenset[str]) -> tuple[list[int], list[int]]:
    """_place's (stage start layers, bytes each stage needs) with the types in keep as stored (unchecked)."""
    on_cpu = devices[0] == "cpu"
    dense = torch.finfo(dtype).bits // 8 if on_cpu else None
    fast = dtype == torch.bfloat16
    blocks = layer_bytes(gf, cfg.n_layers + cfg.n_mtp, dense, fast, keep)
    lb, drafter = blocks[:cfg.n_layers], sum(blocks[cfg.n_layers:cfg.n_layers + 1])
    head_t = gf.tensors["token_embd.weight" if cfg.tied_embeddings else "output.weight"]
    # GPU: the embedding's file blocks (never repacked); CPU: rows read from the mapped file
    embd = 0 if on_cpu else gf.tensors["token_embd.weight"].nbytes
    if on_cpu:      # a Q8_0 head in the fast mode: the file's blocks (engine.cpu_gemm.q8_head)
        head = head_t.nbytes if fast and cpu_gemm.q8_head(head_t.qtype, head_t.torch_shape) else \
            cpu_matrix_bytes(head_t, dense, fast)
    else:
        head = gpu_matrix_bytes(head_t, keep)
    starts = layout.parse_split(config.layer_split, cfg.n_layers, len(devices))
    if starts is None:
        depth = plan.depth(pipelined=len(groups) > 1) if plan.mtp else 0
        per_window = head + depth * (head + drafter) + (drafter if depth else 0)
        starts = layout.auto_split(lb, [layout.free_bytes(d) if d != "cpu" else 1 for d in devices], embd, per_window)
        if depth and len(devices) > 1:
            notes.append(f"auto split: the last stage also reads the head and the MTP layer about {depth + 1} times "
                         f"per window, so it holds {cfg.n_layers - starts[-1]} of {cfg.n_layers} layers")
    ends = starts[1:] + [cfg.n_layers]
    cache = [cfg.cache_bytes(i, ctx, config.parallel + 1) for i in range(cfg.n_layers + 1)]   # + the nextn block's
    last = len(starts) - 1
    # GPU prompt tiles: the widest weight dequantized for the tile (fused gate|up, or the head; bfloat16)
    # and the tile's widest activations (float32)
    ff = max(cfg.n_ff, cfg.shexp_ff, cfg.n_embd)
    work = 0 if on_cpu else max(2 * ff, cfg.vocab_size) * cfg.n_embd * 2 + TILE_SIZES["cuda"].prompt * 2 * ff * 4
    # the drafter's ring of paused positions, where a draft guard can pause drafts (Scheduler)
    ring = 0
    if _keeps_ring(plan, groups):
        ring = ring_rows(ctx, config.parallel, cfg.n_embd) * (config.parallel + 1) * cfg.n_embd * 4
    need = [sum(lb[a:b]) + sum(cache[a:b]) + work + (embd if k == 0 else 0)
            + (head + (drafter + cache[-1] + ring if plan.mtp else 0) if k == last else 0)
            for k, (a, b) in enumerate(zip(starts, ends))]
    return starts, need


def _capture_tiles(stages: list[Stage], pipeline: Pipeline) -> None:
    """Every stage's tile graphs, one stage at a time, before any stage thread makes CUDA calls. A GPU out
    of memory here (the weights fitted, the graphs' buffers did not: CUDA says so as an AcceleratorError
    at the capture's end) becomes the load's OutOfMemoryError, with what to change."""
    if any(s.use_graph for s in stages):   # the load's freed temporaries: a graph's memory pool is its own
        torch.cuda.empty_cache()
    for s in stages:
        try:
            for n in sorted({pipeline.tiles.prompt} | pipeline.tiles.decode_sizes()):
                s.capture(n, with_logits=n in pipeline.tiles.decode_sizes())
        except RuntimeError as e:
            if "out of memory" not in str(e):
                raise
            raise OutOfMemoryError(
                f"stage {s.index} ({s.device}) ran out of memory capturing its tile graphs after its "
                f"{s.weight_bytes / layout.GiB:.2f} GiB of weights loaded: move layers to another device with "
                f"--layer-split, or lower --parallel / --ctx") from None


def _attach_mtp(gf: GGUFFile, cfg: ModelConfig, notes: list[str]) -> bool:
    """Give a model without an MTP layer the one trained for it (engine.model_files.trained_mtp), if
    there is one and it was trained for exactly this file (gf.sidecar then names it); else a note why not."""
    side, why = trained_mtp(gf.path, cfg.arch, cfg.n_embd, cfg.n_layers)
    if side is None:
        notes.extend([why] if why else [])
        return False
    gf.attach(side, (f"{cfg.arch}.block_count", f"{cfg.arch}.nextn_predict_layers"))
    return True


def load_model(config: EngineConfig, progress=lambda f, m: None) -> LoadedModel:
    if lone_cpu(layout.parse_devices(config.devices)):    # its stage will run there (engine.cpu_thread)
        return on_compute_thread(_load_model, config, progress)
    return _load_model(config, progress)


@dataclass
class Placement:
    """What a configuration loads, checked against the file and the devices' free memory before any weight
    is read: the stage start layers and the notes on what falls back."""
    path: str
    gf: GGUFFile
    cfg: ModelConfig
    devices: list[str]
    ctx: int
    groups: layout.GroupLayout
    dtype: torch.dtype
    decode_kernel: str
    plan: DraftPlan
    starts: list[int]
    notes: list[str]
    compact: frozenset[str] = frozenset()     # types GPU stages keep in the file's layout, to fit (_place)


def place(config: EngineConfig, progress=lambda f, m: None) -> Placement:
    """The file's header against the configuration (raises ModelFileError, ConfigError, OutOfMemoryError):
    `strata batch-test` runs it before its reference so that a bad layout is said at once."""
    notes: list[str] = []
    path = resolve_model(config.model)
    progress(0.0, f"reading {Path(path).name}")
    gf = read_gguf(path)
    cfg = model_config(gf)
    drafts_on = config.draft in MTP_SOURCES and (config.spec > 1 or config.piped_mtp > 0)
    if cfg.n_mtp == 0 and drafts_on and _attach_mtp(gf, cfg, notes):    # a trained layer beside the model
        cfg = model_config(gf)
    check_quant_types(gf)
    check_tensor_shapes(gf, cfg)
    tokens = gf.get("tokenizer.ggml.tokens")
    if isinstance(tokens, list) and len(tokens) > cfg.vocab_size:
        raise ModelFileError(gf.path, f"{len(tokens):,} tokens in the vocabulary but token_embd.weight has "
                                      f"{cfg.vocab_size:,} rows")
    devices = layout.parse_devices(config.devices)
    if any(d != "cpu" for d in devices) and importlib.util.find_spec("triton") is None:
        raise ConfigError("GPU stages run Triton kernels, and triton is not installed: pip install triton "
                          "(or use --devices cpu)")
    layout.check_layers(cfg.n_layers, len(devices))
    if config.ctx < 16:
        raise ConfigError(f"--ctx {config.ctx} is too small (at least 16)")
    ctx = config.ctx
    if ctx > cfg.context_length:   # allowed, as llama.cpp does; said once here and in the settings panel
        notes.append(f"ctx {ctx} is above the model's trained context ({cfg.context_length} tokens): positions "
                     f"past {cfg.context_length} are outside what it was trained on, so replies there may degrade "
                     f"(RoPE is not rescaled)")
    groups = layout.slot_groups(config.parallel, config.batch_groups, len(devices))
    if groups.note:
        notes.append(groups.note)
    dtype = _dtype(config)
    decode_kernel = _decode_kernel(config, devices, notes)
    plan = DraftPlan(config.draft, max(1, config.spec), config.spec_min_p, max(0, config.piped_mtp),
                     has_mtp=cfg.n_mtp > 0)
    if cfg.ssm_conv:                      # a hybrid: what a slot's state ring holds (engine.gdn)
        plan.max_depth = STATE_RING - cfg.ssm_conv
    starts, compact = _place(gf, cfg, config, devices, dtype, ctx, groups.groups, plan, notes)
    return Placement(str(path), gf, cfg, devices, ctx, groups, dtype, decode_kernel, plan, starts, notes, compact)


def _load_model(config: EngineConfig, progress) -> LoadedModel:
    t0 = time.perf_counter()
    p = place(config, progress)
    path, gf, cfg, devices, ctx, groups = p.path, p.gf, p.cfg, p.devices, p.ctx, p.groups
    dtype, decode_kernel, plan, starts, notes = p.dtype, p.decode_kernel, p.plan, p.starts, p.notes
    packed.FIT_KEEP = p.compact             # GPU stages: these types stay in the file's layout (_place)
    ends = starts[1:] + [cfg.n_layers]
    threads = cpu_threads(devices, notes)
    tok = Tokenizer.from_gguf(gf)
    progress(0.05, "tokenizer ready")
    loader = WeightLoader(gf, cfg, dtype)
    done = [0]

    def on_layer(i):
        done[0] += 1
        progress(0.05 + 0.9 * done[0] / cfg.n_layers, f"layer {done[0]}/{cfg.n_layers}")

    stages = [Stage(k, dev, a, b, loader, cfg, config.parallel, ctx, k == 0, k == len(devices) - 1, dtype, on_layer)
              for k, (dev, a, b) in enumerate(zip(devices, starts, ends))]
    lone = lone_cpu(devices)                # the stage's own thread has every core (engine.cpu_thread)
    if devices.count("cpu") == 1 and stages[-1].device.type == "cpu" and not lone:
        stages[-1].head_threads = os.cpu_count() or 1
    if dtype == torch.float32 and any(d != "cpu" for d in devices):
        notes.append("dtype float32 on GPU: slower than bfloat16")
    drafter = None
    if plan.mtp:
        last = stages[-1]
        drafter = MtpDrafter(loader.drafter(last.device), cfg, stages[0].embedding if len(stages) == 1
                             else loader.embedding(last.device), last.head, config.parallel, ctx, last.device, dtype)
        drafter.probs = plan.min_p > 0
        if _keeps_ring(plan, groups.groups):   # made here, on a lone CPU stage's own thread: see
            drafter.keep_ring(ring_rows(ctx, config.parallel, cfg.n_embd))     # engine.cpu_thread
            if drafter.ring is not None and last.use_graph:     # filled by the decode graphs (Stage.capture)
                last.ring_of = drafter
    rows_free = all(s.rows_free for s in stages)
    if (config.spec > 1 or config.piped_mtp > 0) and "cpu" in devices and not rows_free:
        notes.append("drafts on CPU stages: decode rows run one per matmul call there (dense or routed weights: "
                     "--dtype float32 or an MoE/hybrid model), so each proposal costs about one more decode row")
    if (config.spec > 1 or config.piped_mtp > 0) and config.draft == "mtp" and drafter is None:
        notes.append("MTP drafts asked for but the model has no MTP (nextn) layer: no drafts (try --draft lookup)")
    kind = "cuda" if any(d.startswith("cuda") for d in devices) else "cpu"
    kind += "-moe" if kind == "cuda" and cfg.is_moe else "-rows" if kind == "cpu" and rows_free else ""
    pipeline = Pipeline(stages, TILE_SIZES[kind], threads, lone)
    if any(s.use_graph for s in stages):
        progress(0.96, "capturing CUDA graphs")
    try:                            # a failure from here on closes the stage threads it started
        _capture_tiles(stages, pipeline)
        if drafter is not None and plan.follows and stages[-1].use_graph:
            depths = {plan.depth(pipelined=False), plan.depth(pipelined=True)}
            if guards(len(groups.groups)) or _chooses_groups(config, plan, groups.groups, devices):
                depths |= set(range(1, plan.depth(pipelined=False)))    # a lone group's guard may draft at any depth
            drafter.capture(pipeline.tiles, depths)
            if chains_drafts(pipeline, drafter, plan, cfg.ssm_conv):
                drafter.capture_windows(pipeline.tiles, depths, config.parallel)
        if _chooses_groups(config, plan, groups.groups, devices):
            progress(0.98, "measuring serial and piped drafts")
            try:
                n, note = group_choice.choose(pipeline, drafter, plan, config.parallel, len(groups.groups), ctx,
                                              tok.encode(group_choice.FILLER), cfg.ssm_conv)
                groups = layout.slot_groups(config.parallel, str(n), len(devices))
            except (RuntimeError, torch.OutOfMemoryError) as e:     # the layout stays as auto made it
                note = f"batch-groups auto: serial and piped drafts not measured ({e}); {len(groups.groups)} groups"
            notes.append(note)
    except BaseException:
        pipeline.close()
        raise
    if "cpu" in devices:
        trim_heap()
    progress(1.0, "ready")
    info = model_info(gf, cfg)
    eff = EffectiveConfig(
        model_path=str(path), model_name=cfg.name, arch=cfg.arch, n_layers=cfg.n_layers,
        stages=[StageInfo(index=s.index, device=str(s.device), first_layer=s.first, end_layer=s.end,
                          weight_bytes=s.weight_bytes, kv_bytes=s.kv_bytes, has_head=s.head is not None)
                for s in stages],
        parallel=config.parallel, groups=groups.groups, ctx=ctx, dtype=str(dtype).replace("torch.", ""),
        draft=config.draft, spec=plan.spec, spec_min_p=plan.min_p, piped_mtp=plan.piped, mtp_layers=cfg.n_mtp,
        mtp_file=str(gf.sidecar or ""),
        decode_kernel=decode_kernel, fallbacks=notes,
        weights=weights_mode(devices, dtype, _matrix_types(gf)))
    return LoadedModel(gf, cfg, tok, pipeline, drafter, plan, groups.groups, eff, info, time.perf_counter() - t0)
