/* The CPU fast mode's prompt-tile matmul: y = x @ W.T for bfloat16 x [M, K] and a matrix W [N, K] kept in
 * torch's packed int4 CPU layout (engine/cpu_int4.py), on AVX512-BF16.
 *
 * torch's int4 kernel unpacks every weight again for each few rows and multiplies in float32; on the
 * 2-core machine it makes 75-170 GFLOP/s at 128 rows where a bfloat16 matmul of dense weights makes ~370.
 * Here each thread takes blocks of 64 columns (torch's packing block): it dequantizes the block once per
 * call into a bfloat16 panel laid out for vdpbf16ps (pairs of k per 32-bit lane, 64 columns), then runs
 * every row of x over it. Two int4 parts (Q8_0, Q5_0, Q5_1: a 2K-wide packing) are summed in float32 and
 * rounded to bfloat16 once.
 *
 * Exactness: every output value is the same sequence of operations whatever M, the other rows, the row
 * block it falls in and the thread count: the accumulator starts at zero and takes the k pairs in order
 * (one vdpbf16ps each), through registers or the float32 scratch between k blocks (stores are exact), then
 * one rounding to bfloat16. So a row's result does not depend on the row count (the tile's real rows may
 * run alone), as torch's int4 kernel's does not.
 *
 * Layouts (torch's, checked by tests/engine/test_int4_prompt_gemm.py):
 *   packed [N/64, KP, 32] bytes, KP = parts * K: byte (b, k, i) holds column b*64+i in its low nibble and
 *          column b*64+32+i in its high nibble, for packed column k (part k / K, x column k % K)
 *   sz     [KP/32, N, 2] bfloat16: scale and zero of each 32-value group; value = (code - 8) * scale + zero
 */
#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_math.h"

#define NB 64          /* columns a block (torch's packing) */
#define MR 6           /* rows a register block: 6 x 4 accumulators */
#define KB 256         /* k pairs a cache block: 256 x 64 x 4 bytes = 64 KiB of panel */

#define TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

int strata_int4_gemm_supported(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512bf16");
}

/* Per thread: the panel [K/2][64] (two bfloat16 each), then the block's group scales/zeros as float32
 * followed by the rows' float32 sums [M][64]. */
static __thread uint32_t *t_panel;
static __thread float *t_sz;
static __thread size_t t_panel_cap, t_sz_cap;

static int reserve(void **p, size_t *cap, size_t bytes) {
    if (*cap >= bytes) return 0;
    free(*p);
    *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    *cap = *p ? bytes : 0;
    return *p ? 0 : -1;
}

/* 16 columns' float32 values at packed column k: codes from 16 bytes (low or high nibbles). */
TARGET static inline __m512 part_values(const uint8_t *bytes, int high, const float *s, const float *z) {
    __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)bytes));
    __m512i q = high ? _mm512_srli_epi32(b, 4) : _mm512_and_si512(b, _mm512_set1_epi32(15));
    __m512 qf = _mm512_sub_ps(_mm512_cvtepi32_ps(q), _mm512_set1_ps(8.0f));
    return _mm512_fmadd_ps(qf, _mm512_loadu_ps(s), _mm512_loadu_ps(z));
}

/* Column block b dequantized into panel[j][c] = (w[c][2j], w[c][2j+1]) as bfloat16 pairs. */
TARGET static void dequant_block(const uint8_t *packed, const uint16_t *sz, int64_t N, int64_t K, int parts,
                                 int64_t b, uint32_t *panel, float *szf) {
    const int64_t KP = K * parts, G = KP / 32;
    for (int64_t g = 0; g < G; g++)                 /* [G][2][64]: scales then zeros of the block's columns */
        for (int c = 0; c < NB; c++) {
            const uint16_t *e = sz + (g * N + b * NB + c) * 2;
            szf[(g * 2) * NB + c] = bf16_to_f32(e[0]);
            szf[(g * 2 + 1) * NB + c] = bf16_to_f32(e[1]);
        }
    const uint8_t *blk = packed + b * KP * 32;
    for (int64_t k = 0; k < K; k += 2) {
        for (int c = 0; c < NB; c += 16) {           /* 16 columns: low nibbles of bytes c.., or high of c-32.. */
            const int high = c >= 32, at = c & 31;
            __m512 w[2];
            for (int h = 0; h < 2; h++) {
                __m512 v = _mm512_setzero_ps();
                for (int p = 0; p < parts; p++) {
                    const int64_t kk = p * K + k + h, g = kk / 32;
                    __m512 pv = part_values(blk + kk * 32 + at, high, szf + (g * 2) * NB + c, szf + (g * 2 + 1) * NB + c);
                    v = p ? _mm512_add_ps(v, pv) : pv;
                }
                w[h] = v;
            }
            __m512i lo = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(w[0]));
            __m512i hi = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(w[1]));
            _mm512_store_si512((__m512i *)(panel + (k / 2) * NB + c), _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
        }
    }
}

