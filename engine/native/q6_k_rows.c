/* The CPU fast mode's Q6_K decode rows: y = x @ W.T for bfloat16 x [M, K] (a decode tile's few rows) and
 * W [N, K] read straight from the GGUF file's Q6_K blocks (210 bytes a 256 values: ql[128] the low 4 bits,
 * qh[64] the high 2, 16 signed 8-bit scales, a float16 d; value = d * scale * (q - 32), a scale per 16).
 *
 * Why: Q6_K has no int4 form (its scales go per 16 values), so the fast mode keeps a dense bfloat16 copy
 * (prompt tiles multiply it on torch's bfloat16 GEMM, near the machine's peak); a decode row then reads
 * 2 bytes a value through torch's bfloat16 GEMV: 190 us a 640 x 2048 matrix, 1.7 ms of Gemma 3 270M's 23 ms
 * decode step (the 2-core machine, 2026-12-05). The file's blocks are 0.82 bytes a value, and already
 * resident (the load dequantized them into the copy).
 *
 * Exactness: each output value is four float32 accumulators of 16 lanes (one per 32-value run of a half
 * block) taking the blocks in order (the weight d * scale * (q - 32) formed the same way each time, one
 * fused multiply-add a value), then one fixed sum of the four and reduction of the lanes; neither the other rows, their count (rows go 4 at a time, each with its own
 * accumulator) nor the thread count (threads split the columns) changes a value's operations.
 */
#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define QK 256
#define BLOCK_BYTES 210
#define RB 4           /* rows a pass over a column's blocks */
#define PREFETCH 4096  /* bytes ahead, as the Q8_0 head's kernel */

#define TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,f16c")))

/* One column's sums for MR rows of x (bfloat16, rows K apart) into y (rows N apart); inlined for each MR so
 * that the accumulators stay in registers. lut0/lut1: the bfloat16 of q - 32 for q = 0..31 / 32..63. */
TARGET static inline __attribute__((always_inline)) void column(const uint8_t *row, int64_t nb, const uint16_t *x,
                                                                int64_t K, float *y, int64_t N, const int MR,
                                                                int prefetch, __m512i lut0, __m512i lut1) {
    const __m512i low4 = _mm512_set1_epi8(0x0F), two = _mm512_set1_epi8(3);
    const __m512i pair = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    __m512 acc[RB][2];          /* two chains of FMAs a row (even and odd 32-value runs) */
    for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = row + b * BLOCK_BYTES;
        if (prefetch)
            _mm_prefetch((const char *)blk + PREFETCH, _MM_HINT_T0);
        uint16_t dh;
        memcpy(&dh, blk + 208, 2);
        /* the 16 scales d * sc, one per 16 values in order */
        const __m512 sv = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 192)))),
                                        _mm512_set1_ps(_cvtsh_ss(dh)));
        for (int h = 0; h < 2; h++) {               /* two halves of 128 values */
            const __m512i ql = _mm512_loadu_si512(blk + h * 64);     /* runs 0 | 1 low nibbles, 2 | 3 high */
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(blk + 128 + h * 32));
            const __m512i e = _mm512_inserti64x4(_mm512_castsi256_si512(qh), qh, 1);
            const __m512i e2 = _mm512_srli_epi16(e, 2), e4 = _mm512_srli_epi16(e, 4), e6 = _mm512_srli_epi16(e, 6);
            /* bytes 0..63: values h * 128 + 0..63 (runs 0, 1), then + 64..127 (runs 2, 3) */
            const __m512i hi01 = _mm512_slli_epi16(_mm512_and_si512(_mm512_mask_blend_epi64(0xF0, e, e2), two), 4);
            const __m512i hi23 = _mm512_slli_epi16(_mm512_and_si512(_mm512_mask_blend_epi64(0xF0, e4, e6), two), 4);
            const __m512i q01 = _mm512_or_si512(_mm512_and_si512(ql, low4), hi01);
            const __m512i q23 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4), hi23);
            for (int r = 0; r < 4; r++) {           /* 32 values: h * 128 + r * 32 .. + 31 */
                const __m512i qb = r < 2 ? q01 : q23;
                const __m512i qw = _mm512_cvtepu8_epi16((r & 1) ? _mm512_extracti64x4_epi64(qb, 1)
                                                                 : _mm512_castsi512_si256(qb));
                const __m512bh wv = (__m512bh)_mm512_permutex2var_epi16(lut0, qw, lut1);
                const int g = h * 4 + r;            /* scales 2g (lanes 0..7) and 2g + 1 (lanes 8..15) */
                const __m512 scale = _mm512_permutexvar_ps(_mm512_add_epi32(pair, _mm512_set1_epi32(2 * g)), sv);
                const int64_t k = b * QK + g * 32;
                for (int i = 0; i < MR; i++) {
                    const __m512bh xv = (__m512bh)_mm512_loadu_si512(x + i * K + k);
                    acc[i][r & 1] = _mm512_fmadd_ps(_mm512_dpbf16_ps(_mm512_setzero_ps(), wv, xv), scale, acc[i][r & 1]);
                }
            }
        }
    }
    for (int i = 0; i < MR; i++) y[i * N] = _mm512_reduce_add_ps(_mm512_add_ps(acc[i][0], acc[i][1]));
}

/* y [M, N] float32 = x [M, K] bfloat16 @ W.T, W [N][K/256] Q6_K blocks. Returns 0. */
TARGET int strata_q6_k_matmul(const uint16_t *x, int64_t M, int64_t K, const uint8_t *w, int64_t N, float *y) {
    uint16_t lut[64];
    for (int q = 0; q < 64; q++) {
        const float v = (float)(q - 32);
        uint32_t u;
        memcpy(&u, &v, 4);
        lut[q] = (uint16_t)(u >> 16);           /* exact: |q - 32| <= 32 */
    }
    const __m512i lut0 = _mm512_loadu_si512(lut), lut1 = _mm512_loadu_si512(lut + 32);
    const int64_t nb = K / QK, row_bytes = nb * BLOCK_BYTES;
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; n++) {
        const uint8_t *row = w + n * row_bytes;
        for (int64_t m0 = 0; m0 < M; m0 += RB) {
            const uint16_t *xr = x + m0 * K;
            float *yr = y + m0 * N + n;
            switch (M - m0 < RB ? (int)(M - m0) : RB) {
                case 1: column(row, nb, xr, K, yr, N, 1, m0 == 0, lut0, lut1); break;
                case 2: column(row, nb, xr, K, yr, N, 2, m0 == 0, lut0, lut1); break;
                case 3: column(row, nb, xr, K, yr, N, 3, m0 == 0, lut0, lut1); break;
                default: column(row, nb, xr, K, yr, N, 4, m0 == 0, lut0, lut1); break;
            }
        }
    }
    return 0;
}
