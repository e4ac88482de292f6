"""Faults the suite must catch, kept as a mutation check (issue 10, item 4).

Each fault in FAULTS is one exact text substitution in one engine file. The script copies the
project's tracked files (as they are in the work tree) into a throw-away folder, runs every selected
test there on the unmodified copy (all must pass, or a failure under a fault would mean nothing), then
plants each fault alone and runs that fault's tests: CAUGHT when they fail, MISSED when they all pass.
Faults in the bfloat16 tl.dot branches of the Triton matmuls are planted (so their pattern is checked)
but not run: the interpreter's bf16 tl.dot is wrong; tests/gpu/bench_matmul.py checks them on a GPU.

    make faults          # or: .venv/bin/python tests/faults/plant.py [--keep] [--jobs N] [NAME ...]

Two faults run at once by default, each in its own copy (the machine's two cores; --jobs 1 for one).

Exit status 1 when a fault is MISSED, the unmodified copy fails, or a pattern is not found exactly
once (the code moved: update the table). The tests run with the calling interpreter (the project's
.venv) and the copy first on sys.path; every run also checks that engine and app come from the copy.
"""
from __future__ import annotations

import argparse
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import torch

__test__ = False                     # not a test module (pytest does not collect plant.py anyway)

ROOT = Path(__file__).resolve().parents[2]
RD = "tests/engine/test_reference_decode.py::"
DA = "tests/engine/test_drafts_attention.py::"
EX = "tests/engine/test_exactness.py::"
PK = "tests/engine/test_packed.py::"
GK = "tests/engine/test_gpu_kernels.py::"
DG = "tests/engine/test_dp4a_gemv.py::"
GM = "tests/engine/test_cpu_gemm.py::"
CA = "tests/engine/test_cpu_attention.py::"
INDUCTION = DA + "test_induction_layouts_identical_with_most_drafts_accepted"
HY = "tests/engine/test_hybrid.py::"
DC = "tests/engine/test_draft_chain.py::"
LY = "tests/engine/test_cpu_layers.py::"
TC = "tests/engine/test_tool_calls.py::"


@dataclass
class Fault:
    name: str
    file: str
    old: str
    new: str
    tests: list[str]                 # pytest node ids (or files); [] = GPU only, planted but not run
    cpu_kernels: bool = False        # its code runs only with the native CPU kernels (AVX512-BF16)


