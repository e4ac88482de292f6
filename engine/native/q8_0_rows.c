/* The CPU fast mode's Q8_0 head: y = x @ W.T for bfloat16 x [M, K] (a few rows: decode rows, a prompt's
 * wanted rows) and W [N, K] read straight from the GGUF file's Q8_0 blocks (34 bytes each: a float16 scale d,
 * then 32 signed 8-bit codes; value = d * code).
 *
 * Why: a head is the largest matrix a decode step reads (Gemma 3 270M: 262,144 x 640). As two int4 parts for
 * torch's kernel it takes 1.25 bytes a value (codes plus a bfloat16 scale and zero per 32 values, twice); the
 * file's blocks take 1.0625, and need no copy: the file's mapped pages are the weights.
 *
 * Exactness: each output value is one float32 accumulator per 16 lanes taking the blocks in order (the
 * weight d * code exact in float32, one fused multiply-add a value), then one fixed reduction of the 16
 * lanes; neither the other rows, their count (rows go 4 at a time, each with its own accumulator) nor the
 * thread count (threads split the columns) changes a value's operations.
 */
#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define QK 32
#define BLOCK_BYTES 34
#define RB 4           /* rows a pass over a column's blocks */
#define PREFETCH 4096  /* bytes ahead (2026-12-04, 2 cores, 262,144 x 640: 2 KiB 25-31 GB/s, 4-8 KiB 31, 16 KiB 30) */

#define TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,f16c")))

/* y [M, N] float32 = x [M, K] bfloat16 @ W.T, W [N][K/32] Q8_0 blocks. Returns 0, or -1 where memory ran out. */
TARGET int strata_q8_0_matmul(const uint16_t *x, int64_t M, int64_t K, const uint8_t *w, int64_t N, float *y) {
    float *xf = aligned_alloc(64, ((size_t)M * K * 4 + 63) / 64 * 64);
    if (!xf) return -1;
    for (int64_t i = 0; i < M * K; i++) {
        uint32_t u = (uint32_t)x[i] << 16;
        memcpy(xf + i, &u, 4);
    }
    const int64_t nb = K / QK, row_bytes = nb * BLOCK_BYTES;
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; n++) {
        const uint8_t *row = w + n * row_bytes;
        for (int64_t m0 = 0; m0 < M; m0 += RB) {
            const int mr = M - m0 < RB ? (int)(M - m0) : RB;
            __m512 acc[RB];
            for (int i = 0; i < RB; i++) acc[i] = _mm512_setzero_ps();
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *blk = row + b * BLOCK_BYTES;
                if (m0 == 0 && (b & 1) == 0)      /* the hardware's own prefetch alone: 23 GB/s, with this 31 */
                    _mm_prefetch((const char *)blk + PREFETCH, _MM_HINT_T0);
                uint16_t dh;
                memcpy(&dh, blk, 2);
                const __m512 d = _mm512_set1_ps(_cvtsh_ss(dh));
                const __m512 w0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 2)))), d);
                const __m512 w1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 18)))), d);
                for (int i = 0; i < mr; i++) {
                    const float *xr = xf + (m0 + i) * K + b * QK;
                    acc[i] = _mm512_fmadd_ps(w0, _mm512_load_ps(xr), acc[i]);
                    acc[i] = _mm512_fmadd_ps(w1, _mm512_load_ps(xr + 16), acc[i]);
                }
            }
            for (int i = 0; i < mr; i++) y[(m0 + i) * N + n] = _mm512_reduce_add_ps(acc[i]);
        }
    }
    free(xf);
    return 0;
}
