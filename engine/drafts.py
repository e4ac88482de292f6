"""Draft sources: the MTP (nextn) drafter on the last stage, prompt-lookup proposals, and (for
benchmarks) replayed proposals: a request's own tokens from an earlier run, kept at a set rate, so a
draft layout can be measured at a chosen acceptance on models whose random weights draft nothing. The
replay source still runs the MTP drafter where the model has one (its cost stays in every window).

Drafts only change how many tokens a window yields, never which: every emitted token is the
target's own pick, so nothing here needs row-invariant numerics.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from engine import cpu_gemm
from engine.block import Tile, device_experts, matmul_input, run_block
from engine.config import ModelConfig
from engine.graphs import on_device, rows_at
from engine.layers import rms_norm, rope_tables, rotation_tables
from engine.weights import DrafterWeights, HeadWeights
from engine.window import kept_on_device


MTP_SOURCES = ("mtp", "both", "replay")      # draft sources that run the MTP layer where the model has one
RING_BYTES = 128 << 20     # the most the drafter's ring of paused positions' hidden states takes (float32)
GAP_CHUNK = 128            # gap rows the drafter catches up on per pass where it has no graphs
GAP_MAX = 512              # the most recent positions a slot catches up on after a pause (older ones stay holes)


def ring_rows(ctx: int, n_slots: int, n_embd: int) -> int:
    """Positions per slot the drafter's ring keeps (MtpDrafter.keep_ring): the context, or fewer where
    (n_slots + 1) slots of float32 hidden states would pass RING_BYTES; 0 (no ring) below 64, or with
    STRATA_DRAFT_RING=0 (for measuring what keeping it costs a paused window: tests/gpu/run_guard_windows.sh)."""
    if os.environ.get("STRATA_DRAFT_RING", "1") == "0":
        return 0
    n = min(ctx, RING_BYTES // ((n_slots + 1) * n_embd * 4))
    return n if n >= 64 else 0


@dataclass
class DraftPlan:
    source: str          # "mtp" | "lookup" | "both" | "replay"
    spec: int            # window size for the solo / single-group path (1 = no drafts)
    min_p: float
    piped: int           # draft depth inside pipelined groups
    has_mtp: bool
    max_depth: int = 1 << 30     # hybrid models: what a slot's delta net state ring holds (engine.gdn)

    @property
    def mtp(self) -> bool:
        return self.has_mtp and self.source in MTP_SOURCES

    @property
    def lookup(self) -> bool:
        return self.source in ("lookup", "both")

    @property
    def replay(self) -> bool:
        return self.source == "replay"

    @property
    def follows(self) -> bool:
        """Whether the MTP drafter follows every window (its catch-up rows): only while drafts are on. A
        model with an MTP layer decodes without them at the speed of one without (GPU windows chain);
        drafts turned on later propose from the positions the drafter has seen since."""
        return self.mtp and (self.spec > 1 or self.piped > 0)

    def depth(self, pipelined: bool) -> int:
        if not (self.mtp or self.lookup or self.replay):
            return 0
        if pipelined:
            return min(self.piped, self.max_depth)
        return min(self.spec - 1 if self.spec > 1 else self.piped, self.max_depth)

    def choose(self, mtp_props: list[int], tokens: list[int], depth: int, seq=None) -> list[int]:
        """Up to `depth` proposals for the token after tokens[-1]; seq: the Sequence (for replay)."""
        if depth <= 0:
            return []
        if self.replay:
            if seq is None:
                return []
            p = seq.params
            return replay_proposals(p.replay, seq.n_generated, depth, p.replay_accept, p.seed)
        if self.lookup:
            found = lookup_proposals(tokens, depth)
            if len(found) >= 2 or not self.mtp:
                return found
        return mtp_props[:depth]


def replay_proposals(recorded: list[int], made: int, depth: int, accept: float, seed: int) -> list[int]:
    """Proposals for the request's generated tokens made..made+depth-1: recorded[made + j] kept with
    probability `accept` each (drawn from (seed, position) alone, so every run and layout offers the same),
    the first one not kept replaced by a wrong token (the recorded one + 1) and nothing proposed after it."""
    out = []
    for t in range(made, min(made + depth, len(recorded))):
        if _uniform(seed, t) < accept:
            out.append(recorded[t])
        else:
            out.append(recorded[t] + 1)
            break
    return out


def _uniform(seed: int, t: int) -> float:
    """A draw in [0, 1) from (seed, t) alone: splitmix64's finaliser on seed * 2^32 + t."""
    m = (1 << 64) - 1
    z = ((seed << 32) + t + 0x9E3779B97F4A7C15) & m
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
    return ((z ^ (z >> 31)) >> 11) / 2 ** 53


