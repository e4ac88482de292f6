/* The CPU fast mode's attention of a prompt tile: each row over its own slot's cached keys 0..pos (or its
 * sliding window), read in place from the bfloat16 cache [slots, ctx, kvh, hd], with AVX512-BF16 dot products.
 *
 * torch's blocked path (engine/layers.py attention) multiplies whole key blocks in float32 (copies of the
 * cache converted first), masks, and runs the online softmax as a dozen torch calls a block; for a 128-row
 * Gemma 3 270M tile at position 256 that is ~45 of the tile's ~157 ms. Here 16 query vectors, (row, head)
 * pairs of rows of one slot and the heads of one KV head, sit in the 16 float32 lanes of a register: each
 * key pair is broadcast once from the cache and multiplied with all 16 (vdpbf16ps), each value once (a
 * float32 FMA), so the heads of a KV group and neighbouring rows share every key and value load, and the
 * softmax runs on whole lanes.
 *
 * Numerics: q * scale rounded to bfloat16 (the cache's keys already are; bfloat16 q, as SmolLM2's, at a
 * power-of-two scale loses nothing), scores as float32 sums of the d pairs in order; the softmax in float32
 * (exp: Cephes' polynomial, exactly 1 at 0); the value products as float32 FMAs in key order (probabilities
 * rounded to bfloat16 there too cost KL: 2026-12-05, tests/cpu/fast_mode_kl.py, default model 0.00112
 * against torch's path's 0.00096; float32 ones 0.00097, Gemma 3 0.00085 as torch's); divided by the float32
 * sum of the probabilities at the end; the output in q's dtype (float32, or bfloat16 rounded to nearest even).
 * Kernel alone (tests/cpu/bench_prompt_attention.py), a 128-row Gemma 3 270M tile (4 heads, 1 KV head, hd
 * 256), interleaved: 0.82-0.86 ms at position 256, 2.46-2.60 at 1024 (195-199 / 220-225 GFLOP/s counting the
 * attended keys only), torch's path 2.5-4.3 / 6.6-10.2; with the values in bfloat16 pairs too 0.67 / 1.9-2.0.
 *
 * Exactness: a lane's operations depend only on its row (query, slot, position, window) and the chunk grid:
 * keys go in chunks of CH on an absolute grid (multiples of CH), each row walking the chunks from its
 * window's first to its position's, an online-softmax step each. Lanes of rows that do not reach a chunk
 * shared by their block keep their state untouched (masked operations), so a row's bits are the same alone,
 * anywhere in any tile, with any other rows beside it, at any thread count (work items are independent).
 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_math.h"

#define L 16           /* lanes: query vectors a work item */
#define CH 16          /* keys a chunk, on the absolute grid of multiples of CH */

#define TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

static __thread uint32_t *t_buf;
static __thread size_t t_cap;

static int reserve(size_t bytes) {
    if (t_cap >= bytes) return 0;
    free(t_buf);
    t_buf = aligned_alloc(64, (bytes + 63) / 64 * 64);
    t_cap = t_buf ? bytes : 0;
    return t_buf ? 0 : -1;
}

/* acc [hd][L] = acc * alpha + the chunk's probabilities pf [CH][L] times its values vf [CH][hd], on the lanes
 * in act (masked: others untouched; unmasked where act holds every lane in use, the same operations on
 * those lanes: 2026-12-05, 128 Gemma rows at 1024, 2.9 -> 2.5 ms). */
TARGET static inline __attribute__((always_inline)) void values(float *acc, const float *pf, const float *vf,
                                                                int64_t hd, __m512 alpha, __mmask16 act,
                                                                const int masked) {
    for (int64_t d0 = 0; d0 < hd; d0 += 16) {
        __m512 o[16];
        for (int i = 0; i < 16; i++) {
            const __m512 a = _mm512_load_ps(acc + (d0 + i) * L);
            o[i] = masked ? _mm512_mask_mul_ps(a, act, a, alpha) : _mm512_mul_ps(a, alpha);
        }
        for (int j = 0; j < CH; j++) {
            const __m512 pj = _mm512_load_ps(pf + j * L);
            const float *vr = vf + j * hd + d0;
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++)
                o[i] = masked ? _mm512_mask3_fmadd_ps(pj, _mm512_set1_ps(vr[i]), o[i], act)
                              : _mm512_fmadd_ps(pj, _mm512_set1_ps(vr[i]), o[i]);
        }
        for (int i = 0; i < 16; i++) _mm512_store_ps(acc + (d0 + i) * L, o[i]);
    }
}

typedef struct {
    const void *q;
    int64_t q_row, q_head;         /* q's strides (elements) */
    int q_f32;
    const uint16_t *k, *v;         /* [slots, ctx, kvh, hd] bfloat16 */
    int64_t ctx, kvh, hd;
    const int64_t *slot, *pos;
    int64_t window;
    float scale;
    void *out;                     /* [T, H, hd] contiguous, q's dtype */
    int64_t H;
} Args;

