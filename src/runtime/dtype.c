/* Element sizes and names. */
#include "tn/dtype.h"
#include "tn/tensor.h"

int32_t tn_dtype_size(tn_dtype dtype) {
    switch (dtype) {
    case TN_DTYPE_BOOL:
    case TN_DTYPE_U8:
    case TN_DTYPE_I8:
    case TN_DTYPE_F8E4M3FN:
    case TN_DTYPE_F8E5M2:
        return 1;
    case TN_DTYPE_I16:
    case TN_DTYPE_F16:
    case TN_DTYPE_BF16:
        return 2;
    case TN_DTYPE_I32:
    case TN_DTYPE_F32:
        return 4;
    case TN_DTYPE_I64:
    case TN_DTYPE_F64:
    case TN_DTYPE_C64:
        return 8;
    case TN_DTYPE_C128:
        return 16;
    default:
        return 0;
    }
}

const char *tn_dtype_name(tn_dtype dtype) {
    static const char *const names[TN_DTYPE_COUNT_] = {
        "bool", "uint8", "int8", "int16", "int32", "int64",
        "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
        "float8_e4m3fn", "float8_e5m2"};
    return (dtype >= 0 && dtype < TN_DTYPE_COUNT_) ? names[dtype] : "unknown";
}

int64_t tn_tensor_numel(const tn_tensor *t) {
    int64_t n = 1;
    for (int32_t d = 0; d < t->ndim; d++) n *= t->sizes[d];
    return n;
}

int tn_dtype_is_float(tn_dtype dtype) {
    return dtype == TN_DTYPE_F16 || dtype == TN_DTYPE_BF16 || dtype == TN_DTYPE_F32 ||
           dtype == TN_DTYPE_F64;
}
