/* Float32 math written so compilers vectorize it (no calls, no branches the vectoriser cannot
 * turn into selects). Accuracy: each function states its bound (exp 1 ulp, most within 2-3.5,
 * the exact GELU 6.8), held over dense grids by test_math_ulp_every_isa, with NaN and
 * infinities handled. Shared by every ISA variant of the row kernels. */
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

/* e^r - 1 for |r| <= ln 2 / 2, as r + r^2 q(r), q of degree 5 evaluated in pairs (Estrin): a
 * shorter chain of dependent operations than Horner's, so more elements are in flight at once.
 * Without the 1, e^r - 1 keeps its relative accuracy near 0 (expm1 needs that). */
TN_INLINE float tn_exp_m1_reduced(float r) {
    float r2 = r * r;
    float q01 = TN_FMA(1.6666665459e-1f, r, 5.0000001201e-1f);
    float q23 = TN_FMA(8.3334519073e-3f, r, 4.1665795894e-2f);
    float q45 = TN_FMA(1.9875691500e-4f, r, 1.3981999507e-3f);
    float q = TN_FMA(TN_FMA(q45, r2, q23), r2, q01);
    return TN_FMA(q, r2, r);
}

/* x = n ln 2 + r with |r| <= ln 2 / 2 (Cody-Waite, ln 2 in two parts). n = rint(x / ln 2) comes
 * from adding 1.5 * 2^23 (the float's units then sit at mantissa bit 0, so t's low bits hold n
 * and t - 1.5 * 2^23 is n exactly): no clamp, no float-to-int conversion. Returns r; *t keeps
 * the sum, whose bits << 23 are n in the exponent field. */
TN_INLINE float tn_exp_reduce(float x, float *t) {
    *t = TN_FMA(x, 1.44269504f, 12582912.0f);
    float n = *t - 12582912.0f;
    float r = TN_FMA(n, -0.693359375f, x);
    return TN_FMA(n, 2.12194440e-4f, r);
}

/* p * 2^n for p in [1/2, 2] by adding n (t's bits << 23: the bits above n's shift out) to p's
 * exponent bits: exact, and right for n = 128 too, where a separate 2^n would not fit a float's
 * exponent; the result must be a normal float. */
TN_INLINE float tn_scale_by(float p, float t) { return tn_f32_from_bits(tn_f32_bits(p) + (tn_f32_bits(t) << 23)); }

/* e^r 2^n and e^r 2^n - 1 from a reduced argument r and tn_exp_reduce's t (n in its bits), with
 * no range handling: the callers' selects or clamps keep n where the results are normal. The
 * second is 2^n (e^r - 1) + (2^n - 1): both terms exact but for e^r - 1's own error, one
 * rounding in the sum, and no cancellation near 0 (where n = 0 and it is e^r - 1 itself). */
TN_INLINE float tn_exp_scaled(float r, float t) { return tn_scale_by(tn_exp_m1_reduced(r) + 1.0f, t); }
TN_INLINE float tn_expm1_scaled(float r, float t) {
    float two_n = tn_scale_by(1.0f, t);
    return TN_FMA(two_n, tn_exp_m1_reduced(r), two_n - 1.0f);
}

/* e^x. Outside [-87.34, 88.72] (and for NaN) n's bits are garbage, and the two selects at the
 * end replace the result: 0 below (results that would be subnormal flush to zero), x + inf
 * above (inf, and NaN stays NaN). */
TN_INLINE float tn_expf(float x) {
    float t, r = tn_exp_reduce(x, &t);
    float y = tn_exp_scaled(r, t);
    y = x < -87.33654f ? 0.0f : y;
    return x <= 88.72283f ? y : x + INFINITY;
}

/* e^x - 1 (tn_expm1_scaled). 2^n is built from its bits for |n| <= 126; from x = 80, e^x alone
 * (the 1 is far below its last bit), and below -17.33 (e^x < 2^-25) the result is -1. */