/* One work item: rows r0.. (lanes / gs rows of one slot, count nr) and heads kh*g + h0 .. (gs of them). */
TARGET static void item(const Args *a, int64_t r0, int nr, int64_t kh, int64_t h0, int gs, int64_t g) {
    const int64_t hd = a->hd, hp = hd / 2, kstride = a->kvh * hd;
    uint32_t *qt = t_buf;                          /* [hd/2][L] q pairs */
    float *acc = (float *)(qt + hp * L);           /* [hd][L] */
    float *vf = acc + hd * L;                      /* [CH][hd] the chunk's values */
    int32_t lpos[L], llo[L];
    int64_t lrow[L], lhead[L];
    for (int l = 0; l < L; l++) {
        const int rr = l / gs, hh = l % gs;
        const int on = rr < nr && h0 + hh < g;
        lrow[l] = r0 + rr;
        lhead[l] = kh * g + h0 + hh;
        lpos[l] = on ? (int32_t)a->pos[r0 + rr] : -1;
        llo[l] = on && a->window ? (int32_t)(a->pos[r0 + rr] - a->window + 1) : 0;
        if (llo[l] < 0) llo[l] = 0;
        for (int64_t j = 0; j < hp; j++) {
            float x0 = 0, x1 = 0;
            if (on) {
                const int64_t at = lrow[l] * a->q_row + lhead[l] * a->q_head + 2 * j;
                if (a->q_f32) {
                    x0 = ((const float *)a->q)[at];
                    x1 = ((const float *)a->q)[at + 1];
                } else {
                    x0 = bf16_to_f32(((const uint16_t *)a->q)[at]);
                    x1 = bf16_to_f32(((const uint16_t *)a->q)[at + 1]);
                }
            }
            qt[j * L + l] = f32_to_bf16(x0 * a->scale) | (uint32_t)f32_to_bf16(x1 * a->scale) << 16;
        }
    }
    memset(acc, 0, (size_t)hd * L * 4);
    const __m512i vpos = _mm512_loadu_si512(lpos), vlo = _mm512_loadu_si512(llo);
    const __mmask16 live = _mm512_cmp_epi32_mask(vpos, _mm512_setzero_si512(), _MM_CMPINT_NLT);
    int64_t c_lo = INT64_MAX, c_hi = -1;
    for (int l = 0; l < L; l++)
        if (lpos[l] >= 0) {
            if (llo[l] / CH < c_lo) c_lo = llo[l] / CH;
            if (lpos[l] / CH > c_hi) c_hi = lpos[l] / CH;
        }
    const int64_t slot = a->slot[r0];
    const uint16_t *kbase = a->k + slot * a->ctx * kstride + kh * hd;
    const uint16_t *vbase = a->v + slot * a->ctx * kstride + kh * hd;
    __m512 m = _mm512_set1_ps(-INFINITY), lsum = _mm512_setzero_ps();
    for (int64_t c = c_lo; c <= c_hi; c++) {
        const int64_t key0 = c * CH;
        const int nk = a->ctx - key0 < CH ? (int)(a->ctx - key0) : CH;
        /* lanes whose row walks this chunk: its window's first key .. its position */
        const __m512i first = _mm512_set1_epi32((int32_t)key0), last = _mm512_set1_epi32((int32_t)(key0 + CH - 1));
        const __mmask16 act = _mm512_cmp_epi32_mask(vpos, first, _MM_CMPINT_NLT) &
                              _mm512_cmp_epi32_mask(vlo, last, _MM_CMPINT_LE);
        __m512 s[CH];
        for (int j = 0; j < CH; j++) s[j] = _mm512_setzero_ps();
        if (nk == CH) {
            for (int64_t d = 0; d < hp; d++) {
                const __m512bh qv = (__m512bh)_mm512_load_si512(qt + d * L);
#pragma GCC unroll 16
                for (int j = 0; j < CH; j++) {
                    uint32_t kw;
                    memcpy(&kw, kbase + (key0 + j) * kstride + 2 * d, 4);
                    s[j] = _mm512_dpbf16_ps(s[j], (__m512bh)_mm512_set1_epi32((int)kw), qv);
                }
            }
        } else {
            for (int64_t d = 0; d < hp; d++) {
                const __m512bh qv = (__m512bh)_mm512_load_si512(qt + d * L);
                for (int j = 0; j < nk; j++) {
                    uint32_t kw;
                    memcpy(&kw, kbase + (key0 + j) * kstride + 2 * d, 4);
                    s[j] = _mm512_dpbf16_ps(s[j], (__m512bh)_mm512_set1_epi32((int)kw), qv);
                }
            }
        }
        __mmask16 ok[CH];
        __m512 mx = _mm512_set1_ps(-INFINITY);
        for (int j = 0; j < CH; j++) {
            const __m512i kp = _mm512_set1_epi32((int32_t)(key0 + j));
            ok[j] = j < nk ? act & _mm512_cmp_epi32_mask(kp, vpos, _MM_CMPINT_LE) &
                                 _mm512_cmp_epi32_mask(kp, vlo, _MM_CMPINT_NLT) : 0;
            mx = _mm512_mask_max_ps(mx, ok[j], mx, s[j]);
        }
        const __m512 m_new = _mm512_max_ps(m, mx);
        const __mmask16 fin = _mm512_cmp_ps_mask(m_new, _mm512_set1_ps(-INFINITY), _CMP_NEQ_OQ);
        const __m512 m_safe = _mm512_maskz_mov_ps(fin, m_new);
        const __mmask16 seen = _mm512_cmp_ps_mask(m, _mm512_set1_ps(-INFINITY), _CMP_NEQ_OQ);
        const __m512 alpha = exp_le0(seen, _mm512_sub_ps(m, m_safe));
        __m512 psum = _mm512_setzero_ps();
        float pf[CH][L] __attribute__((aligned(64)));
        for (int j = 0; j < CH; j++) {
            const __m512 p = exp_le0(ok[j], _mm512_sub_ps(s[j], m_safe));
            psum = _mm512_add_ps(psum, p);
            _mm512_store_ps(pf[j], p);
        }
        m = _mm512_mask_mov_ps(m, act, m_new);
        lsum = _mm512_mask_mov_ps(lsum, act, _mm512_add_ps(_mm512_mul_ps(lsum, alpha), psum));
        /* the chunk's values as float32 (keys past the cache: zeros, their probabilities are zero) */
        for (int j = 0; j < CH; j++)
            for (int64_t d = 0; d < hd; d += 16) {
                const __m256i *vr = (const __m256i *)(vbase + (key0 + j) * kstride + d);
                const __m512i w = j < nk ? _mm512_cvtepu16_epi32(_mm256_loadu_si256(vr)) : _mm512_setzero_si512();
                _mm512_store_si512(vf + j * hd + d, _mm512_slli_epi32(w, 16));
            }
        if (act == live)          /* every lane in use walks this chunk (most chunks): no masks (faster) */
            values(acc, &pf[0][0], vf, hd, alpha, act, 0);
        else
            values(acc, &pf[0][0], vf, hd, alpha, act, 1);
    }
    for (int64_t d = 0; d < hd; d++) {
        const __m512 y = _mm512_div_ps(_mm512_load_ps(acc + d * L), lsum);
        _mm512_store_ps(acc + d * L, y);
    }
    for (int l = 0; l < L; l++) {
        if (lpos[l] < 0) continue;
        const int64_t at = (lrow[l] * a->H + lhead[l]) * hd;
        if (a->q_f32)
            for (int64_t d = 0; d < hd; d++) ((float *)a->out)[at + d] = acc[d * L + l];
        else
            for (int64_t d = 0; d < hd; d++) ((uint16_t *)a->out)[at + d] = f32_to_bf16(acc[d * L + l]);
    }
}

