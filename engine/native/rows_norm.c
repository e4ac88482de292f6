/* The CPU stages' RMSNorm: y = x * (1 / sqrt(mean(x^2) + eps)) * w over each row of float32 x [rows, n].
 *
 * Why: torch runs a CPU rms_norm as five or six kernels (square, mean, add, rsqrt, two multiplies), each
 * a dispatch and a pass over the row; Gemma 3 270M makes 109 of them a decode step (six a layer, q and k
 * heads included) at about 25 us each, 2.7-2.8 ms of a 23 ms step, and 8.4 ms of a 155 ms 128-row prompt
 * tile (the 2-core machine, 2026-12-05). Here it is one call, one pass to sum and one to scale.
 *
 * Exactness: a row's sum of squares is 16 float32 lanes taking the row's values in order (one fused
 * multiply-add each), then one fixed tree over the lanes; threads split whole rows. So a row's bits do not
 * depend on the other rows, their count or the thread count.
 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#define TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define PARALLEL_MIN 32768     /* values below which one thread does all rows (a decode row: no team wake-up) */

TARGET static void norm_row(const float *x, const float *w, float *y, int64_t n, float eps) {
    __m512 acc = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        acc = _mm512_fmadd_ps(v, v, acc);
    }
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        acc = _mm512_fmadd_ps(v, v, acc);
    }
    float lane[16];
    _mm512_storeu_ps(lane, acc);
    for (int s = 8; s > 0; s >>= 1)
        for (int j = 0; j < s; j++) lane[j] += lane[j + s];
    const __m512 inv = _mm512_set1_ps(1.0f / sqrtf(lane[0] / (float)n + eps));
    for (i = 0; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), inv), _mm512_loadu_ps(w + i)));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv);
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, w + i)));
    }
}

/* y [rows, n] = rms_norm(x [rows, n]) * w [n], all float32 and contiguous. */
TARGET int strata_rms_norm(const float *x, const float *w, float *y, int64_t rows, int64_t n, float eps) {
#pragma omp parallel for schedule(static) if (rows * n >= PARALLEL_MIN)
    for (int64_t r = 0; r < rows; r++) norm_row(x + r * n, w, y + r * n, n, eps);
    return 0;
}
