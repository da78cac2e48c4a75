/* Unary and binary elementwise kernels (see tn/elementwise.h).
 *
 * Per row: all-float32 operands use the ISA table's row functions; bfloat16 operands of one
 * dtype the same functions widened and rounded within the loop, where the op has such a row;
 * float16/bfloat16 operands otherwise are widened to float32 in chunks, run through the float32
 * rows, and narrowed;
 * anything else (mixed dtypes, integers, bools, float64, ops without a float32 row) goes
 * element by element through double or int64 arithmetic. A large output with contiguous rows
 * is computed in chunks into a buffer in L1 and written non-temporally (nontemporal.h). */
#include <math.h>
#include <string.h>

#include "elem.h"
#include "strided.h"
#include "table.h"
#include "tn/elementwise.h"
#include "half.h"
#include "math_f32.h"
#include "nontemporal.h"
#include "tn/kernels.h"
#include "typed_rows.h"

#define CHUNK 256

static inline int is_half(tn_dtype t) { return t == TN_DTYPE_F16 || t == TN_DTYPE_BF16; }

/* A float scalar as a bf16 or f16 value holds it: PyTorch's alpha for half tensors. */
static double round_to_half(tn_dtype t, double x) {
    float f = (float)x;
    return t == TN_DTYPE_BF16 ? tn_bf16_to_f32_inline(tn_f32_to_bf16_inline(f))
                              : tn_f16_to_f32_inline(tn_f32_to_f16_inline(f));
}

/* ---- generic element paths ---- */

/* erf^-1(y): a rational first guess in w = -log(1 - y^2) (central and tail branches), then
 * Newton steps on erf(x) - y, each of which doubles the correct digits. */
static double erfinv(double y) {
    if (y != y || y < -1.0 || y > 1.0) return NAN;
    if (y == 1.0 || y == -1.0) return y * INFINITY;
    double w = -log((1.0 - y) * (1.0 + y)), x;
    if (w < 5.0) {
        w -= 2.5;
        double p = 2.81022636e-08;
        p = 3.43273939e-07 + p * w;
        p = -3.5233877e-06 + p * w;
        p = -4.39150654e-06 + p * w;
        p = 0.00021858087 + p * w;
        p = -0.00125372503 + p * w;
        p = -0.00417768164 + p * w;
        p = 0.246640727 + p * w;
        p = 1.50140941 + p * w;
        x = p * y;
    } else {
        w = sqrt(w) - 3.0;
        double p = -0.000200214257;
        p = 0.000100950558 + p * w;
        p = 0.00134934322 + p * w;
        p = -0.00367342844 + p * w;
        p = 0.00573950773 + p * w;
        p = -0.0076224613 + p * w;
        p = 0.00943887047 + p * w;
        p = 1.00167406 + p * w;
        p = 2.83297682 + p * w;
        x = p * y;
    }
    for (int i = 0; i < 2; i++) x -= (erf(x) - y) / (1.1283791670955126 * exp(-x * x));
    return x;
}

static double erf_gelu(double x) { return 0.5 * x * (1.0 + erf(x * 0.7071067811865476)); }

