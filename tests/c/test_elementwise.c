/* Elementwise kernels: every ISA variant of the float32 rows against double-precision
 * references (special values included), the half-precision and generic paths, integer
 * semantics, and the thread pool. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "kernels/elem.h"
#include "kernels/table.h"
#include "runtime/internal.h"
#include "tn/tn.h"

#define N 1031 /* odd: exercises vector tails */

static float inputs[N];

static void fill_inputs(void) {
    const float special[] = {0.0f, -0.0f, 1.0f, -1.0f, INFINITY, -INFINITY, NAN, 88.0f, -88.0f,
                             100.0f, -100.0f, 1e-30f, -1e-30f, 0.5f, 0.625f, -0.625f, 1e-4f,
                             /* either side of exp's overflow and underflow cut-offs */
                             88.72283f, 88.7229f, -87.33654f, -87.3366f, 1e15f, -1e15f};
    size_t ns = sizeof special / sizeof special[0];
    uint32_t state = 12345;
    for (int i = 0; i < N; i++) {
        if ((size_t)i < ns) {
            inputs[i] = special[i];
            continue;
        }
        state = state * 1664525u + 1013904223u;
        inputs[i] = ((float)(state >> 8) / 16777216.0f - 0.5f) * 20.0f;
    }
}

static int close_f32(float got, double want) {
    if (isnan(want)) return isnan(got);
    if (isinf((float)want)) return got == (float)want; /* overflows float32 */
    double tol = 4e-6 * fabs(want) + 2e-7;
    return fabs((double)got - want) <= tol;
}

/* erf^-1 by bisection on erf in double, then Newton steps: slow and exact enough. */
static double ref_erfinv(double y) {
    if (y != y || y < -1.0 || y > 1.0) return NAN;
    if (y == 1.0 || y == -1.0) return y * INFINITY;
    double lo = -6.0, hi = 6.0, x = 0.0;
    for (int i = 0; i < 80; i++) {
        x = 0.5 * (lo + hi);
        if (erf(x) < y) lo = x; else hi = x;
    }
    for (int i = 0; i < 2; i++) {
        double step = (erf(x) - y) / (1.1283791670955126 * exp(-x * x));
        if (isfinite(step)) x -= step;
    }
    return x;
}

static double ref_unary(tn_unary_op op, double x) {
    switch (op) {
    case TN_UNARY_NEG: return -x;
    case TN_UNARY_ABS: return fabs(x);
    case TN_UNARY_EXP: return exp(x);
    case TN_UNARY_SQRT: return sqrt(x);
    case TN_UNARY_RSQRT: return 1.0 / sqrt(x);
    case TN_UNARY_RECIPROCAL: return 1.0 / x;
    case TN_UNARY_TANH: return tanh(x);
    case TN_UNARY_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case TN_UNARY_SILU: return x / (1.0 + exp(-x)); /* NaN at -inf, as PyTorch */
    case TN_UNARY_GELU_TANH:
        return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    case TN_UNARY_LOG: return log(x);
    case TN_UNARY_SIN: return sin(x);
    case TN_UNARY_COS: return cos(x);
    case TN_UNARY_GELU: return 0.5 * x * erfc(-x * 0.7071067811865476); /* the left tail without cancellation */
    case TN_UNARY_RELU: return x != x ? x : (x > 0 ? x : 0.0);
    case TN_UNARY_FLOOR: return floor(x);
    case TN_UNARY_CEIL: return ceil(x);
    case TN_UNARY_TRUNC: return trunc(x);
    case TN_UNARY_ROUND: return nearbyint(x);
    case TN_UNARY_SIGN: return (double)((x > 0) - (x < 0));
    case TN_UNARY_EXPM1: return expm1(x);
    case TN_UNARY_LOG1P: return log1p(x);
    case TN_UNARY_LOG2: return log2(x);
    case TN_UNARY_LOG10: return log10(x);
    case TN_UNARY_EXP2: return exp2(x);
    case TN_UNARY_ERF: return erf(x);
    case TN_UNARY_ERFINV: return ref_erfinv(x);
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
    case TN_UNARY_HARDSIGMOID: return x != x ? x : fmin(fmax(x + 3, 0), 6) / 6;
    case TN_UNARY_HARDSWISH: return x * fmin(fmax(x + 3, 0), 6) / 6;
    case TN_UNARY_LOG_SIGMOID: return fmin(x, 0) - log1p(exp(-fabs(x)));
    default: return NAN;
    }
}

void test_unary_rows_every_isa(void) {
    fill_inputs();
    static float out[N];
    for (int isa = 0; isa < TN_ISA_COUNT_; isa++) {
        const tn_kernel_table *k = tn_kernels_for((tn_isa)isa);
        if (!k) continue;
        for (int op = 0; op < TN_UNARY_COUNT_; op++) {
            /* erfinv's domain is [-1, 1]: the inputs scaled into it (and past it at +-10) */
            static float scaled[N];
            const float *in = inputs;
            if (op == TN_UNARY_ERFINV || op == TN_UNARY_ASIN || op == TN_UNARY_ACOS || op == TN_UNARY_ATANH) {
                for (int i = 0; i < N; i++) scaled[i] = inputs[i] / 9.99f;
                in = scaled;
            }
            if (!k->unary_f32((tn_unary_op)op, N, out, 1, in, 1)) continue;
            for (int i = 0; i < N; i++) {
                double want = ref_unary((tn_unary_op)op, in[i]);
                if (op == TN_UNARY_GELU_TANH && fabs(inputs[i]) > 50) continue; /* x^3 overflow in f32 */
                if (!close_f32(out[i], want)) {
                    fprintf(stderr, "  %s unary op %d x=%g got %.9g want %.9g\n",
                            tn_isa_name((tn_isa)isa), op, (double)in[i], (double)out[i], want);
                    CHECK(0);
                    break;
                }
            }
        }
    }
}

/* exp within 2 ulp of the exact result over the range where float32 results are normal, on
 * every ISA (math_f32.h's promise; the test above allows more for the functions built on it). */
void test_exp_ulp_every_isa(void) {
    enum { M = 20011 };
    static float x[M], y[M];
    for (int i = 0; i < M; i++) x[i] = -87.3365f + 176.0593f * (float)i / (float)(M - 1); /* to 88.7228 */
    for (int isa = 0; isa < TN_ISA_COUNT_; isa++) {
        const tn_kernel_table *k = tn_kernels_for((tn_isa)isa);
        if (!k || !k->unary_f32(TN_UNARY_EXP, M, y, 1, x, 1)) continue;
        double worst = 0;
        for (int i = 0; i < M; i++) {
            double want = exp((double)x[i]);
            float w = (float)want;
            double ulp = (double)nextafterf(w, INFINITY) - (double)w;
            double err = fabs((double)y[i] - want) / ulp;
            if (err > worst) worst = err;
        }
        if (worst > 2.0) fprintf(stderr, "  %s exp: %.2f ulp\n", tn_isa_name((tn_isa)isa), worst);
        CHECK(worst <= 2.0);
    }
}

/* The error in units of the last place of the float32 result (a result past float32's range
 * must be an infinity of its sign). */
static double ulps(float got, double want) {
    if (isnan(want)) return isnan(got) ? 0.0 : INFINITY;
    if (fabs(want) > 3.4028234663852886e38) return isinf(got) && (got > 0) == (want > 0) ? 0.0 : INFINITY;
    double a = fabs(want) < 1.17549435e-38 ? 1.17549435e-38 : fabs(want);
    int e;
    frexp(a, &e);
    return fabs((double)got - want) / ldexp(1.0, e - 24);
}

/* The transcendental rows of math_f32.h within their stated ulp over dense grids of their
 * domains, on every ISA (the reference variant rounds a * b + c twice). */
