/* Float32 math written so compilers vectorize it (no calls, no branches the vectoriser cannot
 * turn into selects). Accuracy: within 2 ulp of the correctly rounded result over the finite
 * range, with NaN and infinities handled. Shared by every ISA variant of the row kernels. */
#ifndef TN_KERNELS_MATH_F32_H
#define TN_KERNELS_MATH_F32_H

#include <math.h>
#include <stdint.h>

#include "half.h"

/* a * b + c, fused where the ISA has FMA (ISO C does not contract a * b + c by itself). */
#ifdef __FMA__
#define TN_FMA(a, b, c) __builtin_fmaf(a, b, c)
#else
#define TN_FMA(a, b, c) ((a) * (b) + (c))
#endif

/* e^x: Cody-Waite reduction by ln 2, degree-6 polynomial, n added to the exponent bits.
 * The clamp is written as max/min that send NaN to the lower bound (x86's maxps/minps keep
 * the second operand when either is NaN, as these selects do), so the reduction never sees a
 * NaN (its integer conversion would be undefined); the last select puts NaN back. */
static inline float tn_expf(float x) {
    float xc = x > -87.33655f ? x : -87.33655f;
    xc = xc < 88.72284f ? xc : 88.72284f;
    float n = rintf(xc * 1.44269504f);
    float r = TN_FMA(n, -0.693359375f, xc);
    r = TN_FMA(n, 2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = TN_FMA(p, r, 1.3981999507e-3f);
    p = TN_FMA(p, r, 8.3334519073e-3f);
    p = TN_FMA(p, r, 4.1665795894e-2f);
    p = TN_FMA(p, r, 1.6666665459e-1f);
    p = TN_FMA(p, r, 5.0000001201e-1f);
    p = TN_FMA(p * r, r, r) + 1.0f;
    /* p * 2^n by adding n to p's exponent bits: exact, and right for n = 128 too (x above
     * 88.38), where a separate 2^n would not fit a float's exponent */
    float y = tn_f32_from_bits(tn_f32_bits(p) + ((uint32_t)(int32_t)n << 23));
    y = x > 88.72283f ? INFINITY : y;
    y = x < -87.33654f ? 0.0f : y;
    return x != x ? x : y;
}

static inline float tn_sigmoidf(float x) { return 1.0f / (1.0f + tn_expf(-x)); }

/* tanh: odd polynomial near 0 (no cancellation), 1 - 2/(e^2|x| + 1) elsewhere. */
static inline float tn_tanhf(float x) {
    float ax = fabsf(x);
    float z = x * x;
    float small = ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z +
                    1.33314422036e-1f) * z - 3.33332819422e-1f) * z * x + x;
    float big = 1.0f - 2.0f / (tn_expf(2.0f * ax) + 1.0f);
    big = x < 0 ? -big : big;
    return ax < 0.625f ? small : big;
}

static inline float tn_gelu_tanhf(float x) {
    float inner = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + tn_tanhf(inner));
}

#endif
