"""`strata mtp-train`: train an MTP (nextn) layer for a model that has none, by self-distillation.

    strata mtp-train --model default --out smollm2-mtp.gguf [--steps 300] [--tokens 20000] [--device cpu]

1. The model writes its training text: it continues the bundled prompts (app/mtp_prompts.py: chat,
   code, prose), sampled, until --tokens tokens (kept in OUT.data.pt as it is written: a run stopped
   part way continues the text where it was).
2. One trunk pass per sequence gives its hidden states and its distribution of every next token.
3. The layer (engine/mtp_train.py) learns those distributions, for its first proposal and for the next
   one it chains on its own output; a progress bar shows the loss and the share of rows whose greedy pick
   is the trunk's; about a tenth of the sequences is held out for that figure (first and second proposal),
   whole prompts' and files' worth, so the figure is on text from sources the layer never saw (the sequences
   of one prompt are alike: held out among them, the first figure read 62.9% where the bench's unseen
   prompts gave 28-38%). --text adds files' own text (your code, say): the trunk reads it, and the layer
   learns the trunk's predictions there too.
   OUT.ckpt is written every 50 steps: run the same command again to resume (--fresh starts over).
4. OUT is the model's file (every tensor and key as it was) plus the layer as block n_layers, quantized
   (--qtype Q8_0) and reusing the model's own embedding and output head; with --sidecar, the layer
   alone: named MODEL.mtp.gguf beside the model, the engine reads it with the model when drafts are on.
"""
from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import torch
from gguf.constants import GGMLQuantizationType as Q
from tqdm import tqdm

from app.local_engine import local_client
from app.mtp_prompts import training_requests
from app.run_requests import run_together
from engine.cpu_thread import on_compute_thread
from engine.errors import ConfigError
from engine.messages import AddRequest, EngineConfig, SamplingParams

HELD_OUT = 0.1
SAVE_EVERY = 2          # rounds of model text between saves of what is written so far
QUEUED = 4              # on a GPU, requests per slot in a round: a slot whose answer ends early takes the next


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="default", help="GGUF file, or 'default'")
    p.add_argument("--out", required=True, help="the GGUF to write (the model plus its trained MTP layer)")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--tokens", type=int, default=20000, help="tokens of model-written training text")
    p.add_argument("--seq-tokens", type=int, default=256, help="tokens the model writes per prompt")
    p.add_argument("--batch", type=int, default=4, help="sequences per step (run together, padded to the longest)")
    p.add_argument("--streams", type=int, default=0,
                   help="requests the model writes its text in at once (default: 4 on a CPU, 16 on a GPU)")
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--qtype", choices=("Q8_0", "F32"), default="Q8_0")
    p.add_argument("--device", default="cpu", help="cpu or cuda:N (writing the text and training)")
    p.add_argument("--text", action="append", default=[], metavar="PATH",
                   help="also learn from these files' own text (a file or a folder of .py/.md/.txt/... files; "
                        "repeatable): the trunk reads it, nothing is generated")
    p.add_argument("--text-tokens", type=int, default=1_000_000, help="at most this many tokens from --text")
    p.add_argument("--text-seq", type=int, default=512, help="tokens a --text sequence holds")
    p.add_argument("--fresh", action="store_true", help="ignore OUT.data.pt and OUT.ckpt from an earlier run")
    p.add_argument("--sidecar", action="store_true",
                   help="write the layer alone (OUT should be MODEL.mtp.gguf beside the model: the engine then "
                        "gives the model this layer when drafts are on)")


TEXT_SUFFIXES = (".py", ".md", ".txt", ".rst", ".js", ".ts", ".c", ".h", ".cpp", ".go", ".rs", ".java", ".sh", ".html")


def file_text(tok, paths: list[str], budget: int, seq: int) -> list[list[list[int]]]:
    """Sequences of up to `seq` tokens of the files at paths (folders: their files of TEXT_SUFFIXES,
    recursively), per file, in a fixed order: files shuffled by a fixed seed, read until `budget` tokens."""
    files: list[Path] = []
    for p in map(Path, paths):
        if not p.exists():
            raise ConfigError(f"--text {p}: no such file or folder")
        files += [p] if p.is_file() else sorted(f for f in p.rglob("*") if f.suffix in TEXT_SUFFIXES and f.is_file())
    random.Random(0).shuffle(files)
    out, total = [], 0
    for f in files:
        if total >= budget:
            break
        ids = tok.encode(f.read_text(errors="ignore")[:200_000])
        chunks = [ids[a:a + seq] for a in range(0, min(len(ids), budget - total), seq)]
        chunks = [c for c in chunks if len(c) >= 8]
        if chunks:
            out.append(chunks)
            total += sum(map(len, chunks))
    return out