TN_INLINE float tn_expm1f(float x) {
    float t, r = tn_exp_reduce(x, &t);
    float y = tn_expm1_scaled(r, t);
    y = x > 80.0f ? tn_expf(x) : y;
    y = x < -17.33f ? -1.0f : y;
    return x == 0.0f ? x : y; /* expm1(-0) = -0 */
}

/* 2^x = 2^n e^(r ln 2) with n = rint(x), r = x - n exact: whole x give 2^x exactly. Below -126
 * the result is flushed to 0 (as tn_expf), from 128 it is inf; NaN stays NaN. */
TN_INLINE float tn_exp2f(float x) {
    float t = x + 12582912.0f, n = t - 12582912.0f;
    float y = tn_exp_scaled((x - n) * 0.693147180559945f, t);
    y = x < -126.0f ? 0.0f : y;
    return x < 128.0f ? y : x + INFINITY;
}

TN_INLINE float tn_sigmoidf(float x) { return 1.0f / (1.0f + tn_expf(-x)); }

/* tanh(x) = e / (e + 2) for e = e^(2|x|) - 1 (expm1's parts: relative accuracy near 0, no
 * cancellation), with x's sign: one branch, within 2.2 ulp of the exact value. |x| is clamped
 * to 9, where tanh is 1 in float32 and e stays finite, so expm1's range selects are not needed;
 * NaN passes the clamp and stays NaN, and -0 keeps its sign. */
TN_INLINE float tn_tanhf(float x) {
    float ax = fabsf(x), t;
    ax = ax > 9.0f ? 9.0f : ax;
    float r = tn_exp_reduce(2.0f * ax, &t), e = tn_expm1_scaled(r, t);
    return copysignf(e / (e + 2.0f), x);
}

/* 0.5 x (1 + tanh(u)) written as x / (1 + e^(-2u)), the same value (1 + tanh(u) = 2 / (1 +
 * e^(-2u))): one exponential and one division, and no cancellation in 1 + tanh(u) for x < 0.
 * Most of the error is the float rounding of u, which CPU kernels share. */
TN_INLINE float tn_gelu_tanhf(float x) {
    float u = 0.7978845608028654f * TN_FMA(0.044715f * x, x * x, x);
    return x / (1.0f + tn_expf(-2.0f * u));
}

/* erf: z P(z^2) for |z| < 1, and 1 - erfc(|z|) with erfc(|z|) = e^(-z^2) Q(1 / |z|) for |z| >= 1.
 * P (degree 6) and Q (degree 8) are least-squares fits on Chebyshev nodes made for these
 * kernels; in float32 erf(z) for |z| < 1 is within 2e-7 and erfc(|z|) within 1e-6 (the rounding
 * of z^2 in e^(-z^2)) of the exact value, relative. Past |z| = 4, erfc is below 2e-8 and taken
 * as 0. (The exact GELU's normal CDF has a one-branch form of its own below.) */
TN_INLINE float tn_erf_poly(float u) { /* P(u), u = z^2 */
    float p = 7.882497448008507e-05f;
    p = TN_FMA(p, u, -8.018855005502701e-04f);
    p = TN_FMA(p, u, 5.189312156289816e-03f);
    p = TN_FMA(p, u, -2.685432881116867e-02f);
    p = TN_FMA(p, u, 1.128359735012054e-01f);
    p = TN_FMA(p, u, -3.761262595653534e-01f);
    return TN_FMA(p, u, 1.128379106521606e+00f);
}

TN_INLINE float tn_erfc_tail(float az) {
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
    return az < 4.0f ? tn_expf(-(az * az)) * q : 0.0f;
}

/* t = 1 / (1 + a / 2) for a = |x| / sqrt 2: the variable of the bfloat16 form's erfc polynomial */
TN_INLINE float tn_erfc_t(float ax) { return 1.0f / TN_FMA(ax, 0.35355339059327376f, 1.0f); }