def lookup_proposals(tokens: list[int], depth: int, max_ngram: int = 4, min_ngram: int = 2) -> list[int]:
    """Copy what followed the latest earlier occurrence of the current suffix (longest n-gram first)."""
    n_tok = len(tokens)
    for n in range(min(max_ngram, n_tok - 1), min_ngram - 1, -1):
        suffix = tokens[n_tok - n:]
        for start in range(n_tok - n - 1, -1, -1):
            if tokens[start:start + n] == suffix:
                follow = tokens[start + n:start + n + depth]
                if follow:
                    return follow
    return []


class MtpDrafter:
    """The nextn layer: row t joins the trunk's final hidden state at t with the embedding of the token
    at t+1, writes the drafter KV at t, and predicts the token at t+2; it chains on its own output."""

    def __init__(self, w: DrafterWeights, cfg: ModelConfig, embedding, head: HeadWeights, n_slots: int,
                 ctx: int, device, dtype):
        self.w, self.cfg, self.device, self.dtype = w, cfg, torch.device(device), dtype
        self.embedding = w.embed or embedding
        self.head = w.head or head.output
        self.trunk_norm = head.output_norm if cfg.mtp_post_norm else None    # qwen35: joins the normed state
        self.layer = cfg.n_layers
        shape = (n_slots + 1, ctx, cfg.n_kv_heads, cfg.head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=self.device)
        self.v = torch.zeros(shape, dtype=dtype, device=self.device)
        self.rope = rope_tables(cfg.layer_rope_base(self.layer), cfg.rope_dim, ctx, self.device)
        self.ctx = ctx
        self.graphs = None       # engine.draft_graph.DraftGraphs once captured (GPU)
        self.scratch_slot = n_slots
        self.n_slots = n_slots
        self.ring: torch.Tensor | None = None   # [(n_slots + 1) * R, d] float32: see keep_ring
        self.ring_n = 0
        self.probs = True        # whether proposals' probabilities are computed (--spec-min-p > 0 reads them)
        self.windows: dict[tuple[int, int], object] = {}   # (slots, width) -> engine.draft_graph.DraftWindow
        self.use_windows = os.environ.get("STRATA_DRAFT_WINDOW", "1") != "0"     # (else separate passes)
        self._fused = False      # engine.cpu_layers.DecodeLayers for the block, None, or not made yet

    def keep_ring(self, rows: int) -> None:
        """Keep the trunk's hidden state of the last `rows` positions of every slot that windows without
        the drafter decoded (engine.draft_guard's pauses: those windows chain and skip the drafter), so
        that drafts resumed after a pause first catch the drafter's KV up on them (catch_up). Without it
        the drafter attends over zeros at the paused positions and its proposals after a pause are worse
        than before it (H200, the default model, 2026-12-04: the guard measured drafts at 472 tok/s after
        a pause where drafts every window made 976)."""
        if rows > 0 and self.ring is None:
            self.ring_n = rows
            self.ring = torch.zeros(((self.n_slots + 1) * rows, self.cfg.n_embd), dtype=torch.float32,
                                    device=self.device)

    def remember(self, hidden: torch.Tensor, slots: list[int], pos: list[int]) -> None:
        """Put rows of the trunk's hidden states (hidden [len(slots), d], in stream order before the next
        window can overwrite them) into the ring at (slot, pos)."""
        at = self._ring_at(slots, pos)
        if len(at) == 1:                           # a lone request: one slice copy, no index to send
            self.ring[at[0]:at[0] + 1].copy_(hidden)
        else:
            self.ring.index_copy_(0, on_device(at, self.device), hidden.float())

    def remember_on_device(self, hidden: torch.Tensor, slots: torch.Tensor, pos: torch.Tensor) -> None:
        """remember, with the rows' slots and positions as device tensors (inside a decode graph: Stage.capture;
        padding rows on the scratch slot go to its own part of the ring)."""
        self.ring.index_copy_(0, self._ring_row(slots, pos), hidden.float())

    @torch.inference_mode()
    def catch_up(self, gaps: list[tuple[int, list[int], list[int]]]) -> None:
        """The drafter's KV at positions it missed, from the ring: gaps holds (slot, positions, the token
        after each), every slot's positions ascending. On a GPU as replays of the `layer` graph over its
        decode tiles (16 rows each: no new kernel shapes to compile, no host wait; H200, 2026-12-05: run
        eagerly in 128-row passes the first resumes of a process took seconds, compiling), else GAP_CHUNK
        rows a pass."""
        rows = [(s, p, t) for s, ps, ts in gaps for p, t in zip(ps, ts)]
        step = len(rows) if self.graphs is not None else GAP_CHUNK
        for a in range(0, len(rows), step):
            slots, pos, nxt = (list(c) for c in zip(*rows[a:a + step]))
            h = self.ring[on_device(self._ring_at(slots, pos), self.device)]
            if self.trunk_norm is not None:
                h = rms_norm(h, self.trunk_norm, self.cfg.norm_eps)
            self._rows(h, nxt, slots, pos)

    @torch.inference_mode()
    def dry_run(self, hidden: torch.Tensor, k: int, depth: int, room: int) -> torch.Tensor:
        """A window's drafter work on the scratch slot, for measuring (engine.window_cost): the layer over
        hidden's rows (a window of k slots' rows), then a chain of `depth` proposals from k of them, at
        positions below room + depth."""
        n, s = hidden.shape[0], self.scratch_slot
        tok = torch.zeros(n, dtype=torch.long, device=self.device)
        g, t, _ = self._step(hidden, tok, [s] * n, [i % room for i in range(n)])
        h, t = g[:k], t[:k]
        for step in range(depth - 1):
            h, t, _ = self._step(h, t, [s] * k, [room + step] * k)
        return t

    def _ring_at(self, slots: list[int], pos: list[int]) -> list[int]:
        """The ring's rows of (slot, position) pairs."""
        return [self._ring_row(s, p) for s, p in zip(slots, pos)]

    def _ring_row(self, slot, pos):
        """The ring's row of a slot's position (ints, or device tensors of them)."""
        return slot * self.ring_n + pos % self.ring_n

    def capture(self, sizes, depths=()) -> None:
        """Capture the drafter's passes as CUDA graphs on the pipeline's decode tiles (sizes: its
        TileSizes) where its block's work stays on the device (the loader calls this on a GPU stage that
        replays graphs, with drafts on, before any stage thread runs); depths: the draft depths whose chains
        are captured whole (engine.draft_graph's chainN)."""
        from engine.draft_graph import DraftGraphs

        lw = self.w.block
        if self.device.type == "cuda" and (lw.router is None or all(device_experts(lw, n)
                                                                    for n in sizes.decode_sizes())):
            self.graphs = DraftGraphs(self, self.scratch_slot, sizes, [d - 1 for d in depths])

    def capture_windows(self, sizes, depths, n_slots: int) -> None:
        """Capture a chained draft window's drafter work as one graph (engine.draft_graph.DraftWindow) for
        each draft depth and slot count whose window fits one decode tile (the loader calls this on a GPU
        stage where draft windows chain, after capture)."""
        from engine.draft_graph import DraftWindow

        tile = max(sizes.decode_sizes())
        for depth in sorted(d for d in depths if d >= 1):
            for k in range(1, min(n_slots, tile // (depth + 1)) + 1):
                self.windows[k, depth + 1] = DraftWindow(self, k, depth + 1, sizes)

    def window(self, lens: list[int]):
        """The DraftWindow for a chained draft window of these rows per slot, or None (the slots' row
        counts differ, none was captured, or STRATA_DRAFT_WINDOW=0): on a CPU made on first use."""
        w = lens[0]
        if not self.use_windows or w < 2 or any(m != w for m in lens):
            return None
        if self.device.type == "cpu" and (len(lens), w) not in self.windows:
            from engine.draft_graph import DraftWindow
            self.windows[len(lens), w] = DraftWindow(self, len(lens), w, None)
        return self.windows.get((len(lens), w))

    def _layer(self, tok: torch.Tensor, hidden: torch.Tensor, slot: torch.Tensor, pos: torch.Tensor,
               n_dev: torch.Tensor | None = None) -> torch.Tensor:
        """The layer over rows (device tensors; n_dev: the real rows, a device scalar, in a graph)."""
        e = self.embedding.rows(tok).float() * self.cfg.embed_scale
        x = torch.cat((matmul_input(e, self.w.enorm, self.cfg, self.w.eh_proj),
                       matmul_input(hidden, self.w.hnorm, self.cfg, self.w.eh_proj)), dim=-1)
        x = self.w.eh_proj.linear(x, n_dev=n_dev)
        fused = self._decode_layers(x.shape[0])
        if fused is not None:
            return fused.run(x, slot, pos)
        tile = Tile(slot, pos, slot.shape[0], n_dev)
        return run_block(self.w.block, self.cfg, self.layer, x, tile, self.k, self.v, self.rope)

    def _decode_layers(self, rows: int):
        """engine.cpu_layers' C loop for the block over a CPU decode tile's rows (fewer than a prompt tile's: a
        row count chooses the kernels, as in the torch block), where it runs the block; else None."""
        if self.device.type != "cpu" or rows >= cpu_gemm.MIN_TILE or self.dtype != torch.bfloat16:
            return None
        if self._fused is False:
            from engine import cpu_layers

            self._rotation = rotation_tables(*self.rope, self.cfg.rope_neox)     # (the loop points into them)
            self._fused = cpu_layers.build(self.cfg, self.ctx, [(self.w.block, self.layer, self.k, self.v,
                                                                 self._rotation)])
        return self._fused

    def _pick(self, g: torch.Tensor, n_dev: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Each row's greedy proposal and its probability (device tensors; the probability 1 where no
        --spec-min-p reads it: `probs` off saves a softmax over the vocabulary and a max per pass, ~33 us of
        a drafter pass's ~180 on an H100, tests/gpu/run_draft_window.sh)."""
        h = rms_norm(g, self.w.head_norm, self.cfg.norm_eps)
        lg = self.head.linear(h, n_dev=n_dev).float()
        tok = lg.argmax(dim=-1)
        if not self.probs:
            return tok, lg.new_ones(lg.shape[0])
        return tok, torch.softmax(lg, dim=-1).gather(1, tok[:, None])[:, 0]

    def _rows(self, hidden: torch.Tensor, tok, slots: list[int], pos: list[int]) -> torch.Tensor:
        """The layer over rows: tok a host list or a device tensor of token ids."""
        if self.graphs is not None:
            return self.graphs.run("layer", hidden, tok, slots, pos)[0]
        return self._layer(on_device(tok, self.device), hidden, on_device(slots, self.device),
                           on_device(pos, self.device))

    def _propose(self, g: torch.Tensor, slots: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        if self.graphs is not None:
            return tuple(self.graphs.run("pick", g, None, slots, [0] * len(slots)))
        return self._pick(g)

    def _step(self, h: torch.Tensor, tok: torch.Tensor, slots: list[int], pos: list[int]):
        """One chain step: the layer on the last proposals, then the next ones (g, tok, p)."""
        if self.graphs is not None:
            return tuple(self.graphs.run("step", h, tok, slots, pos))
        g = self._rows(h, tok, slots, pos)
        return (g, *self._pick(g))

    @torch.inference_mode()
    def advance(self, parts, verdicts, seqs, hidden: torch.Tensor, depth: int, min_p: float,
                gaps=None) -> dict[int, list[int]]:
        """Catch up on every slot's kept rows (first on the positions before them it missed, gaps: see
        catch_up), then chain up to `depth` proposals for decoding slots."""
        if gaps:
            self.catch_up(gaps)
        rows, nxt, slots, pos, last = [], [], [], [], {}
        for sr, v in zip(parts, verdicts):
            full = seqs[sr.slot].tokens + v.picks[:v.kept]
            for j, r in enumerate(v.hidden_rows):
                t = sr.first_pos + j
                if t + 1 < len(full) and t + 1 < self.ctx:
                    rows.append(r)
                    nxt.append(full[t + 1])
                    slots.append(sr.slot)
                    pos.append(t)
                    if sr.decoding:
                        last[sr.slot] = len(rows) - 1      # its last kept row starts the chain
        if not rows:
            return {}
        trunk = rows_at(hidden, rows)
        if self.trunk_norm is not None:
            trunk = rms_norm(trunk, self.trunk_norm, self.cfg.norm_eps)
        live = list(last)
        newest = [last[s] for s in live]                   # each chain's newest row
        at = {s: pos[last[s]] for s in live}              # drafter position of each chain's newest row
        whole = (self.graphs is not None and live and depth >= 1 and (depth == 1 or depth - 1 in self.graphs.chains)
                 and all(at[s] + depth < self.ctx for s in live))
        if whole:
            return self._advance_whole(trunk, nxt, slots, pos, newest, live, at, depth, min_p)
        g = self._rows(trunk, nxt, slots, pos)
        if depth <= 0 or not live:
            return {}
        h = rows_at(g, newest)
        tok, p = self._propose(h, live)
        steps = []                                         # (chains, their proposals, probabilities)
        for step in range(depth):
            steps.append((live, tok, p))
            keep = [i for i, s in enumerate(live) if at[s] + 2 < self.ctx]
            if self.graphs is None and min_p > 0:          # eager: stop unsure chains now (on a GPU the
                probs = p.tolist()                         # chain runs on and they are cut below)
                keep = [i for i in keep if probs[i] >= min_p]
            if step + 1 == depth or not keep:
                break
            if len(keep) < len(live):              # the chains that go on (all of them: no index)
                h, tok = rows_at(h, keep), rows_at(tok, keep)
            live = [live[i] for i in keep]
            for s in live:
                at[s] += 1
            h, tok, p = self._step(h, tok, live, [at[s] for s in live])
        toks = torch.cat([t for _, t, _ in steps]).tolist()      # the chain's one trip to the host
        probs = torch.cat([q for _, _, q in steps]).tolist()
        i = iter(zip(toks, probs))
        return _cut([(s, *next(i)) for chains, _, _ in steps for s in chains], min_p)

    @torch.inference_mode()
    def on_device(self, trunk: torch.Tensor, picks: torch.Tensor, toks: torch.Tensor, slots: list[int],
                  pos: torch.Tensor, starts: list[int], lens: list[int], depth: int, gaps=None) -> DeviceDrafts:
        """A window's verdict and the drafter's next proposals, queued on the device with no host wait (a
        chained draft window's, engine.draft_chain): the window's real rows are k slots' runs (slot i's rows
        starts[i] .. starts[i] + lens[i] - 1: its current token, then proposals), with trunk hidden states
        `trunk`, token ids `toks`, positions `pos` and the target's greedy picks `picks` (device tensors);
        slots: each row's slot. The drafter runs over every row (rows past a slot's kept ones write its KV
        at positions the next window writes again before any row reads them), then chains `depth`
        proposals from each slot's last kept row. gaps: as in advance, caught up first."""
        if gaps:
            self.catch_up(gaps)
        return _mtp_on_device(self, trunk, picks, toks, slots, pos, starts, lens, depth)

    def _advance_whole(self, trunk, nxt, slots, pos, idx, live, at, depth: int, min_p: float) -> dict[int, list[int]]:
        """advance's graph path where every chain has room for `depth` proposals: the catch-up rows with
        their proposals in one replay (`step`), the chains' later steps in one more (`chainN`)."""
        g, tok, p = self.graphs.run("step", trunk, nxt, slots, pos)
        h, tok, p = rows_at(g, idx), rows_at(tok, idx), rows_at(p, idx)
        if depth > 1:
            more_t, more_p = self.graphs.run(f"chain{depth - 1}", h, tok, live, [at[s] + 1 for s in live])
            tok, p = torch.cat((tok[:, None], more_t), dim=1), torch.cat((p[:, None], more_p), dim=1)
        else:
            tok, p = tok[:, None], p[:, None]
        toks, probs = tok.T.tolist(), p.T.tolist()                # the chain's one trip to the host
        return _cut([(s, toks[k][i], probs[k][i]) for k in range(depth) for i, s in enumerate(live)], min_p)


class DeviceDrafts:
    """MtpDrafter.on_device's result, every tensor on the drafter's device: kept [k] (1 + the proposals
    the picks confirmed, per slot), tokens [k, depth + 1] (each slot's next window: the pick after its
    last kept row, then depth proposals) and at [k] (that window's first position)."""

    def __init__(self, kept: torch.Tensor, tokens: torch.Tensor, at: torch.Tensor):
        self.kept, self.tokens, self.at = kept, tokens, at


def _mtp_on_device(d: MtpDrafter, trunk: torch.Tensor, picks: torch.Tensor, toks: torch.Tensor, slots: list[int],
                   pos: torch.Tensor, starts: list[int], lens: list[int], depth: int) -> DeviceDrafts:
    """MtpDrafter.on_device's work (see there)."""
    n, k = picks.shape[0], len(starts)
    dev = picks.device
    longest = max(lens) - 1
    if longest > 0:
        at = [[a + j if j < m - 1 else n - 1 for j in range(longest)] for a, m in zip(starts, lens)]
        kept = kept_on_device(picks, toks, on_device(at, dev))
    else:
        kept = torch.ones(k, dtype=torch.long, device=dev)
    if d.trunk_norm is not None:
        trunk = rms_norm(trunk, d.trunk_norm, d.cfg.norm_eps)
    if d.graphs is not None:
        g, tok, _ = d.graphs.run("step", trunk, picks, slots, pos)
    else:
        g = d._layer(picks, trunk, on_device(slots, dev), pos)
        tok, _ = d._pick(g)
    last = on_device(starts, dev) + kept - 1          # each slot's last kept row starts its chain
    h, first, nxt = g[last], tok[last], pos[last] + 1
    chain = [picks[last][:, None], first[:, None]]
    live = [slots[a] for a in starts]
    if depth > 1 and d.graphs is not None and depth - 1 in d.graphs.chains:
        chain.append(d.graphs.run(f"chain{depth - 1}", h, first, live, nxt)[0])
    else:
        t = first
        for step in range(depth - 1):
            if d.graphs is not None:
                h, t, _ = d.graphs.run("step", h, t, live, nxt + step)
            else:
                h = d._layer(t, h, on_device(live, dev), nxt + step)
                t, _ = d._pick(h)
            chain.append(t[:, None])
    return DeviceDrafts(kept, torch.cat(chain, dim=1), nxt)


def _cut(made: list[tuple[int, int, float]], min_p: float) -> dict[int, list[int]]:
    """Each chain's proposals from (chain, token, probability) in step order: a chain ends after its first
    proposal below min_p."""
    out: dict[int, list[int]] = {}
    done = set()
    for s, t, q in made:
        if s not in done:
            out.setdefault(s, []).append(t)
            if q < min_p:
                done.add(s)
    return out
