/* The float32 row kernels of the elementwise ops, as static functions that each ISA file
 * (rows_ref.c, rows_avx2.c, rows_avx512.c) compiles with its own flags. Every op is a small
 * inline function of one element; `row_*` applies it with the common stride patterns split
 * out (all contiguous, one broadcast operand) so the compiler vectorizes those loops. */
#ifndef TN_KERNELS_ROWS_F32_H
#define TN_KERNELS_ROWS_F32_H

#include <math.h>
#include <stdint.h>

#include "half.h"
#include "math_f32.h"
#include "tn/elementwise.h"

typedef float (*tn_f32_binary_fn)(float a, float b, float alpha);
typedef float (*tn_f32_unary_fn)(float x);

TN_INLINE void row2(tn_f32_binary_fn f, int64_t n, float *restrict o, int64_t os,
                        const float *a, int64_t as, const float *b, int64_t bs, float alpha) {
    if (os == 1 && as == 1 && bs == 1) {
        for (int64_t i = 0; i < n; i++) o[i] = f(a[i], b[i], alpha);
    } else if (os == 1 && as == 1 && bs == 0) {
        float bv = b[0];
        for (int64_t i = 0; i < n; i++) o[i] = f(a[i], bv, alpha);
    } else if (os == 1 && as == 0 && bs == 1) {
        float av = a[0];
        for (int64_t i = 0; i < n; i++) o[i] = f(av, b[i], alpha);
    } else {
        for (int64_t i = 0; i < n; i++) o[i * os] = f(a[i * as], b[i * bs], alpha);
    }
}

TN_INLINE void row1(tn_f32_unary_fn f, int64_t n, float *restrict o, int64_t os,
                        const float *x, int64_t xs) {
    if (os == 1 && xs == 1) {
        for (int64_t i = 0; i < n; i++) o[i] = f(x[i]);
    } else {
        for (int64_t i = 0; i < n; i++) o[i * os] = f(x[i * xs]);
    }
}

/* alpha * b + a in one rounding, as PyTorch's CPU kernels compute it */
TN_INLINE float f_add(float a, float b, float al) { return TN_FMA(al, b, a); }
TN_INLINE float f_sub(float a, float b, float al) { return TN_FMA(-al, b, a); }
TN_INLINE float f_mul(float a, float b, float al) { (void)al; return a * b; }
TN_INLINE float f_div(float a, float b, float al) { (void)al; return a / b; }
TN_INLINE float f_max(float a, float b, float al) {
    (void)al;
    return (a != a || b != b) ? a + b : (a > b ? a : b);
}
TN_INLINE float f_min(float a, float b, float al) {
    (void)al;
    return (a != a || b != b) ? a + b : (a < b ? a : b);
}
/* maximum with b, then minimum with al: a NaN anywhere gives NaN (selects only, so that the
 * row vectorizes) */
TN_INLINE float f_clamp(float a, float b, float al) {
    float v = a < b ? b : a;
    v = v > al ? al : v;
    return (a != a || b != b || al != al) ? a + b + al : v;
}
/* fmodf is exact; the remainder takes the divisor's sign, as PyTorch's CPU kernel does */
/* fmod of two floats, exactly, in double: t = trunc(a / b) is the integer quotient or one off
 * (the quotient's rounding), a - t b is exact in double for |a / b| < 2^29 (t b needs at most
 * 53 bits), and one step towards a's sign fixes an off-by-one. Other arguments (b zero or
 * infinite, larger quotients, NaN) are the caller's to redo: see quotient_row. */
TN_INLINE double tn_fmod_exact(double a, double b) {
    double t = __builtin_trunc(a / b);
    double r = a - t * b;
    double step = a < 0 ? -__builtin_fabs(b) : __builtin_fabs(b);
    r = r != 0 && (r < 0) != (a < 0) ? r + step : r;
    r = __builtin_fabs(r) >= __builtin_fabs(b) ? r - step : r;
    return r == 0 ? __builtin_copysign(0.0, a) : r; /* a zero result has a's sign */
}

