/* The CPU fast mode's decode-tile matmul: y = x @ W.T for a few bfloat16 rows x [M, K] (decode rows: a
 * stream's current token, a draft window's proposals, a few streams' rows) and W [N, K] in torch's packed int4
 * CPU layout (engine/cpu_int4.py; the layout is int4_prompt_gemm.c's), on AVX512-BF16.
 *
 * torch's int4 kernel, which decode tiles ran before, turns each weight into float32 for every few rows; on
 * the 2-core machine a 1536 x 576 matrix took 37 us at one row and 65 at four (2026-12-05). Here the codes
 * stay 4-bit integers: a 32-value group's products with x are summed first, and the group's scale and zero
 * applied once:
 *     sum_k x_k ((q_k - 8) s + z) = s * sum_k x_k (q_k - 8) + z * sum_k x_k
 * (the split torch's kernel makes too: on the tests' random weights the two give the same bits, elsewhere
 * they differ by a rounding at most). Two packed columns' codes (k, k + 1) of 16 output columns become 16
 * bfloat16 pairs (q - 8 is exact in bfloat16) with a byte interleave and a 32-entry table (vpermw), and one
 * vdpbf16ps multiplies them with a row's (x_k, x_k+1): the weights are unpacked once for all the tile's rows.
 *
 * Exactness: each output value is the same sequence of operations whatever M, the other rows, the pass of
 * rows it falls in and the thread count (threads split the columns): per group a float32 sum t from zero over
 * the group's 16 pairs in order (vdpbf16ps), then acc = fma(s, t, acc), acc = fma(z, xsum, acc) (xsum: the
 * row's float32 sum of the group's 32 x values, in order), the groups in order (two parts: the first part's
 * then the second's), then one rounding to bfloat16 (nearest even). So a decode row gets the same bits alone
 * as in any tile, as with torch's kernel (prompt tiles run int4_prompt_gemm.c: each kind always runs the same
 * kernel).
 */
#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_math.h"

#define NB 64          /* columns a packing block (torch's) */
#define MR 4           /* rows a pass: 4 accumulators a row (t and acc, low and high nibbles) */

#define TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

/* Rows [r0, r0 + mr) of columns b*64 + h*16 + [0, 16) (low nibbles) and b*64 + 32 + h*16 + [0, 16) (high). */
TARGET static void half_block(const uint32_t *x, int64_t K, int64_t r0, int mr, const float *xsum, int64_t G,
                              const uint8_t *blk, const uint16_t *sz, int64_t N, int64_t col,
                              __m512i table, float *out_lo, float *out_hi) {
    __m512 acc_lo[MR], acc_hi[MR];
    for (int i = 0; i < MR; i++) acc_lo[i] = acc_hi[i] = _mm512_setzero_ps();
    const __m512i top = _mm512_set1_epi32((int)0xFFFF0000u);
    for (int64_t g = 0; g < G; g++) {                /* packed groups: part p's k from (g * 32) % K */
        __m512 t_lo[MR], t_hi[MR];
        for (int i = 0; i < MR; i++) t_lo[i] = t_hi[i] = _mm512_setzero_ps();
        const int64_t kx = (g * 32) % K;             /* x's column of the group's first value */
        const uint8_t *bytes = blk + g * 32 * 32;
        for (int j = 0; j < 16; j++) {               /* the group's 16 pairs (k, k + 1) */
            const __m128i a = _mm_loadu_si128((const __m128i *)(bytes + (2 * j) * 32));
            const __m128i b = _mm_loadu_si128((const __m128i *)(bytes + (2 * j + 1) * 32));
            const __m256i ab = _mm256_set_m128i(_mm_unpackhi_epi8(a, b), _mm_unpacklo_epi8(a, b));
            const __m512i w = _mm512_cvtepu8_epi16(ab);                   /* lane c: (byte_k, byte_k+1) */
            const __m512bh wlo = (__m512bh)_mm512_permutexvar_epi16(_mm512_and_si512(w, _mm512_set1_epi16(15)), table);
            const __m512bh whi = (__m512bh)_mm512_permutexvar_epi16(_mm512_srli_epi16(w, 4), table);
            for (int i = 0; i < mr; i++) {
                const __m512bh xv = (__m512bh)_mm512_set1_epi32((int)x[(r0 + i) * (K / 2) + kx / 2 + j]);
                t_lo[i] = _mm512_dpbf16_ps(t_lo[i], xv, wlo);
                t_hi[i] = _mm512_dpbf16_ps(t_hi[i], xv, whi);
            }
        }
        /* (scale, zero) of the 16 low and 16 high columns: bfloat16 pairs, 64 bytes each */
        const __m512i pl = _mm512_loadu_si512((const void *)(sz + (g * N + col) * 2));
        const __m512i ph = _mm512_loadu_si512((const void *)(sz + (g * N + col + 32) * 2));
        const __m512 sl = _mm512_castsi512_ps(_mm512_slli_epi32(pl, 16)), zl = _mm512_castsi512_ps(_mm512_and_si512(pl, top));
        const __m512 sh = _mm512_castsi512_ps(_mm512_slli_epi32(ph, 16)), zh = _mm512_castsi512_ps(_mm512_and_si512(ph, top));
        for (int i = 0; i < mr; i++) {
            const __m512 xs = _mm512_set1_ps(xsum[(r0 + i) * (K / 32) + kx / 32]);
            acc_lo[i] = _mm512_fmadd_ps(zl, xs, _mm512_fmadd_ps(sl, t_lo[i], acc_lo[i]));
            acc_hi[i] = _mm512_fmadd_ps(zh, xs, _mm512_fmadd_ps(sh, t_hi[i], acc_hi[i]));
        }
    }
    for (int i = 0; i < mr; i++) {
        _mm512_storeu_ps(out_lo + i * 16, acc_lo[i]);
        _mm512_storeu_ps(out_hi + i * 16, acc_hi[i]);
    }
}

