/* Typed rows of the integer, boolean and comparison ops (elementwise.c's fast paths for what
 * is not a float32 row): the predicates and integer division the generic element path shares,
 * and the row loops, which rows.c builds once per ISA (int64 compares, minimum and maximum
 * have no SSE2 instruction; with AVX2 or AVX-512 they vectorize) and installs in the kernel
 * table. Each row gives the generic path's results. */
#ifndef TN_KERNELS_TYPED_ROWS_H
#define TN_KERNELS_TYPED_ROWS_H

#include <stdint.h>

#include "table.h"
#include "tn/elementwise.h"
#include "tn/kernels.h"

enum { TN_TYPED_CHUNK = 256 }; /* half operands of a comparison are widened this many at a time */

static inline int is_comparison(tn_binary_op op) { return op >= TN_BINARY_EQ && op <= TN_BINARY_GE; }
static inline int is_logical(tn_binary_op op) {
    return op >= TN_BINARY_LOGICAL_AND && op <= TN_BINARY_LOGICAL_XOR;
}

/* Integer division of a by b != 0 as PyTorch's CPU kernels do it: the quotient rounded toward
 * zero or down, the remainder with the divisor's sign or (fmod) the dividend's. A divisor of
 * -1 wraps (INT64_MIN / -1 is INT64_MIN) and leaves no remainder, without C's overflow. */
static inline int64_t int_division(tn_binary_op op, int64_t a, int64_t b) {
    if (b == -1) return op == TN_BINARY_DIV_TRUNC || op == TN_BINARY_DIV_FLOOR ? (int64_t)(0 - (uint64_t)a) : 0;
    int64_t q = a / b, r = a - q * b; /* one division (|q * b| <= |a|: no overflow) */
    /* the signs of r and b differ: without a branch, which random signs mispredict (it took
     * remainder to twice floor division's time) */
    int64_t differ = (r != 0) & ((r ^ b) < 0);
    switch (op) {
    case TN_BINARY_DIV_TRUNC: return q;
    case TN_BINARY_DIV_FLOOR: return q - differ;
    case TN_BINARY_REMAINDER: return r + (b & -differ);
    default: return r;
    }
}

/* ---- unary ---- */

#define INT_UNARY_ROW(T, U)                                                                          \
    do {                                                                                             \
        const T *v = (const T *)x;                                                                   \
        T *r = (T *)o;                                                                               \
        switch (op) {                                                                                \
        case TN_UNARY_NEG: for (int64_t i = 0; i < n; i++) r[i * os] = (T)(0 - (U)v[i * xs]); break; \
        case TN_UNARY_ABS: /* without a branch: signs of token ids or offsets are not predictable */ \
            for (int64_t i = 0; i < n; i++) {                                                        \
                U sign = (U)0 - (U)(v[i * xs] < 0);                                                  \
                r[i * os] = (T)(((U)v[i * xs] ^ sign) - sign);                                       \
            }                                                                                        \
            break;                                                                                   \
        default: for (int64_t i = 0; i < n; i++) r[i * os] = (T)~v[i * xs]; break;                   \
        }                                                                                            \
    } while (0)

/* A row of the common integer and boolean unary ops as typed loops (unary_int's results):
 * neg, abs and bitwise not of int64 and int32, logical not of bools into bools. */
static inline int typed_unary_row(tn_unary_op op, tn_dtype compute, tn_dtype in_dtype, tn_dtype out_dtype, int64_t n,
                           char *o, int64_t os, const char *x, int64_t xs) {
    if ((op == TN_UNARY_LOGICAL_NOT || (op == TN_UNARY_BITWISE_NOT && compute == TN_DTYPE_BOOL)) &&
        in_dtype == TN_DTYPE_BOOL && out_dtype == TN_DTYPE_BOOL) {
        const uint8_t *v = (const uint8_t *)x;
        uint8_t *r = (uint8_t *)o;
        for (int64_t i = 0; i < n; i++) r[i * os] = v[i * xs] == 0;
        return 1;
    }
    if (in_dtype != compute || out_dtype != compute ||
        (op != TN_UNARY_NEG && op != TN_UNARY_ABS && op != TN_UNARY_BITWISE_NOT))
        return 0;
    if (compute == TN_DTYPE_I64) INT_UNARY_ROW(int64_t, uint64_t);
    else if (compute == TN_DTYPE_I32) INT_UNARY_ROW(int32_t, uint32_t);
    else return 0;
    return 1;
}

/* ---- binary ---- */