/* One element of the quotient family from the exact fmod r of x by y. */
TN_INLINE float quotient_of(tn_binary_op op, double x, double y, double r) {
    float rf = (float)r, yf = (float)y;
    if (op == TN_BINARY_FMOD) return rf;
    if (op == TN_BINARY_REMAINDER) return rf != 0.0f && ((yf < 0.0f) != (rf < 0.0f)) ? rf + yf : rf;
    return (float)(y == 0 ? x / y : tn_div_floor(x, y, r));
}

/* The operands of chunk c (up to 256 elements of n) of a binary row, copied into xa and xb;
 * returns the chunk's length. */
TN_INLINE int64_t chunk_pair(int64_t c, int64_t n, const float *a, int64_t as, const float *b, int64_t bs, float *xa,
                             float *xb) {
    int64_t m = n - c < 256 ? n - c : 256;
    for (int64_t i = 0; i < m; i++) {
        xa[i] = a[(c + i) * as];
        xb[i] = b[(c + i) * bs];
    }
    return m;
}

/* The quotient family (fmod, remainder, floor division) of a row in chunks: the operands
 * copied into the chunk's arrays, the vector path for every element (one loop per op, so
 * each vectorizes), then the few whose arguments it does not cover redone with libm's fmod.
 * (A libm call per element had held these to a fifth of the CPU's speed.) */
TN_INLINE void quotient_row(tn_binary_op op, int64_t n, float *o, int64_t os, const float *a, int64_t as,
                                const float *b, int64_t bs) {
    float xa[256], xb[256], out[256];
    for (int64_t c = 0; c < n; c += 256) {
        int64_t m = chunk_pair(c, n, a, as, b, bs, xa, xb);
        int odd = 0;
        for (int64_t i = 0; i < m; i++)
            odd |= !(__builtin_fabsf(xa[i]) < 536870912.0f * __builtin_fabsf(xb[i])) ||
                   !(__builtin_fabsf(xb[i]) < INFINITY);
        if (op == TN_BINARY_FMOD)
            for (int64_t i = 0; i < m; i++) out[i] = quotient_of(TN_BINARY_FMOD, xa[i], xb[i], tn_fmod_exact(xa[i], xb[i]));
        else if (op == TN_BINARY_REMAINDER)
            for (int64_t i = 0; i < m; i++)
                out[i] = quotient_of(TN_BINARY_REMAINDER, xa[i], xb[i], tn_fmod_exact(xa[i], xb[i]));
        else
            for (int64_t i = 0; i < m; i++)
                out[i] = quotient_of(TN_BINARY_DIV_FLOOR, xa[i], xb[i], tn_fmod_exact(xa[i], xb[i]));
        if (odd)
            for (int64_t i = 0; i < m; i++) {
                double x = xa[i], y = xb[i];
                if (__builtin_fabs(x) < 536870912.0 * __builtin_fabs(y) && __builtin_fabs(y) < INFINITY) continue;
                out[i] = quotient_of(op, x, y, fmod(x, y));
            }
        for (int64_t i = 0; i < m; i++) o[(c + i) * os] = out[i];
    }
}

TN_INLINE float f_threshold_bw(float g, float x, float th) { return x <= th ? 0.0f : g; }
TN_INLINE float f_sigmoid_bw(float g, float y, float al) { (void)al; return g * (1.0f - y) * y; }
TN_INLINE float f_tanh_bw(float g, float y, float al) { (void)al; return g * (1.0f - y * y); }
TN_INLINE float f_silu_bw(float g, float x, float al) {
    (void)al;
    float s = tn_sigmoidf(x);
    return g * s * (1.0f + x * (1.0f - s));
}
/* d/dx x Phi(x) = Phi(x) + x phi(x), from Phi(x) and gauss = e^(-x^2 / 2) */
TN_INLINE float gelu_slope(float x, float cdf, float gauss) {
    return TN_FMA(x * 0.3989422804014327f, gauss, cdf);
}
TN_INLINE float f_gelu_bw(float g, float x, float al) {
    (void)al;
    float gauss, cdf = tn_normal_cdf_gauss(x, &gauss);
    return g * gelu_slope(x, cdf, gauss);
}

