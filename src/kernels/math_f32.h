/* Float32 math written so compilers vectorize it (no calls, no branches the vectoriser cannot
 * turn into selects). Accuracy: within 2 ulp of the correctly rounded result over the finite
 * range, with NaN and infinities handled. Shared by every ISA variant of the row kernels. */
#ifndef TN_KERNELS_MATH_F32_H
#define TN_KERNELS_MATH_F32_H

#include <math.h>
#include <stdint.h>

#include "half.h"

/* Every function here and every element function of the row kernels is inlined into its loop,
 * whatever the compiler's size heuristics say: one left out of line is a call per element and
 * a loop that does not vectorize (the exact GELU's backward had run 12 times slower that way).
 * `make check-kernel-loops` checks the row objects for out-of-line copies. */
#define TN_INLINE static inline __attribute__((always_inline))

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
TN_INLINE float tn_expf(float x) {
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

TN_INLINE float tn_sigmoidf(float x) { return 1.0f / (1.0f + tn_expf(-x)); }

/* tanh: odd polynomial near 0 (no cancellation), 1 - 2/(e^2|x| + 1) elsewhere. */
TN_INLINE float tn_tanhf(float x) {
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
TN_INLINE float tn_gelu_tanhf(float x) {
    float u = 0.7978845608028654f * TN_FMA(0.044715f * x, x * x, x);
    return x / (1.0f + tn_expf(-2.0f * u));
}

/* The standard normal CDF, (1 + erf(x / sqrt 2)) / 2, for the exact GELU. With z = x / sqrt 2:
 * erf(z) = z P(z^2) for |z| < 1, and erfc(|z|) = e^(-z^2) Q(1 / |z|) for |z| >= 1, so the left
 * tail is erfc itself, without the cancellation of 1 + erf. P (degree 6) and Q (degree 8) are
 * least-squares fits on Chebyshev nodes made for this kernel; in float32 the result is within
 * 2e-7 (|z| < 1) and 1e-6 (the tail, the rounding of z^2 in e^(-z^2)) of the exact value,
 * relative. Past |z| = 4, erfc is below 2e-8: 0 and 1. */
TN_INLINE float tn_normal_cdff(float x) {
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

/* ln x: x = m 2^e with m in [sqrt(1/2), sqrt(2)), ln x = e ln 2 + ln(1 + f) for f = m - 1, ln(1 + f)
 * as f - f^2/2 + f^3 P(f) (P of degree 8, the classic minimax coefficients for this range), and
 * e ln 2 in two parts so that it adds exactly. Subnormal inputs are scaled by 2^23 first; 0
 * gives -inf, negatives NaN, inf and NaN themselves. */
TN_INLINE float tn_logf(float x) {
    int sub = x < 1.17549435e-38f;
    float xs = sub ? x * 8388608.0f : x;
    uint32_t bits = tn_f32_bits(xs);
    int32_t e = (int32_t)((bits >> 23) & 0xff) - 127;
    float m = tn_f32_from_bits((bits & 0x007fffffu) | 0x3f800000u); /* [1, 2) */
    int half = m > 1.41421356f;
    m = half ? 0.5f * m : m;
    float ef = (float)(e + half) - (sub ? 23.0f : 0.0f);
    float f = m - 1.0f, z = f * f;
    float p = 7.0376836292e-2f;
    p = TN_FMA(p, f, -1.1514610310e-1f);
    p = TN_FMA(p, f, 1.1676998740e-1f);
    p = TN_FMA(p, f, -1.2420140846e-1f);
    p = TN_FMA(p, f, 1.4249322787e-1f);
    p = TN_FMA(p, f, -1.6668057665e-1f);
    p = TN_FMA(p, f, 2.0000714765e-1f);
    p = TN_FMA(p, f, -2.4999993993e-1f);
    p = TN_FMA(p, f, 3.3333331174e-1f);
    float y = p * f * z;
    y = TN_FMA(ef, -2.12194440e-4f, y);
    y = TN_FMA(z, -0.5f, y);
    float r = TN_FMA(ef, 0.693359375f, f + y);
    r = x == 0.0f ? -INFINITY : r;
    r = x < 0.0f ? NAN : r;
    return x == INFINITY || x != x ? x + 0.0f : r;
}

/* sin x (cosine: cos x, the same with the quadrant moved by one): x = n pi/2 + r with
 * |r| <= pi/4 by Cody-Waite reduction in four parts (the first two have few enough bits that
 * n times them is exact for |n| < 2^13), n = rint(2x / pi) from the 1.5 * 2^23 addition as in
 * tn_expf (its low bits are n mod 4), then odd and even polynomials on r (the classic minimax
 * coefficients). Accurate for |x| <= 8192; callers redo larger arguments in double. */
TN_INLINE float tn_sin_cosf(float x, int cosine) {
    float t = TN_FMA(x, 0.63661977236758134f, 12582912.0f);
    float n = t - 12582912.0f;
    int32_t q = (int32_t)tn_f32_bits(t) + cosine;
    float r = TN_FMA(n, -1.5703125f, x);
    r = TN_FMA(n, -4.837512969970703125e-4f, r);
    r = TN_FMA(n, -7.549790126404332e-8f, r);
    r = TN_FMA(n, 1.7151245100058819e-15f, r); /* what the third part's rounding left */
    float z = r * r;
    float s = TN_FMA(TN_FMA(TN_FMA(-1.9515295891e-4f, z, 8.3321608736e-3f), z, -1.6666654611e-1f), z * r, r);
    float c = TN_FMA(TN_FMA(TN_FMA(2.443315711809948e-5f, z, -1.388731625493765e-3f), z, 4.166664568298827e-2f),
                     z * z, TN_FMA(-0.5f, z, 1.0f));
    float v = (q & 1) ? c : s;
    v = (q & 2) ? -v : v;
    return !cosine && x == 0.0f ? x : v; /* sin(-0) = -0 */
}

/* PyTorch's floor division of a by b (b nonzero) from m = fmod(a, b) (exact), in double: the
 * elementwise kernels' generic path and their float32 rows share it. */
TN_INLINE double tn_div_floor(double a, double b, double m) {
    double d = (a - m) / b;
    d = m != 0 && ((b < 0) != (m < 0)) ? d - 1.0 : d;
    double fd = __builtin_floor(d);
    fd = d - fd > 0.5 ? fd + 1.0 : fd;
    return d == 0 ? __builtin_copysign(0.0, a / b) : fd;
}

#endif
