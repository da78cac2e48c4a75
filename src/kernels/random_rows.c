/* The random draws' float rows for one ISA variant (built per ISA like rows.c; see
 * table.h): the vector Philox of philox.h and the vector math of math_f32.h at the ISA's
 * width. Every variant with FMA (AVX2, AVX-512) computes the same values element by element;
 * the reference variant rounds a*b+c twice, so its normal draws can differ in the last bit. */
#include <math.h>
#include <string.h>

#include "math_f32.h"
#include "philox.h"
#include "table.h"

#ifndef TN_ROWS_ISA
#error "compile with -DTN_ROWS_ISA=ref|avx2|avx512"
#endif
#define TN_CONCAT_(a, b) a##b
#define TN_CONCAT(a, b) TN_CONCAT_(a, b)

/* The 64 values of blocks base / 4 .. base / 4 + 16 of a float32, bfloat16 or float16 draw,
 * in float: Philox 16 blocks at a time (philox.h), uniform draws of 24 bits in (0, 1], and
 * Box-Muller on each pair of lanes (the same pairs as draw(): cos for the first, sin for the
 * second) with the vector log, sin and cos of math_f32.h. The loops run over arrays, so they
 * vectorize (draw() spent a whole block and two double transcendental calls per element). */
static void draw_floats(uint64_t seed, uint64_t offset, int64_t base, int normal, double a, double b,
                        float v[4 * TN_PHILOX_LANES]) {
    enum { N = 4 * TN_PHILOX_LANES, PAIRS = N / 2 };
    uint32_t w[N];
    tn_philox_blocks(seed, offset, (uint64_t)base / 4, w);
    float u[N];
    for (int i = 0; i < N; i++) u[i] = ((float)(w[i] >> 8) + 1.0f) * 5.9604644775390625e-8f;
    if (!normal) {
        /* [a, b): a value that rounds up to b becomes the float below it */
        const float lo = (float)a, width = (float)(b - a), top = (float)b, below = nextafterf(top, -INFINITY);
        for (int i = 0; i < N; i++) {
            float x = TN_FMA(width, 1.0f - u[i], lo);
            v[i] = x < top ? x : below;
        }
        return;
    }
    float radius[PAIRS], angle[PAIRS], c[PAIRS], sn[PAIRS];
    for (int j = 0; j < PAIRS; j++) {
        radius[j] = (float)b * sqrtf(-2.0f * tn_logf(u[2 * j]));
        angle[j] = 6.28318530717958648f * u[2 * j + 1];
    }
    for (int j = 0; j < PAIRS; j++) c[j] = tn_sin_cosf(angle[j], 1);
    for (int j = 0; j < PAIRS; j++) sn[j] = tn_sin_cosf(angle[j], 0);
    const float mean = (float)a;
    for (int j = 0; j < PAIRS; j++) {
        v[2 * j] = TN_FMA(radius[j], c[j], mean);
        v[2 * j + 1] = TN_FMA(radius[j], sn[j], mean);
    }
}

/* Dropout of elements first .. first + n of contiguous float32 or bfloat16 rows (see
 * tn_kernel_dropout): Philox's factors in this ISA's vectors (in the baseline build they took
 * most of the time), then the select and the mask. */
static void dropout_rows(uint64_t seed, uint64_t offset, int64_t first, int64_t n, uint64_t keep_from, float scale,
                         int bf16, const void *in, void *out, uint8_t *mask) {
    enum { CHUNK = 4 * TN_PHILOX_LANES };
    float keep[CHUNK];
    for (int64_t i0 = first; i0 < first + n; i0 += CHUNK) {
        int64_t m = first + n - i0 < CHUNK ? first + n - i0 : CHUNK;
        tn_dropout_factors(seed, offset, i0, m, keep_from, scale, keep);
        if (!bf16) {
            const float *x = (const float *)in + i0;
            float *o = (float *)out + i0;
            for (int64_t j = 0; j < m; j++) o[j] = keep[j] != 0.0f ? x[j] * keep[j] : 0.0f;
        } else {
            const uint16_t *x = (const uint16_t *)in + i0;
            uint16_t *o = (uint16_t *)out + i0;
            for (int64_t j = 0; j < m; j++)
                o[j] = tn_f32_to_bf16_inline(keep[j] != 0.0f ? tn_bf16_to_f32_inline(x[j]) * keep[j] : 0.0f);
        }
        for (int64_t j = 0; j < m; j++) mask[i0 + j] = keep[j] != 0.0f;
    }
}

void TN_CONCAT(tn_random_install_, TN_ROWS_ISA)(tn_kernel_table *t) {
    t->draw_floats = draw_floats;
    t->dropout_rows = dropout_rows;
}
