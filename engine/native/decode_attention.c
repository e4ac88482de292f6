/* The CPU fast mode's attention of decode rows: each row over its own slot's cached keys 0..pos (or its
 * sliding window), read in place from the bfloat16 cache [slots, ctx, kvh, hd], with AVX512-BF16 dot products.
 *
 * prompt_attention.c puts 16 (row, head) queries of one slot in a register's lanes and broadcasts each key to
 * them; a decode row alone fills only its KV group's heads of the 16 lanes (SmolLM2: 3, Gemma 3: 4), so most
 * of each key's work is wasted. Here the lanes run along a key's values instead: a key's hd values are loaded
 * once for the KV group's g heads, each head's score is one vdpbf16ps per 32 values and a sum of 16 lanes, and
 * each value row is added to the heads' outputs with hd/16 FMAs a head.
 *
 * Keys go in blocks of KB on an absolute grid (multiples of KB): a work item is (row, KV head, block), so one
 * row's long context spreads over the threads; each block gives its own softmax state (max, sum, outputs),
 * and the blocks are merged in order at the end.
 *
 * Numerics (per row, KV head and head, whatever the other rows and the thread count): q * scale rounded to
 * bfloat16; a score is the float32 sum of the hd/32 vdpbf16ps of the key with q, then _mm512_reduce_add_ps;
 * per block: m = the largest score, p = exp(score - m) (the prompt kernel's exp, kernel_math.h), l = the
 * sum of p in 16-key vectors in key order, then of their lanes, outputs = sum of p * value in key order
 * (float32 FMAs); merged over the blocks in order:
 * M = max m, out = sum_b exp(m_b - M) out_b / sum_b exp(m_b - M) l_b; the output in q's dtype (float32, or
 * bfloat16 rounded to nearest even). A row's bits depend on that row alone (query, slot, position, window).
 *
 * The values' sums keep their accumulators in registers where the group size is one of 1..6 and hd a multiple
 * of 64 (values_of inlined with constants): 27.5 us against 36.7 a row and layer over 1,024 keys of SmolLM2's
 * shape, 49 against 68 for a draft window's two rows, the same bits (2026-12-06, the 2-core machine).
 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_math.h"

#define KB 256         /* keys a block, on the absolute grid of multiples of KB */
#define GMAX 16        /* heads a KV group at most (larger groups: the prompt kernel) */

#define TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

/* A row's first key: its sliding window's first, or 0. */
static inline int64_t first_key(int64_t pos, int64_t window) {
    return window && pos - window + 1 > 0 ? pos - window + 1 : 0;
}

typedef struct {
    const void *q;
    int64_t q_row, q_head;
    int q_f32;
    const uint16_t *k, *v;
    int64_t ctx, kvh, hd, g;
    const int64_t *slot, *pos;
    int64_t window;
    float scale;
    float *part;                   /* [work items][g][2 + hd]: each block's m, l and outputs */
} Args;

/* The outputs: sum over the keys lo..hi (in order) of p * value, for each of g heads (p: s[h][j - lo]), into st's
 * rows; 64 values at a time. Inlined with g a constant, its accumulators stay in registers (with g known only
 * at run time they went through memory: a store and a load on every multiply-add). */
TARGET static inline __attribute__((always_inline)) void values_of(const uint16_t *vb, int64_t kstride, int64_t lo,
                                                                   int64_t hi, float (*s)[KB], float *st, int64_t hd,
                                                                   const int64_t g, const int whole) {
    for (int64_t d0 = 0; d0 < hd; d0 += 64) {        /* (whole: hd a multiple of 64) */
        const int nd = whole || hd - d0 >= 64 ? 4 : (int)((hd - d0) / 16);
        __m512 o[GMAX][4];
        for (int64_t h = 0; h < g; h++)
            for (int i = 0; i < 4; i++) o[h][i] = _mm512_setzero_ps();
        for (int64_t j = lo; j <= hi; j++) {
            const uint16_t *vr = vb + j * kstride + d0;
            __m512 vf[4];
            for (int i = 0; i < nd; i++)
                vf[i] = bf16x16_to_f32(_mm256_loadu_si256((const __m256i *)(vr + 16 * i)));
            for (int64_t h = 0; h < g; h++) {
                const __m512 p = _mm512_set1_ps(s[h][j - lo]);
                for (int i = 0; i < nd; i++) o[h][i] = _mm512_fmadd_ps(p, vf[i], o[h][i]);
            }
        }
        for (int64_t h = 0; h < g; h++)
            for (int i = 0; i < nd; i++) _mm512_storeu_ps(st + h * (2 + hd) + 2 + d0 + 16 * i, o[h][i]);
    }
}

