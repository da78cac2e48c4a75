/* Elementwise kernels: unary and binary ops over broadcast strided views, with type
 * promotion as PyTorch does it.
 *
 * The caller (the PyTorch glue, through TensorIterator) gives views that already have the
 * output's shape (broadcast inputs have stride 0) and the dtype the op computes in
 * (`compute`): inputs are converted to it element by element, the result converted to the
 * output's dtype. Float compute dtypes (f16, bf16, f32, f64) calculate in f32 or f64; integer
 * ones in int64 with two's-complement wrap-around; bool as bool. Complex is not supported
 * here (the glue sends complex work elsewhere).
 *
 * A binary input may be a host scalar (a Python number): its value travels with the launch. */
#ifndef TN_ELEMENTWISE_H
#define TN_ELEMENTWISE_H

#include <stdint.h>

#include "tn/status.h"
#include "tn/stream.h"
#include "tn/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tn_unary_op {
    TN_UNARY_NEG,
    TN_UNARY_ABS,
    TN_UNARY_EXP,
    TN_UNARY_EXPM1,
    TN_UNARY_LOG,
    TN_UNARY_LOG1P,
    TN_UNARY_SQRT,
    TN_UNARY_RSQRT,
    TN_UNARY_RECIPROCAL,
    TN_UNARY_SIN,
    TN_UNARY_COS,
    TN_UNARY_TANH,
    TN_UNARY_SIGMOID,
    TN_UNARY_SILU,
    TN_UNARY_GELU,      /* x * Phi(x), with erf */
    TN_UNARY_GELU_TANH, /* the tanh approximation */
    TN_UNARY_RELU,
    TN_UNARY_ERF,
    TN_UNARY_FLOOR,
    TN_UNARY_CEIL,
    TN_UNARY_ROUND, /* half to even */
    TN_UNARY_TRUNC,
    TN_UNARY_SIGN,
    TN_UNARY_LOGICAL_NOT,
    TN_UNARY_BITWISE_NOT,
    TN_UNARY_ERFINV, /* inverse of erf on (-1, 1); +-inf at +-1, NaN outside */
    TN_UNARY_LOG2,
    TN_UNARY_LOG10,
    TN_UNARY_EXP2,
    TN_UNARY_ATAN,
    TN_UNARY_ASIN,
    TN_UNARY_ACOS,
    TN_UNARY_TAN,
    TN_UNARY_SINH,
    TN_UNARY_COSH,
    TN_UNARY_ASINH,
    TN_UNARY_ACOSH,
    TN_UNARY_ATANH,
    TN_UNARY_FRAC,        /* x - trunc(x) */
    TN_UNARY_HARDSIGMOID, /* min(max(x + 3, 0), 6) / 6 */
    TN_UNARY_HARDSWISH,   /* x min(max(x + 3, 0), 6) / 6 */
    TN_UNARY_LOG_SIGMOID, /* min(x, 0) - log1p(e^-|x|) */
    TN_UNARY_COUNT_
} tn_unary_op;