/* erfc(a) e^(a^2) / 2 for a = |x| / sqrt 2 <= 9.4 (past which e^(-a^2) leaves the float range)
 * as a polynomial of degree 8 in t = 1 / (1 + 0.4 |x|), a minimax fit in relative error (a
 * linear program over the float32-rounded t, so that t's rounding is part of what it fits), made
 * for these kernels: within 5.5 * 2^-24 of the exact value in float32. One branch for every a,
 * where erf's own split at 1 computes two. The polynomial is Horner's: the loop's elements are
 * independent, so its long chain overlaps the next vectors' work, and it saves the multiplies for
 * t^2 and t^4 that Estrin's pairs need (the GELU row is bound by its multiplies and FMAs). */
TN_INLINE float tn_half_erfc_scaled(float ax) {
    float t = 1.0f / TN_FMA(ax, 0.4f, 1.0f);
    float q = TN_FMA(-3.982525229e-02f, t, 2.014769189e-01f);
    q = TN_FMA(q, t, -3.750790262e-01f);
    q = TN_FMA(q, t, 2.521430011e-01f);
    q = TN_FMA(q, t, -1.293931065e-02f);
    q = TN_FMA(q, t, 1.585645614e-01f);
    q = TN_FMA(q, t, 1.557655624e-01f);
    q = TN_FMA(q, t, 1.599055222e-01f);
    return TN_FMA(q, t, -1.200639003e-05f);
}

/* x * x - hi exactly, for hi = x * x rounded: an FMA, or without one Dekker's product of x's
 * halves (x split by Veltkamp's 4097). */
TN_INLINE float tn_square_error(float x, float hi) {
#ifdef __FMA__
    return TN_FMA(x, x, -hi);
#else
    float s = x * 4097.0f, xh = s - (s - x), xl = x - xh;
    return ((xh * xh - hi) + 2.0f * xh * xl) + xl * xl;
#endif
}

/* e^(-x^2 / 2) for |x| < 13.2 (0 from there, where it leaves the float range, and for inf and
 * NaN: the callers' products make NaN stay NaN). x^2 = hi + lo exactly, and the reduction works
 * on s = -x^2 - 2 n ln 2 (twice exp's usual reduced argument, |s| <= ln 2) so that the -1/2 goes
 * into constants: n = rint(-hi log2(e) / 2), s from hi and n by Cody-Waite with 2 ln 2 in two
 * parts, and lo is subtracted from s (an add, not a multiply), so that neither the rounding of
 * x^2 nor that of x / sqrt 2 (either up to 90 * 2^-24 relative at |x| = 13) reaches the result.
 * e^(s / 2) is 1 + s / 2 + s^2 q(s), q of degree 4 by Horner, a fit in relative error made for
 * this function (3.1e-9, well below float32's rounding). The argument is never positive and the
 * select at the end covers exp's lower limit, so exp's own two selects are left out. 11
 * multiplies and FMAs, where e^(-hi / 2) by tn_expf's reduction and polynomial took 14: the
 * exact GELU's row is bound by them. */
TN_INLINE float tn_gaussf(float x) {
    float hi = x * x, lo = tn_square_error(x, hi);
    float t = TN_FMA(hi, -0.72134752044448170f, 12582912.0f), n = t - 12582912.0f;
    float s = TN_FMA(n, -1.38671875f, -hi); /* 2 ln 2 = 1.38671875 - 4.2438888e-4; n 1.38671875 is exact */
    s = TN_FMA(n, 4.2438888e-4f, s) - lo;
    float e = TN_FMA(2.158492504e-05f, s, 2.615250959e-04f);
    e = TN_FMA(e, s, 2.604274832e-03f);
    e = TN_FMA(e, s, 2.083314990e-02f);
    e = TN_FMA(e, s, 1.249999835e-01f);
    e = TN_FMA(e, s, 0.5f);
    e = tn_scale_by(TN_FMA(e, s, 1.0f), t);
    return hi < 174.0f ? e : 0.0f;
}