static double unary_double(tn_unary_op op, double x) {
    switch (op) {
    case TN_UNARY_NEG: return -x;
    case TN_UNARY_ABS: return fabs(x);
    case TN_UNARY_EXP: return exp(x);
    case TN_UNARY_EXPM1: return expm1(x);
    case TN_UNARY_LOG: return log(x);
    case TN_UNARY_LOG1P: return log1p(x);
    case TN_UNARY_LOG2: return log2(x);
    case TN_UNARY_LOG10: return log10(x);
    case TN_UNARY_EXP2: return exp2(x);
    case TN_UNARY_SQRT: return sqrt(x);
    case TN_UNARY_RSQRT: return 1.0 / sqrt(x);
    case TN_UNARY_RECIPROCAL: return 1.0 / x;
    case TN_UNARY_SIN: return sin(x);
    case TN_UNARY_COS: return cos(x);
    case TN_UNARY_TANH: return tanh(x);
    case TN_UNARY_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case TN_UNARY_SILU: return x / (1.0 + exp(-x));
    case TN_UNARY_GELU: return erf_gelu(x);
    case TN_UNARY_GELU_TANH:
        return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    case TN_UNARY_RELU: return x != x ? x : (x > 0 ? x : 0.0);
    case TN_UNARY_ERF: return erf(x);
    case TN_UNARY_ERFINV: return erfinv(x);
    case TN_UNARY_FLOOR: return floor(x);
    case TN_UNARY_CEIL: return ceil(x);
    case TN_UNARY_ROUND: return nearbyint(x);
    case TN_UNARY_TRUNC: return trunc(x);
    case TN_UNARY_SIGN: return (double)((x > 0) - (x < 0)); /* 0 for NaN, as PyTorch */
    case TN_UNARY_ATAN: return atan(x);
    case TN_UNARY_ASIN: return asin(x);
    case TN_UNARY_ACOS: return acos(x);
    case TN_UNARY_TAN: return tan(x);
    case TN_UNARY_SINH: return sinh(x);
    case TN_UNARY_COSH: return cosh(x);
    case TN_UNARY_ASINH: return asinh(x);
    case TN_UNARY_ACOSH: return acosh(x);
    case TN_UNARY_ATANH: return atanh(x);
    case TN_UNARY_FRAC: return x - trunc(x);
    case TN_UNARY_HARDSIGMOID: return fmin(fmax(x + 3.0, 0.0), 6.0) / 6.0 + (x - x); /* x - x: NaN stays NaN */
    case TN_UNARY_HARDSWISH: return x * fmin(fmax(x + 3.0, 0.0), 6.0) / 6.0;
    case TN_UNARY_LOG_SIGMOID: return fmin(x, 0.0) - log1p(exp(-fabs(x))) + (x - x);
    default: return 0.0;
    }
}

static int64_t unary_int(tn_unary_op op, int64_t x, int is_bool) {
    switch (op) {
    case TN_UNARY_NEG: return (int64_t)(0 - (uint64_t)x);
    case TN_UNARY_ABS: return x < 0 ? (int64_t)(0 - (uint64_t)x) : x;
    case TN_UNARY_RELU: return x > 0 ? x : 0;
    case TN_UNARY_SIGN: return (x > 0) - (x < 0);
    case TN_UNARY_BITWISE_NOT: return is_bool ? !x : ~x;
    case TN_UNARY_FLOOR:
    case TN_UNARY_CEIL:
    case TN_UNARY_ROUND:
    case TN_UNARY_TRUNC: return x;
    default: return 0;
    }
}

static tn_value unary_value(tn_unary_op op, tn_value v, tn_dtype compute) {
    tn_value r = {0, 0, 0, 0};
    if (op == TN_UNARY_LOGICAL_NOT) {
        r.i = v.is_int ? v.i == 0 : v.re == 0;
        r.is_int = 1;
    } else if (tn_dtype_is_float(compute)) {
        r.re = unary_double(op, v.is_int ? (double)v.i : v.re);
    } else {
        r.i = unary_int(op, tn_value_to_i64(v), compute == TN_DTYPE_BOOL);
        r.is_int = 1;
    }
    if (r.is_int) r.re = (double)r.i;
    return r;
}

