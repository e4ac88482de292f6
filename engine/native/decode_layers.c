/* The CPU fast mode's decode tiles: a stage's dense attention blocks over a few rows, all of them in one call.
 *
 * Why: with the matmuls and the attention on kernels of their own, what was left of a decode step was torch's
 * small ops around them: ~115 dispatches a layer (norms, conversions, splits, the rotation's cat / flip / mul /
 * add, cache writes, silu, residual adds) at 2-4 us each, about half of a one-row step of the default model on
 * 2 cores (torch.profiler: 3,456 aten calls a step, 30 layers; 2026-12-06). Here a stage's blocks run as one
 * loop in C that calls the same kernels (int4_rows.c, q6_k_rows.c, rows_norm.c, decode_attention.c) and does
 * the small steps between them itself.
 *
 * Numerics: the torch blocks' (engine.block.attention_part / ffn_part in the fast mode), step by step, with the
 * same roundings: the RMSNorms in float32 and rounded to bfloat16 for the matmuls; q, k, v in bfloat16; q's and
 * k's heads normed in float32 where the model has q / k norms (the rotation then in float32, else in bfloat16:
 * each product and the sum rounded, as torch's bfloat16 ops do, the tables rounded to bfloat16 first); k to
 * the cache rounded to bfloat16; the attention's output in q's dtype, rounded to bfloat16 for wo; the residual
 * sums in float32; the FFN's activation and its product with up each rounded to bfloat16. The activations
 * (silu, gelu's tanh form) use kernel_math.h's exp, not torch's: over every bfloat16 gate value, gelu gives
 * torch's bits for all of them, silu for all but three (-87.5, -88, -88.5: -0 here, about -1e-36 in torch),
 * and the real models' tiles came out bit for bit as the torch blocks' (tests/engine/test_cpu_layers.py).
 * Decode tiles always run this where a stage has it (each kind of tile always runs the same code), and every
 * step is a row's own: a row's bits do not depend on the other rows, their count or the thread count. Built
 * with -ffp-contract=off: no product is fused into a sum unless written so.
 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_math.h"

#define TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

int strata_int4_rows(const uint16_t *x, int64_t M, int64_t K, const uint8_t *packed, const uint16_t *sz, int64_t N,
                     int parts, uint16_t *y, int64_t ldy);
int strata_q6_k_matmul(const uint16_t *x, int64_t M, int64_t K, const uint8_t *w, int64_t N, float *y);
int strata_rms_norm(const float *x, const float *w, float *y, int64_t rows, int64_t n, float eps);
int strata_decode_attention(const void *q, int64_t T, int64_t H, int64_t hd, int64_t q_row, int64_t q_head,
                            int q_f32, const uint16_t *k, const uint16_t *v, int64_t ctx, int64_t kvh,
                            const int64_t *slot, const int64_t *pos, int64_t window, float scale, void *out);

enum { MAT_INT4 = 1, MAT_Q6_K = 2 };

typedef struct {                 /* one matrix [n, K] (engine/cpu_layers.py's Mat) */
    int64_t kind, n, parts;      /* parts: an int4 matrix's int4 parts side by side along K */
    const void *a;               /* int4: torch's packed codes; Q6_K: the file's blocks */
    const void *sz;              /* int4: [groups, n, 2] bfloat16 scale and zero */
} Mat;

typedef struct {                 /* one block (engine/cpu_layers.py's Layer); NULL norms: none */
    Mat qkv[3], wo, gate_up[2], down;
    int64_t n_qkv, n_gate_up;    /* matrices whose columns make q | k | v and gate | up */
    const float *attn_norm, *q_norm, *k_norm, *post_attn_norm, *ffn_norm, *post_ffw_norm;
    const float *rope_c, *rope_s;           /* [ctx, rope_dim]: engine.layers.rotation_tables */
    uint16_t *k_cache, *v_cache;            /* [slots, ctx, kvh, hd] bfloat16 */
    int64_t window;
    float scale;
} Layer;

typedef struct {
    int64_t dim, n_heads, n_kv_heads, head_dim, ffn, rope_dim, ctx, neox, gelu;
    float eps;
} Shape;

static inline float round_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

static void to_bf16(const float *x, uint16_t *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = f32_to_bf16(x[i]);
}

/* y [T, ldy] bfloat16 = x [T, K] @ the matrices' rows, side by side from column 0; tmp: T * n floats. */
static int matmul(const Mat *m, int64_t count, const uint16_t *x, int64_t T, int64_t K, uint16_t *y, int64_t ldy,
                  float *tmp) {
    for (int64_t i = 0, col = 0; i < count; col += m[i].n, i++) {
        if (m[i].kind == MAT_INT4) {
            if (strata_int4_rows(x, T, K, m[i].a, m[i].sz, m[i].n, (int)m[i].parts, y + col, ldy)) return -1;
        } else {
            if (strata_q6_k_matmul(x, T, K, m[i].a, m[i].n, tmp)) return -1;
            for (int64_t r = 0; r < T; r++) to_bf16(tmp + r * m[i].n, y + r * ldy + col, m[i].n);
        }
    }
    return 0;
}