/* The exact GELU and its backward for bfloat16 results: the lower-degree CDF */
TN_INLINE float f_gelu_bf16(float x) {
    float gauss;
    return x * tn_normal_cdf_gauss_bf16(x, &gauss);
}
TN_INLINE float f_gelu_bw_bf16(float g, float x, float al) {
    (void)al;
    float gauss, cdf = tn_normal_cdf_gauss_bf16(x, &gauss);
    return g * gelu_slope(x, cdf, gauss);
}

TN_INLINE float f_gelu_tanh_bw(float g, float x, float al) {
    (void)al;
    const float k = 0.7978845608028654f, c = 0.044715f;
    float inner = k * (x + c * x * x * x);
    float t = tn_tanhf(inner);
    float left = 0.5f * x * (1.0f - t * t) * k * (1.0f + 3.0f * c * x * x);
    return g * (0.5f * (1.0f + t) + left);
}

TN_INLINE float f_xlogy(float a, float b, float al) {
    (void)al;
    return b != b ? b : (a == 0.0f ? 0.0f : a * tn_logf(b));
}
TN_INLINE float f_copysign(float a, float b, float al) { (void)al; return __builtin_copysignf(a, b); }
/* in double: a^2 + b^2 neither overflows nor loses bits, and one rounding at the end */
TN_INLINE float f_hypot(float a, float b, float al) {
    (void)al;
    float r = (float)__builtin_sqrt((double)a * a + (double)b * b);
    return fabsf(a) == INFINITY || fabsf(b) == INFINITY ? INFINITY : r;
}
TN_INLINE float f_leaky_relu(float a, float b, float al) { (void)b; return a > 0.0f ? a : a * al; }
TN_INLINE float f_leaky_relu_bw(float g, float x, float al) { return x > 0.0f ? g : g * al; }
TN_INLINE float f_hardsigmoid_bw(float g, float x, float al) {
    (void)al;
    return x > -3.0f && x < 3.0f ? g / 6.0f : 0.0f;
}
TN_INLINE float f_hardswish_bw(float g, float x, float al) {
    (void)al;
    return x < -3.0f ? 0.0f : (x <= 3.0f ? g * (x / 3.0f + 0.5f) : g);
}
TN_INLINE float f_log_sigmoid_bw(float g, float x, float al) { (void)al; return g * tn_sigmoidf(-x); }
/* b is beta, al the threshold, as PyTorch's softplus */
TN_INLINE float f_softplus(float a, float b, float al) {
    float y = a * b;
    return y > al ? a : tn_log1pf(tn_expf(y)) / b;
}
/* b is beta x, al the threshold, as PyTorch's softplus_backward */
TN_INLINE float f_softplus_bw(float g, float y, float al) { return y > al ? g : g * tn_sigmoidf(y); }
/* al = 10^d or -10^-d (TN_BINARY_ROUND_DECIMALS), in float as PyTorch's kernel */
TN_INLINE float f_round_decimals(float a, float b, float al) {
    (void)b;
    return al > 0.0f ? __builtin_rintf(a * al) / al : __builtin_rintf(a / -al) * -al;
}
TN_INLINE float f_pow(float a, float b, float al) { (void)al; return powf(a, b); }
TN_INLINE float f_square(float a, float b, float al) { (void)b; (void)al; return a * a; }
TN_INLINE float f_cube(float a, float b, float al) { (void)b; (void)al; return a * a * a; }
TN_INLINE float f_pow_half(float a, float b, float al) { (void)b; (void)al; return sqrtf(a); }
TN_INLINE float f_pow_minus_half(float a, float b, float al) { (void)b; (void)al; return 1.0f / sqrtf(a); }
TN_INLINE float f_pow_minus_one(float a, float b, float al) { (void)b; (void)al; return 1.0f / a; }
TN_INLINE float f_pow_minus_two(float a, float b, float al) { (void)b; (void)al; return 1.0f / (a * a); }
TN_INLINE float f_first(float a, float b, float al) { (void)b; (void)al; return a; }