static double binary_double(tn_binary_op op, double a, double b, double alpha) {
    switch (op) {
    case TN_BINARY_ADD: return fma(alpha, b, a); /* one rounding, as PyTorch's CPU kernels */
    case TN_BINARY_SUB: return fma(-alpha, b, a);
    case TN_BINARY_MUL: return a * b;
    case TN_BINARY_DIV: return a / b;
    case TN_BINARY_DIV_TRUNC: return trunc(a / b);
    case TN_BINARY_DIV_FLOOR: return b == 0 ? a / b : tn_div_floor(a, b, fmod(a, b));
    case TN_BINARY_MAXIMUM: return (a != a || b != b) ? a + b : (a > b ? a : b);
    case TN_BINARY_MINIMUM: return (a != a || b != b) ? a + b : (a < b ? a : b);
    case TN_BINARY_CLAMP: {
        double lo = (a != a || b != b) ? a + b : (a > b ? a : b);
        return (lo != lo || alpha != alpha) ? lo + alpha : (lo < alpha ? lo : alpha);
    }
    case TN_BINARY_POW: return pow(a, b);
    case TN_BINARY_XLOGY: return b != b ? b : (a == 0 ? 0.0 : a * log(b));
    case TN_BINARY_ATAN2: return atan2(a, b);
    case TN_BINARY_COPYSIGN: return copysign(a, b);
    case TN_BINARY_HYPOT: return hypot(a, b);
    case TN_BINARY_LEAKY_RELU: return a > 0 ? a : a * alpha;
    case TN_BINARY_LEAKY_RELU_BACKWARD: return b > 0 ? a : a * alpha;
    case TN_BINARY_HARDSIGMOID_BACKWARD: return b > -3.0 && b < 3.0 ? a / 6.0 : 0.0;
    case TN_BINARY_HARDSWISH_BACKWARD: return b < -3.0 ? 0.0 : (b <= 3.0 ? a * (b / 3.0 + 0.5) : a);
    case TN_BINARY_LOG_SIGMOID_BACKWARD: return a / (1.0 + exp(b));
    case TN_BINARY_SOFTPLUS: return a * b > alpha ? a : log1p(exp(a * b)) / b;
    case TN_BINARY_SOFTPLUS_BACKWARD: return b > alpha ? a : a / (1.0 + exp(-b));
    case TN_BINARY_ROUND_DECIMALS: { /* in float, as PyTorch's kernel (double tensors fall back) */
        float x = (float)a, t = (float)alpha;
        return t > 0 ? nearbyintf(x * t) / t : nearbyintf(x / -t) * -t;
    }
    case TN_BINARY_FMOD: return fmod(a, b);
    case TN_BINARY_REMAINDER: {
        double m = fmod(a, b);
        return m != 0 && ((b < 0) != (m < 0)) ? m + b : m;
    }
    case TN_BINARY_THRESHOLD_BACKWARD: return b <= alpha ? 0.0 : a;
    case TN_BINARY_SIGMOID_BACKWARD: return a * (1.0 - b) * b;
    case TN_BINARY_TANH_BACKWARD: return a * (1.0 - b * b);
    case TN_BINARY_SILU_BACKWARD: {
        double s = 1.0 / (1.0 + exp(-b));
        return a * s * (1.0 + b * (1.0 - s));
    }
    case TN_BINARY_GELU_BACKWARD: {
        double cdf = 0.5 * (1.0 + erf(b * 0.7071067811865476));
        double pdf = exp(-0.5 * b * b) * 0.3989422804014327;
        return a * (cdf + b * pdf);
    }
    case TN_BINARY_GELU_TANH_BACKWARD: {
        const double k = 0.7978845608028654, c = 0.044715;
        double t = tanh(k * (b + c * b * b * b));
        return a * (0.5 * (1.0 + t) + 0.5 * b * (1.0 - t * t) * k * (1.0 + 3.0 * c * b * b));
    }
    default: return 0.0;
    }
}

/* Comparisons from the three orderings; with a NaN all three are false, so only NE holds. */
static int compare(tn_binary_op op, tn_value a, tn_value b, int as_int) {
    int lt = as_int ? a.i < b.i : a.re < b.re;
    int eq = as_int ? a.i == b.i : a.re == b.re;
    int gt = as_int ? a.i > b.i : a.re > b.re;
    switch (op) {
    case TN_BINARY_EQ: return eq;
    case TN_BINARY_NE: return !eq;
    case TN_BINARY_LT: return lt;
    case TN_BINARY_LE: return lt || eq;
    case TN_BINARY_GT: return gt;
    default: return gt || eq;
    }
}

