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
 * n = rint(x / ln 2) comes from adding 1.5 * 2^23 (the float's units then sit at mantissa bit
 * 0, so t's low bits hold n and t - 1.5 * 2^23 is n exactly): no clamp, no float-to-int
 * conversion. Outside [-87.34, 88.72] (and for NaN) those bits are garbage, and the two
 * selects at the end replace the result: 0 below (results that would be subnormal flush to
 * zero), x + inf above (inf, and NaN stays NaN). */
static inline float tn_expf(float x) {
    float t = TN_FMA(x, 1.44269504f, 12582912.0f);
    float n = t - 12582912.0f;
    float r = TN_FMA(n, -0.693359375f, x);
    r = TN_FMA(n, 2.12194440e-4f, r);
    /* e^r = 1 + r + r^2 q(r), q of degree 5 evaluated in pairs (Estrin): a shorter chain of
     * dependent operations than Horner's, so more elements are in flight at once */
    float r2 = r * r;
    float q01 = TN_FMA(1.6666665459e-1f, r, 5.0000001201e-1f);
    float q23 = TN_FMA(8.3334519073e-3f, r, 4.1665795894e-2f);
    float q45 = TN_FMA(1.9875691500e-4f, r, 1.3981999507e-3f);
    float q = TN_FMA(TN_FMA(q45, r2, q23), r2, q01);
    float p = TN_FMA(q, r2, r) + 1.0f;
    /* p * 2^n by adding n to p's exponent bits (n << 23 is t's bits << 23: the bits above n's
     * shift out): exact, and right for n = 128 too (x above 88.38), where a separate 2^n
     * would not fit a float's exponent */
    float y = tn_f32_from_bits(tn_f32_bits(p) + (tn_f32_bits(t) << 23));
    y = x < -87.33654f ? 0.0f : y;
    return x <= 88.72283f ? y : x + INFINITY;
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

/* 0.5 x (1 + tanh(u)) written as x / (1 + e^(-2u)), the same value (1 + tanh(u) = 2 / (1 +
 * e^(-2u))): one exponential and one division, and no cancellation in 1 + tanh(u) for x < 0.
 * Most of the error is the float rounding of u, which CPU kernels share. */
static inline float tn_gelu_tanhf(float x) {
    float u = 0.7978845608028654f * TN_FMA(0.044715f * x, x * x, x);
    return x / (1.0f + tn_expf(-2.0f * u));
}

/* The standard normal CDF, (1 + erf(x / sqrt 2)) / 2, for the exact GELU. With z = x / sqrt 2:
 * erf(z) = z P(z^2) for |z| < 1, and erfc(|z|) = e^(-z^2) Q(1 / |z|) for |z| >= 1, so the left
 * tail is erfc itself, without the cancellation of 1 + erf. P (degree 6) and Q (degree 8) are
 * least-squares fits on Chebyshev nodes made for this kernel; in float32 the result is within
 * 2e-7 (|z| < 1) and 1e-6 (the tail, the rounding of z^2 in e^(-z^2)) of the exact value,
 * relative. Past |z| = 4, erfc is below 2e-8: 0 and 1. */
static inline float tn_normal_cdff(float x) {
    float z = x * 0.70710678118654752f, az = fabsf(z), u = z * z;
    float p = 7.882497448008507e-05f;
    p = TN_FMA(p, u, -8.018855005502701e-04f);
    p = TN_FMA(p, u, 5.189312156289816e-03f);
    p = TN_FMA(p, u, -2.685432881116867e-02f);
    p = TN_FMA(p, u, 1.128359735012054e-01f);
    p = TN_FMA(p, u, -3.761262595653534e-01f);
    p = TN_FMA(p, u, 1.128379106521606e+00f);
    float t = 1.0f / (az > 1.0f ? az : 1.0f);
    float q = -7.106618955731392e-03f;
    q = TN_FMA(q, t, 1.684301346540451e-02f);
    q = TN_FMA(q, t, 4.870541393756866e-02f);
    q = TN_FMA(q, t, -2.714609205722809e-01f);
    q = TN_FMA(q, t, 5.181747078895569e-01f);
    q = TN_FMA(q, t, -4.810591340065002e-01f);
    q = TN_FMA(q, t, 4.451758041977882e-02f);
    q = TN_FMA(q, t, 5.586768984794617e-01f);
    q = TN_FMA(q, t, 2.926261513493955e-04f);
    float erfc = az < 4.0f ? tn_expf(-u) * q : 0.0f;
    float inner = TN_FMA(0.5f * z, p, 0.5f);
    float tail = z > 0.0f ? 1.0f - 0.5f * erfc : 0.5f * erfc;
    return az < 1.0f ? inner : tail;
}

#endif
