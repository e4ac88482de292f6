"""`strata bench`: decode tok/s per stream and in total for 1..N concurrent streams, time to first
token, prompt-read tok/s, drafts offered/accepted, tokens per window and per-stage busy %.

tok_s_decode is the decode-only aggregate (the streams' decode rates added up, comparable with
llama-batched-bench's S_TG); tok_s_total is generated tokens over wall time, prompt reading included.
Stage busy % is GPU time on GPU stages (CUDA events), executor time on CPU stages."""
from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from pathlib import Path

import msgspec
import psutil

from app import bench_prompts
from app.engine_flags import add_engine_flags, engine_config_from_args
from app.local_engine import local_client
from app.run_requests import run_together
from engine.errors import EngineError
from engine.group_choice import FILLER
from engine.messages import AddRequest, SamplingParams, Telemetry, TokenDelta

BENCH_TEXT = FILLER + " "


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_engine_flags(p)
    p.add_argument("--streams", default="1,2,4", help="comma-separated concurrent stream counts")
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--prompt-tokens", type=int, default=64,
                   help="prompt length per stream (the filler kind, sized to the model's tokenizer; the others are "
                        "their own length)")
    p.add_argument("--prompt-kind", choices=bench_prompts.KINDS, default="filler",
                   help="filler text, or a bundled code / prose / edit (return a file with one rename) prompt")
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling's share (with --temperature > 0)")
    p.add_argument("--read-beside", type=int, default=0, metavar="N",
                   help="also measure one stream decoding while another reads an N-token prompt: the decoding "
                        "stream's longest gap between tokens, and the read's tok/s against the same read alone")
    p.add_argument("--replay-accept", type=float, default=0.7, metavar="P",
                   help="with --draft replay: each level's requests run once first, then again with their own "
                        "tokens as proposals, each kept with probability P (0-1)")
    p.add_argument("--window-costs", default="", metavar="ROWS",
                   help="also measure a decode window of each of these row counts (e.g. 1,2,4,8) by part, before the "
                        "streams: the layers, + the picks, + the drafter (where drafts are on)")
    p.add_argument("--json", action="store_true")