/* x ** e with one exponent for the row: the exponents PyTorch's CPU kernel computes by
 * multiplication or square roots take the same route (so results match it), others powf.
 * Each names its function, so that the row inlines and vectorizes it. */
#define TN_POW_EXPONENTS(X)                                                                     \
    X(2.0f, f_square) X(3.0f, f_cube) X(0.5f, f_pow_half) X(-0.5f, f_pow_minus_half)            \
    X(-1.0f, f_pow_minus_one) X(-2.0f, f_pow_minus_two) X(1.0f, f_first)

TN_INLINE void pow_row(int64_t n, float *restrict o, int64_t os, const float *a, int64_t as,
                           const float *b, int64_t bs) {
    float e = b[0];
#define TN_EXPONENT(v, fn)                            \
    if (bs == 0 && e == (v)) {                        \
        row2(fn, n, o, os, a, as, b, bs, 1.0f);       \
        return;                                       \
    }
    TN_POW_EXPONENTS(TN_EXPONENT)
#undef TN_EXPONENT
    row2(f_pow, n, o, os, a, as, b, bs, 1.0f);
}

TN_INLINE float f_neg(float x) { return -x; }
TN_INLINE float f_abs(float x) { return fabsf(x); }
TN_INLINE float f_exp(float x) { return tn_expf(x); }
TN_INLINE float f_sqrt(float x) { return sqrtf(x); }
TN_INLINE float f_rsqrt(float x) { return 1.0f / sqrtf(x); }
TN_INLINE float f_reciprocal(float x) { return 1.0f / x; }
TN_INLINE float f_tanh(float x) { return tn_tanhf(x); }
TN_INLINE float f_sigmoid(float x) { return tn_sigmoidf(x); }
TN_INLINE float f_silu(float x) { return x / (1.0f + tn_expf(-x)); }
TN_INLINE float f_gelu_tanh(float x) { return tn_gelu_tanhf(x); }
TN_INLINE float f_gelu(float x) {
    float gauss;
    return x * tn_normal_cdf_gauss(x, &gauss);
}
TN_INLINE float f_log(float x) { return tn_logf(x); }
TN_INLINE float f_log2(float x) { return tn_log2f(x); }
TN_INLINE float f_log10(float x) { return tn_log10f(x); }
TN_INLINE float f_log1p(float x) { return tn_log1pf(x); }
TN_INLINE float f_expm1(float x) { return tn_expm1f(x); }
TN_INLINE float f_exp2(float x) { return tn_exp2f(x); }
TN_INLINE float f_erf(float x) { return tn_erff(x); }
TN_INLINE float f_erfinv(float x) { return tn_erfinvf(x); }
TN_INLINE float f_sin(float x) { return tn_sin_cosf(x, 0); }
TN_INLINE float f_cos(float x) { return tn_sin_cosf(x, 1); }

/* sin, cos or tan of a row in chunks (kind 0, 1, 2): the vector reduction covers |x| <= 8192,
 * and the rare larger arguments (found by a vector test first: the loop with the call is
 * scalar) are redone in double from the chunk's input. A contiguous row apart from its output
 * is read and written in place; otherwise the chunk is copied in and out (so o may be x). */