void test_math_ulp_every_isa(void) {
    enum { M = 40009 };
    static float x[M], y[M];
    const struct {
        tn_unary_op op;
        float lo, hi, ulp;
    } cases[] = {
        {TN_UNARY_EXPM1, -20.0f, 88.7f, 2.0f}, {TN_UNARY_EXPM1, -0.4f, 0.4f, 2.0f},
        {TN_UNARY_LOG1P, -0.999f, 1e6f, 2.0f}, {TN_UNARY_LOG1P, -1e-3f, 1e-3f, 2.0f},
        {TN_UNARY_LOG2, 1e-30f, 1e30f, 2.5f},  {TN_UNARY_LOG2, 0.5f, 2.0f, 2.5f},
        {TN_UNARY_LOG10, 1e-30f, 1e30f, 2.5f}, {TN_UNARY_LOG10, 0.5f, 2.0f, 2.5f},
        {TN_UNARY_EXP2, -125.9f, 127.9f, 1.5f}, {TN_UNARY_EXP2, -1.0f, 1.0f, 1.5f},
        {TN_UNARY_ERF, -5.0f, 5.0f, 3.0f},     {TN_UNARY_ERF, -1.2f, 1.2f, 3.0f},
        {TN_UNARY_ERFINV, -0.999999f, 0.999999f, 4.0f}, {TN_UNARY_ERFINV, -0.3f, 0.3f, 4.0f},
        {TN_UNARY_ATAN, -100.0f, 100.0f, 3.0f}, {TN_UNARY_ATAN, -3.0f, 3.0f, 3.0f},
        {TN_UNARY_ASIN, -1.0f, 1.0f, 3.0f},   {TN_UNARY_ACOS, -1.0f, 1.0f, 3.0f},
        {TN_UNARY_TAN, -8000.0f, 8000.0f, 6.0f}, {TN_UNARY_TAN, -1.6f, 1.6f, 4.0f},
        {TN_UNARY_SINH, -89.0f, 89.0f, 3.0f}, {TN_UNARY_SINH, -1.5f, 1.5f, 3.0f},
        {TN_UNARY_COSH, -89.0f, 89.0f, 3.0f}, {TN_UNARY_ASINH, -1e6f, 1e6f, 3.0f},
        {TN_UNARY_ASINH, -2.0f, 2.0f, 3.0f},  {TN_UNARY_ACOSH, 1.0f, 1e6f, 3.0f},
        {TN_UNARY_ACOSH, 1.0f, 3.0f, 3.0f},   {TN_UNARY_ATANH, -0.9999f, 0.9999f, 3.0f},
        {TN_UNARY_LOG, 1e-45f, 1e-36f, 1.0f}, {TN_UNARY_LOG, 0.5f, 2.0f, 1.0f},
        {TN_UNARY_LOG, 0.7f, 1.6f, 1.0f},    {TN_UNARY_LOG, 1e-30f, 3.4e38f, 1.0f},
        {TN_UNARY_LOG, 1e-8f, 1e3f, 1.0f},
        {TN_UNARY_TANH, -10.0f, 10.0f, 2.5f}, {TN_UNARY_TANH, -0.7f, 0.7f, 2.5f},
        {TN_UNARY_GELU, -13.0f, 10.0f, 7.0f}, {TN_UNARY_GELU, -2.0f, 2.0f, 7.0f},
    };
    for (int isa = 0; isa < TN_ISA_COUNT_; isa++) {
        const tn_kernel_table *k = tn_kernels_for((tn_isa)isa);
        if (!k) continue;
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            for (int i = 0; i < M; i++) x[i] = cases[c].lo + (cases[c].hi - cases[c].lo) * (float)i / (float)(M - 1);
            CHECK(k->unary_f32(cases[c].op, M, y, 1, x, 1));
            double worst = 0.0;
            float at = 0.0f;
            for (int i = 0; i < M; i++) {
                double e = ulps(y[i], ref_unary(cases[c].op, x[i]));
                if (e > worst) worst = e, at = x[i];
            }
            if (worst > cases[c].ulp)
                fprintf(stderr, "  %s unary op %d: %.2f ulp at %.9g\n", tn_isa_name((tn_isa)isa), cases[c].op, worst,
                        (double)at);
            CHECK(worst <= cases[c].ulp);
        }
        /* special inputs, and a tail of one element past a whole vector (AVX-512's log row) */
        const float special[17] = {0.0f, -0.0f, -1.0f, -INFINITY, INFINITY, NAN, 1.0f, 1e-45f, 3.4028235e38f,
                                   2.0f, 0.75f, 1.5f, 1.4999999f, -1e-45f, 1.17549435e-38f, 0.5f, 8.0f};
        CHECK(k->unary_f32(TN_UNARY_LOG, 17, y, 1, special, 1));
        for (int i = 0; i < 17; i++) CHECK(ulps(y[i], log((double)special[i])) <= 1.0);
    }
}

static double ref_binary(tn_binary_op op, double a, double b, double alpha) {
    switch (op) {
    case TN_BINARY_ADD: return a + alpha * b;
    case TN_BINARY_SUB: return a - alpha * b;
    case TN_BINARY_MUL: return a * b;
    case TN_BINARY_DIV: return a / b;
    case TN_BINARY_MAXIMUM: return (a != a || b != b) ? NAN : fmax(a, b);
    case TN_BINARY_MINIMUM: return (a != a || b != b) ? NAN : fmin(a, b);
    case TN_BINARY_THRESHOLD_BACKWARD: return b <= alpha ? 0.0 : a;
    case TN_BINARY_SIGMOID_BACKWARD: return a * (1.0 - b) * b;
    case TN_BINARY_TANH_BACKWARD: return a * (1.0 - b * b);
    case TN_BINARY_SILU_BACKWARD: {
        double s = 1.0 / (1.0 + exp(-b));
        return a * s * (1.0 + b * (1.0 - s));
    }
    case TN_BINARY_GELU_BACKWARD:
        return a * (0.5 * erfc(-b * 0.7071067811865476) + b * exp(-0.5 * b * b) * 0.3989422804014327);
    case TN_BINARY_DIV_FLOOR: { /* PyTorch's: from fmod, rounded to the nearest whole quotient */
        if (b == 0) return a / b;
        double m = fmod(a, b), d = (a - m) / b;
        if (m != 0 && ((b < 0) != (m < 0))) d -= 1.0;
        double fd = floor(d);
        if (d - fd > 0.5) fd += 1.0;
        return d == 0 ? copysign(0.0, a / b) : fd;
    }
    case TN_BINARY_POW: return pow(a, b);
    case TN_BINARY_FMOD: return fmod(a, b); /* exact */
    case TN_BINARY_REMAINDER: { /* fmod moved to the divisor's sign */
        double m = fmod(a, b);
        return m != 0 && (m < 0) != (b < 0) ? m + b : m;
    }
    case TN_BINARY_XLOGY: return b != b ? b : (a == 0 ? 0.0 : a * log(b));
    case TN_BINARY_ATAN2: return atan2(a, b);
    case TN_BINARY_COPYSIGN: return copysign(a, b);
    case TN_BINARY_HYPOT: return hypot(a, b);
    case TN_BINARY_LEAKY_RELU: return a > 0 ? a : a * alpha;
    case TN_BINARY_LEAKY_RELU_BACKWARD: return b > 0 ? a : a * alpha;
    case TN_BINARY_HARDSIGMOID_BACKWARD: return b > -3 && b < 3 ? a / 6 : 0.0;
    case TN_BINARY_HARDSWISH_BACKWARD: return b < -3 ? 0.0 : (b <= 3 ? a * (b / 3 + 0.5) : a);
    case TN_BINARY_LOG_SIGMOID_BACKWARD: return a / (1.0 + exp(b));
    case TN_BINARY_SOFTPLUS: return a * b > alpha ? a : log1p(exp(a * b)) / b;
    case TN_BINARY_SOFTPLUS_BACKWARD: return b > alpha ? a : a / (1.0 + exp(-b));
    case TN_BINARY_ROUND_DECIMALS: { /* in float, as PyTorch's kernel (double tensors fall back) */
        float x = (float)a, t = (float)alpha;
        return t > 0 ? nearbyintf(x * t) / t : nearbyintf(x / -t) * -t;
    }
    default: return NAN;
    }
}

/* pow with one exponent for the row: the exponents computed by multiplication or roots, as
 * PyTorch's CPU kernel does (so pow(-inf, 0.5) is NaN there, not C's inf) */
static void check_pow_exponents(const tn_kernel_table *k, const char *isa) {
    static const float exps[] = {2.0f, 3.0f, 0.5f, -0.5f, -1.0f, -2.0f, 1.0f, 1.7f};
    static float out[N];
    for (size_t e = 0; e < sizeof exps / sizeof exps[0]; e++) {
        if (!k->binary_f32(TN_BINARY_POW, N, out, 1, inputs, 1, &exps[e], 0, 1.0f)) continue;
        for (int64_t i = 0; i < N; i++) {
            double x = inputs[i];
            double want = exps[e] == 0.5f ? sqrt(x) : exps[e] == -0.5f ? 1.0 / sqrt(x) : pow(x, exps[e]);
            if (!close_f32(out[i], want) && !(isinf(want) && isinf(out[i]))) {
                fprintf(stderr, "  %s pow(%g, %g) got %.9g want %.9g\n", isa, (double)inputs[i],
                        (double)exps[e], (double)out[i], want);
                CHECK(0);
                break;
            }
        }
    }
}