/* The comparison loops with r[R] = x[X] op y[Y] for i < n. */
#define COMPARE_SWITCH(R, X, Y)                                                                 \
    switch (op) {                                                                               \
    case TN_BINARY_EQ: for (int64_t i = 0; i < n; i++) r[R] = x[X] == y[Y]; break;              \
    case TN_BINARY_NE: for (int64_t i = 0; i < n; i++) r[R] = x[X] != y[Y]; break;              \
    case TN_BINARY_LT: for (int64_t i = 0; i < n; i++) r[R] = x[X] < y[Y]; break;               \
    case TN_BINARY_LE: for (int64_t i = 0; i < n; i++) r[R] = x[X] <= y[Y]; break;              \
    case TN_BINARY_GT: for (int64_t i = 0; i < n; i++) r[R] = x[X] > y[Y]; break;               \
    default: for (int64_t i = 0; i < n; i++) r[R] = x[X] >= y[Y]; break;                        \
    }

/* One row of a comparison of two T views into bool. NaN compares as C compares it: only
 * NE holds, as compare() gives. Contiguous rows against a row or a scalar (a mask from
 * x != 0) have loops of constant strides, which vectorize (the strided loop ran at a fifth
 * of the memory's speed). */
#define COMPARE_ROW(T)                                                                          \
    do {                                                                                        \
        const T *x = (const T *)pa, *y = (const T *)pb;                                         \
        uint8_t *r = (uint8_t *)o;                                                              \
        if (os == 1 && as == 1 && bs == 0) {                                                    \
            const T y0 = y[0];                                                                  \
            y = &y0;                                                                            \
            COMPARE_SWITCH(i, i, 0)                                                             \
        } else if (os == 1 && as == 1 && bs == 1) {                                             \
            COMPARE_SWITCH(i, i, i)                                                             \
        } else {                                                                                \
            COMPARE_SWITCH(i * os, i * as, i * bs)                                              \
        }                                                                                       \
    } while (0)

/* The integer arithmetic loops with r[R] = x[X] op y[Y] for i < n, wrapping through
 * unsigned U as binary_int does (clamp: y the lower bound, alpha the upper). */
#define INT_SWITCH(T, U, R, X, Y)                                                               \
    switch (op) {                                                                               \
    case TN_BINARY_ADD: for (int64_t i = 0; i < n; i++) r[R] = (T)((U)x[X] + al * (U)y[Y]); break; \
    case TN_BINARY_SUB: for (int64_t i = 0; i < n; i++) r[R] = (T)((U)x[X] - al * (U)y[Y]); break; \
    case TN_BINARY_MUL: for (int64_t i = 0; i < n; i++) r[R] = (T)((U)x[X] * (U)y[Y]); break;   \
    case TN_BINARY_MAXIMUM: for (int64_t i = 0; i < n; i++) r[R] = x[X] > y[Y] ? x[X] : y[Y]; break; \
    case TN_BINARY_MINIMUM: for (int64_t i = 0; i < n; i++) r[R] = x[X] < y[Y] ? x[X] : y[Y]; break; \
    case TN_BINARY_CLAMP:                                                                       \
        for (int64_t i = 0; i < n; i++) {                                                       \
            T v = x[X] < y[Y] ? y[Y] : x[X];                                                    \
            r[R] = v > hi ? hi : v;                                                             \
        }                                                                                       \
        break;                                                                                  \
    case TN_BINARY_BITWISE_AND: for (int64_t i = 0; i < n; i++) r[R] = x[X] & y[Y]; break;      \
    case TN_BINARY_BITWISE_OR: for (int64_t i = 0; i < n; i++) r[R] = x[X] | y[Y]; break;       \
    default: for (int64_t i = 0; i < n; i++) r[R] = x[X] ^ y[Y]; break;                         \
    }

/* One row of integer arithmetic on T views. Contiguous rows against a row or a scalar (i * 3,
 * clamp(lo, hi), positions + offset) have loops of constant strides, which vectorize: the
 * strided loop ran int64 clamp and max at a third of the CPU's speed. */
#define INT_ROW(T, U)                                                                           \
    do {                                                                                        \
        const T *x = (const T *)pa, *y = (const T *)pb;                                         \
        T *r = (T *)o;                                                                          \
        const U al = (U)alpha;                                                                  \
        const T hi = (T)alpha;                                                                  \
        if (os == 1 && as == 1 && bs == 0) {                                                    \
            const T y0 = y[0];                                                                  \
            y = &y0;                                                                            \
            INT_SWITCH(T, U, i, i, 0)                                                           \
        } else if (os == 1 && as == 1 && bs == 1) {                                             \
            INT_SWITCH(T, U, i, i, i)                                                           \
        } else {                                                                                \
            INT_SWITCH(T, U, i * os, i * as, i * bs)                                            \
        }                                                                                       \
    } while (0)

/* One row of integer division on T views (int_division's results, in T); a zero divisor
 * sets *zero_div and gives 0. */