def model_text(model: str, device: str, tokens: int, seq_tokens: int, data: Path,
               streams: int = 0) -> tuple[list[list[int]], list[int]]:
    """Token ids of prompt + continuation, sampled, until `tokens` continuation tokens, and each one's
    prompt length. Kept in `data` as they come (every SAVE_EVERY rounds): a run stopped part way
    continues where it was."""
    prompts = training_requests()
    done = torch.load(data, weights_only=True) if data.exists() else {}
    seqs: list[list[int]] = done.get("sequences", [])
    lens: list[int] = done.get("prompt_lens", [0] * len(seqs))       # (0: written before they were kept)
    i, written = done.get("next", len(seqs)), done.get("written", 0)
    if done and done.get("complete", True):
        print(f"mtp-train: {len(seqs)} sequences from {data}", file=sys.stderr)
        return seqs, lens

    def save(complete: bool) -> None:
        torch.save({"sequences": seqs, "prompt_lens": lens, "next": i, "written": written, "complete": complete},
                   data)
    # a GPU writes 16 streams at little more than the cost of one
    n_streams = streams or (4 if device == "cpu" else 16)
    per_round = n_streams if device == "cpu" else n_streams * QUEUED
    with local_client(EngineConfig(model=model, devices=device, parallel=n_streams, ctx=2048)) as eng:
        tok = eng.transport.core.model.tokenizer
        bar = tqdm(total=tokens, initial=min(written, tokens), desc="model text", unit="tok", file=sys.stderr)
        rounds = 0
        while written < tokens:
            batch = []
            for j in range(per_round):
                text, chat = prompts[(i + j) % len(prompts)]
                ids = tok.apply_chat([{"role": "user", "content": text}]) if chat else tok.encode(text)
                sp = SamplingParams(max_tokens=seq_tokens, temperature=0.8, top_p=0.95, seed=i + j)
                batch.append((ids, AddRequest(request_id=f"s{i + j}", sampling=sp, token_ids=ids)))
            out = run_together(eng, [r for _, r in batch])
            for ids, r in batch:
                seqs.append(ids + out[r.request_id].tokens)
                lens.append(len(ids))
                written += len(out[r.request_id].tokens)
                bar.update(len(out[r.request_id].tokens))
            i += len(batch)
            rounds += 1
            if rounds % SAVE_EVERY == 0:
                save(False)
        bar.close()
    save(True)
    return seqs, lens


def held_apart(groups: list[list[list[int]]]) -> tuple[list[list[int]], list[list[int]]]:
    """(training, held-out) sequences: about HELD_OUT of them held out, whole groups at a time (every
    sequence written from one prompt, every piece of one file), so held-out text is text whose source the
    layer never trained on; groups shuffled by a fixed seed."""
    groups = list(groups)
    random.Random(0).shuffle(groups)
    want = HELD_OUT * sum(map(len, groups))
    held: list[list[int]] = []
    train: list[list[int]] = []
    for g in groups:
        (held if len(held) < want else train).extend(g)
    if not train:                       # one source only: hold out some of its sequences
        n = max(1, int(len(held) * HELD_OUT))
        train, held = held[n:], held[:n]
    return train, held


def by_prompt(seqs: list[list[int]], lens: list[int]) -> list[list[list[int]]]:
    """Model-written sequences grouped by the prompt each continues (one group each where unknown)."""
    groups: dict = {}
    for k, (s, n) in enumerate(zip(seqs, lens)):
        groups.setdefault(tuple(s[:n]) if n else k, []).append(s)
    return list(groups.values())


def run(args: argparse.Namespace) -> int:
    from engine import mtp_trainer
    from engine.loader import load_model

    out = Path(args.out)
    data, ckpt = out.with_name(out.name + ".data.pt"), out.with_name(out.name + ".ckpt")
    if args.fresh:
        data.unlink(missing_ok=True)
        ckpt.unlink(missing_ok=True)
    # the trunk as the engine runs it there (on a GPU its float32 form took the kernels' slow IEEE path)
    model = load_model(EngineConfig(model=args.model, devices=args.device, dtype="float32" if args.device == "cpu"
                                    else "auto", ctx=2048))
    try:
        if model.cfg.n_mtp:
            raise ConfigError(f"{Path(model.gf.path).name} already has {model.cfg.n_mtp} MTP layer(s)")
        layer = mtp_trainer.new_layer(model).to(args.device)
        seqs, lens = model_text(args.model, args.device, args.tokens, args.seq_tokens, data, args.streams)
        texts = file_text(model.tokenizer, args.text, args.text_tokens, args.text_seq) if args.text else []
        parts = [held_apart(by_prompt(seqs, lens))] + ([held_apart(texts)] if texts else [])
        bar = tqdm(total=sum(len(a) + len(b) for a, b in parts), desc="trunk pass", unit="seq", file=sys.stderr)
        rows = [(mtp_trainer.collect(model, a, lambda: bar.update(1)), mtp_trainer.collect(model, b, lambda: bar.update(1)))
                for a, b in parts]
        bar.close()
        train_rows = [r for tr, _ in rows for r in tr]
        helds = [h for _, h in rows]
        # on a CPU the layer's own work runs on the thread that runs the model (engine.cpu_thread: a second
        # OpenMP team would slow both)
        run = on_compute_thread if args.device == "cpu" else lambda fn, *a: fn(*a)
        before = [run(mtp_trainer.held_out, layer, h) for h in helds]
        bar = tqdm(total=args.steps, desc="training", unit="step", file=sys.stderr)
        bar.update(int(torch.load(ckpt, weights_only=True, map_location="cpu")["step"]) if ckpt.exists() else 0)

        def step(s: int, loss: float, acc: float) -> None:
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.3f}", accept=f"{acc:.2f}")
        run(mtp_trainer.train, layer, train_rows, args.steps, args.lr, ckpt, args.batch, step)
        bar.close()
        after = [run(mtp_trainer.held_out, layer, h) for h in helds]
        mtp_trainer.export(model, layer, out, Q[args.qtype], args.sidecar)
    finally:
        model.pipeline.close()
    for name, h, (loss0, acc0, chain0), (loss1, acc1, chain1) in zip(("model text", "--text"), helds, before, after):
        print(f"held-out {name} ({sum(len(r.next_ids) for r in h)} rows, from sources it did not train on): loss "
              f"{loss0:.3f} -> {loss1:.3f}; its greedy pick is the trunk's: first proposal {acc0:.1%} -> {acc1:.1%}, "
              f"second (chained on its own output) {chain0:.1%} -> {chain1:.1%}")
    print(f"wrote {out}")
    return 0