FAULTS = [
    # 1. the CPU one-row decode attention (every generated token on CPU) with its scale tripled
    Fault("decode-attn-scale-x3", "engine/layers.py",
          "qg = (q.float() * scale).view(k.shape[0], H // k.shape[0], hd)",
          "qg = (q.float() * scale * 3).view(k.shape[0], H // k.shape[0], hd)",
          [RD + "test_decode_path_is_transformers_greedy[smollm2]",
           RD + "test_decode_path_is_transformers_greedy[qwen3]",
           RD + "test_decode_path_logits_match_transformers[qwen3]",
           DA + "test_the_induction_model_repeats_through_attention"]),
    # 2. the KV rows of accepted proposals zeroed when the window is committed
    Fault("zero-kv-accepted-drafts", "engine/scheduler.py",
          "            s.n_cached = sr.first_pos + v.n_valid_rows\n",
          "            s.n_cached = sr.first_pos + v.n_valid_rows\n"
          "            for st in self.pipeline.stages:                      # PLANTED FAULT\n"
          "                for kv in st.k + st.v:\n"
          "                    kv[sr.slot, sr.first_pos + sr.n_base:s.n_cached] = 0\n",
          [INDUCTION]),
    # 3. noise on the hidden states of tiles holding rows of more than one slot (batched prompt rows)
    Fault("noise-batched-hidden", "engine/pipeline.py",
          "            outs = [stage.forward_logits(x[a:a + size], tile) if x is not None else\n"
          "                    stage.forward_logits(None, tile, rows.tokens[a:a + size], fed_in(fed, a, size),\n"
          "                                         fed_in(fed_pos, a, size))\n"
          "                    for a, size, tile in rows.tiles()]",
          "            outs = [(lambda o, t: (o[0] + (1e-3 * torch.randn_like(o[0])  # PLANTED FAULT\n"
          "                            if len(set(t.slot[:t.n_real].tolist())) > 1 else 0), o[1]))(\n"
          "                    stage.forward_logits(x[a:a + size], tile) if x is not None else\n"
          "                    stage.forward_logits(None, tile, rows.tokens[a:a + size], fed_in(fed, a, size),\n"
          "                                         fed_in(fed_pos, a, size)), tile)\n"
          "                    for a, size, tile in rows.tiles()]",
          [EX + "test_synthetic_layouts_identical"]),
    # 4. Triton matmuls: the decode kernel drops a row's partial sum (4-bit kinds; its bf16 rows use the
    #    same float32 code); the tensor-core kernels drop the sum of the previous chunks / K steps
    Fault("gemv-row-partial-dropped", "engine/kernels/stream_matmul.py",
          "                p = tl.sum(t, axis=1)\n"
          "                acc = tl.where(rows[:, None] == r, acc + p[None, :], acc)",
          "                p = tl.sum(t, axis=1)\n                acc = tl.where(rows[:, None] == r, acc, acc)",
          [PK + "test_matmul_is_right_and_row_invariant", PK + "test_decode_kernel_bf16_rows"]),
    Fault("dp4a-q4k-min-term-dropped", "engine/kernels/dp4a_gemv.py",
          "            acc = tl.fma(-dmin, tl.fma(mn_hi, s1, mn_lo * s0), acc)",
          "            acc = acc",
          [DG + "test_decode_kernel_is_right_and_row_invariant", DG + "test_decode_kernel_lanes_and_steps"]),
    # IQ4_XS in 64-value units: its second run read with the first run's scale
    Fault("dp4a-iq4xs-runs-share-a-scale", "engine/kernels/dp4a_gemv.py",
          "            sc_hi = tl.load(gp + 1, mask=wok3, other=0).to(tl.int32)\n",
          "            sc_hi = tl.load(gp, mask=wok3, other=0).to(tl.int32)\n",
          [DG + "test_decode_kernel_is_right_and_row_invariant[IQ4_XS]",
           DG + "test_decode_kernel_lanes_and_steps[4096-IQ4_XS]"]),
    Fault("dp4a-last-row-skipped", "engine/kernels/dp4a_gemv.py",
          "    ok3 = wok3 & (r3 + i < M)", "    ok3 = wok3 & (r3 + i < M - 1)",
          [DG + "test_decode_kernel_is_right_and_row_invariant",
           DG + "test_decode_kernel_computes_only_the_real_rows"]),
    Fault("stream-mm-acc-dropped-f32", "engine/kernels/stream_matmul.py",
          'acc = tl.dot(x_lo, wl, acc, input_precision="ieee")',
          'acc = tl.dot(x_lo, wl, input_precision="ieee")',
          [PK + "test_kernel_reads_the_layout_like_engine_quant", PK + "test_matmul_is_right_and_row_invariant",
           PK + "test_programs_that_walk_several_chunks"]),
    Fault("stream-mm-acc-dropped-bf16", "engine/kernels/stream_matmul.py",
          "acc = tl.dot(x_lo, wl, acc)\n", "acc = tl.dot(x_lo, wl)\n", []),
    Fault("quant-mm-acc-dropped-f32", "engine/kernels/quant_matmul.py",
          'acc = tl.dot(x, tl.trans(w), acc, input_precision="ieee")',
          'acc = tl.dot(x, tl.trans(w), input_precision="ieee")',
          [GK + "test_matmul_parts_side_by_side", GK + "test_quant_linear_k_tails",
           GK + "test_quant_matmul_programs_that_walk_several_k_steps"]),
    Fault("quant-mm-acc-dropped-bf16", "engine/kernels/quant_matmul.py",
          "acc = tl.dot(x, tl.trans(w), acc)\n", "acc = tl.dot(x, tl.trans(w))\n", []),
    # 5. proposal rows one position too far (their RoPE angle, and so their KV row, shifted by one)
    Fault("proposal-rows-pos+1", "engine/scheduler.py",
          "poss += range(s.n_cached, s.n_cached + sr.n_rows)",
          "poss += [p + (p >= s.n_cached + sr.n_base) for p in range(s.n_cached, s.n_cached + sr.n_rows)]",
          [RD + "test_decode_path_is_transformers_greedy[smollm2]",
           RD + "test_decode_path_logits_match_transformers[smollm2]", INDUCTION]),
    # 12. prefix reuse on a hybrid model without asking whether the state ring still holds the state
    Fault("hybrid-reuse-unchecked", "engine/scheduler.py",
          "return n if not self.conv_kernel or all(",
          "return n if True or all(",
          [HY + "test_follow_up_reuses_the_state_while_the_ring_holds_it[qwen35]"]),
    # 13. the delta net reads the state of the row's own position (a rejected proposal's, or stale)
    Fault("delta-net-reads-own-position", "engine/gdn.py",
          "S = state_ring[s, (p - 1) % STATE_RING] if p > 0",
          "S = state_ring[s, p % STATE_RING] if p > 0",
          [RD + "test_decode_path_logits_match_transformers[qwen35]",
           HY + "test_rejected_proposals_leave_the_state_as_if_they_never_ran"]),
    # a CPU prompt tile's real rows run alone: a lone real row's attention taking the one-row path
    Fault("trimmed-tile-attention-unpadded", "engine/layers.py",
          "    if rows > q.shape[0] and not q.is_cuda:",
          "    if False and rows > q.shape[0] and not q.is_cuda:",
          ["tests/engine/test_cpu_int4.py::test_a_tiles_real_rows_attend_as_in_the_full_tile",
           "tests/engine/test_cpu_int4.py::test_a_tiles_padding_rows_are_left_out_with_the_same_bits[default]"]),
    # the CPU attention's key blocks laid from the tile's first key instead of one grid (a row's blocks
    # then depend on its tile's other rows)
    Fault("key-blocks-grid-from-tile", "engine/layers.py",
          "start = 0 if lo < LONG_BLOCK else lo // LONG_BLOCK * LONG_BLOCK",
          "start = lo // KEY_BLOCK * KEY_BLOCK",
          ["tests/engine/test_cpu_int4.py::test_key_blocks_are_one_grid_whatever_the_tile"]),
    # the flash prompt attention's key blocks laid from the rows' first key instead of the absolute grid (a
    # row's blocks then depend on the rows beside it), and its running max starting at -inf (a block before
    # a row's window then makes NaN of it)
    Fault("flash-grid-from-rows", "engine/kernels/flash_prompt.py",
          "start = (tl.min(tl.where(act, lo, 1 << 30)) // BN) * BN",
          "start = tl.min(tl.where(act, lo, 1 << 30))",
          ["tests/engine/test_attention_kernel.py::test_flash_attention_for_prompt_tiles_matches_torch_and_is_row_invariant"]),
    Fault("flash-max-from-minus-inf", "engine/kernels/flash_prompt.py",
          "m = tl.full((BR * GP,), -1e30, tl.float32)",
          "m = tl.full((BR * GP,), float(\"-inf\"), tl.float32)",
          ["tests/engine/test_attention_kernel.py::test_flash_attention_for_prompt_tiles_matches_torch_and_is_row_invariant"]),
    # the tensor-core split attention's merge of its heads leaving out each row's first chunk
    Fault("tc-split-merge-drops-a-chunk", "engine/kernels/attention.py",
          "        w = tl.exp(tl.load(ml_ptr + (first + c) * 2, mask=live,",
          "        w = tl.where(c == lo // CH, 0.0, 1.0) * tl.exp(tl.load(ml_ptr + (first + c) * 2, mask=live,",
          ["tests/engine/test_attention_kernel.py::test_fused_split_attention_merges_in_its_last_chunk_program"]),
    # decode tiles of every head shape on the tensor-core split kernel (smollm2-135m's measured slower there)
    Fault("tc-split-for-every-shape", "engine/kernels/attention.py",
          "    return group >= 4 and 16 <= head_dim <= 256",
          "    return 16 <= head_dim",
          ["tests/engine/test_attention_kernel.py::test_decode_tiles_take_the_tensor_core_split_kernel_by_head_shape"]),
    # mtp-train's batched loss: a sequence's mean taken over the batch's longest length (its padding rows counted)
    Fault("mtp-train-loss-over-padding", "engine/mtp_train.py",
          "(cross_entropy(lg, ids, p).sum(1) / k.clamp(min=1)).mean()", "cross_entropy(lg, ids, p).mean(1).mean()",
          ["tests/engine/test_mtp_train_batch.py::test_a_padded_batch_gives_each_sequence_what_it_gives_alone"]),
    # device sampling: each slot's rows read from the window's first pick row instead of its own
    Fault("device-sampling-rows-from-zero", "engine/window.py",
          "rows += [(at + i, p, q) for i, q in enumerate(sr.pick_positions)]",
          "rows += [(i, p, q) for i, q in enumerate(sr.pick_positions)]",
          ["tests/engine/test_sampling.py::test_a_windows_sampled_picks_made_on_the_device_are_the_hosts"]),
    # the device sampler's top-p stretch one candidate short where its mass reaches top_p inside a run of ties
    Fault("device-top-p-one-short", "engine/kernels/sample.py",
          "t = tl.minimum(tl.maximum(tl.ceil((target - s_gt)", "t = tl.minimum(tl.maximum(tl.floor((target - s_gt)",
          ["tests/engine/test_sample_kernel.py::test_device_picks_are_the_hosts"]),
    # the device sampler's few candidates' path drawing the candidate after the one the draw passes
    Fault("device-few-draw-one-late", "engine/kernels/sample.py",
          "pick = tl.minimum(d, keep - 1)", "pick = tl.minimum(d + 1, keep - 1)",
          ["tests/engine/test_sample_kernel.py::test_device_picks_are_the_hosts"]),
    # the device sampler's chunk masses: each chunk's mass counted from its first block only
    Fault("device-chunk-mass-first-block", "engine/kernels/sample.py",
          "        mass += tl.where(eb >= 0, e, 0.0)\n",
          "        mass = tl.where(eb >= 0, e, 0.0) + mass * (b == 0)\n",
          ["tests/engine/test_sample_kernel.py::test_device_picks_are_the_hosts"]),
    # the device sampler's candidates: a later chunk's written over the first chunk's places
    Fault("device-chunk-candidates-from-zero", "engine/kernels/sample.py",
          "sel = (j >= n) & (j < n + cnt) & (j - n < FEW)",
          "sel = (j < cnt) & (j < FEW)",
          ["tests/engine/test_sample_kernel.py::test_device_picks_are_the_hosts"]),
    # a chained window of sampled streams fed by its feeding window's argmax instead of the sampler's picks
    Fault("chained-sampled-as-argmax", "engine/scheduler.py",
          "        seqs = dict(w.seqs)\n        rows.pick_params = self._pick_params(parts, seqs)\n",
          "        seqs = dict(w.seqs)\n",
          ["tests/engine/test_chaining.py::test_sampled_windows_chain_on_the_samplers_device_picks"]),
    # a whole chain's graph running every step at its first position
    Fault("draft-chain-same-position", "engine/draft_graph.py",
          "x = d._layer(tok, x, slot, pos + k, n)", "x = d._layer(tok, x, slot, pos, n)",
          ["tests/engine/test_draft_graph.py::test_whole_chains_propose_at_each_steps_position"]),
    # every paused window's rows put into the drafter's ring, through the whole hold (2-3% of each on an H100)
    Fault("guard-ring-whole-hold", "engine/draft_guard.py",
          "return not self.enabled or bool(self._todo) or self.hold - self._held <= within", "return True",
          ["tests/engine/test_draft_guard.py::test_paused_windows_keep_their_hidden_states_only_near_the_next_trial"]),
    # a bench that prints rates over requests that ended in an error part way
    Fault("bench-ignores-failed-requests", "app/cmd_bench.py",
          'if d.finish_reason == "error":', 'if d.finish_reason == "never":',
          ["tests/app/test_bench.py::test_a_request_that_fails_part_way_fails_the_bench"]),
    # a chained draft window's DraftWindow chosen by its rows alone: after the guard goes deeper it chains at
    # the shallower depth and the next window fails (guarded GPU requests ended in an error, 2026-12-06)
    Fault("draft-window-by-rows", "engine/draft_chain.py",
          "win = self.drafter.window(self.lens) if all(m == self.depth + 1 for m in self.lens) else None",
          "win = self.drafter.window(self.lens)",
          ["tests/engine/test_draft_chain.py::test_draft_windows_chain_at_the_depth_the_guard_moves_to"]),
    # the draft guard keeping drafts that give fewer tokens a second than windows without them
    Fault("guard-keeps-slower-drafts", "engine/draft_guard.py",
          "best = high if self.rate[high] > self.rate[low] else low",
          "best = high",
          ["tests/engine/test_draft_guard.py::test_drafts_that_cost_more_than_they_give_are_paused_and_measured_again_later"]),
    # held drafts never looked at again until their hold ends
    Fault("guard-holds-drafts-blind", "engine/draft_guard.py",
          "if self.drafting and recent[2] >= CHECK:", "if self.drafting and recent[2] >= CHECK * 1000:",
          ["tests/engine/test_draft_guard.py::test_held_drafts_pause_as_soon_as_their_recent_windows_fall_behind"]),
    # a count of sequences the guard has not seen starting with drafts whatever the counts it has seen hold
    Fault("guard-new-count-drafts", "engine/draft_guard.py",
          "(self._known[near][0], self._known[near][-1]) if near is not None else (",
          "(self.top, self.top) if near is not None else (",
          ["tests/engine/test_draft_guard.py::"
           "test_prompt_windows_restart_a_span_and_each_count_of_sequences_keeps_its_own_measurements"]),
    # a loaded model's objects left in Python's full collections (90-120 ms stalls inside a request)
    Fault("model-objects-collected", "engine/core.py",
          "        gc.collect()\n        gc.freeze()\n", "        gc.collect()\n",
          ["tests/engine/test_collector.py::test_a_loaded_model_is_left_out_of_full_collections_until_it_is_unloaded"]),
    # a hold counted in the tokens of all sequences together: four streams measure drafts four times as often
    Fault("guard-hold-all-sequences", "engine/draft_guard.py",
          "self._held += tokens / n_active", "self._held += tokens",
          ["tests/engine/test_draft_guard.py::test_a_hold_is_counted_in_each_sequences_tokens"]),
    # drafts that lose at their full depth paused without trying a shallower depth that pays
    Fault("guard-no-shallower-depth", "engine/draft_guard.py",
          "if self.rate[high] <= self.rate[low] and low == 0 and high > 1:",
          "if self.rate[high] <= self.rate[low] and low == 0 and high > 99:",
          ["tests/engine/test_draft_guard.py::"
           "test_a_fresh_guard_climbs_where_drafts_keep_most_and_drafts_that_fall_behind_are_tried_shallower"]),
    # held drafts never tried deeper when their windows keep most proposals
    Fault("guard-never-deeper", "engine/draft_guard.py",
          "return min(2 * d, self.top) if self._climbs(d) else d // 2",
          "return d // 2",
          ["tests/engine/test_draft_guard.py::test_held_drafts_go_deeper_when_their_windows_keep_most_proposals"]),
    # a fresh guard that climbs only after a hold (1,024 tokens at depth 1 on code before depth 2 is tried)
    Fault("guard-climbs-after-hold", "engine/draft_guard.py",
          "if best == high and self._climbs(high):", "if False:",
          ["tests/engine/test_draft_guard.py::"
           "test_a_fresh_guard_climbs_where_drafts_keep_most_and_drafts_that_fall_behind_are_tried_shallower"]),
    # a fresh guard that measures the plan's full depth first (a trial of 16-row windows at four streams)
    Fault("guard-starts-at-full-depth", "engine/draft_guard.py",
          "self._known[near][-1]) if near is not None else (\n                1, 1)",
          "self._known[near][-1]) if near is not None else (\n                self.top, self.top)",
          ["tests/engine/test_draft_guard.py::"
           "test_a_fresh_guard_measures_depth_1_first_and_goes_no_deeper_where_it_keeps_little"]),
    # the scheduler drafting at the plan's depth whatever depth the guard holds
    Fault("guard-depth-ignored", "engine/draft_guard.py",
          "return min(top, self.level) if self.enabled else top",
          "return (top if self.level else 0) if self.enabled else top",
          ["tests/engine/test_draft_guard.py::"
           "test_a_guarded_engine_drafts_at_the_depth_that_pays_and_gives_the_same_tokens"]),
    # the draft guard measuring a side far behind as often as a close one
    Fault("guard-far-side-soon", "engine/draft_guard.py",
          "if lead >= FAR else hold", "if lead >= 100 * FAR else hold",
          ["tests/engine/test_draft_guard.py::test_drafts_that_cost_more_than_they_give_are_paused_and_measured_again_later"]),
    # windows the guard paused still followed by the drafter (no chaining: the pause saves nothing)
    # a CPU stage (windows that do not chain) left without the guard by default, as before 2026-12-05
    Fault("guard-off-on-cpu", "engine/draft_guard.py",
          'return n_groups == 1 and guard_mode() != "0"', 'return n_groups == 1 and guard_mode() == "1"',
          ["tests/engine/test_draft_guard.py::"
           "test_a_cpu_stage_is_guarded_by_default_and_its_paused_windows_skip_the_drafter"]),
    # the drafter's ring only where windows chain (as before 2026-12-06): a CPU stage's paused windows follow
    Fault("guard-ring-only-chained", "engine/loader.py",
          "    return plan.follows and guards(len(groups))\n",
          "    return plan.follows and guards(len(groups)) and False\n",
          ["tests/engine/test_draft_guard.py::"
           "test_a_cpu_stage_is_guarded_by_default_and_its_paused_windows_skip_the_drafter"]),
    # paused windows that do not chain (a CPU stage) still running the drafter's layer over their rows
    Fault("guard-paused-unchained-follow", "engine/scheduler.py",
          "rows.pick_idx is None and (self.drafter.ring is None or not self._decode_only(parts))))",
          "rows.pick_idx is None))",
          ["tests/engine/test_draft_guard.py::"
           "test_a_cpu_stage_is_guarded_by_default_and_its_paused_windows_skip_the_drafter"]),
    Fault("guard-paused-drafter-follows", "engine/scheduler.py",
          "return self.drafter is not None and self.plan.follows and self.guard.drafting",
          "return self.drafter is not None and self.plan.follows",
          ["tests/engine/test_draft_guard.py::test_a_guarded_engine_pauses_costly_drafts_chains_meanwhile_and_gives_the_same_tokens"]),
    # the draft guard timing the window that read the prompt as a decode window
    Fault("guard-counts-prompt-window", "engine/scheduler.py",
          "self._decode_only(w.parts),", "all(sr.decoding for sr in w.parts),",
          ["tests/engine/test_draft_guard.py::"
           "test_a_guarded_engine_pauses_costly_drafts_chains_meanwhile_and_gives_the_same_tokens"]),
    # drafts resumed after a pause without the drafter catching up on the paused positions (its KV holes)
    Fault("guard-resume-skips-gap", "engine/scheduler.py",
          "gaps = self._gaps(parts, seqs) if follow else None", "gaps = None",
          ["tests/engine/test_draft_guard.py::"
           "test_drafts_resumed_after_a_pause_first_catch_the_drafter_up_on_the_paused_positions"]),
    # the ring keeping a paused row's hidden state at the next position's row
    Fault("drafter-ring-off-by-one", "engine/drafts.py",
          "at = self._ring_at(slots, pos)",
          "at = self._ring_at(slots, [p + 1 for p in pos])",
          ["tests/engine/test_draft_guard.py::"
           "test_drafts_resumed_after_a_pause_first_catch_the_drafter_up_on_the_paused_positions"]),
    # the MTP drafter following every window with drafts off (no chaining, catch-up rows for nothing)
    Fault("drafter-follows-without-drafts", "engine/drafts.py",
          "return self.mtp and (self.spec > 1 or self.piped > 0)",
          "return self.mtp",
          ["tests/engine/test_chaining.py::test_a_model_with_an_mtp_layer_chains_while_drafts_are_off"]),
    # replayed proposals: a proposal drawn as not kept still the recorded token
    Fault("replay-never-wrong", "engine/drafts.py",
          "out.append(recorded[t] + 1)",
          "out.append(recorded[t])",
          ["tests/engine/test_drafts.py::test_replay_proposals_keep_the_recorded_tokens_at_the_rate_asked"]),
    # the int8 decode kernel: a pass's later rows multiplied with its first row's x
    Fault("dp4a-pass-rows-share-x", "engine/kernels/dp4a_gemv.py",
          "_x_unit(xp + i * rstride,", "_x_unit(xp + 0 * rstride,",
          [DG + "test_decode_kernel_is_right_and_row_invariant"]),
    # two weight rows a thread (XS 2): the second rows' code pointers left at the first lane step
    Fault("dp4a-xs-second-rows-stale", "engine/kernels/dp4a_gemv.py",
          "        cp_b += step_w\n", "",
          [DG + "test_weight_rows_sharing_x_loads_give_the_same_bits[Q4_K]"]),
    # a pass of the int8 kernel skipping its third row as if it were past the real count
    Fault("dp4a-pass-skips-a-real-row", "engine/kernels/dp4a_gemv.py",
          "        if r0 + I0 + 2 < M:\n", "        if r0 + I0 + 3 < M:\n",
          [DG + "test_rows_per_pass_give_the_same_bits"]),
    # a window's hidden rows taken as a slice from its first real row although padding lies between them
    Fault("window-rows-slice-across-padding", "engine/graphs.py",
          "    return a if index == list(range(a, a + len(index))) else None", "    return a",
          ["tests/engine/test_tiles.py::test_a_windows_rows_are_a_slice_only_where_they_are_consecutive"]),
    # the fused split attention miscounting a row's chunks: no program merges them
    Fault("attn-fused-chunks-miscounted", "engine/kernels/attention.py",
          "                if ticket == pos // CH - lo // CH:\n                    tl.store(cnt_ptr + t * H + h, 0)",
          "                if ticket == pos // CH - lo // CH + 1:\n                    tl.store(cnt_ptr + t * H + h, 0)",
          ["tests/engine/test_attention_kernel.py::test_fused_split_attention_merges_in_its_last_chunk_program"]),
    # a lone GPU decode row padded into the 16-row tile (its 1-row tile and graph never used)
    Fault("solo-decode-tile-unused", "engine/pipeline.py",
          "out.append((a, self.solo if not prompt and real == 1 and self.solo else size, real))",
          "out.append((a, size, real))",
          ["tests/engine/test_tiles.py::test_a_lone_decode_row_gets_a_one_row_tile_on_a_gpu"]),
    # the drafter's graph path: a chain past its first unsure proposal still offered
    Fault("draft-graph-min-p-ignored", "engine/drafts.py",
          "            if q < min_p:\n", "            if False:\n",
          ["tests/engine/test_draft_graph.py::test_the_graph_path_cuts_unsure_chains_like_the_eager_one"]),
    # IQ4 on the GPU path: two of the 16 values swapped (the dequantizing kernels and the int8 kernel's
    # emulated lookup read the same tree)
    Fault("iq4-kvalues-swapped", "engine/kernels/iq4.py",
          "_tree(q, -127, -104, -83, -65, -49, -35, -22, -10,", "_tree(q, -127, -104, -83, -65, -49, -35, -10, -22,",
          [PK + "test_dequantize_kernel_writes_engine_quants_values[IQ4_XS]",
           DG + "test_decode_kernel_is_right_and_row_invariant[IQ4_NL]"]),
    # the CPU fast mode's two-part matrices (Q8_0, Q5_0, Q5_1) losing their second part's products
    Fault("int4-second-part-dropped", "engine/cpu_int4.py",
          "torch.cat((x, x), 1) if w.twice else x", "torch.cat((x, 0 * x), 1) if w.twice else x",
          ["tests/engine/test_cpu_int4.py::test_int4_values_are_the_files_and_rows_do_not_depend_on_the_tile"]),
    # the CPU prompt kernel (engine/native/int4_prompt_gemm.c): the nibbles of a byte read the wrong way
    # round; a two-part matrix's second part scaled by the first part's group; the accumulators restarting
    # at each k block; a tile's last rows (past the 6-row blocks) taking the k pairs in reverse order
    Fault("prompt-gemm-nibbles-swapped", "engine/native/int4_prompt_gemm.c",
          "const int high = c >= 32, at", "const int high = c < 32, at",
          [GM + "test_prompt_kernel_reads_every_type_and_rows_stand_alone[Q4_0-576]"]),
    Fault("prompt-gemm-second-part-group", "engine/native/int4_prompt_gemm.c",
          "kk = p * K + k + h, g = kk / 32;", "kk = p * K + k + h, g = (k + h) / 32;",
          [GM + "test_prompt_kernel_reads_every_type_and_rows_stand_alone[Q8_0-320]"]),
    Fault("prompt-gemm-k-blocks-restart", "engine/native/int4_prompt_gemm.c",
          "a[i][c] = i < mr ? _mm512_load_ps(acc + i * NB + c * 16) : _mm512_setzero_ps();",
          "a[i][c] = _mm512_setzero_ps();",
          [GM + "test_prompt_kernel_reads_every_type_and_rows_stand_alone[Q5_0-640]"]),
    Fault("prompt-gemm-tail-rows-apart", "engine/native/int4_prompt_gemm.c",
          "for (int64_t j = j0; j < j1; j++) {\n            const __m512bh *w = (const __m512bh *)(panel + j * NB);\n"
          "            for (int i = 0; i < mr; i++)",
          "for (int64_t jr = j0; jr < j1; jr++) {\n            const int64_t j = j0 + j1 - 1 - jr;\n"
          "            const __m512bh *w = (const __m512bh *)(panel + j * NB);\n            for (int i = 0; i < mr; i++)",
          [GM + "test_prompt_kernel_reads_every_type_and_rows_stand_alone[Q4_K-512]"]),
    # the CPU decode attention kernel (engine/native/decode_attention.c): a row's first key block left out of
    # the merge; a sliding window's first block walked from the block's start; every row reading row 0's slot
    Fault("decode-attn-merge-skips-a-block", "engine/native/decode_attention.c",
          "for (int64_t b = 0; b < blocks[r]; b++) {\n                    const float *st = st0 + b * per;",
          "for (int64_t b = 1; b < blocks[r]; b++) {\n                    const float *st = st0 + b * per;",
          [CA + "test_decode_kernel_is_attention_and_rows_stand_alone[9-3-64-torch.bfloat16-0]"]),
    Fault("decode-attn-window-from-block-start", "engine/native/decode_attention.c",
          "const int64_t a0 = b * KB > lo ? b * KB : lo,", "const int64_t a0 = b * KB,",
          [CA + "test_decode_kernel_is_attention_and_rows_stand_alone[4-1-256-torch.float32-300]"]),
    # the values' sums with one head fewer where the group size is a constant (Gemma 3's 4)
    Fault("decode-attn-values-head-short", "engine/native/decode_attention.c",
          "case 4: values_of(vb, kstride, lo, hi, s, st, hd, 4, 1); break;",
          "case 4: values_of(vb, kstride, lo, hi, s, st, hd, 3, 1); break;",
          [CA + "test_decode_kernel_is_attention_and_rows_stand_alone[4-1-256-torch.float32-300]"]),
    Fault("decode-attn-row-zeros-slot", "engine/native/decode_attention.c",
          "const int64_t slot = a->slot[r];", "const int64_t slot = a->slot[0];",
          [CA + "test_decode_kernel_is_attention_and_rows_stand_alone[8-8-32-torch.float32-0]"]),
    # the CPU decode-row kernel (engine/native/int4_rows.c): a group's zero left out; a two-part matrix's
    # second part multiplied with x's first columns again; every row of a 4-row pass reading the pass's first
    # row of x; decode tiles sent to torch's kernel after all
    Fault("int4-rows-zero-dropped", "engine/native/int4_rows.c",
          "acc_lo[i] = _mm512_fmadd_ps(zl, xs, _mm512_fmadd_ps(sl, t_lo[i], acc_lo[i]));",
          "acc_lo[i] = _mm512_fmadd_ps(sl, t_lo[i], acc_lo[i]);",
          [GM + "test_decode_row_kernel_reads_every_type_and_rows_stand_alone[Q4_1-320]"]),
    Fault("int4-rows-second-part-x", "engine/native/int4_rows.c",
          "const int64_t kx = (g * 32) % K;", "const int64_t kx = g * 32 < K ? g * 32 : 0;",
          [GM + "test_decode_row_kernel_reads_every_type_and_rows_stand_alone[Q8_0-320]"]),
    Fault("int4-rows-pass-shares-x", "engine/native/int4_rows.c",
          "x[(r0 + i) * (K / 2) + kx / 2 + j]", "x[r0 * (K / 2) + kx / 2 + j]",
          [GM + "test_decode_row_kernel_reads_every_type_and_rows_stand_alone[Q4_K-512]"]),
    Fault("int4-decode-rows-on-torch", "engine/cpu_int4.py",
          "if (tile < cpu_gemm.MIN_TILE or not w.gemm) and cpu_gemm.rows_usable(w.n, w.k):", "if False:",
          [GM + "test_decode_row_kernel_reads_every_type_and_rows_stand_alone[Q4_1-320]"]),
    # a CPU stage's decode tiles in one C call (engine/native/decode_layers.c, engine.cpu_layers): the two
    # rotations' partners swapped; every row's k and v written at the tile's first row's slot; gemma's norm
    # after the FFN left out; the activation not rounded to bfloat16 before its product with up; q and k
    # rotated in bfloat16 steps where q / k norms made them float32; the sliding window dropped; the attention
    # over the tile's first row only; a tile's padding rows given back as they came in; the MTP drafter's loop
    # given the other rotation's tables
    Fault("layers-rotation-partners-swapped", "engine/native/decode_layers.c",
          "s->neox ? (i + rd / 2) % rd : (i ^ 1)", "s->neox ? (i ^ 1) : (i + rd / 2) % rd",
          [LY + "test_decode_layers_give_a_tile_the_torch_blocks_bits[llama]"]),
    Fault("layers-kv-at-first-rows-slot", "engine/native/decode_layers.c",
          "(slot[r] * s->ctx + pos[r]) * nk", "(slot[0] * s->ctx + pos[r]) * nk",
          [LY + "test_decode_layers_give_a_tile_the_torch_blocks_bits[qwen3]"]),
    Fault("layers-post-ffw-norm-dropped", "engine/native/decode_layers.c",
          "add_output(s, x, T, L->post_ffw_norm, b);", "add_output(s, x, T, NULL, b);",
          [LY + "test_decode_layers_give_a_tile_the_torch_blocks_bits[gemma3]"]),
    Fault("layers-activation-unrounded", "engine/native/decode_layers.c",
          "to_bf16_16(_mm512_mul_ps(ab, up))", "to_bf16_16(_mm512_mul_ps(_mm512_add_ps(a, _mm512_mul_ps(ab, _mm512_setzero_ps())), up))",
          [LY + "test_decode_layers_give_a_tile_the_torch_blocks_bits[qwen3]"]),
    Fault("layers-normed-rotation-in-bf16", "engine/native/decode_layers.c",
          "rotate(s, L, v, pos[r], qf);", "rotate(s, L, v, pos[r], 0);",
          [LY + "test_decode_layers_give_a_tile_the_torch_blocks_bits[qwen3]"]),
    Fault("layers-window-dropped", "engine/native/decode_layers.c",
          "L->window, L->scale, att)", "0, L->scale, att)",
          [LY + "test_decode_layers_give_a_tile_the_torch_blocks_bits[gemma3]"]),
    Fault("layers-attention-first-row-only", "engine/native/decode_layers.c",
          "strata_decode_attention(b->q, T, H,", "strata_decode_attention(b->q, 1, H,",
          [LY + "test_decode_layers_give_a_tile_the_torch_blocks_bits[llama]"]),
    Fault("layers-padding-rows-as-given", "engine/stage.py",
          "return y if n == x.shape[0] else torch.cat((y, y.new_zeros(x.shape[0] - n, y.shape[1])))",
          "return y if n == x.shape[0] else torch.cat((y, x[n:]))",
          [LY + "test_a_decode_tiles_padding_rows_come_back_as_zeros"]),
    # the draft guard: a span without drafts far behind drafts' rate run to its end all the same
    Fault("guard-plain-span-never-ends-early", "engine/draft_guard.py",
          " or self._far_behind(span, now)\n", "\n",
          ["tests/engine/test_draft_guard.py::test_drafts_that_pay_stay_on"]),
    # --batch-groups auto's measured choice (engine.group_choice): piped groups whatever the windows measured
    Fault("group-choice-ignores-measurement", "engine/group_choice.py",
          "g = n_groups if piped > serial else 1", "g = n_groups",
          ["tests/engine/test_group_choice.py::test_the_choice_follows_the_measurement_and_the_engine_runs_it"]),
    # the device verdict (chained draft windows, DraftWindow and MtpDrafter.on_device): proposals confirmed
    # after a rejected one counted as kept
    Fault("device-verdict-keeps-past-a-miss", "engine/window.py",
          "return 1 + runs.long().cumprod(dim=1).sum(dim=1)", "return 1 + runs.long().sum(dim=1)",
          ["tests/engine/test_draft_chain.py::test_the_device_verdict_keeps_proposals_up_to_the_first_miss"]),
    Fault("drafter-loop-rotation-flipped", "engine/drafts.py",
          "self._rotation = rotation_tables(*self.rope, self.cfg.rope_neox)",
          "self._rotation = rotation_tables(*self.rope, not self.cfg.rope_neox)",
          [LY + "test_the_mtp_drafters_block_runs_the_loop_with_the_torch_blocks_bits"]),
    # the CPU Q8_0 head kernel (engine/native/q8_0_rows.c): a block's second 16 codes read from its first;
    # every row of a 4-row pass reading the pass's first row of x
    # the CPU RMSNorm leaving out a row's values past its last 16 lanes, or dividing by one value fewer
    Fault("rms-norm-drops-tail", "engine/native/rows_norm.c",
          "        __m512 v = _mm512_maskz_loadu_ps(m, x + i);\n        acc = _mm512_fmadd_ps(v, v, acc);",
          "        __m512 v = _mm512_maskz_loadu_ps(m, x + i);\n        (void)v;",
          [GM + "test_rms_norm_kernel_matches_torch_and_rows_stand_alone"]),
    Fault("rms-norm-mean-off", "engine/native/rows_norm.c",
          "lane[0] / (float)n + eps", "lane[0] / (float)(n - 1) + eps",
          [GM + "test_rms_norm_kernel_matches_torch_and_rows_stand_alone"]),
    # the Q6_K decode kernel taking a half block's runs 2 and 3 before 0 and 1, or qh's bit pairs shifted wrong
    Fault("q6k-runs-swapped", "engine/native/q6_k_rows.c",
          "const __m512i qb = r < 2 ? q01 : q23;", "const __m512i qb = r < 2 ? q23 : q01;",
          [GM + "test_q6_k_decode_kernel_is_exact_and_rows_stand_alone"]),
    Fault("q6k-high-bits-wrong", "engine/native/q6_k_rows.c",
          "e6 = _mm512_srli_epi16(e, 6);", "e6 = _mm512_srli_epi16(e, 5);",
          [GM + "test_q6_k_decode_kernel_is_exact_and_rows_stand_alone"]),
    Fault("q8-head-second-half-codes", "engine/native/q8_0_rows.c",
          "_mm_loadu_si128((const __m128i *)(blk + 18))", "_mm_loadu_si128((const __m128i *)(blk + 2))",
          [GM + "test_q8_0_head_kernel_is_exact_and_rows_stand_alone"]),
    Fault("q8-head-rows-of-a-pass-share-x", "engine/native/q8_0_rows.c",
          "const float *xr = xf + (m0 + i) * K + b * QK;", "const float *xr = xf + m0 * K + b * QK;",
          [GM + "test_q8_0_head_kernel_is_exact_and_rows_stand_alone"]),
    # the CPU prompt attention kernel (engine/native/prompt_attention.c): a lane's window starting at its
    # block's first row's; the first chunk's keys before a row's window attended; a row block running on
    # across a change of slot (its later rows reading the first row's keys)
    Fault("prompt-attn-window-of-block-first-row", "engine/native/prompt_attention.c",
          "(int32_t)(a->pos[r0 + rr] - a->window + 1)", "(int32_t)(a->pos[r0] - a->window + 1)",
          [CA + "test_kernel_is_attention_and_close_to_torchs_path[4-1-256-torch.float32-40]",
           CA + "test_kernel_rows_stand_alone_at_any_tile_start_row_count_and_thread_count[100]"]),
    Fault("prompt-attn-window-mask-dropped", "engine/native/prompt_attention.c",
          "_mm512_cmp_epi32_mask(kp, vpos, _MM_CMPINT_LE) &\n", "_mm512_cmp_epi32_mask(kp, vpos, _MM_CMPINT_LE) | 0 *\n",
          [CA + "test_kernel_is_attention_and_close_to_torchs_path[4-1-256-torch.float32-40]"]),
    Fault("prompt-attn-block-spans-slots", "engine/native/prompt_attention.c",
          "e - r < rows && slot[e] == slot[r]", "e - r < rows",
          [CA + "test_kernel_rows_stand_alone_at_any_tile_start_row_count_and_thread_count[0]"]),
    # the GPU delta net kernel reading a row's previous state from its own position (not p - 1)
    Fault("gdn-rows-state-not-previous", "engine/kernels/gdn_rows.py",
          "((p - 1 + RING) % RING) * stride_sr", "((p + RING) % RING) * stride_sr",
          ["tests/engine/test_gdn_rows.py::test_the_kernel_walks_rows_like_the_torch_recurrence"]),
    # the GPU delta net's conv reading an earlier row of the tile's input from the ring (not yet written)
    Fault("gdn-conv-ring-for-tile-rows", "engine/kernels/gdn_rows.py",
          "here = ch * 0 + u >= 0", "here = ch * 0 + u >= 1 << 30",
          ["tests/engine/test_gdn_rows.py::test_a_prompt_longer_than_the_ring"]),
    # every row writing its conv inputs to the ring, also those a later row of its slot overwrites (a race)
    Fault("gdn-ring-write-not-last-row", "engine/kernels/gdn_rows.py",
          "        if later == 0:", "        if later >= 0:",
          ["tests/engine/test_gdn_rows.py::test_a_prompt_longer_than_the_ring"]),
    # prompt tiles and the dequantizing kernel taking an IQ4 word's high half from the wrong nibbles
    Fault("iq4-prompt-word-halves", "engine/kernels/stream_matmul.py",
          "kvalue(tl.reshape((wd[:, :, :, None] >> (sh + 16)) & 0xF,",
          "kvalue(tl.reshape((wd[:, :, :, None] >> (sh + 12)) & 0xF,",
          ["tests/engine/test_packed.py::test_prompt_kernels_iq4_values_by_select_tree[IQ4_XS]",
           "tests/engine/test_packed.py::test_prompt_kernels_iq4_values_by_select_tree[IQ4_NL]"]),
    # the same, with the values by byte permutes (the default, STRATA_IQ4_PRMT=1)
    Fault("iq4-prompt-permute-halves", "engine/kernels/stream_matmul.py",
          "v_hi = tl.reshape((vb[:, :, :, None] << sh8)", "v_hi = tl.reshape((va[:, :, :, None] << sh8)",
          ["tests/engine/test_packed.py::test_dequantize_kernel_writes_engine_quants_values[IQ4_XS]",
           "tests/engine/test_packed.py::test_kernel_reads_the_layout_like_engine_quant[IQ4_NL]"]),
    # the GPU's IQ4 lookup (PTX, never run by the interpreter) keeping the codes' bit 3 in the lookups'
    # selectors (prmt's sign fill)
    Fault("iq4-prmt-sign-fill", "engine/kernels/iq4.py",
          '"and.b32 c, $2, 0x77777777;', '"and.b32 c, $2, 0xFFFFFFFF;',
          ["tests/engine/test_iq4_prmt.py::test_kvalues8_ptx_matches_each_table_on_every_half_word"]),
    # a CPU decode tile of several rows (streams together, a slot's proposals) attending with the blocked
    # a CPU prompt tile writing its rows' keys one place off (the slice path for one slot's consecutive rows)
    Fault("cpu-prompt-run-keys-shifted", "engine/block.py",
          "        k_cache[s, p:p + T] = k.to(k_cache.dtype)", "        k_cache[s, p:p + T] = k.roll(1, 0).to(k_cache.dtype)",
          ["tests/engine/test_reference.py::test_logits_match_transformers"]),
    # prompt path instead of each row's one-row attention: other bits than the row alone
    Fault("cpu-decode-tile-not-per-row", "engine/layers.py",
          "    if per_row and not q.is_cuda and q.shape[0] > 1:", "    if False:",
          ["tests/engine/test_cpu_decode_rows.py::test_rows_in_shared_decode_tiles_keep_their_bits"
           "[spec3-torch-attention]"], cpu_kernels=True),
    # a dense matrix (Q6_K on a CPU) computing a decode tile's rows in one padded GEMM, not one row per call
    Fault("cpu-dense-rows-not-alone", "engine/quant.py",
          "        if alone and x[..., 0].numel() > 1:", "        if False:",
          ["tests/engine/test_cpu_decode_rows.py::test_a_dense_matrix_gives_each_row_of_a_decode_tile_its_one_row_bits"]),
    # the bfloat16 decode kernel scaling a group's high-nibble sub-block by the low one's scale
    Fault("bf16-high-nibbles-low-scale", "engine/kernels/bf16_decode.py",
          "_pair(dd * byte_at(ws, sh + 8), BN)", "_pair(dd * byte_at(ws, sh), BN)",
          ["tests/engine/test_bf16_decode.py::test_bf16_kernel_is_right_within_bfloat16_and_row_invariant"]),
    # a row's lanes added in another order than the GPU's tl.sum (the interpreter's int8 kernel and its
    # tensor-core twin both read the tree, so only the butterfly reference can tell)
    Fault("lane-tree-highest-bit-always", "engine/kernels/lane_tree.py",
          "    v = tl.reshape(v, (LC // (2 << B), 2, 1 << B, X))", "    v = tl.reshape(v, (1, 2, LC // 2, X))",
          ["tests/engine/test_dp4a_mma.py::test_the_lane_tree_is_the_gpus_butterfly"]),
    # its Q4_K minimums taken from the other sub-block
    Fault("dmma-q4k-mins-swapped", "engine/kernels/dp4a_mma.py",
          "        mn_lo = tl.load(gp + 8, mask=uok, other=0).to(tl.float32)",
          "        mn_lo = tl.load(gp + 9, mask=uok, other=0).to(tl.float32)",
          [GK + "test_packed_block_decode_tile_is_row_invariant_and_right[Q4_K-dp4a+mma]"]),
    # Q4_K codes in the tensor-core order with a lane's quarter and its row half swapped
    Fault("mma-order-rows-swapped", "engine/kernels/packed.py",
          ".permute(0, 3, 4, 2, 5, 1, 6)", ".permute(0, 3, 4, 2, 1, 5, 6)",
          [PK + "test_tensor_core_order_is_the_mma_fragments"]),
    # the prompt kernels reading tensor-core ordered codes with the second 8 rows' words one word off
    Fault("mma-order-prompt-index", "engine/kernels/stream_matmul.py",
          "+ ((nn % 16) // 8) * 8 + j % 8)", "+ ((nn % 16) // 8) * 4 + j % 8)",
          [PK + "test_kernels_read_the_tensor_core_order"]),
    # the dequantizing kernel (prompt tiles) putting a word of row g + 8 in row g's place
    Fault("mma-order-dequant-rows", "engine/kernels/stream_matmul.py",
          "+ u * 16 + r * 8 + i)", "+ u * 16 + r * 4 + i)",
          [PK + "test_kernels_read_the_tensor_core_order"]),
    # the tensor-core decode kernel taking a sub-block's minimum from its scale's byte (PTX: GPU only,
    # tests/engine/test_q4k_mma.py)
    Fault("q4k-mma-mins-from-scales", "engine/kernels/q4k_mma.py",
          'f"prmt.b32 ma, ${14 + w}, k, {sel};"', 'f"prmt.b32 ma, ${12 + w}, k, {sel};"', []),
    # the tensor-core decode kernel storing a warp's second 16-row group over its first's second half (GPU
    # only: tests/engine/test_q4k_mma.py, the groups-a-warp and rows tests)
    Fault("q4k-mma-groups-overlap", "engine/kernels/q4k_mma.py",
          "n = ng * (16 * TM) + to * 16 + lo // 4", "n = ng * (16 * TM) + to * 8 + lo // 4", []),
    # chained draft windows: the drafter's chain starting from each slot's first row, not its last kept one
    Fault("chained-drafts-first-row", "engine/draft_graph.py",
          "last = starts + kept - 1", "last = starts + kept * 0",
          [DC + "test_chained_draft_windows_keep_every_token_and_draft[1-1]"]),
    # the same in the drafter's separate passes (STRATA_DRAFT_WINDOW=0, and windows whose slots differ)
    Fault("chained-drafts-passes-first-row", "engine/drafts.py",
          "last = on_device(starts, dev) + kept - 1", "last = on_device(starts, dev) + kept * 0",
          [DC + "test_chained_draft_windows_keep_every_token_and_draft[2-0]"]),
    # chained draft windows: the next window's rows one position past the device's kept ones
    Fault("chained-drafts-positions-ahead", "engine/draft_graph.py",
          "(nxt[:, None] + torch.arange(width", "(nxt[:, None] + 1 + torch.arange(width",
          [DC + "test_chained_draft_windows_keep_every_token_and_draft[1-1]"]),
    # a slot's later decode rows of a draft window on a CPU stage over keys their sliding window has passed
    Fault("decode-rows-window-start", "engine/layers.py",
          "a, b = lo - los[0], pos[r] + 1 - los[0]", "a, b = 0, pos[r] + 1 - los[0]",
          ["tests/engine/test_cpu_decode_rows.py::test_a_slots_run_of_decode_rows_gets_each_rows_one_row_attention"]),
    # the GPU block's q|k|v kernel leaving out the values' bias (glm4moe)
    Fault("qkv-kernel-v-bias-dropped", "engine/kernels/fused.py",
          "        v += tl.load(b_ptr + (H + KVH) * HD + kvh * HD + d)\n",
          "        v += 0.0 * tl.load(b_ptr + (H + KVH) * HD + kvh * HD + d)\n",
          [GK + "test_fast_block_matches_torch_block[glm4moe]"]),
    # Q5_0 repacked as Q8_0's planes with its codes off by one (q - 15)
    Fault("q5-0-codes-offset", "engine/kernels/packed.py",
          "(q.view(torch.int8) - 16)", "(q.view(torch.int8) - 15)",
          [PK + "test_unpack_is_bit_identical_to_engine_quant[Q5_0]", PK + "test_q5_0_is_q8_planes"]),
    # the int8 decode kernel giving both halves of a Q6_K unit the first half's scale
    Fault("dp4a-q6k-one-scale", "engine/kernels/dp4a_gemv.py",
          "under x's d0\n        acc = tl.fma(d0, tl.fma(dmin, phi.to(tl.float32), dd * plo.to(tl.float32)), acc)",
          "under x's d0\n        acc = tl.fma(d0, tl.fma(dd, phi.to(tl.float32), dd * plo.to(tl.float32)), acc)",
          [DG + "test_decode_kernel_is_right_and_row_invariant[Q6_K]"]),
    # Q6_K's 6-bit planes (kind 10): codes not sign-extended, the second 32 values under x's first scale,
    # the prompt kernels' high bits from the wrong pair, the packer's high bits in the wrong order
    Fault("dp4a-q6k-planes-unsigned", "engine/kernels/dp4a_gemv.py",
          "    return u | (t << 1) | (t << 2)", "    return u",
          [DG + "test_decode_kernel_is_right_and_row_invariant[Q6_K-planes]"]),
    Fault("dp4a-q6k-planes-one-x-scale", "engine/kernels/dp4a_gemv.py",
          "        acc = tl.fma(d1, tl.fma(sc_hi, phi", "        acc = tl.fma(d0, tl.fma(sc_hi, phi",
          [DG + "test_decode_kernel_is_right_and_row_invariant[Q6_K-planes]"]),
    Fault("prompt-q6k-planes-high-bits", "engine/kernels/stream_matmul.py",
          "(((hi >> (2 * (g16 % 4))) & 3) << 4)", "(((hi >> (2 * (g16 % 2))) & 3) << 4)",
          [PK + "test_prompt_kernels_scale16_values_as_rows_of_32[Q6_K-planes-w16]"]),
    # Q5_K's 5-bit planes (kind 11): the fifth bit one place low, the minimums added, the prompt kernels'
    # second sub-block reading the first's fifth bits' neighbours, the packer's minimums as the scales
    Fault("dp4a-q5k-planes-fifth-bit", "engine/kernels/dp4a_gemv.py",
          "    return (lo & 0x0F0F0F0F) | (((h >> (2 * G)) & 0x01010101) << 4)",
          "    return (lo & 0x0F0F0F0F) | (((h >> (2 * G)) & 0x01010101) << 3)",
          [DG + "test_decode_kernel_is_right_and_row_invariant[Q5_K-planes]"]),
    Fault("dp4a-q5k-planes-min-sign", "engine/kernels/dp4a_gemv.py",
          "acc = tl.fma(-sc_hi, s1, tl.fma(-sc_lo, s0, acc + t))", "acc = tl.fma(sc_hi, s1, tl.fma(-sc_lo, s0, acc + t))",
          [DG + "test_decode_kernel_is_right_and_row_invariant[Q5_K-planes]"]),
    Fault("prompt-q5k-planes-fifth-bits", "engine/kernels/stream_matmul.py",
          "((fb >> (t + 4)) & 1)", "((fb >> (t + 2)) & 1)",
          [PK + "test_kernel_reads_the_layout_like_engine_quant[Q5_K-planes]"]),
    # IQ2_XS / IQ2_S / IQ1_M as int8 codes: IQ1_M's d of 1 written where the other types keep d (its codes'
    # bytes), IQ2_S's scales read at IQ2_XS's place
    Fault("packer-iq1m-unit-d", "engine/kernels/packed.py",
          "        if qtype == QT.IQ1_M:                     # d = 1.0", "        if False:                     # d = 1.0",
          [PK + "test_run16_int8_types_are_int8_codes_with_a_scale_per_16[IQ1_M]"]),
    Fault("iq2s-factor-place", "engine/quant_iquants.py",
          "QT.IQ2_S: lambda blocks: _iq2_xs_db(blocks, 74),", "QT.IQ2_S: lambda blocks: _iq2_xs_db(blocks),",
          [PK + "test_run16_int8_types_are_int8_codes_with_a_scale_per_16[IQ2_S]"]),
    # the effective configuration's GPU forms: Q2_K's planes named as something else, the FIT_KEEP types not said
    Fault("gpu-form-q2k-planes", "engine/kernels/packed.py",
          "QT.Q3_K: Q3K_PLANES, QT.Q2_K: True}[qt]", "QT.Q3_K: Q3K_PLANES, QT.Q2_K: False}[qt]",
          [PK + "test_effective_configuration_names_each_types_gpu_form"]),
    Fault("gpu-form-fit-keep", "engine/kernels/packed.py",
          "    if not supports(qt, GGML_QUANT_SIZES[qt][0]):\n        return \"the GGUF layout\"",
          "    if qt not in PACKED_TYPES and qt != QT.Q2_K:\n        return \"the GGUF layout\"",
          [PK + "test_effective_configuration_names_each_types_gpu_form"]),
    Fault("packer-q5k-planes-mins", "engine/kernels/packed.py",
          "sub[a:a + m, :, 2:4] = mn.reshape", "sub[a:a + m, :, 2:4] = sc.reshape",
          [PK + "test_unpack_is_bit_identical_to_engine_quant[Q5_K-planes]"]),
    # Q2_K's 2-bit planes (kind 12): one minimum for both 16s of a half, the prompt kernels' minimum from the
    # scale's nibble, the packer's first two 16s swapped
    Fault("dp4a-q2k-planes-one-min", "engine/kernels/dp4a_gemv.py",
          "((w >> 4) & 15) * n0 + ((w >> 12) & 15) * n1", "((w >> 4) & 15) * n0 + ((w >> 4) & 15) * n1",
          [DG + "test_decode_kernel_is_right_and_row_invariant[Q2_K-planes]"]),
    # the [BN, 8, 32] prompt values (STRATA_PROMPT_W32): each 16's place in its unit without the half,
    # Q6_K's second 32 of a unit reading the low nibbles again, Q2_K's minimum taken from the other 16
    Fault("w32-unit-place", "engine/kernels/scale16_chunk.py",
          "    q4 = 2 * (g % 2) + h ", "    q4 = 2 * (g % 2) ",
          [PK + "test_prompt_kernels_scale16_values_as_rows_of_32[Q6_K-planes-w32]"]),
    Fault("w32-q6k-nibble", "engine/kernels/scale16_chunk.py",
          "u = ((lo >> (4 * (g % 2))) & 15)", "u = ((lo >> (4 * (g % 1))) & 15)",
          [PK + "test_prompt_kernels_scale16_values_as_rows_of_32[Q6_K-planes-w32]"]),
    Fault("w32-int8-scale-half", "engine/kernels/scale16_chunk.py",
          "tl.load(at + 1, mask=sok, other=0.0))", "tl.load(at, mask=sok, other=0.0))",
          [PK + "test_prompt_kernels_scale16_values_as_rows_of_32[Q6_K-w32]"]),
    Fault("w32-q2k-min-half", "engine/kernels/scale16_chunk.py",
          "sm = tl.where(h == 0, tl.load(at, mask=okn, other=0), tl.load(at + 1,",
          "sm = tl.where(h == 1, tl.load(at, mask=okn, other=0), tl.load(at + 1,",
          [PK + "test_prompt_kernels_scale16_values_as_rows_of_32[Q2_K-planes-w32]"]),
    Fault("prompt-q2k-planes-min-nibble", "engine/kernels/stream_matmul.py",
          "to(tl.float32) * (sm >> 4).to(tl.float32)", "to(tl.float32) * (sm & 15).to(tl.float32)",
          [PK + "test_prompt_kernels_scale16_values_as_rows_of_32[Q2_K-planes-w16]"]),
    Fault("packer-q2k-planes-order", "engine/kernels/packed.py",
          "codes[a:a + m] = _bit_fields(q, 2)", "codes[a:a + m] = _bit_fields(q.flip(-2), 2)",
          [PK + "test_unpack_is_bit_identical_to_engine_quant[Q2_K-planes]"]),
    # Q3_K's 3-bit planes (kind 13): codes not sign-extended, the prompt kernels' third bits from the first
    # word's half for every word, the packer's scales one off
    Fault("dp4a-q3k-planes-unsigned", "engine/kernels/dp4a_gemv.py",
          "    return u + (u & 0x04040404) * 62", "    return u",
          [DG + "test_decode_kernel_is_right_and_row_invariant[Q3_K-planes]"]),
    Fault("prompt-q3k-planes-third-bits", "engine/kernels/stream_matmul.py",
          "(((hb >> (2 * (g16 % 4) + (j16 // 4) % 2)) & 1) << 2)", "(((hb >> (2 * (g16 % 4))) & 1) << 2)",
          [PK + "test_kernel_reads_the_layout_like_engine_quant[Q3_K-planes]"]),
    Fault("packer-q3k-planes-scales", "engine/kernels/packed.py",
          "sub[a:a + m, :, :4] = q3_k_scales(blk).view", "sub[a:a + m, :, :4] = (q3_k_scales(blk) + 1).view",
          [PK + "test_unpack_is_bit_identical_to_engine_quant[Q3_K-planes]"]),
    Fault("packer-q6k-planes-high-order", "engine/kernels/packed.py",
          "_bit_fields((u >> 4).reshape(m, k // 64, 4, 16), 2)",
          "_bit_fields((u >> 4).reshape(m, k // 64, 16, 4).transpose(-1, -2), 2)",
          [PK + "test_unpack_is_bit_identical_to_engine_quant[Q6_K-planes]"]),
    # the prompt kernels reading Q5_K / Q5_1 without their minimums
    Fault("prompt-kernel-q5-min-dropped", "engine/kernels/stream_matmul.py",
          "            w_lo = d * q + mm\n", "            w_lo = d * q\n",
          [PK + "test_kernel_reads_the_layout_like_engine_quant[Q5_K]",
           PK + "test_dequantize_kernel_writes_engine_quants_values[Q5_1]"]),
    # the int8 grouped expert kernel adding Q4_K's minimums instead of subtracting them
    Fault("moe-q8-q4k-min-sign", "engine/kernels/moe_grouped_q8.py",
          "acc = tl.fma(-ew, sx, acc)", "acc = tl.fma(ew, sx, acc)",
          ["tests/engine/test_moe_gemv.py::test_prompt_tile_on_int8_tensor_cores[Q4_K-Q6_K]"]),
    # the grid i-quants' table codes (STRATA_IQ_TABLES, kind 6 with a table): a tree value out of place,
    # a permute register word off, the table not handed on in the decode and expert kernels, the packer's d
    Fault("iq-table-tree-value", "engine/kernels/iq4.py",
          "return _tree(q, -62, -52, -44,", "return _tree(q, -52, -62, -44,",
          [PK + "test_kernel_reads_the_layout_like_engine_quant[IQ3_XXS-table]"]),
    Fault("iq-table-permute-word", "engine/kernels/iq4.py",
          "t0, t1, t2, t3 = 150530005, 11033, 0, 0", "t0, t1, t2, t3 = 150530005, 11034, 0, 0",
          ["tests/engine/test_iq4_prmt.py::test_kvalues8_ptx_matches_each_table_on_every_half_word"]),
    Fault("iq-table-dp4a-tab-dropped", "engine/kernels/dp4a_gemv.py",
          "        mn_lo, mn_hi = kvalues8(cb, INTERP, TAB)", "        mn_lo, mn_hi = kvalues8(cb, INTERP)",
          [DG + "test_decode_kernel_is_right_and_row_invariant[IQ3_S-table]"]),
    Fault("iq-table-moe-tab-dropped", "engine/kernels/moe_gemv.py",
          "stride_pm, KIND, BN, L, EVEN, INTERP, 1, XS, False, 0, TAB)",
          "stride_pm, KIND, BN, L, EVEN, INTERP, 1, XS, False, 0, 0)",
          ["tests/engine/test_moe_gemv.py::test_routed_experts_are_each_rows_own_experts[IQ1_S-IQ2_XXS-planes]"]),
    Fault("iq-table-grouped-tab-dropped", "engine/kernels/moe_grouped.py",
          "        TAB=a.table, num_warps=warps or WARPS,", "        TAB=0, num_warps=warps or WARPS,",
          ["tests/engine/test_moe_gemv.py::test_prompt_tile_groups_pairs_by_expert[IQ2_XXS-table]"]),
    # kind 14 (a scale per 16): the decode kernel's second 16 under the first's scale, the prompt kernels'
    Fault("iq-table16-dp4a-scale", "engine/kernels/dp4a_gemv.py",
          "            + ((sc_lo >> 8) & 255) * tl.sum(_dp4a(cb, x1, zero, INTERP), axis=3)",
          "            + (sc_lo & 255) * tl.sum(_dp4a(cb, x1, zero, INTERP), axis=3)",
          [DG + "test_decode_kernel_is_right_and_row_invariant[IQ2_XS-table]"]),
    Fault("iq-table16-prompt-scale", "engine/kernels/stream_matmul.py",
          "d_hi = d * tl.load(s16 + 1, mask=okn, other=0).to(tl.float32)",
          "d_hi = d * tl.load(s16, mask=okn, other=0).to(tl.float32)",
          [PK + "test_kernel_reads_the_layout_like_engine_quant[IQ1_M-table]"]),
    Fault("iq-table-packer-d", "engine/kernels/packed.py",
          "TABLE_D = {QT.IQ3_XXS: 0.25,", "TABLE_D = {QT.IQ3_XXS: 0.5,",
          [PK + "test_unpack_is_bit_identical_to_engine_quant[IQ3_XXS-table]"]),
    # function calling: a marker split over two deltas missed, glm's values all read as JSON, a call key on every
    # message (Llama 3.1 then takes each turn for a call), the forced opening not sent, calls finishing as "stop"
    Fault("tool-marker-split-missed", "engine/tool_parse.py",
          "                    keep = held_prefix(self._buf, START)\n", "                    keep = 0\n",
          [TC + "test_streaming_gives_what_one_piece_gives", TC + "test_text_around_calls_is_kept_in_order",
           TC + "test_a_templates_calls_read_back"]),
    Fault("tool-glm-values-untyped", "engine/tool_parse.py",
          "typed_value(v, k.strip() in as_string)", "typed_value(v, False)",
          [TC + "test_separate_argument_values_follow_the_schema"]),
    Fault("tool-calls-key-always", "engine/tool_format.py",
          "    if m.tool_calls:\n        d[\"tool_calls\"]", "    if True:\n        d[\"tool_calls\"]",
          [TC + "test_native_messages_carry_only_what_is_set", TC + "test_a_templates_calls_read_back[llama3]"]),
    Fault("tool-opening-not-sent", "engine/core.py",
          "prefix=msg.assistant_prefix,", 'prefix="",',
          ["tests/app/test_server_tools.py::test_the_engine_reads_the_functions_the_results_and_a_forced_opening"]),
    Fault("tool-finish-reason-stop", "app/server.py",
          'return "tool_calls" if calls and d.finish_reason == "stop" else d.finish_reason',
          "return d.finish_reason",
          ["tests/app/test_server_tools.py::test_a_named_tool_choice_calls_that_function_once"]),
    # reasoning: a reply that starts inside the thinking read as if it did not; reasoning_format none ignored
    Fault("reasoning-open-ignored", "engine/reasoning.py",
          'self._state = "inside" if inside else "start"', 'self._state = "start"',
          [TC + "test_reasoning_comes_apart_however_the_reply_streams"]),
    Fault("reasoning-format-none-ignored", "app/openai_types.py",
          'if not mode or req.reasoning_format == "none":', "if not mode:",
          ["tests/app/test_server_tools.py::test_a_thinking_models_reasoning_comes_apart"]),
    # constrained output: the matcher following a window's rows past the first refused proposal, a finished
    # grammar letting the picks go free, greedy picks made where the logits are (no mask)
    Fault("grammar-follows-refused-proposal", "engine/sampling.py",
          "following = i < len(proposals) and t == proposals[i]", "following = i < len(proposals)",
          ["tests/engine/test_grammar.py::test_a_windows_rows_are_picked_as_if_its_proposals_were_accepted_one_by_one"]),
    Fault("grammar-free-when-complete", "engine/grammar.py",
          "return self._ended or self._m.is_error()", "return self._m.is_stopped() or self._m.is_error()",
          ["tests/engine/test_grammar.py::test_a_forced_call_grammar_ends_the_call_and_then_the_turn"]),
    Fault("grammar-greedy-unmasked", "engine/sampling.py",
          "return is_greedy(p) and not host_picks(p)", "return is_greedy(p) and not has_penalties(p)",
          ["tests/app/test_server_tools.py::test_a_json_schema_response_format_holds_the_reply_to_it"]),
]

