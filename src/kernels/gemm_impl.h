/* Pieces shared by the blocked GEMM (gemm.c) and its small-m paths (gemm_vector.c). */
#ifndef TN_KERNELS_GEMM_IMPL_H
#define TN_KERNELS_GEMM_IMPL_H

#include <stdint.h>

#include "elem.h"
#include "half.h"
#include "table.h"
#include "tn/gemm.h"

/* Element `index` of a float32, bfloat16, float16 (or other) operand, as a float. */
static inline float load_f32(const char *base, int64_t index, tn_dtype t) {
    switch (t) {
    case TN_DTYPE_F32: return ((const float *)base)[index];
    case TN_DTYPE_BF16: return tn_bf16_to_f32_inline(((const uint16_t *)base)[index]);
    case TN_DTYPE_F16: return tn_f16_to_f32_inline(((const uint16_t *)base)[index]);
    default: return (float)tn_load(base + index * tn_dtype_size(t), t).re;
    }
}

/* m <= 4 with A's rows and B's columns contiguous (x @ W.T): one dot product per output. */
int tn_gemm_dot_path(const tn_gemm *g);
/* m <= 4 with B's rows contiguous (x @ W): rows of C as sums of scaled rows of B. */
int tn_gemm_axpy_path(const tn_gemm *g);
/* Columns j0 .. j1 of matrix `batch` of C by those paths. */
void tn_gemm_dots(const tn_gemm *g, const tn_kernel_table *k, float *scratch, int64_t batch, int64_t j0, int64_t j1);
void tn_gemm_axpys(const tn_gemm *g, const tn_kernel_table *k, int64_t batch, int64_t j0, int64_t j1);

#endif
