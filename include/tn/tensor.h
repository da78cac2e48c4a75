/* A strided view of device (or host) memory, as kernels and copies receive it.
 *
 * Sizes and strides are in elements; strides may be zero (broadcast) or negative. The view
 * does not own its memory. TN_MAX_DIMS bounds the rank; callers with more dimensions must
 * coalesce or make the tensor contiguous first. */
#ifndef TN_TENSOR_H
#define TN_TENSOR_H

#include <stdint.h>

#include "tn/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TN_MAX_DIMS 16

typedef struct tn_tensor {
    void *data; /* address of element [0, 0, ...] */
    tn_dtype dtype;
    int32_t ndim;
    int64_t sizes[TN_MAX_DIMS];
    int64_t strides[TN_MAX_DIMS];
} tn_tensor;

/* A scalar as PyTorch passes it: exactly one of the members is meaningful, by kind. */
typedef enum tn_scalar_kind {
    TN_SCALAR_KIND_BOOL,
    TN_SCALAR_KIND_INT,
    TN_SCALAR_KIND_FLOAT,
    TN_SCALAR_KIND_COMPLEX
} tn_scalar_kind;

typedef struct tn_scalar {
    tn_scalar_kind kind;
    int64_t i;
    double f;
    double imag;
} tn_scalar;

int64_t tn_tensor_numel(const tn_tensor *t);

#ifdef __cplusplus
}
#endif
#endif