def bench_prompt(n_tokens: int, tag: str, words_per_token: float) -> str:
    """About n_tokens of filler text (words_per_token: the model's, from filler_words_per_token); streams
    (and levels) differ in their first words so prefix reuse cannot help."""
    n_words = max(1, round(n_tokens * words_per_token))
    words = (f"Stream {tag}. " + BENCH_TEXT * (n_words // 20 + 2)).split(" ")
    return " ".join(words[:n_words])


def filler_words_per_token(eng) -> float:
    """Words of the filler text per token of the loaded model's tokenizer, from one request of a
    400-word text (its first word shares nothing with the streams' prompts) and one token: so that
    `--prompt-tokens N` gives prompts of about N tokens."""
    probe = " ".join(("Calibration. " + BENCH_TEXT * 16).split(" ")[:400])
    done = run_together(eng, [AddRequest(request_id="calibrate", prompt=probe,
                                         sampling=SamplingParams(max_tokens=1))])["calibrate"].done
    return 400 / max(1, done.prompt_tokens)


def run_level(eng, n: int, args, tag: str) -> dict:
    sp = SamplingParams(temperature=args.temperature, top_p=args.top_p, max_tokens=args.max_tokens, ignore_eos=True,
                        seed=1)
    kind = getattr(args, "prompt_kind", "filler")
    reqs = [AddRequest(request_id=f"{tag}{i}", sampling=msgspec.structs.replace(sp, seed=i),
                       prompt=bench_prompts.prompt(kind, f"{tag}{i}", bench_prompt(args.prompt_tokens, f"{tag}{i}",
                                                                                    args.words_per_token)))
            for i in range(n)]
    if eng.ready.config.draft == "replay":        # a first run gives each request's own tokens to propose
        first = run_together(eng, [msgspec.structs.replace(r, request_id=r.request_id + "-rec") for r in reqs])
        reqs = [msgspec.structs.replace(r, sampling=msgspec.structs.replace(
            r.sampling, replay=first[r.request_id + "-rec"].tokens, replay_accept=args.replay_accept)) for r in reqs]
    tel: list[Telemetry] = []
    base = eng.latest_telemetry
    t0 = time.monotonic()
    out = run_together(eng, reqs, tel.append)
    wall = time.monotonic() - t0
    by_pos = _accepted_by_pos(eng, base)
    dones = [o.done for o in out.values()]
    for d in dones:             # a figure from a request that failed part way is no figure
        if d.finish_reason == "error":
            raise EngineError(f"request {d.request_id} ended in an error after {d.completion_tokens} of "
                              f"{args.max_tokens} tokens: {d.error}")
    gen = sum(d.completion_tokens for d in dones)
    decode_rates = [(d.completion_tokens - 1) / d.decode_s for d in dones if d.decode_s > 0]
    first, last = (tel[0], tel[-1]) if len(tel) >= 2 else (None, None)
    span = (last.t - first.t) if first else 0.0
    busy = [round(100 * (b - a) / span, 1) for a, b in zip(first.stage_busy_s_total, last.stage_busy_s_total)] \
        if span > 0 else []
    # chained windows (one GPU, greedy) that went onto the device before their feeding window ended: below
    # 100 the host's part of a window outlasted the window's kernels and the device waited for it
    ahead = last.chained_total - first.chained_total if first else 0
    late = last.chained_late_total - first.chained_late_total if first else 0
    # windows the draft guard (engine.draft_guard) ran without drafts, where they cost more than they gave
    paused = last.drafts_paused_total - first.drafts_paused_total if first else 0
    all_windows = last.windows_total - first.windows_total if first else 0
    offered = sum(d.drafts_offered for d in dones)
    accepted = sum(d.drafts_accepted for d in dones)
    windows = sum(d.windows for d in dones)
    # a decode window's cost and rows (issue 13: where drafts can pay): a stream's decode time over its
    # windows after the first token; its group's rows per window, the group's streams each with their
    # current token and their proposals
    window_ms = [1e3 * d.decode_s / (d.windows - 1) for d in dones if d.windows > 1]
    groups = min(n, len(eng.ready.config.groups) or 1)
    return {
        "streams": n, "wall_s": round(wall, 2), "prompt_kind": kind,
        "prompt_tokens": round(sum(d.prompt_tokens for d in dones) / n, 1),
        "tok_s_per_stream": round(sum(decode_rates) / len(decode_rates), 2) if decode_rates else 0.0,
        # the streams' decode rates added up while they run together (llama-batched-bench's S_TG)
        "tok_s_decode": round(sum(decode_rates), 2),
        "tok_s_total": round(gen / wall, 2),
        "ttft_s": round(sum(d.ttft_s for d in dones) / n, 3),
        "prompt_tok_s": round(sum(d.prompt_tokens - d.cached_tokens for d in dones)
                              / max(1e-9, max(d.prompt_s for d in dones)), 1),
        "drafts_offered": offered, "drafts_accepted": accepted,
        "acceptance": round(accepted / offered, 3) if offered else None,
        "tokens_per_window": round(gen / windows, 3) if windows else None,
        "mean_acceptance_length": round(1 + accepted / windows, 3) if windows and offered else None,
        "stage_busy_pct": busy,
        "chained_pct": round(100 * ahead / (ahead + late), 1) if ahead + late else None,
        "paused_pct": round(100 * paused / all_windows, 1) if paused and all_windows else None,
        "draft_guard": last.draft_guard if last else "",
        "accepted_by_pos": by_pos,
        "window_ms": round(statistics.median(window_ms), 3) if window_ms else None,
        "rows_per_window": round(n / groups * (1 + offered / windows), 2) if windows else None,
    }


def _accepted_by_pos(eng, base: Telemetry | None) -> str:
    """'accepted/offered' at each draft position (first proposal first) over this level, from the
    engine's counters before it and after its last window (telemetry comes at 10 Hz: wait for one)."""
    t_end = time.monotonic() + 0.5
    while time.monotonic() < t_end and (eng.latest_telemetry is base or eng.latest_telemetry.t < t_end - 0.35):
        time.sleep(0.02)
    end = eng.latest_telemetry
    if end is None or not end.drafts_offered_by_pos:
        return ""
    zero = [0] * len(end.drafts_offered_by_pos)
    o0 = (list(base.drafts_offered_by_pos) if base else []) + zero
    a0 = (list(base.drafts_accepted_by_pos) if base else []) + zero
    return " ".join(f"{a - a0[i]}/{o - o0[i]}" for i, (a, o) in
                    enumerate(zip(end.drafts_accepted_by_pos, end.drafts_offered_by_pos)) if o - o0[i])


def run(args: argparse.Namespace) -> int:
    levels = [int(x) for x in args.streams.split(",") if x.strip()]
    cfg = engine_config_from_args(args)
    cfg = msgspec.structs.replace(cfg, parallel=max(cfg.parallel, *levels, 2 if args.read_beside else 1))
    import engine.core  # noqa: F401  the runtime (torch and friends) is imported first: not the model's memory
    rss0 = psutil.Process().memory_info().rss
    with local_client(cfg) as eng:
        eff = eng.ready.config
        load_rss = psutil.Process().memory_info().rss - rss0      # the engine runs in this process
        args.words_per_token = filler_words_per_token(eng)
        run_level(eng, 1, _warm(args), "w")
        costs = (eng.measure_windows([int(x) for x in args.window_costs.split(",") if x.strip()])
                 if args.window_costs else None)
        rows = [run_level(eng, n, args, f"b{n}_") for n in levels]
        beside = read_beside(eng, args.read_beside, args.words_per_token) if args.read_beside else None
    layout = {"stages": [f"{s.device}:{s.first_layer}-{s.end_layer - 1}" for s in eff.stages], "groups": eff.groups,
              "draft": eff.draft, "spec": eff.spec, "piped_mtp": eff.piped_mtp, "dtype": eff.dtype,
              "decode_kernel": eff.decode_kernel, "weights": eff.weights,
              "load_rss_mib": round(load_rss / 2**20, 1), "file_mib": round(eng.ready.model.file_bytes / 2**20, 1),
              "weights_mib": round(sum(s.weight_bytes for s in eff.stages) / 2**20, 1),
              "kv_mib": round(sum(s.kv_bytes for s in eff.stages) / 2**20, 1),
              "load_s": round(eng.ready.load_seconds, 2), "model": eff.model_name, "fallbacks": eff.fallbacks,
              "mtp_file": eff.mtp_file}
    if args.json:
        print(json.dumps({"layout": layout, "results": rows, **({"read_beside": beside} if beside else {}),
                          **({"window_costs": msgspec.to_builtins(costs)} if costs else {})}))
        return 0
    print(f"# {layout['model']}: stages {layout['stages']}, groups {layout['groups']}, draft {layout['draft']} "
          f"spec {layout['spec']} piped-mtp {layout['piped_mtp']}"
          f"{' (MTP layer ' + Path(eff.mtp_file).name + ')' if eff.mtp_file else ''}, {layout['dtype']}"
          f"{', decode ' + eff.decode_kernel if eff.decode_kernel else ''}, load {layout['load_s']} s")
    print(f"# memory: resident +{layout['load_rss_mib']} MiB at load for a {layout['file_mib']} MiB file: weights "
          f"{layout['weights_mib']} MiB, KV cache {layout['kv_mib']} MiB (the runtime's own, loaded before, not "
          f"counted); {eff.weights or 'quantized'}")
    for note in eff.fallbacks:
        print(f"# note: {note}")
    if eff.draft == "replay":
        print(f"# replay: proposals are each request's tokens from a first run of the same prompts, each kept with "
              f"probability {args.replay_accept} (the prompts' cached prefixes may shorten their second reading)")
    if costs:
        print_window_costs(costs)
    cols = ["streams", "prompt_tokens", "tok_s_per_stream", "tok_s_decode", "tok_s_total", "ttft_s", "prompt_tok_s",
            "drafts_offered", "drafts_accepted", "tokens_per_window", "mean_acceptance_length", "window_ms",
            "rows_per_window", "stage_busy_pct", "chained_pct", "paused_pct", "accepted_by_pos"]
    width = {c: max(len(c), 8) for c in cols}
    print("  ".join(f"{c:>{width[c]}}" for c in cols))
    for r in rows:
        print("  ".join(f"{str(r[c]):>{width[c]}}" for c in cols))
    for r in rows:
        if r["draft_guard"]:
            print(f"# draft guard, {r['streams']} streams: {r['draft_guard']} (STRATA_DRAFT_GUARD=0 drafts every window)")
    if beside:
        b = beside
        print(f"# read beside a decoding stream: {b['prompt_tokens']} prompt tokens at {b['read_tok_s_beside']} tok/s "
              f"({b['read_tok_s_alone']} alone, {b['read_speed_vs_alone']:.0%}); the decoding stream's longest gap "
              f"{b['longest_gap_ms']} ms during the read (median {b['median_gap_before_ms']} ms before it)")
    return 0


def print_window_costs(c) -> None:
    """The window costs by rows and part (engine.window_cost), ms a window."""
    print("# a decode window by its rows, ms (on the scratch slot, wall time a window, host included): the stages' "
          "layers (a GPU's last stage runs the head in its graph), + the picks to the host"
          + (f", + the drafter (its layer over the rows, chains of {c.depth} from one row in {c.depth + 1})"
             if c.draft_ms else ""))
    print("#   rows  " + "".join(f"{n:>9d}" for n in c.rows))
    for name, ms in (("layers", c.trunk_ms), ("+ picks", c.pick_ms), ("+ drafter", c.draft_ms)):
        if ms:
            print(f"#   {name:9s}" + "".join(f"{v:9.3f}" for v in ms))


def read_beside(eng, n_tokens: int, words_per_token: float) -> dict:
    """One stream decodes; once it has emitted a few tokens another stream's n-token prompt is read.
    Returns the decoding stream's longest gap between two tokens while the prompt is read (and its
    median gap before), and the read's tok/s beside the stream against the same read alone."""
    def long_request(tag: str) -> AddRequest:
        return AddRequest(request_id=f"read-{tag}", prompt=bench_prompt(n_tokens, f"read {tag}", words_per_token),
                          sampling=SamplingParams(max_tokens=1, ignore_eos=True))

    alone = run_together(eng, [long_request("alone")])["read-alone"].done
    stamps: list[float] = []
    started = threading.Event()

    def decode() -> None:
        for ev in eng.submit(AddRequest(request_id="decoder", prompt=bench_prompt(16, "decoder", words_per_token),
                                        sampling=SamplingParams(max_tokens=100_000, ignore_eos=True))):
            if isinstance(ev, TokenDelta):
                stamps.append(time.monotonic())
                if len(stamps) == 8:
                    started.set()
        started.set()
    t = threading.Thread(target=decode, daemon=True)
    t.start()
    started.wait(600)
    t0 = time.monotonic()
    done = run_together(eng, [long_request("beside")])["read-beside"].done
    t1 = time.monotonic()
    eng.abort("decoder")
    t.join(60)
    before = [b - a for a, b in zip(stamps, stamps[1:]) if b <= t0]
    during = [b - a for a, b in zip(stamps, stamps[1:]) if b > t0 and a < t1]

    def read_rate(d) -> float:
        return round((d.prompt_tokens - d.cached_tokens) / max(1e-9, d.prompt_s), 1)
    return {"prompt_tokens": done.prompt_tokens, "read_tok_s_alone": read_rate(alone),
            "read_tok_s_beside": read_rate(done), "read_speed_vs_alone": round(read_rate(done) / read_rate(alone), 3),
            "longest_gap_ms": round(1000 * max(during, default=0.0), 1),
            "median_gap_before_ms": round(1000 * statistics.median(before), 1) if before else None,
            "tokens_during_read": len(during)}


def _warm(args):
    """A short warm-up level so the first measured level does not pay one-time costs."""
    ns = argparse.Namespace(**vars(args))
    ns.max_tokens = 4
    return ns