/* Integer arithmetic in int64 with wrap-around; sets *zero_div on integer division by 0. */
static int64_t binary_int(tn_binary_op op, int64_t a, int64_t b, int64_t alpha, int is_bool,
                          int *zero_div) {
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b, ual = (uint64_t)alpha;
    switch (op) {
    case TN_BINARY_ADD: return is_bool ? (a || (alpha && b)) : (int64_t)(ua + ual * ub);
    case TN_BINARY_SUB: return (int64_t)(ua - ual * ub);
    case TN_BINARY_MUL: return is_bool ? (a && b) : (int64_t)(ua * ub);
    case TN_BINARY_DIV_TRUNC:
    case TN_BINARY_DIV_FLOOR:
    case TN_BINARY_REMAINDER:
    case TN_BINARY_FMOD:
        if (b == 0) {
            *zero_div = 1;
            return 0;
        }
        return int_division(op, a, b);
    case TN_BINARY_MAXIMUM: return a > b ? a : b;
    case TN_BINARY_MINIMUM: return a < b ? a : b;
    case TN_BINARY_CLAMP: {
        int64_t lo = a < b ? b : a;
        return lo > alpha ? alpha : lo;
    }
    case TN_BINARY_POW: {
        if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0);
        uint64_t r = 1, base = ua;
        for (int64_t e = b; e > 0; e >>= 1) {
            if (e & 1) r *= base;
            base *= base;
        }
        return (int64_t)r;
    }
    case TN_BINARY_BITWISE_AND: return a & b;
    case TN_BINARY_BITWISE_OR: return a | b;
    case TN_BINARY_BITWISE_XOR: return a ^ b;
    case TN_BINARY_THRESHOLD_BACKWARD: return b <= alpha ? 0 : a;
    default: return 0;
    }
}

static tn_value binary_value(tn_binary_op op, tn_value a, tn_value b, const tn_scalar *alpha,
                             tn_dtype compute, int *zero_div) {
    tn_value r = {0, 0, 0, 1};
    int as_int = !tn_dtype_is_float(compute);
    if (as_int) {
        a.i = tn_value_to_i64(a);
        b.i = tn_value_to_i64(b);
    } else {
        if (a.is_int) a.re = (double)a.i;
        if (b.is_int) b.re = (double)b.i;
    }
    if (is_comparison(op)) {
        r.i = compare(op, a, b, as_int);
    } else if (is_logical(op)) {
        int x = as_int ? a.i != 0 : a.re != 0, y = as_int ? b.i != 0 : b.re != 0;
        r.i = op == TN_BINARY_LOGICAL_AND ? (x && y) : op == TN_BINARY_LOGICAL_OR ? (x || y) : (x != y);
    } else if (as_int) {
        int64_t al = alpha->kind == TN_SCALAR_KIND_FLOAT ? (int64_t)alpha->f : alpha->i;
        r.i = binary_int(op, a.i, b.i, al, compute == TN_DTYPE_BOOL, zero_div);
        if (compute == TN_DTYPE_BOOL) r.i = r.i != 0;
    } else {
        double al = alpha->kind == TN_SCALAR_KIND_FLOAT ? alpha->f : (double)alpha->i;
        if (op == TN_BINARY_DIV_TRUNC && is_half(compute)) /* PyTorch rounds a half quotient first */
            r.re = trunc(round_to_half(compute, a.re / b.re));
        else
            r.re = binary_double(op, a.re, b.re, al);
        r.is_int = 0;
        if (compute == TN_DTYPE_F32 || is_half(compute)) r.re = (float)r.re;
        return r;
    }
    r.re = (double)r.i;
    return r;
}