# Written into the copy and run with every selection: the modules under test are the copy's.
WHERE_TEST = '''from pathlib import Path
import app, engine
def test_modules_come_from_the_copy():
    root = Path(__file__).resolve().parents[1]
    for m in (app, engine):
        assert Path(m.__file__).resolve().is_relative_to(root), m.__file__
'''
WHERE = "tests/test_planted_copy_is_imported.py"


def copy_project(dest: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True).stdout
    for rel in filter(None, files.decode().split("\0")):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    (dest / WHERE).write_text(WHERE_TEST)


def pytest(copy: Path, tests: list[str], log: Path) -> tuple[int, dict[str, str], float]:
    """Run the tests in the copy: (exit code, {node id: PASSED/FAILED/ERROR/SKIPPED}, seconds)."""
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(copy), PYTHONDONTWRITEBYTECODE="1")
    if not torch.cuda.is_available():   # before anything imports triton (transformers may, ahead of the
        env.setdefault("TRITON_INTERPRET", "1")     # kernel tests' own fixtures in a mixed selection)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rpfEs", "--timeout=300", WHERE, *tests]
    t0 = time.monotonic()
    r = subprocess.run(cmd, cwd=copy, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log.write_text(r.stdout)
    found = re.finditer(r"^(PASSED|FAILED|ERROR|SKIPPED) (\S+)", r.stdout, re.M)
    outcomes = {m.group(2): m.group(1) for m in found}
    return r.returncode, outcomes, time.monotonic() - t0


def native_cpu_kernels() -> bool:
    """Whether this machine runs the native CPU kernels (engine.cpu_gemm: AVX512-BF16 and a C compiler)."""
    code = "from engine import cpu_gemm; print(cpu_gemm.available())"
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    return r.stdout.strip() == "True"


def plant(copy: Path, f: Fault) -> str:
    """Apply the fault to the copy; returns the file's original text (to restore)."""
    path = copy / f.file
    text = path.read_text()
    n = text.count(f.old)
    if n != 1:
        sys.exit(f"fault {f.name}: pattern found {n} times in {f.file} (expected once): update FAULTS\n{f.old}")
    path.write_text(text.replace(f.old, f.new))
    return text


def short(node: str) -> str:
    return node.split("/")[-1].replace(".py::", "::")


def tally(sel: str, outcomes: dict[str, str]) -> str:
    """'failed/run' of the tests a selection (a node id, a parametrized function or a file) holds."""
    mine = [o for n, o in outcomes.items() if n == sel or n.startswith((sel + "[", sel + "::"))]
    return f"{sum(o in ('FAILED', 'ERROR') for o in mine)}/{len(mine)} failed"


def run_fault(copy: Path, f: Fault) -> tuple[str, str, str, list[tuple[str, str]]]:
    """Plant one fault in this copy, run its tests, restore the file: (fault, result, seconds, tallies)."""
    if not f.tests:                             # its pattern was checked; nothing runs without a GPU
        return f.name, "GPU only", "", [("tests/gpu/bench_matmul.py", "(not run here)")]
    original = plant(copy, f)
    try:
        rc, outcomes, secs = pytest(copy, f.tests, copy / f"{f.name}.log")
    finally:
        (copy / f.file).write_text(original)
    if rc not in (0, 1) or outcomes.get(WHERE + "::test_modules_come_from_the_copy") != "PASSED":
        print((copy / f"{f.name}.log").read_text()[-3000:])    # 2-5: interrupted, usage or
        raise SystemExit(f"fault {f.name}: pytest exited {rc}: no verdict")  # collection error
    verdict = "CAUGHT" if any(o in ("FAILED", "ERROR") for o in outcomes.values()) else "MISSED"
    print(f"  {f.name}: {verdict} ({secs:.0f} s)", flush=True)
    return f.name, verdict, f"{secs:.0f}", [(short(s), tally(s, outcomes)) for s in f.tests]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("names", nargs="*", help="faults to plant (default: all)")
    ap.add_argument("--keep", action="store_true", help="keep the copies and the pytest logs")
    ap.add_argument("--max-minutes", type=float, default=0,
                    help="start no fault after this many minutes (0: no limit); those left are listed as not run")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                    help="faults run at once, each in its own copy (default: 2, or 1 on one core)")
    args = ap.parse_args()
    faults = [f for f in FAULTS if not args.names or f.name in args.names]
    if not faults:
        sys.exit(f"no such fault; known: {', '.join(f.name for f in FAULTS)}")
    start = time.monotonic()
    copies = [Path(tempfile.mkdtemp(prefix="strata-faults-")) for _ in range(max(1, args.jobs))]
    try:
        for copy in copies:
            copy_project(copy)
        for f in faults:                       # every pattern exists once before anything runs
            (copies[0] / f.file).write_text(plant(copies[0], f))
        union = list(dict.fromkeys(t for f in faults for t in f.tests))
        xdist = ["-n", str(len(copies)), "--dist", "loadscope"] if len(copies) > 1 else []
        rc, outcomes, secs = pytest(copies[0], xdist + union, copies[0] / "baseline.log")
        bad = [short(n) + " " + o for n, o in outcomes.items() if o in ("FAILED", "ERROR")]
        print(f"unmodified copy: {len(outcomes)} tests, {'PASS' if rc == 0 and not bad else 'FAIL'} ({secs:.0f} s)")
        if rc != 0 or bad:
            print((copies[0] / "baseline.log").read_text()[-4000:])
            print("the unmodified copy must pass every selected test first:", *bad, sep="\n  ")
            return 1
        # tests that skip on this machine (a CPU without AVX512-BF16 has no native CPU kernels): a fault none of
        # whose tests ran is said to be unchecked here, not run (it would be MISSED for want of a test)
        skips = sorted(set(re.findall(r"^SKIPPED \[\d+\] (.*)$", (copies[0] / "baseline.log").read_text(), re.M)))
        if skips:
            print("selected tests that skip on this machine:", *skips, sep="\n  ")
        ran = [n for n, o in outcomes.items() if o == "PASSED"]
        unchecked = {f.name for f in faults if f.tests and not any(
            n == sel or n.startswith((sel + "[", sel + "::")) for sel in f.tests for n in ran)}
        if not native_cpu_kernels():
            unchecked |= {f.name for f in faults if f.cpu_kernels}
        free: queue.Queue[Path] = queue.Queue()
        for copy in copies:
            free.put(copy)

        def one(f: Fault):
            if args.max_minutes and time.monotonic() - start > args.max_minutes * 60:
                return f.name, "NOT RUN", "", [(short(sel), f"past --max-minutes {args.max_minutes:g}")
                                               for sel in f.tests[:1]]
            if f.name in unchecked:
                why = "needs the native CPU kernels" if f.cpu_kernels else "skips here"
                return f.name, "UNCHECKED", "", [(short(sel), why) for sel in f.tests]
            copy = free.get()                   # a copy no other fault is planted in right now
            try:
                return run_fault(copy, f)
            finally:
                free.put(copy)

        pool = ThreadPoolExecutor(len(copies))
        try:
            rows = list(pool.map(one, faults))  # (fault, result, seconds, [(selection, tally)]), in order
        finally:
            pool.shutdown(cancel_futures=True)  # after a fault with no verdict, run no more
        w = [max(len(r[i]) for r in rows + [("fault", "result", "s", [])]) for i in range(3)]
        print("\n" + "  ".join(h.ljust(n) for h, n in zip(("fault", "result", "s"), w)) + "  tests run")
        for name, verdict, secs, sels in rows:
            lead = "  ".join(c.ljust(n) for c, n in zip((name, verdict, secs), w))
            for i, (sel, count) in enumerate(sels or [("", "")]):
                print((lead if i == 0 else " " * len(lead)) + f"  {sel}  {count}".rstrip())
        missed = [r[0] for r in rows if r[1] == "MISSED"]
        skipped = sorted(r[0] for r in rows if r[1] == "UNCHECKED")
        ok = sum(r[1] in ("CAUGHT", "GPU only") for r in rows)
        print(f"\n{ok}/{len(rows)} faults caught or GPU-only; missed: {', '.join(missed) or 'none'}; unchecked on "
              f"this machine (their tests skip here): {', '.join(skipped) or 'none'}; not run (time limit): "
              f"{sum(r[1] == 'NOT RUN' for r in rows)}; {time.monotonic() - start:.0f} s")
        return 1 if missed else 0
    finally:
        for copy in copies:
            if args.keep:
                print(f"kept: {copy}")
            else:
                shutil.rmtree(copy, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