/* The standard normal CDF, (1 + erf(x / sqrt 2)) / 2, for the exact GELU: 1 - erfc(z) / 2 for
 * z = x / sqrt 2 > 0 and erfc(|z|) / 2 otherwise, so the left tail keeps its relative accuracy.
 * *gauss receives e^(-x^2 / 2), which the GELU's backward needs too. */
TN_INLINE float tn_normal_cdf_gauss(float x, float *gauss) {
    *gauss = tn_gaussf(x);
    float half_erfc = *gauss * tn_half_erfc_scaled(fabsf(x));
    return x > 0.0f ? 1.0f - half_erfc : half_erfc;
}

/* The standard normal CDF for results that are rounded to bfloat16 (the exact GELU and its
 * backward): the form of tn_normal_cdf_gauss at lower degrees, within 2.3e-5 of the exact
 * value, relative (about 1% of a bfloat16 half-ulp; the bound tested is 3e-5), with or without
 * FMA. e^(-x^2 / 2) takes x^2 rounded and a degree-4 polynomial (2.6e-6), erfc(a) e^(a^2) / 2
 * a degree-5 one in the same t (1.7e-5, minimax in relative error, fitted for this function):
 * 17 multiplies and FMAs where the float32 form takes 22. The left tail keeps its relative
 * accuracy, to x = -13.2, where e^(-x^2 / 2) leaves the float range. *gauss receives
 * e^(-x^2 / 2). */
TN_INLINE float tn_normal_cdf_gauss_bf16(float x, float *gauss) {
    float t, r = tn_exp_reduce(-0.5f * x * x, &t);
    float e = TN_FMA(TN_FMA(TN_FMA(TN_FMA(0.0414586067f, r, 0.167909071f), r, 0.500043571f), r, 0.999963403f), r,
                     0.999999285f);
    *gauss = x * x < 174.0f ? tn_scale_by(e, t) : 0.0f;
    float u = tn_erfc_t(fabsf(x));
    float p = TN_FMA(TN_FMA(TN_FMA(TN_FMA(TN_FMA(-0.0988845751f, u, 0.272151113f), u, 0.0177374445f), u, 0.172300726f),
                            u, 0.136436597f),
                     u, 0.000266968273f);
    float h = *gauss * p;
    return x > 0.0f ? 1.0f - h : h;
}

TN_INLINE float tn_erff(float x) {
    float ax = fabsf(x), tail = 1.0f - tn_erfc_tail(ax);
    tail = x < 0.0f ? -tail : tail;
    return ax < 1.0f ? x * tn_erf_poly(x * x) : (x != x ? x : tail);
}

/* The parts of a logarithm: x = m 2^e with m in [sqrt(1/2), sqrt(2)), ln m = f + l for f = m - 1
 * and l = -f^2/2 + f^3 P(f) (P of degree 8, the classic minimax coefficients for this range).
 * Returns f; *e and *l receive e (as a float) and l. e and m come from x's bits less those of
 * sqrt(1/2): the difference's exponent field is e and its mantissa, added back to sqrt(1/2)'s
 * bits, is m (no compare and select for the half above sqrt(2)). Subnormal inputs are scaled
 * by 2^23 first. The callers handle x <= 0, inf and NaN. */
TN_INLINE float tn_log_parts(float x, float *e, float *l) {
    int sub = x < 1.17549435e-38f;
    float xs = sub ? x * 8388608.0f : x;
    int32_t d = (int32_t)(tn_f32_bits(xs) - 0x3f3504f3u);
    float m = tn_f32_from_bits(((uint32_t)d & 0x007fffffu) + 0x3f3504f3u);
    *e = (float)(d >> 23) - (sub ? 23.0f : 0.0f); /* an arithmetic shift: d < 0 below sqrt(1/2) */
    float f = m - 1.0f, z = f * f, z2 = z * z;
    /* P in pairs (Estrin), as tn_exp_m1_reduced: half the dependent steps of Horner's */
    float p01 = TN_FMA(-2.4999993993e-1f, f, 3.3333331174e-1f);
    float p23 = TN_FMA(-1.6668057665e-1f, f, 2.0000714765e-1f);
    float p45 = TN_FMA(-1.2420140846e-1f, f, 1.4249322787e-1f);
    float p67 = TN_FMA(-1.1514610310e-1f, f, 1.1676998740e-1f);
    float p03 = TN_FMA(p23, z, p01), p47 = TN_FMA(p67, z, p45);
    float p = TN_FMA(TN_FMA(7.0376836292e-2f, z2, p47), z2, p03);
    *l = TN_FMA(z, -0.5f, p * f * z);
    return f;
}