/* One head's values v [hd] rotated at position p (the first rope_dim of them); f32: in float32, else each step
 * rounded to bfloat16 (v holds bfloat16 values). */
static void rotate(const Shape *s, const Layer *L, float *v, int64_t p, int f32) {
    const int64_t rd = s->rope_dim;
    const float *c = L->rope_c + p * rd, *sn = L->rope_s + p * rd;
    float out[256];                               /* rope_dim <= head_dim <= 256 */
    for (int64_t i = 0; i < rd; i++) {
        const int64_t j = s->neox ? (i + rd / 2) % rd : (i ^ 1);      /* the value i turns with */
        if (f32) {
            const float a = v[i] * c[i], b = v[j] * sn[i];
            out[i] = a + b;
        } else {
            const float a = round_bf16(v[i] * round_bf16(c[i])), b = round_bf16(v[j] * round_bf16(sn[i]));
            out[i] = round_bf16(a + b);
        }
    }
    memcpy(v, out, (size_t)rd * sizeof(float));
}

/* 16 floats to bfloat16, nearest even, as f32_to_bf16 (vcvtneps2bf16 would flush subnormals to zero). */
TARGET static inline __m256i to_bf16_16(__m512 f) {
    const __m512i u = _mm512_castps_si512(f);
    __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff),
                                                     _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1))));
    r = _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q), _mm512_or_si512(u, _mm512_set1_epi32(0x400000)));
    return _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16));
}

/* The activation of gate values g times up values u, each step rounded to bfloat16: 16 at a time. */
TARGET static void glu(const uint16_t *g, const uint16_t *u, uint16_t *y, int64_t n, int gelu) {
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 in = n - i >= 16 ? 0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        const __m512 x = bf16x16_to_f32(_mm256_maskz_loadu_epi16(in, g + i));
        const __m512 up = bf16x16_to_f32(_mm256_maskz_loadu_epi16(in, u + i));
        const __m512 one = _mm512_set1_ps(1.0f);
        __m512 a;
        if (gelu) {      /* 0.5 x (1 + tanh(b (x + k x^3))), tanh(t) = sign(t) (1 - e) / (1 + e), e = exp(-2|t|) */
            const __m512 cube = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
            const __m512 t = _mm512_mul_ps(_mm512_set1_ps(0.7978845608028654f),
                                           _mm512_add_ps(x, _mm512_mul_ps(_mm512_set1_ps(0.044715f), cube)));
            const __m512 at = _mm512_abs_ps(t);
            const __m512 e = exp_le0(0xFFFF, _mm512_mul_ps(_mm512_set1_ps(-2.0f), at));
            /* (1 - e) / (1 + e) in double, rounded once: tanh to the float nearest it, 1 beyond 8.664339742 as
             * torch's (Sleef's) tanh gives it (1 + tanh near -1, gate values below about -4, keeps torch's bits
             * only so) */
            const __m512d one_d = _mm512_set1_pd(1.0);
            const __m512d e0 = _mm512_cvtps_pd(_mm512_castps512_ps256(e));
            const __m512d e1 = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1)));
            __m512 th = _mm512_insertf32x8(
                _mm512_castps256_ps512(_mm512_cvtpd_ps(_mm512_div_pd(_mm512_sub_pd(one_d, e0), _mm512_add_pd(one_d, e0)))),
                _mm512_cvtpd_ps(_mm512_div_pd(_mm512_sub_pd(one_d, e1), _mm512_add_pd(one_d, e1))), 1);
            th = _mm512_mask_mov_ps(th, _mm512_cmp_ps_mask(at, _mm512_set1_ps(8.664339742f), _CMP_GT_OQ), one);
            th = _mm512_mask_sub_ps(th, _mm512_cmp_ps_mask(t, _mm512_setzero_ps(), _CMP_LT_OQ), _mm512_setzero_ps(), th);
            a = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x), _mm512_add_ps(one, th));
        } else {         /* x / (1 + exp(-x)); exp(-x) = 1 / exp(x) for x < 0 */
            const __m512 e = exp_le0(0xFFFF, _mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(x)));
            const __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
            const __m512 em = _mm512_mask_div_ps(e, neg, one, e);
            a = _mm512_div_ps(x, _mm512_add_ps(one, em));
        }
        const __m512 ab = bf16x16_to_f32(to_bf16_16(a));
        _mm256_mask_storeu_epi16(y + i, in, to_bf16_16(_mm512_mul_ps(ab, up)));
    }
}

typedef struct {                 /* one call's scratch */
    float *f, *f2, *tmp, *q;     /* q: [T, H, hd], float32 or bfloat16 */
    uint16_t *xb, *qkv, *att, *gu, *act, *o;
} Scratch;

/* x += the part's bfloat16 output b->o [T, dim], normed first where the model norms it (Gemma 3). */
static void add_output(const Shape *s, float *x, int64_t T, const float *norm, const Scratch *b) {
    const int64_t n = T * s->dim;
    for (int64_t i = 0; i < n; i++) b->f[i] = bf16_to_f32(b->o[i]);
    const float *o = b->f;
    if (norm) {
        strata_rms_norm(b->f, norm, b->f2, T, s->dim, s->eps);
        o = b->f2;
    }
    for (int64_t i = 0; i < n; i++) x[i] = x[i] + o[i];
}

