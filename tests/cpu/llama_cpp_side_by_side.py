"""llama.cpp beside the engine on this CPU, the same GGUF files and thread count (issue 20's targets).

llama.cpp comes from the llama-cpp-python sdist built for this CPU, in its own virtual environment
(an 11-minute build on 2 cores; the project's .venv is not touched):

    python3.11 -m venv /tmp/lcpvenv
    pip download --no-deps --no-binary :all: llama-cpp-python==0.3.36 -d /tmp/lcp
    CMAKE_ARGS="-DGGML_NATIVE=ON" /tmp/lcpvenv/bin/pip install /tmp/lcp/llama_cpp_python-0.3.36.tar.gz

On a machine whose CPU lists amx_int8 / amx_tile (2026-12-02 here) that native build crashes in its first
batch (SIGSEGV in ggml_backend_amx_mul_mat): build for AVX-512 without AMX instead,
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX_VNNI=ON
      -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON"
    /tmp/lcpvenv/bin/python tests/cpu/llama_cpp_side_by_side.py MODEL.gguf [THREADS] [PROMPT_TOKENS] [DECODE_TOKENS]

Prints llama.cpp's load time, prompt reading (tokens/s over PROMPT_TOKENS tokens in one batch) and
greedy decode (tokens/s over DECODE_TOKENS), the median of three runs each; compare with
`strata bench --model MODEL --streams 1 --prompt-tokens N --max-tokens 64` (the engine's own runs).
"""
from __future__ import annotations

import statistics
import sys
import time

import llama_cpp


def main() -> int:
    model = sys.argv[1]
    threads = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    n_prompt = int(sys.argv[3]) if len(sys.argv) > 3 else 100
    n_decode = int(sys.argv[4]) if len(sys.argv) > 4 else 64
    t0 = time.perf_counter()
    n_ctx = n_prompt + n_decode + 8             # n_batch as large: its logits buffer holds n_batch rows
    llm = llama_cpp.Llama(model, n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads,
                          n_batch=max(512, n_ctx), verbose=False)
    load = time.perf_counter() - t0
    words = ("the quick brown fox jumps over a lazy dog while seven small birds sing " * 200).encode()
    prompt = llm.tokenize(words, add_bos=True)[:n_prompt]
    pp, tg = [], []
    for _ in range(3):
        llm.reset()
        t = time.perf_counter()
        llm.eval(prompt)
        pp.append(len(prompt) / (time.perf_counter() - t))
        tok = int(max(range(llm.n_vocab()), key=lambda i: llm.scores[llm.n_tokens - 1][i]))
        t = time.perf_counter()
        for _ in range(n_decode):
            llm.eval([tok])
            tok = int(llm.scores[llm.n_tokens - 1].argmax())
        tg.append(n_decode / (time.perf_counter() - t))
    print(f"llama.cpp {llama_cpp.__version__}, {threads} threads, {model.rsplit('/', 1)[-1]}: load {load:.2f} s, "
          f"prompt {len(prompt)} tokens {statistics.median(pp):.1f} tok/s, decode {n_decode} tokens "
          f"{statistics.median(tg):.1f} tok/s (runs: prompt {', '.join(f'{v:.0f}' for v in pp)}; "
          f"decode {', '.join(f'{v:.1f}' for v in tg)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