/* A logarithm's special values: 0 gives -inf, negatives NaN, inf and NaN themselves. */
TN_INLINE float tn_log_special(float x, float r) {
    r = x == 0.0f ? -INFINITY : r;
    r = x < 0.0f ? NAN : r;
    return x == INFINITY || x != x ? x + 0.0f : r;
}

/* ln x = e ln 2 + f + l, with e ln 2 in two parts so that it adds exactly. */
TN_INLINE float tn_logf(float x) {
    float e, l, f = tn_log_parts(x, &e, &l);
    float y = TN_FMA(e, -2.12194440e-4f, l);
    return tn_log_special(x, TN_FMA(e, 0.693359375f, f + y));
}

/* log2 x = e + (f + l) log2(e): exact at powers of two (f = l = 0). */
TN_INLINE float tn_log2f(float x) {
    float e, l, f = tn_log_parts(x, &e, &l);
    return tn_log_special(x, e + TN_FMA(f, 1.44269504088896f, l * 1.44269504088896f));
}

/* log10 x = e log10(2) + (f + l) log10(e), log10(2) in two parts. */
TN_INLINE float tn_log10f(float x) {
    float e, l, f = tn_log_parts(x, &e, &l);
    float y = TN_FMA(e, 4.6050389811980175e-6f, TN_FMA(f, 0.434294481903252f, l * 0.434294481903252f));
    return tn_log_special(x, TN_FMA(e, 0.301025390625f, y));
}

/* ln(1 + x) = ln u + (x - (u - 1)) / u for u = 1 + x rounded: the second term is the first
 * order of what the rounding lost (exact when u = 1, where the result is x). */
TN_INLINE float tn_log1pf(float x) {
    float u = 1.0f + x;
    float y = tn_logf(u) + (x - (u - 1.0f)) / u;
    y = u == 0.0f || x == INFINITY ? tn_logf(u) : y;
    return x == 0.0f ? x : y; /* log1p(-0) = -0 */
}

/* erf^-1(y): a polynomial in w = -ln(1 - y^2) with a central branch (w < 5) and a tail branch
 * in sqrt(w) (the generic path's first guess), within 3.3 ulp by itself; a Newton step on
 * erf(x) - y, as the generic path takes in double, made it worse in float (4 ulp: tn_erff's own
 * error) and three times slower. +-1 give +-inf; |y| > 1 and NaN give NaN. */
TN_INLINE float tn_erfinvf(float y) {
    float w = -tn_logf((1.0f - y) * (1.0f + y));
    float c = w - 2.5f, p = 2.81022636e-08f;
    p = TN_FMA(p, c, 3.43273939e-07f);
    p = TN_FMA(p, c, -3.5233877e-06f);
    p = TN_FMA(p, c, -4.39150654e-06f);
    p = TN_FMA(p, c, 0.00021858087f);
    p = TN_FMA(p, c, -0.00125372503f);
    p = TN_FMA(p, c, -0.00417768164f);
    p = TN_FMA(p, c, 0.246640727f);
    p = TN_FMA(p, c, 1.50140941f);
    float t = sqrtf(w) - 3.0f, q = -0.000200214257f;
    q = TN_FMA(q, t, 0.000100950558f);
    q = TN_FMA(q, t, 0.00134934322f);
    q = TN_FMA(q, t, -0.00367342844f);
    q = TN_FMA(q, t, 0.00573950773f);
    q = TN_FMA(q, t, -0.0076224613f);
    q = TN_FMA(q, t, 0.00943887047f);
    q = TN_FMA(q, t, 1.00167406f);
    q = TN_FMA(q, t, 2.83297682f);
    float x = (w < 5.0f ? p : q) * y;
    x = fabsf(y) == 1.0f ? y * INFINITY : x;
    return fabsf(y) <= 1.0f ? x : NAN;
}