TN_INLINE void trig_row(int kind, int64_t n, float *o, int64_t os, const float *x, int64_t xs) {
    const int direct = os == 1 && xs == 1 && (o + n <= x || x + n <= o);
    float inbuf[256], outbuf[256];
    for (int64_t c = 0; c < n; c += 256) {
        int64_t m = n - c < 256 ? n - c : 256;
        const float *in = direct ? x + c : inbuf;
        float *out = direct ? o + c : outbuf;
        if (!direct)
            for (int64_t i = 0; i < m; i++) inbuf[i] = x[(c + i) * xs];
        if (kind == 1)
            for (int64_t i = 0; i < m; i++) out[i] = f_cos(in[i]);
        else if (kind == 2)
            for (int64_t i = 0; i < m; i++) out[i] = tn_tanf(in[i]);
        else
            for (int64_t i = 0; i < m; i++) out[i] = f_sin(in[i]);
        int big = 0;
        for (int64_t i = 0; i < m; i++) big |= fabsf(in[i]) > 8192.0f;
        if (big)
            for (int64_t i = 0; i < m; i++)
                if (fabsf(in[i]) > 8192.0f) {
                    double v = in[i];
                    out[i] = (float)(kind == 1 ? cos(v) : kind == 2 ? tan(v) : sin(v));
                }
        if (!direct)
            for (int64_t i = 0; i < m; i++) o[(c + i) * os] = outbuf[i];
    }
}

/* atan2(a, b) of a row in chunks: the angle of min(|a|, |b|) / max(|a|, |b|) moved to its
 * octant and quadrant, for every element; where that quotient is not finite (both zero or
 * both infinite: the signed zeros and pi/4 multiples atan2 defines there) the element is
 * redone with libm's atan2. */
TN_INLINE float tn_atan2_vec(float y, float x) {
    float ay = fabsf(y), ax = fabsf(x);
    int swap = ay > ax;
    float a = tn_atanf((swap ? ax : ay) / (swap ? ay : ax));
    a = swap ? 1.57079637f - (a + 4.37113883e-8f) : a;
    a = x < 0.0f ? 3.14159274f - (a + 8.74227766e-8f) : a;
    return __builtin_copysignf(a, y);
}

/* the pairs tn_atan2_vec leaves to libm: both zero or both infinite */
TN_INLINE int atan2_odd(float y, float x) {
    float big = fabsf(y) > fabsf(x) ? fabsf(y) : fabsf(x);
    return big == 0.0f || big == INFINITY;
}

TN_INLINE void atan2_row(int64_t n, float *o, int64_t os, const float *a, int64_t as, const float *b, int64_t bs) {
    float xa[256], xb[256], out[256];
    for (int64_t c = 0; c < n; c += 256) {
        int64_t m = chunk_pair(c, n, a, as, b, bs, xa, xb);
        int odd = 0;
        for (int64_t i = 0; i < m; i++) out[i] = tn_atan2_vec(xa[i], xb[i]);
        for (int64_t i = 0; i < m; i++) odd |= atan2_odd(xa[i], xb[i]);
        if (odd)
            for (int64_t i = 0; i < m; i++)
                if (atan2_odd(xa[i], xb[i])) out[i] = (float)atan2((double)xa[i], (double)xb[i]);
        for (int64_t i = 0; i < m; i++) o[(c + i) * os] = out[i];
    }
}