/* Rows [r, r + mr) of x over k pairs [j0, j1) of the panel; acc [mr][64] float32 in and out. */
TARGET static inline void rows_block(const uint32_t *xp, int64_t ldx, int mr, const uint32_t *panel, int64_t j0,
                                     int64_t j1, float *acc) {
    __m512 a[MR][4];
    for (int i = 0; i < MR; i++)
        for (int c = 0; c < 4; c++)
            a[i][c] = i < mr ? _mm512_load_ps(acc + i * NB + c * 16) : _mm512_setzero_ps();
    if (mr == MR) {
        for (int64_t j = j0; j < j1; j++) {
            const __m512bh *w = (const __m512bh *)(panel + j * NB);
            __m512bh w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3];
#pragma GCC unroll 6
            for (int i = 0; i < MR; i++) {
                __m512bh xv = (__m512bh)_mm512_set1_epi32((int)xp[i * ldx + j]);
                a[i][0] = _mm512_dpbf16_ps(a[i][0], xv, w0);
                a[i][1] = _mm512_dpbf16_ps(a[i][1], xv, w1);
                a[i][2] = _mm512_dpbf16_ps(a[i][2], xv, w2);
                a[i][3] = _mm512_dpbf16_ps(a[i][3], xv, w3);
            }
        }
    } else {
        for (int64_t j = j0; j < j1; j++) {
            const __m512bh *w = (const __m512bh *)(panel + j * NB);
            for (int i = 0; i < mr; i++) {
                __m512bh xv = (__m512bh)_mm512_set1_epi32((int)xp[i * ldx + j]);
                for (int c = 0; c < 4; c++) a[i][c] = _mm512_dpbf16_ps(a[i][c], xv, w[c]);
            }
        }
    }
    for (int i = 0; i < mr; i++)
        for (int c = 0; c < 4; c++) _mm512_store_ps(acc + i * NB + c * 16, a[i][c]);
}

/* y [M, ldy] (columns [0, N)) = x [M, K] bfloat16 @ W.T, in bfloat16 (f32 = 0) or as the float32 sums before
 * that rounding (f32 = 1: for tests, whose bit comparisons the rounding would blunt). Returns 0, or -1 where
 * memory ran out. */
TARGET int strata_int4_gemm(const uint16_t *x, int64_t M, int64_t K, const uint8_t *packed, const uint16_t *sz,
                            int64_t N, int parts, void *y, int64_t ldy, int f32) {
    const int64_t blocks = N / NB, pairs = K / 2, G = K * parts / 32;
    int failed = 0;
#pragma omp parallel for schedule(static) reduction(| : failed)
    for (int64_t b = 0; b < blocks; b++) {
        if (reserve((void **)&t_panel, &t_panel_cap, (size_t)pairs * NB * 4) ||
            reserve((void **)&t_sz, &t_sz_cap, (size_t)G * 2 * NB * 4 + (size_t)M * NB * 4)) {
            failed = 1;
            continue;
        }
        float *acc = t_sz + G * 2 * NB;
        dequant_block(packed, sz, N, K, parts, b, t_panel, t_sz);
        memset(acc, 0, (size_t)M * NB * 4);
        for (int64_t j0 = 0; j0 < pairs; j0 += KB) {
            const int64_t j1 = j0 + KB < pairs ? j0 + KB : pairs;
            for (int64_t r = 0; r < M; r += MR) {
                const int mr = M - r < MR ? (int)(M - r) : MR;
                rows_block((const uint32_t *)(x + r * K), K / 2, mr, t_panel, j0, j1, acc + r * NB);
            }
        }
        for (int64_t r = 0; r < M; r++)
            for (int c = 0; c < NB; c += 16) {
                __m512 v = _mm512_load_ps(acc + r * NB + c);
                if (f32)
                    _mm512_storeu_ps((float *)y + r * ldy + b * NB + c, v);
                else
                    _mm256_storeu_si256((__m256i *)((uint16_t *)y + r * ldy + b * NB + c), (__m256i)_mm512_cvtneps_pbh(v));
            }
    }
    return failed ? -1 : 0;
}