TARGET static int block(const Shape *s, const Layer *L, float *x, int64_t T, const int64_t *slot,
                        const int64_t *pos, const Scratch *b) {
    const int64_t D = s->dim, H = s->n_heads, kvh = s->n_kv_heads, hd = s->head_dim, F = s->ffn;
    const int64_t nq = H * hd, nk = kvh * hd, nqkv = nq + 2 * nk;
    const int qf = L->q_norm != NULL;             /* q and k normed: float32 from there on */
    strata_rms_norm(x, L->attn_norm, b->f, T, D, s->eps);
    to_bf16(b->f, b->xb, T * D);
    if (matmul(L->qkv, L->n_qkv, b->xb, T, D, b->qkv, nqkv, b->tmp)) return -1;
    for (int64_t r = 0; r < T; r++) {
        const uint16_t *row = b->qkv + r * nqkv;
        const int64_t at = (slot[r] * s->ctx + pos[r]) * nk;      /* the row's place in the caches */
        for (int64_t j = 0; j < H + kvh; j++) {                    /* q's heads, then k's */
            float v[256], w[256];
            for (int64_t d = 0; d < hd; d++) v[d] = bf16_to_f32(row[j * hd + d]);
            const float *nw = j < H ? L->q_norm : L->k_norm;
            if (nw) {
                strata_rms_norm(v, nw, w, 1, hd, s->eps);
                memcpy(v, w, (size_t)hd * sizeof(float));
            }
            rotate(s, L, v, pos[r], qf);
            if (j >= H)
                to_bf16(v, L->k_cache + at + (j - H) * hd, hd);
            else if (qf)
                memcpy(b->q + (r * H + j) * hd, v, (size_t)hd * sizeof(float));
            else
                to_bf16(v, (uint16_t *)b->q + (r * H + j) * hd, hd);
        }
        memcpy(L->v_cache + at, row + nq + nk, (size_t)nk * sizeof(uint16_t));
    }
    void *att = qf ? (void *)b->f2 : (void *)b->att;              /* the attention's output, in q's dtype */
    if (strata_decode_attention(b->q, T, H, hd, nq, hd, qf, L->k_cache, L->v_cache, s->ctx, kvh, slot, pos,
                                L->window, L->scale, att)) return -1;
    if (qf) to_bf16(b->f2, b->att, T * nq);
    if (matmul(&L->wo, 1, b->att, T, nq, b->o, D, b->tmp)) return -1;
    add_output(s, x, T, L->post_attn_norm, b);
    strata_rms_norm(x, L->ffn_norm, b->f, T, D, s->eps);
    to_bf16(b->f, b->xb, T * D);
    if (matmul(L->gate_up, L->n_gate_up, b->xb, T, D, b->gu, 2 * F, b->tmp)) return -1;
    for (int64_t r = 0; r < T; r++) glu(b->gu + r * 2 * F, b->gu + r * 2 * F + F, b->act + r * F, F, (int)s->gelu);
    if (matmul(&L->down, 1, b->act, T, F, b->o, D, b->tmp)) return -1;
    add_output(s, x, T, L->post_ffw_norm, b);
    return 0;
}

/* The blocks in turn over x [T, dim] float32 (the residual stream, updated in place); slot / pos [T]: each row's
 * KV slot and position. head_dim a multiple of 32 up to 256, rope_dim even, up to head_dim. Returns 0, or -1 where memory
 * ran out. */
int strata_decode_layers(const Layer *layers, int64_t n_layers, const Shape *s, float *x, int64_t T,
                         const int64_t *slot, const int64_t *pos) {
    const int64_t D = s->dim, F = s->ffn, nq = s->n_heads * s->head_dim, nqkv = nq + 2 * s->n_kv_heads * s->head_dim;
    int64_t widest = D > 2 * F ? D : 2 * F;
    if (nqkv > widest) widest = nqkv;
    const int64_t wide = D > nq ? D : nq;
    const size_t floats = (size_t)T * (2 * wide + widest + nq), halves = (size_t)T * (D + nqkv + nq + 2 * F + F + D);
    float *mem = malloc(floats * sizeof(float) + halves * sizeof(uint16_t) + 64);
    if (!mem) return -1;
    Scratch b;
    b.f = mem;
    b.f2 = b.f + T * wide;
    b.tmp = b.f2 + T * wide;
    b.q = b.tmp + T * widest;
    b.xb = (uint16_t *)(b.q + T * nq);
    b.qkv = b.xb + T * D;
    b.att = b.qkv + T * nqkv;
    b.gu = b.att + T * nq;
    b.act = b.gu + T * 2 * F;
    b.o = b.act + T * F;
    int rc = 0;
    for (int64_t l = 0; l < n_layers && !rc; l++) rc = block(s, layers + l, x, T, slot, pos, &b);
    free(mem);
    return rc;
}