TN_INLINE float f_relu(float x) { return x != x ? x : (x > 0.0f ? x : 0.0f); }
TN_INLINE float f_floor(float x) { return floorf(x); }
TN_INLINE float f_ceil(float x) { return ceilf(x); }
TN_INLINE float f_trunc(float x) { return truncf(x); }
TN_INLINE float f_round(float x) { return __builtin_rintf(x); } /* half to even */
TN_INLINE float f_atan(float x) { return tn_atanf(x); }
TN_INLINE float f_asin(float x) { return tn_asin_acosf(x, 0); }
TN_INLINE float f_acos(float x) { return tn_asin_acosf(x, 1); }
TN_INLINE float f_sinh(float x) { return tn_sinhf(x); }
TN_INLINE float f_cosh(float x) { return tn_coshf(x); }
TN_INLINE float f_asinh(float x) { return tn_asinhf(x); }
TN_INLINE float f_acosh(float x) { return tn_acoshf(x); }
TN_INLINE float f_atanh(float x) { return tn_atanhf(x); }
TN_INLINE float f_frac(float x) { return x - truncf(x); }
/* min(max(x + 3, 0), 6) / 6 with NaN kept, as the CPU's kernel computes it */
TN_INLINE float f_hardsigmoid(float x) {
    float t = x + 3.0f;
    t = t < 0.0f ? 0.0f : t;
    return (t > 6.0f ? 6.0f : t) / 6.0f;
}
TN_INLINE float f_hardswish(float x) {
    float t = x + 3.0f;
    t = t < 0.0f ? 0.0f : t;
    return x * (t > 6.0f ? 6.0f : t) / 6.0f;
}
TN_INLINE float f_log_sigmoid(float x) { return (x < 0.0f ? x : 0.0f) - tn_log1pf(tn_expf(-fabsf(x))); }
TN_INLINE float f_sign(float x) { return (float)((x > 0.0f) - (x < 0.0f)); } /* 0 for NaN, as the generic path */

/* The ops whose row is one element function applied by row1 / row2: the float32 rows and the
 * fused bfloat16 rows below both expand these lists. */
#define TN_BINARY_ELEMENT_OPS(X)                                                                            \
    X(TN_BINARY_ADD, f_add) X(TN_BINARY_SUB, f_sub) X(TN_BINARY_MUL, f_mul) X(TN_BINARY_DIV, f_div)         \
    X(TN_BINARY_MAXIMUM, f_max) X(TN_BINARY_MINIMUM, f_min) X(TN_BINARY_CLAMP, f_clamp)                     \
    X(TN_BINARY_THRESHOLD_BACKWARD, f_threshold_bw) X(TN_BINARY_SIGMOID_BACKWARD, f_sigmoid_bw)             \
    X(TN_BINARY_TANH_BACKWARD, f_tanh_bw) X(TN_BINARY_SILU_BACKWARD, f_silu_bw)                             \
    X(TN_BINARY_GELU_TANH_BACKWARD, f_gelu_tanh_bw) X(TN_BINARY_GELU_BACKWARD, f_gelu_bw)                   \
    X(TN_BINARY_XLOGY, f_xlogy) X(TN_BINARY_COPYSIGN, f_copysign) X(TN_BINARY_HYPOT, f_hypot)               \
    X(TN_BINARY_LEAKY_RELU, f_leaky_relu) X(TN_BINARY_LEAKY_RELU_BACKWARD, f_leaky_relu_bw)                 \
    X(TN_BINARY_HARDSIGMOID_BACKWARD, f_hardsigmoid_bw) X(TN_BINARY_HARDSWISH_BACKWARD, f_hardswish_bw)     \
    X(TN_BINARY_LOG_SIGMOID_BACKWARD, f_log_sigmoid_bw) X(TN_BINARY_SOFTPLUS, f_softplus)      \
    X(TN_BINARY_SOFTPLUS_BACKWARD, f_softplus_bw) X(TN_BINARY_ROUND_DECIMALS, f_round_decimals)