/* Row r, KV head kh, the keys of one block in [lo, hi]: its softmax state for each of the g heads, at st. */
TARGET static void block(const Args *a, int64_t r, int64_t kh, int64_t lo, int64_t hi, float *st) {
    const int64_t hd = a->hd, g = a->g, kstride = a->kvh * hd, n32 = hd / 32;
    __m512bh qv[GMAX][8];                              /* q pairs: hd / 32 registers a head (hd <= 256) */
    for (int64_t h = 0; h < g; h++)
        for (int64_t c = 0; c < n32; c++) {
            uint16_t w[32];
            for (int e = 0; e < 32; e++) {
                const int64_t at = r * a->q_row + (kh * g + h) * a->q_head + c * 32 + e;
                const float x = a->q_f32 ? ((const float *)a->q)[at] : bf16_to_f32(((const uint16_t *)a->q)[at]);
                w[e] = f32_to_bf16(x * a->scale);
            }
            qv[h][c] = (__m512bh)_mm512_loadu_si512(w);
        }
    const int64_t slot = a->slot[r];
    const uint16_t *kb = a->k + slot * a->ctx * kstride + kh * hd;
    const uint16_t *vb = a->v + slot * a->ctx * kstride + kh * hd;
    float s[GMAX][KB];
    float m[GMAX];
    for (int64_t j = lo; j <= hi; j++) {               /* scores */
        const uint16_t *kr = kb + j * kstride;
        __m512bh kv[8];
        for (int64_t c = 0; c < n32; c++) kv[c] = (__m512bh)_mm512_loadu_si512(kr + c * 32);
        for (int64_t h = 0; h < g; h++) {
            __m512 t = _mm512_setzero_ps();
            for (int64_t c = 0; c < n32; c++) t = _mm512_dpbf16_ps(t, kv[c], qv[h][c]);
            s[h][j - lo] = _mm512_reduce_add_ps(t);
        }
    }
    const int64_t nk = hi - lo + 1;
    for (int64_t h = 0; h < g; h++) {                  /* m: the largest score (a max: any order) */
        __m512 mv = _mm512_set1_ps(-INFINITY);
        for (int64_t j = 0; j < nk; j += 16) {
            const __mmask16 in = nk - j >= 16 ? 0xFFFF : (__mmask16)((1u << (nk - j)) - 1);
            mv = _mm512_mask_max_ps(mv, in, mv, _mm512_maskz_loadu_ps(in, s[h] + j));
        }
        m[h] = _mm512_reduce_max_ps(mv);
    }
    for (int64_t h = 0; h < g; h++) {                  /* p = exp(s - m), 16 keys at a time; l their sum */
        __m512 lacc = _mm512_setzero_ps();
        const __m512 mh = _mm512_set1_ps(m[h]);
        for (int64_t j = 0; j < nk; j += 16) {
            const __mmask16 in = nk - j >= 16 ? 0xFFFF : (__mmask16)((1u << (nk - j)) - 1);
            const __m512 p = exp_le0(in, _mm512_sub_ps(_mm512_maskz_loadu_ps(in, s[h] + j), mh));
            _mm512_mask_storeu_ps(s[h] + j, in, p);
            lacc = _mm512_add_ps(lacc, p);
        }
        st[h * (2 + hd)] = m[h];
        st[h * (2 + hd) + 1] = _mm512_reduce_add_ps(lacc);
    }
    switch (hd % 64 ? 0 : g) {                          /* values: accumulators in registers where g is known */
    case 1: values_of(vb, kstride, lo, hi, s, st, hd, 1, 1); break;
    case 2: values_of(vb, kstride, lo, hi, s, st, hd, 2, 1); break;
    case 3: values_of(vb, kstride, lo, hi, s, st, hd, 3, 1); break;
    case 4: values_of(vb, kstride, lo, hi, s, st, hd, 4, 1); break;
    case 5: values_of(vb, kstride, lo, hi, s, st, hd, 5, 1); break;
    case 6: values_of(vb, kstride, lo, hi, s, st, hd, 6, 1); break;
    default: values_of(vb, kstride, lo, hi, s, st, hd, g, 0);
    }
}