void test_binary_rows_every_isa(void) {
    fill_inputs();
    static float b[N], out[N];
    for (int i = 0; i < N; i++) b[i] = inputs[(i * 7 + 3) % N] * 0.25f;
    /* stride patterns: contiguous, b broadcast, a broadcast, strided (every other element) */
    const int64_t pat[4][3] = {{1, 1, 1}, {1, 1, 0}, {1, 0, 1}, {1, 2, 2}};
    for (int isa = 0; isa < TN_ISA_COUNT_; isa++) {
        const tn_kernel_table *k = tn_kernels_for((tn_isa)isa);
        if (!k) continue;
        check_pow_exponents(k, tn_isa_name((tn_isa)isa));
        for (int op = 0; op < TN_BINARY_COUNT_; op++) {
            if (op == TN_BINARY_GELU_TANH_BACKWARD) continue; /* checked through the generic path */
            for (int p = 0; p < 4; p++) {
                int64_t n = pat[p][1] == 2 ? N / 2 : N;
                if (!k->binary_f32((tn_binary_op)op, n, out, pat[p][0], inputs, pat[p][1], b,
                                   pat[p][2], 0.5f))
                    break;
                for (int64_t i = 0; i < n; i++) {
                    double want = ref_binary((tn_binary_op)op, inputs[i * pat[p][1]],
                                             b[i * pat[p][2]], 0.5);
                    /* the GELU's derivative Phi(x) + x phi(x) cancels near x = -0.75: its
                     * error is measured against the size of the two terms */
                    double x = b[i * pat[p][2]], g = inputs[i * pat[p][1]];
                    double scale = fabs(g) * (1.0 + fabs(x) * 0.4);
                    int close = op == TN_BINARY_GELU_BACKWARD && !isnan(want) && !isinf(want)
                                    ? fabs((double)out[i] - want) <= 4e-6 * scale + 2e-7
                                    : close_f32(out[i], want);
                    if (!close && !(isnan(want) && op >= TN_BINARY_THRESHOLD_BACKWARD)) {
                        fprintf(stderr, "  %s binary op %d pattern %d i=%lld got %.9g want %.9g\n",
                                tn_isa_name((tn_isa)isa), op, p, (long long)i, (double)out[i], want);
                        CHECK(0);
                        break;
                    }
                }
            }
        }
    }
}

static tn_tensor vec(void *data, tn_dtype dt, int64_t n, int64_t stride) {
    tn_tensor t = {.data = data, .dtype = dt, .ndim = 1, .sizes = {n}, .strides = {stride}};
    return t;
}

/* Integer quotients and remainders (int64 and int32 rows, a broadcast divisor, and the generic
 * path through a mixed-dtype view) against Python's rules written out: floor division rounds
 * down, % takes the divisor's sign, fmod the dividend's; -1 wraps INT_MIN; a zero divisor is
 * reported, not a crash. */
static int64_t py_floordiv(int64_t a, int64_t b) {
    if (b == -1) return (int64_t)(0 - (uint64_t)a);
    int64_t q = a / b;
    return (q * b != a && (a ^ b) < 0) ? q - 1 : q;
}

static int64_t want_division(tn_binary_op op, int64_t a, int64_t b) {
    if (b == -1) return op == TN_BINARY_DIV_TRUNC || op == TN_BINARY_DIV_FLOOR ? (int64_t)(0 - (uint64_t)a) : 0;
    switch (op) {
    case TN_BINARY_DIV_TRUNC: return a / b;
    case TN_BINARY_DIV_FLOOR: return py_floordiv(a, b);
    case TN_BINARY_REMAINDER: return (int64_t)((uint64_t)a - (uint64_t)b * (uint64_t)py_floordiv(a, b));
    default: return a - b * (a / b);
    }
}

void test_integer_division_rows(void) {
    enum { M = 64 };
    int64_t a[M], b[M], o[M];
    int32_t a32[M], b32[M], o32[M];
    for (int i = 0; i < M; i++) {
        a[i] = (int64_t)((i * 37) % 41) - 20;
        b[i] = (int64_t)((i * 11) % 13) - 6;
        if (b[i] == 0) b[i] = 7;
    }
    a[0] = INT64_MIN, b[0] = -1;
    a[1] = INT64_MIN, b[1] = 3;
    a[2] = INT64_MAX, b[2] = -2;
    for (int i = 0; i < M; i++) a32[i] = i < 3 ? (i == 2 ? INT32_MAX : INT32_MIN) : (int32_t)a[i], b32[i] = (int32_t)b[i];
    tn_scalar one = {.kind = TN_SCALAR_KIND_INT, .i = 1};
    const tn_binary_op ops[] = {TN_BINARY_DIV_TRUNC, TN_BINARY_DIV_FLOOR, TN_BINARY_REMAINDER, TN_BINARY_FMOD};
    for (int k = 0; k < 4; k++) {
        tn_tensor ta = vec(a, TN_DTYPE_I64, M, 1), tb = vec(b, TN_DTYPE_I64, M, 1), to = vec(o, TN_DTYPE_I64, M, 1);
        CHECK_OK(tn_kernel_binary(ops[k], &to, &ta, &tb, &one, TN_DTYPE_I64, 0, 1));
        for (int i = 0; i < M; i++) CHECK(o[i] == want_division(ops[k], a[i], b[i]));
        tn_tensor tb0 = vec(b + 5, TN_DTYPE_I64, M, 0); /* one divisor for the row */
        CHECK_OK(tn_kernel_binary(ops[k], &to, &ta, &tb0, &one, TN_DTYPE_I64, 0, 1));
        for (int i = 0; i < M; i++) CHECK(o[i] == want_division(ops[k], a[i], b[5]));
        tn_tensor t32a = vec(a32, TN_DTYPE_I32, M, 1), t32b = vec(b32, TN_DTYPE_I32, M, 1),
                  t32o = vec(o32, TN_DTYPE_I32, M, 1);
        CHECK_OK(tn_kernel_binary(ops[k], &t32o, &t32a, &t32b, &one, TN_DTYPE_I32, 0, 1));
        for (int i = 0; i < M; i++) CHECK(o32[i] == (int32_t)want_division(ops[k], a32[i], b32[i]));
        /* int32 inputs computed in int64 (the generic path) */
        CHECK_OK(tn_kernel_binary(ops[k], &to, &t32a, &t32b, &one, TN_DTYPE_I64, 0, 1));
        for (int i = 0; i < M; i++) CHECK(o[i] == want_division(ops[k], a32[i], b32[i]));
        b[9] = 0;
        CHECK(tn_kernel_binary(ops[k], &to, &ta, &tb, &one, TN_DTYPE_I64, 0, 1) == TN_STATUS_INVALID_ARGUMENT);
        b32[9] = 0;
        CHECK(tn_kernel_binary(ops[k], &t32o, &t32a, &t32b, &one, TN_DTYPE_I32, 0, 1) == TN_STATUS_INVALID_ARGUMENT);
        b[9] = 7, b32[9] = 7;
    }
}

/* Every ISA's float16 rows (F16C where the variant has it) against the inline conversions
 * (branch-free since they are vectorized in fused kernels too): all 65536 halves widened, and
 * floats around every half (halfway cases, subnormals, overflow to inf, infinities) plus a
 * sweep of 2^20 bit patterns over all floats narrowed; NaN only needs to stay NaN. (The
 * inline narrowing also matched F16C on all 2^32 floats, checked once outside the suite.) */
void test_f16_rows_every_isa(void) {
    enum { H = 65536, F = 3 * 65536 + (1 << 20) };
    static uint16_t h[H], got_h[F];
    static float f[F], got_f[H];
    for (int i = 0; i < H; i++) h[i] = (uint16_t)i;
    for (int i = 0; i < H; i++) { /* each half, halfway to the next, and a hair above that */
        float x = tn_f16_to_f32((uint16_t)i), y = tn_f16_to_f32((uint16_t)(i + 1 < H ? i + 1 : i));
        f[3 * i] = x;
        f[3 * i + 1] = isfinite(x) && isfinite(y) ? (float)(((double)x + (double)y) / 2) : 70000.0f;
        f[3 * i + 2] = isfinite(x) ? nextafterf(f[3 * i + 1], INFINITY) : -1e30f;
    }
    for (uint32_t i = 0; i < (1u << 20); i++) {
        uint32_t bits = i * 4099u + (i >> 9); /* spread over all 2^32 patterns */
        memcpy(&f[3 * H + i], &bits, 4);
    }
    for (int isa = 0; isa < TN_ISA_COUNT_; isa++) {
        const tn_kernel_table *k = tn_kernels_for((tn_isa)isa);
        if (!k) continue;
        k->widen_half(TN_DTYPE_F16, H - 3, got_f + 3, 1, h + 3, 1); /* a start off 32 bytes */
        k->narrow_half(TN_DTYPE_F16, F, got_h, 1, f, 1);
        int bad = 0;
        for (int i = 3; i < H; i++) {
            float want = tn_f16_to_f32(h[i]);
            bad += isnan(want) ? !isnan(got_f[i]) : memcmp(&want, &got_f[i], 4) != 0;
        }
        for (int i = 0; i < F; i++) {
            uint16_t want = tn_f32_to_f16(f[i]);
            int nan = (want & 0x7fffu) > 0x7c00u;
            bad += nan ? (got_h[i] & 0x7fffu) <= 0x7c00u : got_h[i] != want;
        }
        if (bad) fprintf(stderr, "  %s: %d float16 conversions differ\n", tn_isa_name((tn_isa)isa), bad);
        CHECK(bad == 0);
    }
}

/* The fused bfloat16 rows give what widening, the float32 row and rounding give, bit for bit,
 * for every op they take, on every ISA: contiguous, strided, and (binary) with either operand
 * broadcast. */