/* x = n pi/2 + r with |r| <= pi/4 by Cody-Waite reduction in four parts (the first two have
 * few enough bits that n times them is exact for |n| < 2^13), n = rint(2x / pi) from the
 * 1.5 * 2^23 addition as in tn_exp_reduce. Returns r; *q receives n's low bits (n mod 4 in its
 * last two). Accurate for |x| <= 8192; callers redo larger arguments in double. */
TN_INLINE float tn_trig_reduce(float x, int32_t *q) {
    float t = TN_FMA(x, 0.63661977236758134f, 12582912.0f);
    float n = t - 12582912.0f;
    *q = (int32_t)tn_f32_bits(t);
    float r = TN_FMA(n, -1.5703125f, x);
    r = TN_FMA(n, -4.837512969970703125e-4f, r);
    r = TN_FMA(n, -7.549790126404332e-8f, r);
    return TN_FMA(n, 1.7151245100058819e-15f, r); /* what the third part's rounding left */
}

/* sin r and cos r for |r| <= pi/4: odd and even polynomials (the classic minimax coefficients). */
TN_INLINE float tn_sin_poly(float r) {
    float z = r * r;
    return TN_FMA(TN_FMA(TN_FMA(-1.9515295891e-4f, z, 8.3321608736e-3f), z, -1.6666654611e-1f), z * r, r);
}

TN_INLINE float tn_cos_poly(float r) {
    float z = r * r;
    return TN_FMA(TN_FMA(TN_FMA(2.443315711809948e-5f, z, -1.388731625493765e-3f), z, 4.166664568298827e-2f),
                  z * z, TN_FMA(-0.5f, z, 1.0f));
}

/* sin x (cosine: cos x, the same with the quadrant moved by one). */
TN_INLINE float tn_sin_cosf(float x, int cosine) {
    int32_t q;
    float r = tn_trig_reduce(x, &q);
    q += cosine;
    float v = (q & 1) ? tn_cos_poly(r) : tn_sin_poly(r);
    v = (q & 2) ? -v : v;
    return !cosine && x == 0.0f ? x : v; /* sin(-0) = -0 */
}

/* tan x = sin r / cos r, or -cos r / sin r in the odd quadrants. */
TN_INLINE float tn_tanf(float x) {
    int32_t q;
    float r = tn_trig_reduce(x, &q);
    float s = tn_sin_poly(r), c = tn_cos_poly(r);
    float v = (q & 1) ? -c / s : s / c;
    return x == 0.0f ? x : v;
}

/* atan x: |x| reduced to |y| <= tan(pi/8) by atan x = pi/2 + atan(-1/x) above tan(3pi/8) and
 * pi/4 + atan((x - 1)/(x + 1)) above tan(pi/8) (one division for either), then y + y^3 P(y^2)
 * (the classic minimax coefficients), the pi/2 or pi/4 added in two parts. */
TN_INLINE float tn_atanf(float x) {
    float ax = fabsf(x);
    int big = ax > 2.41421356f, mid = ax > 0.41421356f;
    float num = big ? -1.0f : (mid ? ax - 1.0f : ax), den = big ? ax : (mid ? ax + 1.0f : 1.0f);
    float y = num / den, z = y * y;
    float p = TN_FMA(TN_FMA(TN_FMA(8.05374449538e-2f, z, -1.38776856032e-1f), z, 1.99777106478e-1f), z,
                     -3.33329491539e-1f);
    float hi = big ? 1.57079637f : (mid ? 0.785398185f : 0.0f);
    float lo = big ? -4.37113883e-8f : (mid ? -2.18556941e-8f : 0.0f);
    return __builtin_copysignf(hi + (TN_FMA(p * z, y, y) + lo), x);
}

