#!/usr/bin/env bash
# Issue 15, item 2: IQ4_NL and IQ4_XS repacked on the GPU (the default; STRATA_GPU_IQ4=0 keeps a dense
# bfloat16 copy). Kernel tests under CUDA; bench_matmul's checks (every type, IQ4 included) and its IQ4 times on
# the llama-3-8b shapes; batch-test IDENTICAL on the llama-3-8b shape in IQ4_XS (sampled) and a MoE
# small model in IQ4_XS (spec 3); decode and prompt benches in IQ4_XS and IQ4_NL, repacked against
# the dense bfloat16 copy (STRATA_GPU_IQ4=0).
set -euo pipefail
source "$(dirname "$0")/env.sh"
export STRATA_GPU_IQ4=1
check "kernel tests" timeout 400 python3 -m pytest -q -p no:cacheprovider -x tests/engine/test_iq4_prmt.py tests/engine/test_packed.py \
  tests/engine/test_dp4a_gemv.py tests/engine/test_moe_gemv.py
check "bench_matmul iq4" timeout 200 python3 tests/gpu/bench_matmul.py --iq4
for q in IQ4_XS IQ4_NL; do
  $S make-model --arch llama --shape llama-3-8b --qtype $q --out $M/l8b-$q.gguf >/dev/null
done
$S make-model --arch qwen3moe --shape small --mtp 1 --qtype IQ4_XS --out $M/moe-iq4.gguf >/dev/null
check "batch-test 8b IQ4_XS sampled" timeout 150 $S batch-test --max-tokens 12 --model $M/l8b-IQ4_XS.gguf \
  --devices cuda:0 --parallel 4 --temperature 0.8 --seed 3
check "batch-test moe IQ4_XS spec 3" timeout 150 $S batch-test --max-tokens 12 --model $M/moe-iq4.gguf \
  --devices cuda:0 --parallel 4 --spec 3
for q in IQ4_XS IQ4_NL; do
  for on in 1 0; do
    check "bench 8b $q (repacked $on)" env STRATA_GPU_IQ4=$on timeout 150 $S bench --model $M/l8b-$q.gguf \
      --devices cuda:0 --streams 1,8 --parallel 8 --prompt-tokens 512 --max-tokens 64 --ctx 2048
  done
done
summary