#define INT_DIVISION_ROW(T)                                                                     \
    do {                                                                                        \
        const T *x = (const T *)pa, *y = (const T *)pb;                                         \
        T *r = (T *)o;                                                                          \
        for (int64_t i = 0; i < n; i++) {                                                       \
            T d = y[i * bs];                                                                    \
            if (d == 0) {                                                                       \
                *zero_div = 1;                                                                  \
                r[i * os] = 0;                                                                  \
            } else {                                                                            \
                r[i * os] = (T)int_division(op, x[i * as], d);                                  \
            }                                                                                   \
        }                                                                                       \
    } while (0)

static inline int is_division(tn_binary_op op) {
    return op == TN_BINARY_DIV_TRUNC || op == TN_BINARY_DIV_FLOOR || op == TN_BINARY_REMAINDER ||
           op == TN_BINARY_FMOD;
}

static inline void compare_f32_row(tn_binary_op op, int64_t n, uint8_t *o, int64_t os, const float *pa, const float *pb) {
    const int64_t as = 1, bs = 1;
    COMPARE_ROW(float);
}

static inline int int_row_op(tn_binary_op op) {
    return op == TN_BINARY_ADD || op == TN_BINARY_SUB || op == TN_BINARY_MUL || op == TN_BINARY_MAXIMUM ||
           op == TN_BINARY_MINIMUM || op == TN_BINARY_CLAMP || op == TN_BINARY_BITWISE_AND || op == TN_BINARY_BITWISE_OR ||
           op == TN_BINARY_BITWISE_XOR;
}

/* A row of the common non-float32 binary ops as typed loops instead of the generic
 * element-by-element path: comparisons of float32, int64 and int32 into bool, int64 and
 * int32 arithmetic, division (quotients and remainders; a zero divisor sets *zero_div) and
 * bitwise ops, and logical and bitwise ops of bools (masks, token ids, positions). Both
 * inputs are in `compute`. Returns 0 for any other case. */
static inline int typed_binary_row(tn_binary_op op, tn_dtype compute, tn_dtype out_dtype, int64_t n, char *o, int64_t os,
                            const char *pa, int64_t as, const char *pb, int64_t bs, int64_t alpha, int *zero_div) {
    if (is_comparison(op) && out_dtype == TN_DTYPE_BOOL && (compute == TN_DTYPE_BF16 || compute == TN_DTYPE_F16)) {
        /* widened a chunk at a time, compared as float32 */
        const tn_kernel_table *k = tn_kernels();
        float xa[TN_TYPED_CHUNK], xb[TN_TYPED_CHUNK];
        for (int64_t c = 0; c < n; c += TN_TYPED_CHUNK) {
            int64_t m = n - c < TN_TYPED_CHUNK ? n - c : TN_TYPED_CHUNK;
            k->widen_half(compute, m, xa, 1, (const uint16_t *)(const void *)pa + c * as, as);
            k->widen_half(compute, m, xb, 1, (const uint16_t *)(const void *)pb + c * bs, bs);
            compare_f32_row(op, m, (uint8_t *)o + c * os, os, xa, xb);
        }
        return 1;
    }
    if (is_comparison(op) && out_dtype == TN_DTYPE_BOOL) {
        switch (compute) {
        case TN_DTYPE_F32: COMPARE_ROW(float); return 1;
        case TN_DTYPE_I64: COMPARE_ROW(int64_t); return 1;
        case TN_DTYPE_I32: COMPARE_ROW(int32_t); return 1;
        default: return 0;
        }
    }
    if (out_dtype != compute) return 0;
    if (int_row_op(op) && compute == TN_DTYPE_I64) {
        INT_ROW(int64_t, uint64_t);
        return 1;
    }
    if (int_row_op(op) && compute == TN_DTYPE_I32) {
        INT_ROW(int32_t, uint32_t);
        return 1;
    }
    if (is_division(op) && compute == TN_DTYPE_I64) {
        INT_DIVISION_ROW(int64_t);
        return 1;
    }
    if (is_division(op) && compute == TN_DTYPE_I32) {
        INT_DIVISION_ROW(int32_t);
        return 1;
    }
    if (compute == TN_DTYPE_BOOL && (is_logical(op) || op == TN_BINARY_BITWISE_AND || op == TN_BINARY_BITWISE_OR ||
                                     op == TN_BINARY_BITWISE_XOR)) {
        const uint8_t *x = (const uint8_t *)pa, *y = (const uint8_t *)pb;
        uint8_t *r = (uint8_t *)o;
        int and_ = op == TN_BINARY_LOGICAL_AND || op == TN_BINARY_BITWISE_AND;
        int or_ = op == TN_BINARY_LOGICAL_OR || op == TN_BINARY_BITWISE_OR;
        for (int64_t i = 0; i < n; i++) {
            uint8_t p = x[i * as] != 0, q = y[i * bs] != 0;
            r[i * os] = and_ ? (p & q) : or_ ? (p | q) : (p ^ q);
        }
        return 1;
    }
    return 0;
}

#endif