typedef enum tn_binary_op {
    TN_BINARY_ADD,       /* a + alpha * b */
    TN_BINARY_SUB,       /* a - alpha * b */
    TN_BINARY_MUL,
    TN_BINARY_DIV,       /* true division */
    TN_BINARY_DIV_TRUNC, /* rounded toward zero */
    TN_BINARY_DIV_FLOOR, /* rounded down */
    TN_BINARY_MAXIMUM,   /* NaN propagates */
    TN_BINARY_MINIMUM,
    TN_BINARY_POW,
    TN_BINARY_EQ,
    TN_BINARY_NE,
    TN_BINARY_LT,
    TN_BINARY_LE,
    TN_BINARY_GT,
    TN_BINARY_GE,
    TN_BINARY_LOGICAL_AND,
    TN_BINARY_LOGICAL_OR,
    TN_BINARY_LOGICAL_XOR,
    TN_BINARY_BITWISE_AND,
    TN_BINARY_BITWISE_OR,
    TN_BINARY_BITWISE_XOR,
    /* backward ops: a is the incoming gradient, b the forward input or output */
    TN_BINARY_THRESHOLD_BACKWARD, /* b <= alpha ? 0 : a */
    TN_BINARY_SIGMOID_BACKWARD,   /* b is sigmoid's output: a * b * (1 - b) */
    TN_BINARY_TANH_BACKWARD,      /* b is tanh's output: a * (1 - b^2) */
    TN_BINARY_SILU_BACKWARD,      /* b is silu's input */
    TN_BINARY_GELU_BACKWARD,      /* b is gelu's input (erf form) */
    TN_BINARY_GELU_TANH_BACKWARD, /* b is gelu's input (tanh form) */
    TN_BINARY_XLOGY,              /* a * log(b); 0 where a == 0, NaN where b is NaN */
    TN_BINARY_REMAINDER,          /* a - b * floor(a / b): the sign of b (Python's %) */
    TN_BINARY_FMOD,               /* a - b * trunc(a / b): the sign of a (C's fmod and %) */
    TN_BINARY_CLAMP,              /* minimum(maximum(a, b), alpha): clamp to [b, alpha], NaN propagates */
    TN_BINARY_ATAN2,              /* atan2(a, b): the angle of (b, a) */
    TN_BINARY_COPYSIGN,           /* |a| with b's sign */
    TN_BINARY_HYPOT,              /* sqrt(a^2 + b^2) without overflow */
    TN_BINARY_LEAKY_RELU,         /* a > 0 ? a : alpha a (b is a again) */
    TN_BINARY_LEAKY_RELU_BACKWARD, /* b > 0 ? a : alpha a */
    TN_BINARY_HARDSIGMOID_BACKWARD, /* -3 < b < 3 ? a / 6 : 0 */
    TN_BINARY_HARDSWISH_BACKWARD,   /* b < -3 ? 0 : b <= 3 ? a (b / 3 + 1/2) : a */
    TN_BINARY_LOG_SIGMOID_BACKWARD, /* a sigmoid(-b) */
    TN_BINARY_SOFTPLUS,             /* b is beta, alpha the threshold: a b > alpha ? a : log1p(e^(a b)) / b */
    TN_BINARY_SOFTPLUS_BACKWARD,    /* b is beta x, alpha the threshold: b > alpha ? a : a sigmoid(b) */
    TN_BINARY_ROUND_DECIMALS,       /* round(a, decimals), half to even, in float (b is a again): alpha =
                                       10^d for d >= 0, rint(a alpha) / alpha; -10^-d for d < 0,
                                       rint(a / -alpha) * -alpha */
    TN_BINARY_COUNT_
} tn_binary_op;

typedef enum tn_ternary_op {
    TN_TERNARY_ADDCMUL, /* a + scalar * b * c */
    TN_TERNARY_ADDCDIV, /* a + scalar * (b / c) */
    TN_TERNARY_LERP,    /* a + c * (b - a), c the weight view or (c NULL) scalar */
    TN_TERNARY_COUNT_
} tn_ternary_op;

typedef struct tn_input {
    tn_tensor t;       /* the view; when `scalar` is set only t.dtype is used */
    int32_t scalar;    /* non-zero: the input is `value` broadcast to the output */
    tn_scalar value;
} tn_input;

/* `name` (a string that outlives the work, e.g. a literal "aten::add.out") names the op in
 * error messages. Integer division by zero fails with TN_STATUS_INVALID_ARGUMENT
 * ("ZeroDivisionError"), reported, like any kernel error, at the next synchronisation. */
tn_status tn_unary_async(tn_stream_t stream, const char *name, tn_unary_op op,
                         const tn_tensor *out, const tn_tensor *in, tn_dtype compute);
tn_status tn_binary_async(tn_stream_t stream, const char *name, tn_binary_op op,
                          const tn_tensor *out, const tn_input *a, const tn_input *b,
                          const tn_scalar *alpha, tn_dtype compute);

/* Views of out's shape (stride 0 where broadcast), each of its own dtype; math in `compute`
 * (integers only for addcmul, with an integral scalar). */
tn_status tn_ternary_async(tn_stream_t stream, const char *name, tn_ternary_op op,
                           const tn_tensor *out, const tn_tensor *a, const tn_tensor *b,
                           const tn_tensor *c, double scalar, tn_dtype compute);

/* The kernels behind those launches, for one thread slice (see tn/kernels.h). */
tn_status tn_kernel_unary(tn_unary_op op, const tn_tensor *out, const tn_tensor *in,
                          tn_dtype compute, int32_t ith, int32_t nth);
tn_status tn_kernel_binary(tn_binary_op op, const tn_tensor *out, const tn_tensor *a,
                           const tn_tensor *b, const tn_scalar *alpha, tn_dtype compute,
                           int32_t ith, int32_t nth);
void tn_kernel_ternary(tn_ternary_op op, const tn_tensor *out, const tn_tensor *a, const tn_tensor *b,
                       const tn_tensor *c, double scalar, tn_dtype compute, int32_t ith, int32_t nth);

#ifdef __cplusplus
}
#endif
#endif