void test_bf16_rows_match_float32_rows_every_isa(void) {
    enum { M = 517 };
    static uint16_t a[2 * M], b[2 * M], got[2 * M], want[M];
    static float fa[M], fb[M], fo[M];
    fill_inputs();
    for (int i = 0; i < 2 * M; i++) {
        a[i] = tn_f32_to_bf16(inputs[i % N]);
        b[i] = tn_f32_to_bf16(inputs[(i * 7 + 3) % N] * 0.37f);
    }
    b[0] = tn_f32_to_bf16(2.0f); /* the broadcast exponent of pow: a row of its own */
    for (int isa = 0; isa < TN_ISA_COUNT_; isa++) {
        const tn_kernel_table *k = tn_kernels_for((tn_isa)isa);
        if (!k) continue;
        int taken = 0;
        for (int op = 0; op < TN_UNARY_COUNT_; op++)
            for (int64_t xs = 1; xs <= 2; xs++) {
                if (op == TN_UNARY_GELU) continue; /* a form of its own: test_bf16_gelu_every_isa */
                if (!k->unary_bf16((tn_unary_op)op, M, got, xs, a, xs)) continue;
                taken++;
                k->widen_half(TN_DTYPE_BF16, M, fa, 1, a, xs);
                CHECK(k->unary_f32((tn_unary_op)op, M, fo, 1, fa, 1));
                k->narrow_half(TN_DTYPE_BF16, M, want, 1, fo, 1);
                for (int i = 0; i < M; i++)
                    if (got[i * xs] != want[i]) {
                        fprintf(stderr, "  %s unary op %d stride %d: %04x, not %04x\n", tn_isa_name((tn_isa)isa), op,
                                (int)xs, got[i * xs], want[i]);
                        CHECK(0);
                        break;
                    }
            }
        const int64_t layouts[4][2] = {{1, 1}, {1, 0}, {0, 1}, {2, 2}};
        for (int op = 0; op < TN_BINARY_COUNT_; op++)
            for (int l = 0; l < 4; l++) {
                int64_t as = layouts[l][0], bs = layouts[l][1], os = l == 3 ? 2 : 1;
                if (op == TN_BINARY_GELU_BACKWARD) continue; /* test_bf16_gelu_every_isa */
                if (!k->binary_bf16((tn_binary_op)op, M, got, os, a, as, b, bs, 0.5f)) continue;
                taken++;
                k->widen_half(TN_DTYPE_BF16, as ? M : 1, fa, 1, a, as);
                k->widen_half(TN_DTYPE_BF16, bs ? M : 1, fb, 1, b, bs);
                CHECK(k->binary_f32((tn_binary_op)op, M, fo, 1, fa, as ? 1 : 0, fb, bs ? 1 : 0, 0.5f));
                k->narrow_half(TN_DTYPE_BF16, M, want, 1, fo, 1);
                for (int i = 0; i < M; i++)
                    if (got[i * os] != want[i]) {
                        fprintf(stderr, "  %s binary op %d layout %d: %04x, not %04x at %d\n",
                                tn_isa_name((tn_isa)isa), op, l, got[i * os], want[i], i);
                        CHECK(0);
                        break;
                    }
            }
        CHECK(taken > 80); /* the fused rows are there: not every op fell through */
    }
}

/* A bfloat16 result y against the exact value: within a half-ulp of y and `rel` of `scale`
 * (the terms the value is made of). NaN, infinities and zeros (also past the float range of
 * e^(-x^2 / 2)) must be the float32 row's `w`, but for the sign of 0. */
static int bf16_off(uint16_t got, float w, double exact, double scale, double rel) {
    float y = tn_bf16_to_f32(got);
    if (isnan(w) || isinf(w) || (w == 0.0f && y == 0.0f)) return !(isnan(y) && isnan(w)) && y != w;
    double half_ulp = fabs((double)tn_bf16_to_f32((uint16_t)(got + 1)) - y) / 2; /* the next one out */
    return fabs((double)y - exact) > half_ulp + rel * scale;
}

/* The bfloat16 rows of the exact GELU and its backward (tn_normal_cdf_gauss_bf16, a lower-degree
 * form) over every bfloat16 input, on every ISA: each result is a rounding of a value within
 * 3e-5 of the exact x Phi(x), relative, or of Phi(x) + x phi(x) within 3e-5 of its two terms
 * (the backward cancels near x = -0.75). Almost all agree with the float32 row rounded. */
void test_bf16_gelu_every_isa(void) {
    enum { M = 65536 };
    static uint16_t in[M], ones[M], got[M], want[M];
    static float f[M], fo[M], fones[M];
    for (int i = 0; i < M; i++) in[i] = (uint16_t)i, ones[i] = 0x3f80, fones[i] = 1.0f;
    for (int isa = 0; isa < TN_ISA_COUNT_; isa++) {
        const tn_kernel_table *k = tn_kernels_for((tn_isa)isa);
        if (!k) continue;
        k->widen_half(TN_DTYPE_BF16, M, f, 1, in, 1);
        for (int backward = 0; backward < 2; backward++) {
            if (backward) {
                CHECK(k->binary_bf16(TN_BINARY_GELU_BACKWARD, M, got, 1, ones, 1, in, 1, 1.0f));
                CHECK(k->binary_f32(TN_BINARY_GELU_BACKWARD, M, fo, 1, fones, 1, f, 1, 1.0f));
            } else {
                CHECK(k->unary_bf16(TN_UNARY_GELU, M, got, 1, in, 1));
                CHECK(k->unary_f32(TN_UNARY_GELU, M, fo, 1, f, 1));
            }
            k->narrow_half(TN_DTYPE_BF16, M, want, 1, fo, 1);
            int bad = 0, differ = 0;
            for (int i = 0; i < M; i++) {
                double x = f[i], cdf = 0.5 * erfc(-x * 0.7071067811865476);
                double dens = x * 0.3989422804014327 * exp(-x * x / 2);
                float y = tn_bf16_to_f32(got[i]), w = tn_bf16_to_f32(want[i]);
                differ += y != w && !(isnan(y) && isnan(w));
                bad += backward ? bf16_off(got[i], w, cdf + dens, cdf + fabs(dens), 3e-5)
                                : bf16_off(got[i], w, x * cdf, fabs(x * cdf), 3e-5);
            }
            if (bad) fprintf(stderr, "  %s: %d bfloat16 GELU%s results off\n", tn_isa_name((tn_isa)isa), bad,
                             backward ? " backward" : "");
            CHECK(bad == 0);
            CHECK(differ < M / 100); /* the float32 row rounded: all but a few near ties agree */
        }
    }
}

/* Every ISA's typed conversion rows against the generic element conversion (tn_load, then
 * tn_store): NaN, infinities and out-of-range floats into integers (INT_MIN, as x86 casts),
 * integer narrowing, int64 into float32 in one rounding, and anything nonzero into bool. */
void test_convert_rows_every_isa(void) {
    enum { M = 24 };
    static const float fv[M] = {0.0f, -0.0f, 0.5f, -0.5f, 1.99f, -1.99f, 3e9f, -3e9f, 1e19f, -1e19f, 9.3e18f,
                                -9.3e18f, 2147483520.0f, -2147483648.0f, NAN, INFINITY, -INFINITY, 1e-45f,
                                123456.7f, -7.0f, 65535.9f, 1.0f, 2.0f, -3.0f};
    static const int64_t iv[M] = {0, 1, -1, INT64_MAX, INT64_MIN, 4294967296LL + 5, -4294967301LL, 16777217,
                                  -16777217, 9007199254740993LL, 123, -123, 255, 256, 65536, 7, 8, 9,
                                  10, 11, 12, 13, 14, 15};
    int32_t i32[M];
    uint8_t b8[M];
    for (int i = 0; i < M; i++) i32[i] = (int32_t)(uint32_t)(uint64_t)iv[i], b8[i] = (uint8_t)(i % 3 == 0);
    const tn_dtype types[] = {TN_DTYPE_F32, TN_DTYPE_I64, TN_DTYPE_I32, TN_DTYPE_BOOL};
    const void *data[] = {fv, iv, i32, b8};
    for (int isa = 0; isa < TN_ISA_COUNT_; isa++) {
        const tn_kernel_table *k = tn_kernels_for((tn_isa)isa);
        if (!k) continue;
        for (int s = 0; s < 4; s++)
            for (int d = 0; d < 4; d++) {
                if (s == d) continue;
                char got[M * 8], want[M * 8];
                int32_t ds = tn_dtype_size(types[d]), ss = tn_dtype_size(types[s]);
                CHECK(k->convert_row(types[d], got, 1, types[s], (const char *)data[s], 1, M));
                for (int i = 0; i < M; i++)
                    tn_store(want + i * ds, types[d], tn_load((const char *)data[s] + i * ss, types[s]));
                if (memcmp(got, want, (size_t)(M * ds))) {
                    fprintf(stderr, "  %s: %s -> %s differs\n", tn_isa_name((tn_isa)isa), tn_dtype_name(types[s]),
                            tn_dtype_name(types[d]));
                    CHECK(0);
                }
            }
    }
}