#define TN_UNARY_ELEMENT_OPS(X)                                                                             \
    X(TN_UNARY_NEG, f_neg) X(TN_UNARY_ABS, f_abs) X(TN_UNARY_EXP, f_exp) X(TN_UNARY_SQRT, f_sqrt)           \
    X(TN_UNARY_RSQRT, f_rsqrt) X(TN_UNARY_RECIPROCAL, f_reciprocal) X(TN_UNARY_TANH, f_tanh)                \
    X(TN_UNARY_SIGMOID, f_sigmoid) X(TN_UNARY_SILU, f_silu) X(TN_UNARY_GELU_TANH, f_gelu_tanh)              \
    X(TN_UNARY_GELU, f_gelu) X(TN_UNARY_LOG, f_log) X(TN_UNARY_LOG2, f_log2) X(TN_UNARY_LOG10, f_log10)     \
    X(TN_UNARY_LOG1P, f_log1p) X(TN_UNARY_EXPM1, f_expm1) X(TN_UNARY_EXP2, f_exp2) X(TN_UNARY_ERF, f_erf)   \
    X(TN_UNARY_ERFINV, f_erfinv) X(TN_UNARY_RELU, f_relu) X(TN_UNARY_FLOOR, f_floor)                        \
    X(TN_UNARY_CEIL, f_ceil) X(TN_UNARY_TRUNC, f_trunc) X(TN_UNARY_ROUND, f_round) X(TN_UNARY_SIGN, f_sign)   \
    X(TN_UNARY_ATAN, f_atan) X(TN_UNARY_ASIN, f_asin) X(TN_UNARY_ACOS, f_acos) X(TN_UNARY_SINH, f_sinh)     \
    X(TN_UNARY_COSH, f_cosh) X(TN_UNARY_ASINH, f_asinh) X(TN_UNARY_ACOSH, f_acosh) X(TN_UNARY_ATANH, f_atanh) \
    X(TN_UNARY_FRAC, f_frac) X(TN_UNARY_HARDSIGMOID, f_hardsigmoid) X(TN_UNARY_HARDSWISH, f_hardswish)      \
    X(TN_UNARY_LOG_SIGMOID, f_log_sigmoid)

/* Returns 0 when the op has no float32 row here (the caller uses the generic path). */
TN_INLINE int binary_f32_rows(tn_binary_op op, int64_t n, float *o, int64_t os, const float *a, int64_t as,
                              const float *b, int64_t bs, float alpha) {
#define TN_CASE(code, fn) case code: row2(fn, n, o, os, a, as, b, bs, alpha); return 1;
    switch (op) {
    TN_BINARY_ELEMENT_OPS(TN_CASE)
    case TN_BINARY_POW: pow_row(n, o, os, a, as, b, bs); return 1;
    case TN_BINARY_FMOD:
    case TN_BINARY_REMAINDER:
    case TN_BINARY_DIV_FLOOR: quotient_row(op, n, o, os, a, as, b, bs); return 1;
    case TN_BINARY_ATAN2: atan2_row(n, o, os, a, as, b, bs); return 1;
    default: return 0;
    }
#undef TN_CASE
}

TN_INLINE int unary_f32_rows(tn_unary_op op, int64_t n, float *o, int64_t os, const float *x, int64_t xs) {
#define TN_CASE(code, fn) case code: row1(fn, n, o, os, x, xs); return 1;
    switch (op) {
    TN_UNARY_ELEMENT_OPS(TN_CASE)
    case TN_UNARY_SIN: trig_row(0, n, o, os, x, xs); return 1;
    case TN_UNARY_COS: trig_row(1, n, o, os, x, xs); return 1;
    case TN_UNARY_TAN: trig_row(2, n, o, os, x, xs); return 1;
    default: return 0;
    }
#undef TN_CASE
}

/* ---- bfloat16 rows: widened, computed and rounded back in one loop ----
 * The same element functions on bfloat16 operands, each value widened as it is read and
 * rounded (to nearest even, as narrow_half) as it is written: no float32 chunk goes through
 * memory between three passes, which had held cheap bfloat16 ops to half the CPU's speed.
 * The results are those of the chunked path bit for bit, but for the exact GELU and its
 * backward, which have a cheaper form of their own for bfloat16 results
 * (tn_normal_cdf_gauss_bf16). */