/* asin s for 0 <= s <= 1/2 as s + s z P(z), z = s^2 (the classic minimax coefficients). */
TN_INLINE float tn_asin_poly(float s, float z) {
    float p = TN_FMA(TN_FMA(TN_FMA(TN_FMA(4.2163199048e-2f, z, 2.4181311049e-2f), z, 4.5470025998e-2f), z,
                            7.4953002686e-2f), z, 1.6666752422e-1f);
    return TN_FMA(s * z, p, s);
}

/* asin x and acos x from a = asin of sqrt((1 - |x|) / 2) above |x| = 1/2 (asin |x| = pi/2 - 2a,
 * acos |x| = 2a) and asin |x| itself below, pi/2 and pi in two parts. |x| > 1 gives NaN (the
 * square root of a negative). */
TN_INLINE float tn_asin_acosf(float x, int cosine) {
    float ax = fabsf(x);
    int big = ax > 0.5f;
    float z = big ? 0.5f * (1.0f - ax) : ax * ax;
    float a = tn_asin_poly(big ? sqrtf(z) : ax, z);
    /* pi/2 = 1.57079637 - 4.37113883e-8 and pi = 3.14159274 - 8.74227766e-8 */
    if (!cosine) return __builtin_copysignf(big ? 1.57079637f - (2.0f * a + 4.37113883e-8f) : a, x);
    float pos = big ? 2.0f * a : 1.57079637f - (a + 4.37113883e-8f); /* acos |x| */
    float neg = big ? 3.14159274f - (2.0f * a + 8.74227766e-8f) : 1.57079637f + (a - 4.37113883e-8f);
    return x < 0.0f ? neg : pos;
}

/* sinh x = (m + m / (m + 1)) / 2 for m = e^|x| - 1 (no cancellation near 0), and from |x| = 88,
 * where e^|x| overflows before sinh does, h (h / 2) for h = e^(|x| / 2). */
TN_INLINE float tn_sinhf(float x) {
    float ax = fabsf(x), m = tn_expm1f(ax), h = tn_expf(0.5f * ax);
    float r = ax > 88.0f ? (0.5f * h) * h : 0.5f * (m + m / (m + 1.0f));
    return __builtin_copysignf(r, x);
}

TN_INLINE float tn_coshf(float x) {
    float ax = fabsf(x), e = tn_expf(ax), h = tn_expf(0.5f * ax);
    return ax > 88.0f ? (0.5f * h) * h : TN_FMA(0.5f, e, 0.5f / e);
}

/* asinh x = log1p(|x| + x^2 / (1 + sqrt(1 + x^2))) (no cancellation near 0), ln |x| + ln 2 from
 * |x| = 2^12 (where x^2 would overflow first), with x's sign. */
TN_INLINE float tn_asinhf(float x) {
    float ax = fabsf(x), z = ax * ax;
    float r = ax < 4096.0f ? tn_log1pf(ax + z / (1.0f + sqrtf(1.0f + z))) : tn_logf(ax) + 0.693147181f;
    return __builtin_copysignf(r, x);
}

/* acosh x = log1p(t + sqrt(2t + t^2)) for t = x - 1 (exact near 1), ln x + ln 2 from 2^12; NaN
 * below 1. */
TN_INLINE float tn_acoshf(float x) {
    float t = x - 1.0f;
    float r = x < 4096.0f ? tn_log1pf(t + sqrtf(TN_FMA(t, t, 2.0f * t))) : tn_logf(x) + 0.693147181f;
    return x < 1.0f ? NAN : r;
}

/* atanh x = log1p(2|x| / (1 - |x|)) / 2 with x's sign: +-inf at +-1, NaN beyond. */
TN_INLINE float tn_atanhf(float x) {
    float ax = fabsf(x);
    return __builtin_copysignf(0.5f * tn_log1pf(2.0f * ax / (1.0f - ax)), x);
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