/* Every ISA's typed integer and comparison rows give the reference variant's results (the
 * reference is checked against the CPU by the OpInfo sweep): int64 and int32 arithmetic,
 * comparisons, clamp, division, with a broadcast operand too, and unary neg, abs and not. */
void test_typed_rows_every_isa(void) {
    enum { M = 67 };
    static int64_t a64[M], b64[M], o64[M], r64[M];
    static int32_t a32[M], b32[M], o32[M], r32[M];
    for (int i = 0; i < M; i++) {
        a64[i] = (int64_t)((uint64_t)i * 0x9E3779B97F4A7C15ull) >> (i % 50);
        b64[i] = (i % 7) - 3 ? (i % 7) - 3 : 5;
        a32[i] = (int32_t)a64[i], b32[i] = (int32_t)b64[i];
    }
    a64[3] = INT64_MIN, a64[4] = INT64_MAX, a32[3] = INT32_MIN, a32[4] = INT32_MAX;
    const tn_kernel_table *ref = tn_kernels_for(TN_ISA_REF);
    for (int isa = 0; isa < TN_ISA_COUNT_; isa++) {
        const tn_kernel_table *k = tn_kernels_for((tn_isa)isa);
        if (!k || k == ref) continue;
        for (int op = 0; op < TN_BINARY_COUNT_; op++)
            for (int bs = 0; bs <= 1; bs++) {
                int z1 = 0, z2 = 0;
                tn_dtype out = op >= TN_BINARY_EQ && op <= TN_BINARY_GE ? TN_DTYPE_BOOL : TN_DTYPE_I64;
                int got = k->typed_binary_row((tn_binary_op)op, TN_DTYPE_I64, out, M, (char *)o64, 1,
                                              (const char *)a64, 1, (const char *)b64, bs, 7, &z1);
                int want = ref->typed_binary_row((tn_binary_op)op, TN_DTYPE_I64, out, M, (char *)r64, 1,
                                                 (const char *)a64, 1, (const char *)b64, bs, 7, &z2);
                CHECK(got == want && z1 == z2);
                if (got) CHECK(memcmp(o64, r64, (size_t)M * (out == TN_DTYPE_BOOL ? 1 : 8)) == 0);
                out = out == TN_DTYPE_BOOL ? out : TN_DTYPE_I32;
                got = k->typed_binary_row((tn_binary_op)op, TN_DTYPE_I32, out, M, (char *)o32, 1, (const char *)a32,
                                          1, (const char *)b32, bs, 7, &z1);
                want = ref->typed_binary_row((tn_binary_op)op, TN_DTYPE_I32, out, M, (char *)r32, 1,
                                             (const char *)a32, 1, (const char *)b32, bs, 7, &z2);
                CHECK(got == want && z1 == z2);
                if (got) CHECK(memcmp(o32, r32, (size_t)M * (out == TN_DTYPE_BOOL ? 1 : 4)) == 0);
            }
        for (int op = 0; op < TN_UNARY_COUNT_; op++) {
            int got = k->typed_unary_row((tn_unary_op)op, TN_DTYPE_I64, TN_DTYPE_I64, TN_DTYPE_I64, M, (char *)o64, 1,
                                         (const char *)a64, 1);
            int want = ref->typed_unary_row((tn_unary_op)op, TN_DTYPE_I64, TN_DTYPE_I64, TN_DTYPE_I64, M,
                                            (char *)r64, 1, (const char *)a64, 1);
            CHECK(got == want);
            if (got) CHECK(memcmp(o64, r64, sizeof o64) == 0);
        }
    }
}

void test_half_and_generic_paths(void) {
    /* bf16 same-dtype path vs computing through f32 by hand */
    uint16_t a[300], b[300], o[300];
    for (int i = 0; i < 300; i++) {
        a[i] = tn_f32_to_bf16((float)i * 0.37f - 40.0f);
        b[i] = tn_f32_to_bf16((float)(i % 17) - 8.0f);
    }
    tn_tensor ta = vec(a, TN_DTYPE_BF16, 300, 1), tb = vec(b, TN_DTYPE_BF16, 300, 1),
              to = vec(o, TN_DTYPE_BF16, 300, 1);
    tn_scalar one = {.kind = TN_SCALAR_KIND_INT, .i = 1};
    CHECK_OK(tn_kernel_binary(TN_BINARY_MUL, &to, &ta, &tb, &one, TN_DTYPE_BF16, 0, 1));
    for (int i = 0; i < 300; i++)
        CHECK(o[i] == tn_f32_to_bf16(tn_bf16_to_f32(a[i]) * tn_bf16_to_f32(b[i])));
    CHECK_OK(tn_kernel_unary(TN_UNARY_SILU, &to, &ta, TN_DTYPE_BF16, 0, 1));
    for (int i = 0; i < 300; i++) {
        float x = tn_bf16_to_f32(a[i]);
        CHECK(fabsf(tn_bf16_to_f32(o[i]) - x / (1.0f + expf(-x))) <= 0.01f * fabsf(x) + 1e-3f);
    }
    /* mixed dtypes: int32 + float32 computed in float32, stored as float64 */
    int32_t ia[4] = {1, -2, 3, 2147483647};
    float fb[4] = {0.5f, 0.25f, -1.0f, 1.0f};
    double od[4];
    tn_tensor tia = vec(ia, TN_DTYPE_I32, 4, 1), tfb = vec(fb, TN_DTYPE_F32, 4, 1),
              tod = vec(od, TN_DTYPE_F64, 4, 1);
    CHECK_OK(tn_kernel_binary(TN_BINARY_ADD, &tod, &tia, &tfb, &one, TN_DTYPE_F32, 0, 1));
    CHECK(od[0] == 1.5 && od[1] == -1.75 && od[2] == 2.0 && od[3] == 2147483648.0);
    /* comparisons write bool */
    uint8_t ob[4];
    tn_tensor tob = vec(ob, TN_DTYPE_BOOL, 4, 1);
    CHECK_OK(tn_kernel_binary(TN_BINARY_GT, &tob, &tia, &tfb, &one, TN_DTYPE_F32, 0, 1));
    CHECK(ob[0] == 1 && ob[1] == 0 && ob[2] == 1 && ob[3] == 1);
}

void test_integer_semantics(void) {
    int64_t a[6] = {7, -7, 7, -7, INT64_MAX, INT64_MIN};
    int64_t b[6] = {2, 2, -2, -2, 1, -1};
    int64_t o[6];
    tn_tensor ta = vec(a, TN_DTYPE_I64, 6, 1), tb = vec(b, TN_DTYPE_I64, 6, 1),
              to = vec(o, TN_DTYPE_I64, 6, 1);
    tn_scalar one = {.kind = TN_SCALAR_KIND_INT, .i = 1};
    CHECK_OK(tn_kernel_binary(TN_BINARY_DIV_FLOOR, &to, &ta, &tb, &one, TN_DTYPE_I64, 0, 1));
    CHECK(o[0] == 3 && o[1] == -4 && o[2] == -4 && o[3] == 3 && o[4] == INT64_MAX && o[5] == INT64_MIN);
    CHECK_OK(tn_kernel_binary(TN_BINARY_DIV_TRUNC, &to, &ta, &tb, &one, TN_DTYPE_I64, 0, 1));
    CHECK(o[0] == 3 && o[1] == -3 && o[2] == -3 && o[3] == 3);
    CHECK_OK(tn_kernel_binary(TN_BINARY_ADD, &to, &ta, &tb, &one, TN_DTYPE_I64, 0, 1));
    CHECK(o[4] == INT64_MIN); /* wraps */
    int64_t z[6] = {1, 1, 0, 1, 1, 1};
    tn_tensor tz = vec(z, TN_DTYPE_I64, 6, 1);
    CHECK(tn_kernel_binary(TN_BINARY_DIV_FLOOR, &to, &ta, &tz, &one, TN_DTYPE_I64, 0, 1) ==
          TN_STATUS_INVALID_ARGUMENT);
    uint8_t u[3] = {250, 3, 0}, uo[3];
    uint8_t ub[3] = {10, 5, 1};
    tn_tensor tu = vec(u, TN_DTYPE_U8, 3, 1), tub = vec(ub, TN_DTYPE_U8, 3, 1),
              tuo = vec(uo, TN_DTYPE_U8, 3, 1);
    CHECK_OK(tn_kernel_binary(TN_BINARY_ADD, &tuo, &tu, &tub, &one, TN_DTYPE_U8, 0, 1));
    CHECK(uo[0] == 4 && uo[1] == 8 && uo[2] == 1);
    CHECK_OK(tn_kernel_binary(TN_BINARY_SUB, &tuo, &tu, &tub, &one, TN_DTYPE_U8, 0, 1));
    CHECK(uo[1] == 254);
}

static void count_slices(void *ctx, int32_t ith, int32_t nth) {
    int *hits = ctx;
    (void)nth;
    __atomic_fetch_add(&hits[ith], 1, __ATOMIC_RELAXED);
}