TN_INLINE void row1_bf16(tn_f32_unary_fn f, int64_t n, uint16_t *restrict o, int64_t os, const uint16_t *x,
                         int64_t xs) {
    if (os == 1 && xs == 1) {
        /* 32 results, then their rounding, as two loops: in one loop GCC merged the rounding's
         * NaN select with the op's own selects (exp's range ends) into 16-bit mask blends,
         * and exp's row ran 20% slower than this */
        int64_t i = 0;
        for (; i + 32 <= n; i += 32) {
            float v[32];
            for (int k = 0; k < 32; k++) v[k] = f(tn_bf16_to_f32_inline(x[i + k]));
            for (int k = 0; k < 32; k++) o[i + k] = tn_f32_to_bf16_inline(v[k]);
        }
        for (; i < n; i++) o[i] = tn_f32_to_bf16_inline(f(tn_bf16_to_f32_inline(x[i])));
    } else {
        for (int64_t i = 0; i < n; i++) o[i * os] = tn_f32_to_bf16_inline(f(tn_bf16_to_f32_inline(x[i * xs])));
    }
}

TN_INLINE void row2_bf16(tn_f32_binary_fn f, int64_t n, uint16_t *restrict o, int64_t os, const uint16_t *a,
                         int64_t as, const uint16_t *b, int64_t bs, float alpha) {
#define TN_W(v) tn_bf16_to_f32_inline(v)
    if (os == 1 && as == 1 && bs == 1) {
        for (int64_t i = 0; i < n; i++) o[i] = tn_f32_to_bf16_inline(f(TN_W(a[i]), TN_W(b[i]), alpha));
    } else if (os == 1 && as == 1 && bs == 0) {
        float bv = TN_W(b[0]);
        for (int64_t i = 0; i < n; i++) o[i] = tn_f32_to_bf16_inline(f(TN_W(a[i]), bv, alpha));
    } else if (os == 1 && as == 0 && bs == 1) {
        float av = TN_W(a[0]);
        for (int64_t i = 0; i < n; i++) o[i] = tn_f32_to_bf16_inline(f(av, TN_W(b[i]), alpha));
    } else {
        for (int64_t i = 0; i < n; i++)
            o[i * os] = tn_f32_to_bf16_inline(f(TN_W(a[i * as]), TN_W(b[i * bs]), alpha));
    }
#undef TN_W
}

/* 0 for the ops with rows of their own (sin/cos, the quotient family, pow of a tensor
 * exponent or an uncommon one): the caller takes the chunked float32 path. */
TN_INLINE int binary_bf16_rows(tn_binary_op op, int64_t n, uint16_t *o, int64_t os, const uint16_t *a, int64_t as,
                               const uint16_t *b, int64_t bs, float alpha) {
    if (op == TN_BINARY_GELU_BACKWARD) { /* as the forward, for bfloat16 results */
        row2_bf16(f_gelu_bw_bf16, n, o, os, a, as, b, bs, alpha);
        return 1;
    }
#define TN_CASE(code, fn) case code: row2_bf16(fn, n, o, os, a, as, b, bs, alpha); return 1;
    switch (op) {
    TN_BINARY_ELEMENT_OPS(TN_CASE)
    case TN_BINARY_POW: { /* the exponents of pow_row's list; powf takes the float32 chunks */
        float e = tn_bf16_to_f32_inline(b[0]);
#define TN_EXPONENT(v, fn)                                \
    if (bs == 0 && e == (v)) {                            \
        row2_bf16(fn, n, o, os, a, as, b, bs, 1.0f);      \
        return 1;                                         \
    }
        TN_POW_EXPONENTS(TN_EXPONENT)
#undef TN_EXPONENT
        return 0;
    }
    default: return 0;
    }
#undef TN_CASE
}

TN_INLINE int unary_bf16_rows(tn_unary_op op, int64_t n, uint16_t *o, int64_t os, const uint16_t *x, int64_t xs) {
    if (op == TN_UNARY_GELU) { /* its own lower-degree form, for bfloat16 results */
        row1_bf16(f_gelu_bf16, n, o, os, x, xs);
        return 1;
    }
#define TN_CASE(code, fn) case code: row1_bf16(fn, n, o, os, x, xs); return 1;
    switch (op) {
    TN_UNARY_ELEMENT_OPS(TN_CASE)
    default: return 0;
    }
#undef TN_CASE
}

#endif
