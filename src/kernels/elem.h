/* Loading and storing one element of any dtype, shared by the generic kernels. Integers go
 * through int64 so integer-to-integer casts are exact; everything else through double
 * (complex: two doubles). Float-to-integer conversion of NaN or out-of-range values gives
 * INT64_MIN before narrowing, as x86 does, instead of undefined behaviour. */
#ifndef TN_KERNELS_ELEM_H
#define TN_KERNELS_ELEM_H

#include <stdint.h>
#include <string.h>

#include "half.h"
#include "tn/kernels.h"
#include "tn/tensor.h"

typedef struct tn_value {
    double re;
    double im;
    int64_t i;
    int is_int; /* i is exact; re mirrors it */
} tn_value;

static inline int tn_dtype_is_int(tn_dtype t) { return t <= TN_DTYPE_I64; }

static inline tn_value tn_load(const void *p, tn_dtype t) {
    tn_value v = {0, 0, 0, 0};
    switch (t) {
    case TN_DTYPE_BOOL: v.i = *(const uint8_t *)p != 0; v.is_int = 1; break;
    case TN_DTYPE_U8: v.i = *(const uint8_t *)p; v.is_int = 1; break;
    case TN_DTYPE_I8: v.i = *(const int8_t *)p; v.is_int = 1; break;
    case TN_DTYPE_I16: v.i = *(const int16_t *)p; v.is_int = 1; break;
    case TN_DTYPE_I32: v.i = *(const int32_t *)p; v.is_int = 1; break;
    case TN_DTYPE_I64: v.i = *(const int64_t *)p; v.is_int = 1; break;
    case TN_DTYPE_F16: v.re = tn_f16_to_f32_inline(*(const uint16_t *)p); break;
    case TN_DTYPE_BF16: v.re = tn_bf16_to_f32_inline(*(const uint16_t *)p); break;
    case TN_DTYPE_F32: v.re = *(const float *)p; break;
    case TN_DTYPE_F64: v.re = *(const double *)p; break;
    case TN_DTYPE_C64: v.re = ((const float *)p)[0]; v.im = ((const float *)p)[1]; break;
    case TN_DTYPE_C128: v.re = ((const double *)p)[0]; v.im = ((const double *)p)[1]; break;
    case TN_DTYPE_F8E4M3FN: v.re = tn_f8e4m3fn_to_f32_inline(*(const uint8_t *)p); break;
    case TN_DTYPE_F8E5M2: v.re = tn_f8e5m2_to_f32_inline(*(const uint8_t *)p); break;
    default: break;
    }
    if (v.is_int) v.re = (double)v.i;
    return v;
}

static inline int tn_is_nonzero(const void *p, tn_dtype t) {
    tn_value v = tn_load(p, t);
    return v.is_int ? v.i != 0 : (v.re != 0 || v.im != 0);
}

/* A float to int64 and to int32 as x86 converts them (one instruction each): NaN and
 * out-of-range values give INT64_MIN / INT32_MIN. */
static inline int64_t tn_float_to_i64(double x) {
    return x >= -9223372036854775808.0 && x < 9223372036854775808.0 ? (int64_t)x : INT64_MIN;
}

static inline int32_t tn_float_to_i32(double x) {
    return x >= -2147483648.0 && x < 2147483648.0 ? (int32_t)x : INT32_MIN;
}

static inline int64_t tn_value_to_i64(tn_value v) { return v.is_int ? v.i : tn_float_to_i64(v.re); }

/* Integers wrap to int32; floats convert as tn_float_to_i32. */
static inline int32_t tn_value_to_i32(tn_value v) {
    return v.is_int ? (int32_t)(uint32_t)(uint64_t)v.i : tn_float_to_i32(v.re);
}

static inline void tn_store(void *p, tn_dtype t, tn_value v) {
    switch (t) {
    case TN_DTYPE_BOOL: *(uint8_t *)p = v.is_int ? v.i != 0 : (v.re != 0 || v.im != 0); break;
    /* narrower integers take the int32 conversion's low bits, as the CPU's casts do */
    case TN_DTYPE_U8: *(uint8_t *)p = (uint8_t)(uint32_t)tn_value_to_i32(v); break;
    case TN_DTYPE_I8: *(int8_t *)p = (int8_t)(uint8_t)(uint32_t)tn_value_to_i32(v); break;
    case TN_DTYPE_I16: *(int16_t *)p = (int16_t)(uint16_t)(uint32_t)tn_value_to_i32(v); break;
    case TN_DTYPE_I32: *(int32_t *)p = tn_value_to_i32(v); break;
    case TN_DTYPE_I64: *(int64_t *)p = tn_value_to_i64(v); break;
    case TN_DTYPE_F16: *(uint16_t *)p = tn_f32_to_f16_inline((float)v.re); break;
    case TN_DTYPE_BF16: *(uint16_t *)p = tn_f32_to_bf16_inline((float)v.re); break;
    case TN_DTYPE_F32: *(float *)p = (float)v.re; break;
    case TN_DTYPE_F64: *(double *)p = v.re; break;
    case TN_DTYPE_C64: ((float *)p)[0] = (float)v.re; ((float *)p)[1] = (float)v.im; break;
    case TN_DTYPE_C128: ((double *)p)[0] = v.re; ((double *)p)[1] = v.im; break;
    case TN_DTYPE_F8E4M3FN: *(uint8_t *)p = tn_f32_to_f8e4m3fn_inline((float)v.re); break;
    case TN_DTYPE_F8E5M2: *(uint8_t *)p = tn_f32_to_f8e5m2_inline((float)v.re); break;
    default: break;
    }
}

/* Element (b, i, j) of a 3-D view (a batch of matrices) as a double, and back. */
static inline double tn_get3(const tn_tensor *t, int64_t b, int64_t i, int64_t j) {
    int64_t off = b * t->strides[0] + i * t->strides[1] + j * t->strides[2];
    return tn_load((const char *)t->data + off * tn_dtype_size(t->dtype), t->dtype).re;
}

static inline void tn_set3(const tn_tensor *t, int64_t b, int64_t i, int64_t j, double x) {
    int64_t off = b * t->strides[0] + i * t->strides[1] + j * t->strides[2];
    tn_value v = {x, 0, 0, 0};
    tn_store((char *)t->data + off * tn_dtype_size(t->dtype), t->dtype, v);
}

#endif