void test_parallel_pool(void) {
    int hits[256] = {0};
    tn_parallel_run(count_slices, hits, 1 << 24);
    int threads = tn_parallel_threads();
    CHECK(threads >= 1);
    for (int i = 0; i < threads; i++) CHECK(hits[i] == 1);
    memset(hits, 0, sizeof hits);
    tn_parallel_run(count_slices, hits, 10); /* small: one slice */
    CHECK(hits[0] == 1 && hits[1] == 0);
    /* workers woken with no job (a launch onto an idle stream prewakes them) go back to
     * waiting, and still take each slice of the next jobs exactly once */
    for (int round = 0; round < 3; round++) {
        struct timespec idle = {0, 30 * 1000 * 1000}; /* past the workers' spin: asleep */
        nanosleep(&idle, NULL);
        tn_parallel_prewake();
        tn_parallel_prewake();
        for (int job = 0; job < 4; job++) {
            memset(hits, 0, sizeof hits);
            tn_parallel_run(count_slices, hits, 1 << 24);
            for (int i = 0; i < threads; i++) CHECK(hits[i] == 1);
            if (job == 1) tn_parallel_prewake(); /* while they spin */
        }
    }
}

void test_elementwise_launch(void) {
    tn_stream_t s;
    CHECK_OK(tn_stream_get(0, 0, &s));
    float a[5] = {1, 2, 3, 4, 5}, o[5];
    tn_tensor ta = vec(a, TN_DTYPE_F32, 5, 1), to = vec(o, TN_DTYPE_F32, 5, 1);
    tn_input ia = {ta, 0, {TN_SCALAR_KIND_INT, 0, 0, 0}};
    tn_input ib = {vec(NULL, TN_DTYPE_F64, 0, 0), 1, {TN_SCALAR_KIND_FLOAT, 0, 2.5, 0}};
    tn_scalar alpha = {.kind = TN_SCALAR_KIND_INT, .i = 2};
    CHECK_OK(tn_binary_async(s, "aten::add.out", TN_BINARY_ADD, &to, &ia, &ib, &alpha, TN_DTYPE_F32));
    CHECK_OK(tn_stream_synchronize(s));
    for (int i = 0; i < 5; i++) CHECK(o[i] == a[i] + 5.0f);
    int32_t x[2] = {4, 5}, y[2] = {2, 0}, r[2];
    tn_input ix = {vec(x, TN_DTYPE_I32, 2, 1), 0, {TN_SCALAR_KIND_INT, 0, 0, 0}};
    tn_input iy = {vec(y, TN_DTYPE_I32, 2, 1), 0, {TN_SCALAR_KIND_INT, 0, 0, 0}};
    tn_tensor tr = vec(r, TN_DTYPE_I32, 2, 1);
    CHECK_OK(tn_binary_async(s, "aten::div.out_mode", TN_BINARY_DIV_FLOOR, &tr, &ix, &iy, &alpha,
                             TN_DTYPE_I32));
    CHECK(tn_stream_synchronize(s) == TN_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(tn_last_error(), "aten::div.out_mode failed: ZeroDivisionError") != NULL);
    CHECK_OK(tn_unary_async(s, "aten::neg.out", TN_UNARY_NEG, &to, &ta, TN_DTYPE_F32));
    CHECK_OK(tn_stream_synchronize(s));
    CHECK(o[4] == -5.0f);
}

/* addcmul / addcdiv / lerp round once: a bfloat16 result equals the float result rounded. */
void test_ternary_kernel(void) {
    float a[3] = {1.0f, -2.0f, 0.25f}, b[3] = {3.0f, 0.5f, -1.0f}, c[3] = {0.1f, 4.0f, 0.75f}, r[3];
    tn_tensor ta = {.data = a, .dtype = TN_DTYPE_F32, .ndim = 1, .sizes = {3}, .strides = {1}};
    tn_tensor tb = ta, tc = ta, tr = ta;
    tb.data = b;
    tc.data = c;
    tr.data = r;
    tn_kernel_ternary(TN_TERNARY_ADDCMUL, &tr, &ta, &tb, &tc, 2.0, TN_DTYPE_F32, 0, 1);
    CHECK(r[0] == 1.0f + 2.0f * 3.0f * 0.1f && r[1] == 2.0f && r[2] == -1.25f);
    tn_kernel_ternary(TN_TERNARY_ADDCDIV, &tr, &ta, &tb, &tc, 1.0, TN_DTYPE_F32, 0, 1);
    CHECK(r[1] == -2.0f + 0.125f);
    tn_kernel_ternary(TN_TERNARY_LERP, &tr, &ta, &tb, &tc, 0.0, TN_DTYPE_F32, 0, 1);
    CHECK(fabsf(r[0] - 1.2f) < 1e-6f && r[1] == 0.5f + 2.5f * 3.0f && r[2] == -0.6875f);
    tn_kernel_ternary(TN_TERNARY_LERP, &tr, &ta, &tb, NULL, 1.0, TN_DTYPE_F32, 0, 1); /* weight 1: end exactly */
    CHECK(r[0] == 3.0f && r[1] == 0.5f && r[2] == -1.0f);
    uint16_t h[3];
    tn_tensor th = {.data = h, .dtype = TN_DTYPE_BF16, .ndim = 1, .sizes = {3}, .strides = {1}};
    tn_kernel_ternary(TN_TERNARY_ADDCMUL, &th, &ta, &tb, &tc, 3.14, TN_DTYPE_F32, 0, 1);
    CHECK(h[0] == tn_f32_to_bf16(1.0f + 3.14f * 3.0f * 0.1f));
    /* integers: wrap-around int64 math */
    int32_t ia[2] = {5, -7}, ib[2] = {3, 2}, ic[2] = {-4, 6}, ir[2];
    tn_tensor xa = {.data = ia, .dtype = TN_DTYPE_I32, .ndim = 1, .sizes = {2}, .strides = {1}};
    tn_tensor xb = xa, xc = xa, xr = xa;
    xb.data = ib;
    xc.data = ic;
    xr.data = ir;
    tn_kernel_ternary(TN_TERNARY_ADDCMUL, &xr, &xa, &xb, &xc, 2.0, TN_DTYPE_I64, 0, 1);
    CHECK(ir[0] == 5 - 24 && ir[1] == -7 + 24);
}

/* One launch over a list: each item equals the single-tensor kernel's result; norms add the
 * partials of several threads (an item past the parallel grain), and NaN wins the largest
 * magnitude. */
