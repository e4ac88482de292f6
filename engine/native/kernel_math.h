/* What the CPU kernels share: bfloat16 conversions (all of them) and an exp (the attention kernels' softmax,
 * decode_layers.c's activations). Part of engine/cpu_gemm.py's build (its hash covers this file too). */
#ifndef STRATA_KERNEL_MATH_H
#define STRATA_KERNEL_MATH_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

static inline uint16_t f32_to_bf16(float f) {        /* round to nearest even (as torch's .to(bfloat16)) */
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

static inline float bf16_to_f32(uint16_t v) {
    uint32_t u = (uint32_t)v << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* 16 bfloat16 values to float32 (exact). */
__attribute__((target("avx512f,avx512bw"))) static inline __m512 bf16x16_to_f32(__m256i v) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
}

/* exp(x) for x <= 0 (Cephes' expf); exactly 1 at 0, exactly 0 below -87 and where mask is clear. */
__attribute__((target("avx512f,avx512dq"))) static inline __m512 exp_le0(__mmask16 mask, __m512 x) {
    mask &= _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_GE_OQ);
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.0f));
    return _mm512_maskz_scalef_ps(mask, y, n);
}

#endif