/* y [M, ldy] bfloat16 (columns [0, N)) = x [M, K] bfloat16 @ W.T; parts int4 parts side by side along K (the
 * same x for both); N a multiple of 64, K of 32. Returns 0, or -1 where memory ran out. */
TARGET int strata_int4_rows(const uint16_t *x, int64_t M, int64_t K, const uint8_t *packed, const uint16_t *sz,
                            int64_t N, int parts, uint16_t *y, int64_t ldy) {
    const int64_t KP = K * parts, G = KP / 32, groups = K / 32;
    float *xsum = malloc((size_t)(M * groups > 0 ? M * groups : 1) * sizeof(float));
    if (!xsum) return -1;
    for (int64_t r = 0; r < M; r++)                  /* each row's sum of each group of 32 values, in order */
        for (int64_t g = 0; g < groups; g++) {
            float s = 0.0f;
            for (int k = 0; k < 32; k++) s += bf16_to_f32(x[r * K + g * 32 + k]);
            xsum[r * groups + g] = s;
        }
    uint16_t tab[32];                                /* code q -> bfloat16(q - 8), exact */
    for (int q = 0; q < 32; q++) {
        float f = (float)((q & 15) - 8);
        uint32_t u;
        memcpy(&u, &f, 4);
        tab[q] = (uint16_t)(u >> 16);
    }
    const __m512i table = _mm512_loadu_si512((const void *)tab);
    const int64_t items = N / NB * 2;                /* (block, half): 32 columns each */
#pragma omp parallel for schedule(static)
    for (int64_t it = 0; it < items; it++) {
        const int64_t b = it / 2, h = it % 2, col = b * NB + h * 16;
        const uint8_t *blk = packed + b * KP * 32 + h * 16;
        float lo[MR * 16], hi[MR * 16];
        for (int64_t r0 = 0; r0 < M; r0 += MR) {
            const int mr = M - r0 < MR ? (int)(M - r0) : MR;
            half_block((const uint32_t *)x, K, r0, mr, xsum, G, blk, sz, N, col, table, lo, hi);
            for (int i = 0; i < mr; i++) {
                uint16_t *yr = y + (r0 + i) * ldy;
                _mm256_storeu_si256((__m256i *)(yr + col), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(lo + i * 16)));
                _mm256_storeu_si256((__m256i *)(yr + col + 32), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(hi + i * 16)));
            }
        }
    }
    free(xsum);
    return 0;
}