void test_foreach_launch(void) {
    tn_stream_t s;
    CHECK_OK(tn_stream_get(0, 0, &s));
    enum { BIG = 3 * TN_PARALLEL_GRAIN + 7 };
    float *x = malloc(sizeof(float) * BIG), *y = malloc(sizeof(float) * BIG), *o = malloc(sizeof(float) * BIG);
    float small[5] = {1, -2, 3, -4, 5}, small_o[5], w[5] = {0.5f, 0.25f, 0, 1, 2}, w_o[5];
    for (int i = 0; i < BIG; i++) {
        x[i] = (float)(i % 101) * 0.01f - 0.5f;
        y[i] = (float)(i % 7) - 3.0f;
    }
    tn_foreach op = {.kind = TN_FOREACH_BINARY, .op = TN_BINARY_ADD, .dtype = TN_DTYPE_F32, .compute = TN_DTYPE_F32,
                     .alpha = {.kind = TN_SCALAR_KIND_FLOAT, .f = 0.5}};
    tn_foreach_item items[3] = {
        {.out = o, .a = x, .b = y, .numel = BIG},
        {.out = small_o, .a = small, .scalar = {.kind = TN_SCALAR_KIND_INT, .i = 3}, .numel = 5},
        {.out = NULL, .a = NULL, .numel = 0}, /* empty tensors may have no memory */
    };
    CHECK_OK(tn_foreach_async(s, "aten::_foreach_add.List", &op, 3, items));
    CHECK_OK(tn_stream_synchronize(s));
    int bad = 0;
    for (int i = 0; i < BIG; i++) bad += o[i] != x[i] + 0.5f * y[i];
    CHECK(bad == 0);
    for (int i = 0; i < 5; i++) CHECK(small_o[i] == small[i] + 0.5f * 3.0f); /* b: the item's scalar */
    /* a device value every item shares */
    float coef = -2.0f;
    items[0].b = NULL;
    op = (tn_foreach){.kind = TN_FOREACH_BINARY, .op = TN_BINARY_MUL, .dtype = TN_DTYPE_F32,
                      .compute = TN_DTYPE_F32, .other = &coef, .other_dtype = TN_DTYPE_F32};
    CHECK_OK(tn_foreach_async(s, "aten::_foreach_mul_.Tensor", &op, 2, items));
    CHECK_OK(tn_stream_synchronize(s));
    CHECK(small_o[4] == -10.0f && o[BIG - 1] == -2.0f * x[BIG - 1]);
    /* lerp with a scalar weight (no c) */
    op = (tn_foreach){.kind = TN_FOREACH_TERNARY, .op = TN_TERNARY_LERP, .dtype = TN_DTYPE_F32, .compute = TN_DTYPE_F32};
    tn_foreach_item lerp = {.out = w_o, .a = small, .b = w, .scalar = {.kind = TN_SCALAR_KIND_FLOAT, .f = 0.25}, .numel = 5};
    CHECK_OK(tn_foreach_async(s, "aten::_foreach_lerp.Scalar", &op, 1, &lerp));
    CHECK_OK(tn_stream_synchronize(s));
    CHECK(w_o[0] == 1.0f + 0.25f * (0.5f - 1.0f) && w_o[3] == -4.0f + 0.25f * 5.0f);
    /* norms: 1, 2 and infinity, into float32 and bfloat16 results */
    double sum1 = 0, sum2 = 0, largest = 0;
    for (int i = 0; i < BIG; i++) {
        sum1 += fabs((double)x[i]);
        sum2 += (double)x[i] * x[i];
        largest = fabs((double)x[i]) > largest ? fabs((double)x[i]) : largest;
    }
    float norms[3];
    uint16_t half_norm;
    small[1] = NAN;
    tn_foreach_item norm_items[3] = {{.out = &norms[0], .a = x, .numel = BIG},
                                     {.out = &norms[1], .a = small, .numel = 5},
                                     {.out = &norms[2], .a = NULL, .numel = 0}};
    const double want[3] = {largest, sum1, sqrt(sum2)};
    for (int32_t order = 0; order <= 2; order++) {
        op = (tn_foreach){.kind = TN_FOREACH_NORM, .op = order, .dtype = TN_DTYPE_F32, .out_dtype = TN_DTYPE_F32};
        CHECK_OK(tn_foreach_async(s, "aten::_foreach_norm.Scalar", &op, 3, norm_items));
        CHECK_OK(tn_stream_synchronize(s));
        CHECK(fabs(norms[0] - want[order]) <= 1e-6 * want[order]);
        CHECK(isnan(norms[1]) && norms[2] == 0.0f);
    }
    op.out_dtype = TN_DTYPE_BF16;
    norm_items[0].out = &half_norm;
    CHECK_OK(tn_foreach_async(s, "aten::_foreach_norm.Scalar", &op, 1, norm_items));
    CHECK_OK(tn_stream_synchronize(s));
    CHECK(half_norm == tn_f32_to_bf16((float)sqrt(sum2)));
    /* refused: an item without its operand, an unknown order, an integer norm */
    op = (tn_foreach){.kind = TN_FOREACH_TERNARY, .op = TN_TERNARY_ADDCMUL, .dtype = TN_DTYPE_F32, .compute = TN_DTYPE_F32};
    CHECK(tn_foreach_async(s, "aten::_foreach_addcmul.Scalar", &op, 1, &lerp) == TN_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(tn_last_error(), "item 0 lacks an operand") != NULL);
    op = (tn_foreach){.kind = TN_FOREACH_NORM, .op = 3, .dtype = TN_DTYPE_F32, .out_dtype = TN_DTYPE_F32};
    CHECK(tn_foreach_async(s, NULL, &op, 1, norm_items) == TN_STATUS_INVALID_ARGUMENT);
    op.op = 2;
    op.dtype = TN_DTYPE_I32;
    CHECK(tn_foreach_async(s, NULL, &op, 1, norm_items) == TN_STATUS_INVALID_ARGUMENT);
    free(x);
    free(y);
    free(o);
}

/* Fill, copy (converting) and GradScaler's unscale as list launches: every thread's share of
 * each item, an empty item, and the flag for an element that is not finite. */
void test_foreach_fill_copy_unscale(void) {
    tn_stream_t s;
    CHECK_OK(tn_stream_get(0, 0, &s));
    enum { BIG = 2 * TN_PARALLEL_GRAIN + 5 };
    float *x = malloc(sizeof(float) * BIG), *o = malloc(sizeof(float) * BIG);
    uint16_t *h = malloc(sizeof(uint16_t) * BIG);
    for (int i = 0; i < BIG; i++) x[i] = (float)(i % 37) * 0.3f - 5.0f;
    float small[3] = {1.0f, 2.0f, 3.0f};
    tn_foreach_item items[3] = {{.out = o, .numel = BIG, .scalar = {.kind = TN_SCALAR_KIND_FLOAT, .f = 0.25}},
                                {.out = small, .numel = 3, .scalar = {.kind = TN_SCALAR_KIND_INT, .i = -7}},
                                {.numel = 0}};
    tn_foreach op = {.kind = TN_FOREACH_FILL, .dtype = TN_DTYPE_F32, .compute = TN_DTYPE_F32};
    CHECK_OK(tn_foreach_async(s, "aten::_foreach_zero_", &op, 3, items));
    CHECK_OK(tn_stream_synchronize(s));
    int bad = 0;
    for (int i = 0; i < BIG; i++) bad += o[i] != 0.25f;
    CHECK(bad == 0 && small[0] == -7.0f && small[2] == -7.0f);
    /* copy float32 into bfloat16 */
    tn_foreach_item copy = {.out = h, .a = x, .numel = BIG};
    op = (tn_foreach){.kind = TN_FOREACH_COPY, .dtype = TN_DTYPE_F32, .compute = TN_DTYPE_F32, .out_dtype = TN_DTYPE_BF16};
    CHECK_OK(tn_foreach_async(s, "aten::_foreach_copy_", &op, 1, &copy));
    CHECK_OK(tn_stream_synchronize(s));
    for (int i = 0; i < BIG; i++) bad += h[i] != tn_f32_to_bf16(x[i]);
    CHECK(bad == 0);
    /* unscale in place: finite values leave the flag alone; an inf in the last thread's share
     * (or a NaN in a small item) sets it, and everything is still multiplied */
    float inv = 0.5f, found = 0.0f;
    tn_foreach_item unscale[2] = {{.out = x, .a = x, .numel = BIG}, {.out = small, .a = small, .numel = 3}};
    op = (tn_foreach){.kind = TN_FOREACH_UNSCALE, .dtype = TN_DTYPE_F32, .compute = TN_DTYPE_F32, .other = &inv,
                      .other_dtype = TN_DTYPE_F32, .found_inf = &found};
    memcpy(o, x, sizeof(float) * BIG);
    CHECK_OK(tn_foreach_async(s, "aten::_amp_foreach_non_finite_check_and_unscale_", &op, 2, unscale));
    CHECK_OK(tn_stream_synchronize(s));
    for (int i = 0; i < BIG; i++) bad += x[i] != o[i] * 0.5f;
    CHECK(bad == 0 && found == 0.0f && small[1] == -3.5f);
    x[BIG - 1] = INFINITY;
    CHECK_OK(tn_foreach_async(s, "aten::_amp_foreach_non_finite_check_and_unscale_", &op, 2, unscale));
    CHECK_OK(tn_stream_synchronize(s));
    CHECK(found == 1.0f && x[0] == o[0] * 0.25f && isinf(x[BIG - 1]));
    found = 0.0f;
    small[2] = NAN;
    CHECK_OK(tn_foreach_async(s, "aten::_amp_foreach_non_finite_check_and_unscale_", &op, 1, unscale + 1));
    CHECK_OK(tn_stream_synchronize(s));
    CHECK(found == 1.0f);
    /* bfloat16 in place: widened, multiplied, rounded */
    for (int i = 0; i < BIG; i++) h[i] = tn_f32_to_bf16((float)(i % 37) * 0.3f - 5.0f);
    tn_foreach_item half = {.out = h, .a = h, .numel = BIG};
    op.dtype = op.compute = TN_DTYPE_BF16;
    inv = 1.0f / 3.0f;
    found = 0.0f;
    CHECK_OK(tn_foreach_async(s, "aten::_amp_foreach_non_finite_check_and_unscale_", &op, 1, &half));
    CHECK_OK(tn_stream_synchronize(s));
    for (int i = 0; i < BIG; i++)
        bad += h[i] != tn_f32_to_bf16(tn_bf16_to_f32(tn_f32_to_bf16((float)(i % 37) * 0.3f - 5.0f)) * inv);
    CHECK(bad == 0 && found == 0.0f);
    /* refused: no flag, a fill without its output */
    op.found_inf = NULL;
    CHECK(tn_foreach_async(s, NULL, &op, 1, &half) == TN_STATUS_INVALID_ARGUMENT);
    op = (tn_foreach){.kind = TN_FOREACH_FILL, .dtype = TN_DTYPE_F32, .compute = TN_DTYPE_F32};
    tn_foreach_item no_out = {.numel = 4};
    CHECK(tn_foreach_async(s, NULL, &op, 1, &no_out) == TN_STATUS_INVALID_ARGUMENT);
    free(x);
    free(o);
    free(h);
}

static float ternary_ref(tn_ternary_op op, float a, float b, float c, float s) {
    if (op == TN_TERNARY_ADDCMUL) return a + s * b * c;
    if (op == TN_TERNARY_ADDCDIV) return a + s * (b / c);
    float d = b - a;
    return fabsf(c) < 0.5f ? a + c * d : b - d * (1.0f - c);
}