/* out [T, H, hd] (q's dtype, contiguous) = attention of q [T, H, hd] (strides q_row, q_head; float32 or
 * bfloat16) over k/v [slots, ctx, kvh, hd] bfloat16; slot/pos [T]; window 0 = all keys 0..pos. hd % 16 == 0.
 * Returns 0, or -1 where memory ran out. */
TARGET int strata_prompt_attention(const void *q, int64_t T, int64_t H, int64_t hd, int64_t q_row, int64_t q_head,
                                   int q_f32, const uint16_t *k, const uint16_t *v, int64_t ctx, int64_t kvh,
                                   const int64_t *slot, const int64_t *pos, int64_t window, float scale, void *out) {
    const int64_t g = H / kvh;
    const int gs = g < L ? (int)g : L, rows = L / gs;
    const int64_t hgroups = (g + gs - 1) / gs;
    /* row blocks: up to `rows` consecutive rows of one slot */
    int64_t *starts = malloc((size_t)(T + 1) * sizeof(int64_t));
    if (!starts) return -1;
    int64_t nb = 0;
    for (int64_t r = 0; r < T;) {
        int64_t e = r + 1;
        while (e < T && e - r < rows && slot[e] == slot[r]) e++;
        starts[nb++] = r;
        r = e;
    }
    starts[nb] = T;
    const Args a = {q, q_row, q_head, q_f32, k, v, ctx, kvh, hd, slot, pos, window, scale, out, H};
    const int64_t items = nb * kvh * hgroups;
    const size_t bytes = (size_t)(hd / 2) * L * 4 + (size_t)hd * L * 4 + (size_t)CH * hd * 4;
    int failed = 0;
#pragma omp parallel for schedule(dynamic, 1) reduction(| : failed)
    for (int64_t it = items - 1; it >= 0; it--) {      /* the later rows (more keys) first */
        if (reserve(bytes)) {
            failed = 1;
            continue;
        }
        const int64_t b = it / (kvh * hgroups), rest = it % (kvh * hgroups);
        item(&a, starts[b], (int)(starts[b + 1] - starts[b]), rest / hgroups, (rest % hgroups) * gs, gs, g);
    }
    free(starts);
    return failed ? -1 : 0;
}
