/* Element types understood by the runtime and the kernels. */
#ifndef TN_DTYPE_H
#define TN_DTYPE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tn_dtype {
    TN_DTYPE_BOOL,
    TN_DTYPE_U8,
    TN_DTYPE_I8,
    TN_DTYPE_I16,
    TN_DTYPE_I32,
    TN_DTYPE_I64,
    TN_DTYPE_F16,
    TN_DTYPE_BF16,
    TN_DTYPE_F32,
    TN_DTYPE_F64,
    TN_DTYPE_C64,
    TN_DTYPE_C128,
    TN_DTYPE_F8E4M3FN, /* storage only: copies convert it, other ops fall back */
    TN_DTYPE_F8E5M2,
    TN_DTYPE_COUNT_
} tn_dtype;

/* Bytes per element; 0 for an unknown dtype. */
int32_t tn_dtype_size(tn_dtype dtype);
const char *tn_dtype_name(tn_dtype dtype);
/* 1 for the real floating types (f16, bf16, f32, f64). */
int tn_dtype_is_float(tn_dtype dtype);

#ifdef __cplusplus
}
#endif
#endif