/* out [T, H, hd] = attention of q [T, H, hd] (strides q_row, q_head; float32 or bfloat16) over k/v [slots, ctx,
 * kvh, hd] bfloat16; slot/pos [T]; window 0 = all keys 0..pos. hd a multiple of 32 up to 256, H / kvh <= 16.
 * Returns 0, or -1 where memory ran out. */
TARGET int strata_decode_attention(const void *q, int64_t T, int64_t H, int64_t hd, int64_t q_row, int64_t q_head,
                                   int q_f32, const uint16_t *k, const uint16_t *v, int64_t ctx, int64_t kvh,
                                   const int64_t *slot, const int64_t *pos, int64_t window, float scale, void *out) {
    const int64_t g = H / kvh, per = g * (2 + hd);
    int64_t *first = malloc((size_t)(2 * T + 1) * sizeof(int64_t));
    if (!first) return -1;
    int64_t *blocks = first + T + 1, n = 0;           /* work items: (row, KV head, block) in that order */
    for (int64_t r = 0; r < T; r++) {
        const int64_t lo = first_key(pos[r], window);
        first[r] = n;
        blocks[r] = pos[r] / KB - lo / KB + 1;
        n += blocks[r] * kvh;
    }
    first[T] = n;
    float *part = malloc((size_t)(n * per) * sizeof(float));
    if (!part) {
        free(first);
        return -1;
    }
    const Args a = {q, q_row, q_head, q_f32, k, v, ctx, kvh, hd, g, slot, pos, window, scale, part};
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t it = 0; it < n; it++) {
        int64_t r = 0;
        while (first[r + 1] <= it) r++;
        const int64_t lo = first_key(pos[r], window);
        const int64_t rest = it - first[r], kh = rest / blocks[r], b = lo / KB + rest % blocks[r];
        const int64_t a0 = b * KB > lo ? b * KB : lo, a1 = (b + 1) * KB - 1 < pos[r] ? (b + 1) * KB - 1 : pos[r];
        block(&a, r, kh, a0, a1, part + it * per);
    }
    for (int64_t r = 0; r < T; r++)                    /* each row's blocks merged in order */
        for (int64_t kh = 0; kh < kvh; kh++)
            for (int64_t h = 0; h < g; h++) {
                const float *st0 = part + (first[r] + kh * blocks[r]) * per + h * (2 + hd);
                float M = -INFINITY;
                for (int64_t b = 0; b < blocks[r]; b++)
                    if (st0[b * per] > M) M = st0[b * per];
                float l = 0.0f, o[256];
                for (int64_t d = 0; d < hd; d++) o[d] = 0.0f;
                for (int64_t b = 0; b < blocks[r]; b++) {
                    const float *st = st0 + b * per;
                    float w;
                    _mm_store_ss(&w, _mm512_castps512_ps128(exp_le0(1, _mm512_set1_ps(st[0] - M))));
                    l = fmaf(w, st[1], l);
                    for (int64_t d = 0; d < hd; d++) o[d] = fmaf(w, st[2 + d], o[d]);
                }
                const int64_t at = (r * H + kh * g + h) * hd;
                for (int64_t d = 0; d < hd; d++) {
                    const float y = o[d] / l;
                    if (q_f32)
                        ((float *)out)[at + d] = y;
                    else
                        ((uint16_t *)out)[at + d] = f32_to_bf16(y);
                }
            }
    free(part);
    free(first);
    return 0;
}