/* ---- non-temporal rows: chunks computed into L1, then streamed to a contiguous row ---- */

/* Ops cheap enough to be bound by memory on large tensors: the only ones non-temporal stores
 * speed up. A transcendental op (exp, silu, gelu) is bound by its arithmetic at about the
 * speed memory delivers, and the chunk's extra pass made it 8-36% slower. */
static int cheap_unary(tn_unary_op op) {
    return op == TN_UNARY_NEG || op == TN_UNARY_ABS || op == TN_UNARY_RELU ||
           op == TN_UNARY_RECIPROCAL || op == TN_UNARY_SQRT || op == TN_UNARY_RSQRT;
}

static int cheap_binary(tn_binary_op op) {
    return op == TN_BINARY_ADD || op == TN_BINARY_SUB || op == TN_BINARY_MUL || op == TN_BINARY_DIV ||
           op == TN_BINARY_MAXIMUM || op == TN_BINARY_MINIMUM || op == TN_BINARY_CLAMP ||
           op == TN_BINARY_THRESHOLD_BACKWARD || op == TN_BINARY_SIGMOID_BACKWARD ||
           op == TN_BINARY_TANH_BACKWARD;
}

/* One row's op for the non-temporal path: a unary op of a, or a binary op of a and b. */
typedef struct nt_op {
    int binary;
    tn_unary_op unary;
    tn_binary_op op;
    float alpha;
} nt_op;

/* The op over a contiguous output row of n elements of t (float32 or a half type), computed
 * in chunks into L1 (halves widened first) and streamed out. Returns 0, having written
 * nothing, when the op has no float32 row. */
static int row_nontemporal(const tn_kernel_table *k, const nt_op *f, tn_dtype t, int64_t n, char *o,
                           const char *a, int64_t as, const char *b, int64_t bs) {
    enum { FLOATS = TN_NT_CHUNK_BYTES / 4 };
    int32_t es = tn_dtype_size(t);
    _Alignas(64) float ia[FLOATS], ib[FLOATS], res[FLOATS];
    _Alignas(64) uint16_t narrow[FLOATS];
    for (int64_t i = 0; i < n;) {
        int64_t m = tn_nontemporal_chunk(o + i * es, es, n - i);
        if (m > FLOATS) m = FLOATS;
        const float *x = (const float *)(a + i * as * es), *y = (const float *)(b + i * bs * es);
        int64_t xs = as, ys = bs;
        if (t != TN_DTYPE_F32) {
            k->widen_half(t, m, ia, 1, (const uint16_t *)x, as);
            if (f->binary) k->widen_half(t, m, ib, 1, (const uint16_t *)y, bs);
            x = ia, y = ib, xs = ys = 1;
        }
        int ok = f->binary ? k->binary_f32(f->op, m, res, 1, x, xs, y, ys, f->alpha)
                           : k->unary_f32(f->unary, m, res, 1, x, xs);
        if (!ok) return 0;
        if (t == TN_DTYPE_F32) {
            tn_copy_nontemporal(o + i * es, res, m * es);
        } else {
            k->narrow_half(t, m, narrow, 1, res, 1);
            tn_copy_nontemporal(o + i * es, narrow, m * es);
        }
        i += m;
    }
    return 1;
}

/* ---- unary ---- */