static int same_bits(float x, float y) { return memcmp(&x, &y, sizeof x) == 0 || (isnan(x) && isnan(y)); }

/* The vectorized ternary rows give the generic loop's values bit for bit, on every ISA and in
 * place; through tn_kernel_ternary a contiguous bfloat16 launch (the fast rows) equals the same
 * data read with a stride (the generic loop). */
void test_ternary_rows_every_isa(void) {
    enum { M = 1003 };
    static float a[M], b[M], c[M], o[M];
    for (int i = 0; i < M; i++) {
        a[i] = (float)((i * 37) % 211) * 0.013f - 1.3f;
        b[i] = (float)((i * 53) % 97) * -0.07f + 2.0f;
        c[i] = (float)((i * 11) % 29) * 0.05f - 0.6f; /* lerp weights on both sides of 0.5 */
    }
    c[5] = 0.0f; /* addcdiv by zero: inf */
    a[7] = NAN;
    for (int isa = 0; isa < TN_ISA_COUNT_; isa++) {
        const tn_kernel_table *k = tn_kernels_for((tn_isa)isa);
        if (!k) continue;
        for (int op = 0; op < TN_TERNARY_COUNT_; op++) {
            for (int scalar_weight = 0; scalar_weight < (op == TN_TERNARY_LERP ? 2 : 1); scalar_weight++) {
                const float *cp = scalar_weight ? NULL : c;
                k->ternary_f32((tn_ternary_op)op, M, o, a, b, cp, 0.3f);
                int bad = 0;
                for (int i = 0; i < M; i++)
                    bad += !same_bits(o[i], ternary_ref((tn_ternary_op)op, a[i], b[i], cp ? c[i] : 0.3f, 0.3f));
                memcpy(o, a, sizeof a); /* in place */
                k->ternary_f32((tn_ternary_op)op, M, o, o, b, cp, 0.3f);
                for (int i = 0; i < M; i++)
                    bad += !same_bits(o[i], ternary_ref((tn_ternary_op)op, a[i], b[i], cp ? c[i] : 0.3f, 0.3f));
                if (bad) fprintf(stderr, "  %s ternary op %d: %d differ\n", tn_isa_name((tn_isa)isa), op, bad);
                CHECK(bad == 0);
            }
        }
    }
    static uint16_t h[3][2 * M], ho[2][M];
    for (int i = 0; i < M; i++) {
        h[0][2 * i] = tn_f32_to_bf16(a[i]);
        h[1][2 * i] = tn_f32_to_bf16(b[i]);
        h[2][2 * i] = tn_f32_to_bf16(c[i] + 0.7f);
    }
    for (int op = 0; op < TN_TERNARY_COUNT_; op++) {
        for (int strided = 0; strided < 2; strided++) {
            tn_tensor v[3], out = vec(ho[strided], TN_DTYPE_BF16, M, 1);
            for (int t = 0; t < 3; t++) {
                if (strided) {
                    v[t] = vec(h[t], TN_DTYPE_BF16, M, 2);
                } else {
                    static uint16_t packed[3][M];
                    for (int i = 0; i < M; i++) packed[t][i] = h[t][2 * i];
                    v[t] = vec(packed[t], TN_DTYPE_BF16, M, 1);
                }
            }
            tn_kernel_ternary((tn_ternary_op)op, &out, &v[0], &v[1], &v[2], -1.5, TN_DTYPE_BF16, 0, 1);
        }
        CHECK(memcmp(ho[0], ho[1], sizeof ho[0]) == 0);
    }
}

/* The vectorized float32 Adam rows equal a plain loop of optim.c's formulas bit for bit, for
 * every combination of grad scaling, decoupled weight decay and amsgrad, on every ISA. */
void test_adam_rows_every_isa(void) {
    enum { M = 517 };
    static float p0[M], g0[M], m0[M], v0[M], x0[M], p[M], g[M], m[M], v[M], x[M];
    for (int i = 0; i < M; i++) {
        p0[i] = (float)((i * 37) % 211) * 0.01f - 1.0f;
        g0[i] = (float)((i * 53) % 97) * -0.003f + 0.1f;
        m0[i] = g0[i] * 0.5f;
        v0[i] = g0[i] * g0[i] * (float)(i % 3);
        x0[i] = v0[i] * 1.5f;
    }
    for (int isa = 0; isa < TN_ISA_COUNT_; isa++) {
        const tn_kernel_table *k = tn_kernels_for((tn_isa)isa);
        if (!k) continue;
        for (int flags = 0; flags < 16; flags++) {
            tn_adam_f32_step c = {1e-3f, 0.01f, 0.9f, 0.999f, 1e-8f, 1.2e-3f, 0.31f, 0.5f,
                                  flags & 8 ? -1.0f : 1.0f, flags & 4, flags & 2};
            memcpy(p, p0, sizeof p), memcpy(g, g0, sizeof g), memcpy(m, m0, sizeof m);
            memcpy(v, v0, sizeof v), memcpy(x, x0, sizeof x);
            k->adam_f32(&c, M, p, g, m, v, flags & 1 ? x : NULL);
            int bad = 0;
            for (int i = 0; i < M; i++) {
                float pp = p0[i], grad = g0[i], mm = m0[i], vv = v0[i], xx = x0[i];
                if (c.scaled) grad *= c.inv_scale;
                bad += c.scaled ? !same_bits(g[i], grad) : !same_bits(g[i], g0[i]);
                if (flags & 8) grad = -grad;
                if (c.decoupled)
                    pp -= c.lr * c.wd * pp;
                else
                    grad += c.wd * pp;
                mm += (1 - c.b1) * (grad - mm);
                vv = c.b2 * vv + (1 - c.b2) * grad * grad;
                float second = vv;
                if (flags & 1) {
                    xx = xx > vv ? xx : vv;
                    second = xx;
                    bad += !same_bits(x[i], xx);
                }
                pp -= c.step_size * mm / (sqrtf(second) / c.bc2 + c.eps);
                bad += !same_bits(p[i], pp) + !same_bits(m[i], mm) + !same_bits(v[i], vv);
            }
            if (bad) fprintf(stderr, "  %s adam flags %d: %d differ\n", tn_isa_name((tn_isa)isa), flags, bad);
            CHECK(bad == 0);
        }
    }
}

/* fmod and remainder rows equal libm's fmod bit for bit on every ISA, floor division the
 * generic path's formula: quotients near whole numbers (the division's rounding), near and
 * past 2^29 (the libm fallback), signs, zeros and infinities. */
void test_quotient_rows_exact_every_isa(void) {
    enum { Q = 4096 };
    static float a[Q], b[Q], out[Q];
    uint32_t state = 777;
    for (int i = 0; i < Q; i++) {
        state = state * 1664525u + 1013904223u;
        float y = ((float)(state >> 8) / 16777216.0f - 0.5f) * 7.0f;
        state = state * 1664525u + 1013904223u;
        float q = (float)(int)((state >> 8) % 100000) * ((state & 1) ? 1.0f : -1.0f);
        float x = q * y; /* a multiple of y, rounded: the quotient sits at a whole number */
        if (i % 5 == 1) x = nextafterf(x, INFINITY);
        if (i % 5 == 2) x = ldexpf(y, 29 + i % 3); /* quotients of 2^29 and more */
        if (i % 97 == 3) y = 0.0f;
        if (i % 89 == 4) y = INFINITY;
        if (i % 83 == 5) x = -0.0f;
        a[i] = x;
        b[i] = y == 0.0f && i % 2 ? -0.0f : y;
    }
    for (int isa = 0; isa < TN_ISA_COUNT_; isa++) {
        const tn_kernel_table *k = tn_kernels_for((tn_isa)isa);
        if (!k) continue;
        const tn_binary_op ops[3] = {TN_BINARY_FMOD, TN_BINARY_REMAINDER, TN_BINARY_DIV_FLOOR};
        for (int oi = 0; oi < 3; oi++) {
            CHECK(k->binary_f32(ops[oi], Q, out, 1, a, 1, b, 1, 1.0f));
            int bad = 0;
            for (int i = 0; i < Q; i++) {
                double want = ref_binary(ops[oi], a[i], b[i], 1.0);
                float w = (float)want;
                if (ops[oi] == TN_BINARY_REMAINDER) { /* in float, as the CPU's kernel */
                    float m = (float)fmod(a[i], b[i]);
                    w = m != 0.0f && ((b[i] < 0.0f) != (m < 0.0f)) ? m + b[i] : m;
                }
                if (!(out[i] == w || (isnan(out[i]) && isnan(w))) || (w == 0.0f && signbit(out[i]) != signbit(w))) {
                    if (!bad) fprintf(stderr, "  %s op %d i=%d a=%.9g b=%.9g got %.9g want %.9g\n", tn_isa_name((tn_isa)isa),
                                      ops[oi], i, (double)a[i], (double)b[i], (double)out[i], (double)w);
                    bad = 1;
                }
            }
            CHECK(!bad);
        }
    }
}