tn_status tn_kernel_unary(tn_unary_op op, const tn_tensor *out, const tn_tensor *in,
                          tn_dtype compute, int32_t ith, int32_t nth) {
    const tn_tensor *views[2] = {out, in};
    tn_walk w;
    tn_walk_init(&w, views, 2);
    int64_t first, last, e0, e1;
    int64_t os = w.strides[0][w.ndim - 1], xs = w.strides[1][w.ndim - 1];
    int32_t oes = tn_dtype_size(out->dtype), xes = tn_dtype_size(in->dtype);
    const tn_kernel_table *k = tn_kernels();
    int same = out->dtype == in->dtype && in->dtype == compute;
    int nt = same && os == 1 && (compute == TN_DTYPE_F32 || is_half(compute)) && cheap_unary(op) &&
             tn_nontemporal(tn_tensor_numel(out) * oes);
    const nt_op f = {0, op, TN_BINARY_ADD, 0.0f};
    tn_walk_slice(&w, ith, nth, &first, &last, &e0, &e1);
    int64_t n = e1 - e0;
    for (int64_t r = first; r < last; r++) {
        char *o = (char *)out->data + (tn_walk_row_offset(&w, 0, r) + e0 * os) * oes;
        const char *x = (const char *)in->data + (tn_walk_row_offset(&w, 1, r) + e0 * xs) * xes;
        if (nt && row_nontemporal(k, &f, compute, n, o, x, xs, x, 0)) continue;
        if (same && compute == TN_DTYPE_F32 && k->unary_f32(op, n, (float *)o, os, (const float *)x, xs))
            continue;
        if (same && compute == TN_DTYPE_BF16 &&
            k->unary_bf16(op, n, (uint16_t *)o, os, (const uint16_t *)x, xs))
            continue;
        if (same && compute == TN_DTYPE_F16 && k->unary_f16(op, n, (uint16_t *)o, os, (const uint16_t *)x, xs))
            continue;
        if (same && is_half(compute)) {
            float buf[CHUNK], res[CHUNK];
            int64_t i = 0;
            for (; i < n; i += CHUNK) {
                int64_t m = n - i < CHUNK ? n - i : CHUNK;
                k->widen_half(compute, m, buf, 1, (const uint16_t *)x + i * xs, xs);
                if (!k->unary_f32(op, m, res, 1, buf, 1)) break;
                k->narrow_half(compute, m, (uint16_t *)o + i * os, os, res, 1);
            }
            if (i >= n) continue;
        }
        if (k->typed_unary_row(op, compute, in->dtype, out->dtype, n, o, os, x, xs)) continue;
        for (int64_t i = 0; i < n; i++) {
            tn_value v = unary_value(op, tn_load(x + i * xs * xes, in->dtype), compute);
            tn_store(o + i * os * oes, out->dtype, v);
        }
    }
    if (nt) tn_nontemporal_fence();
    return TN_STATUS_OK;
}

/* ---- binary ---- */

/* A chunk of one half value, widened. */
static void splat_half(const tn_kernel_table *k, tn_dtype t, float chunk[CHUNK], const uint16_t *value) {
    k->widen_half(t, 1, chunk, 1, value, 1);
    for (int i = 1; i < CHUNK; i++) chunk[i] = chunk[0];
}

/* For half tensors PyTorch's kernels take add's and sub's alpha and clamp's bound as values of
 * the tensors' dtype; every other op's scalar (the activations' slope and thresholds, round's
 * scale) stays float: rounding softplus's or threshold_backward's threshold of 0.1 to bfloat16
 * had moved its cut-off past x = 0.1. */
static int scalar_in_dtype(tn_binary_op op) {
    return op == TN_BINARY_ADD || op == TN_BINARY_SUB || op == TN_BINARY_CLAMP;
}

tn_status tn_kernel_binary(tn_binary_op op, const tn_tensor *out, const tn_tensor *a,
                           const tn_tensor *b, const tn_scalar *alpha, tn_dtype compute,
                           int32_t ith, int32_t nth) {
    const tn_tensor *views[3] = {out, a, b};
    tn_walk w;
    tn_walk_init(&w, views, 3);
    int64_t first, last, e0, e1;
    int64_t os = w.strides[0][w.ndim - 1], as = w.strides[1][w.ndim - 1],
            bs = w.strides[2][w.ndim - 1];
    int32_t oes = tn_dtype_size(out->dtype), aes = tn_dtype_size(a->dtype),
            bes = tn_dtype_size(b->dtype);
    const tn_kernel_table *k = tn_kernels();
    int same = out->dtype == compute && a->dtype == compute && b->dtype == compute;
    tn_scalar al = *alpha;
    if (is_half(compute) && al.kind == TN_SCALAR_KIND_FLOAT && scalar_in_dtype(op))
        al.f = round_to_half(compute, al.f);
    float alpha_f = al.kind == TN_SCALAR_KIND_FLOAT ? (float)al.f : (float)al.i;
    int zero_div = 0;
    int nt = same && os == 1 && (compute == TN_DTYPE_F32 || is_half(compute)) && cheap_binary(op) &&
             tn_nontemporal(tn_tensor_numel(out) * oes);
    const nt_op f = {1, TN_UNARY_NEG, op, alpha_f};
    int typed = a->dtype == compute && b->dtype == compute;
    int64_t alpha_i = al.kind == TN_SCALAR_KIND_FLOAT ? (int64_t)al.f : al.i;
    tn_walk_slice(&w, ith, nth, &first, &last, &e0, &e1);
    int64_t n = e1 - e0;
    for (int64_t r = first; r < last; r++) {
        char *o = (char *)out->data + (tn_walk_row_offset(&w, 0, r) + e0 * os) * oes;
        const char *pa = (const char *)a->data + (tn_walk_row_offset(&w, 1, r) + e0 * as) * aes;
        const char *pb = (const char *)b->data + (tn_walk_row_offset(&w, 2, r) + e0 * bs) * bes;
        if (nt && row_nontemporal(k, &f, compute, n, o, pa, as, pb, bs)) continue;
        if (same && compute == TN_DTYPE_F32 &&
            k->binary_f32(op, n, (float *)o, os, (const float *)pa, as, (const float *)pb, bs, alpha_f))
            continue;
        if (same && compute == TN_DTYPE_BF16 &&
            k->binary_bf16(op, n, (uint16_t *)o, os, (const uint16_t *)pa, as, (const uint16_t *)pb, bs, alpha_f))
            continue;
        if (same && compute == TN_DTYPE_F16 &&
            k->binary_f16(op, n, (uint16_t *)o, os, (const uint16_t *)pa, as, (const uint16_t *)pb, bs, alpha_f))
            continue;
        if (same && is_half(compute)) {
            float ba[CHUNK], bb[CHUNK], res[CHUNK];
            int64_t i = 0;
            /* a broadcast operand (a scalar: x * 0.5) is widened once, not per chunk */
            if (as == 0) splat_half(k, compute, ba, (const uint16_t *)pa);
            if (bs == 0) splat_half(k, compute, bb, (const uint16_t *)pb);
            for (; i < n; i += CHUNK) {
                int64_t m = n - i < CHUNK ? n - i : CHUNK;
                if (as != 0) k->widen_half(compute, m, ba, 1, (const uint16_t *)pa + i * as, as);
                if (bs != 0) k->widen_half(compute, m, bb, 1, (const uint16_t *)pb + i * bs, bs);
                if (!k->binary_f32(op, m, res, 1, ba, 1, bb, 1, alpha_f)) break;
                k->narrow_half(compute, m, (uint16_t *)o + i * os, os, res, 1);
            }
            if (i >= n) continue;
        }
        if (typed && k->typed_binary_row(op, compute, out->dtype, n, o, os, pa, as, pb, bs, alpha_i, &zero_div))
            continue;
        for (int64_t i = 0; i < n; i++) {
            tn_value v = binary_value(op, tn_load(pa + i * as * aes, a->dtype),
                                      tn_load(pb + i * bs * bes, b->dtype), &al, compute,
                                      &zero_div);
            tn_store(o + i * os * oes, out->dtype, v);
        }
    }
    if (nt) tn_nontemporal_fence();
    return zero_div ? TN_STATUS_INVALID_ARGUMENT : TN_STATUS_OK;
}
