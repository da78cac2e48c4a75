/* Integer matrix products (see tn_gemm_int_async in tn/gemm.h): one dot product per output, in
 * unsigned 64-bit arithmetic (wraps without undefined behaviour), truncated on store. */
#include "strided.h"
#include "tn/gemm.h"

static uint64_t load(const tn_matrix *x, int64_t at) {
    switch (x->dtype) {
    case TN_DTYPE_U8: return ((const uint8_t *)x->data)[at];
    case TN_DTYPE_I8: return (uint64_t)(int64_t)((const int8_t *)x->data)[at];
    case TN_DTYPE_I16: return (uint64_t)(int64_t)((const int16_t *)x->data)[at];
    case TN_DTYPE_I32: return (uint64_t)(int64_t)((const int32_t *)x->data)[at];
    default: return ((const uint64_t *)x->data)[at];
    }
}

static void store(const tn_matrix *x, int64_t at, uint64_t v) {
    switch (x->dtype) {
    case TN_DTYPE_U8: ((uint8_t *)x->data)[at] = (uint8_t)v; break;
    case TN_DTYPE_I8: ((uint8_t *)x->data)[at] = (uint8_t)v; break;
    case TN_DTYPE_I16: ((uint16_t *)x->data)[at] = (uint16_t)v; break;
    case TN_DTYPE_I32: ((uint32_t *)x->data)[at] = (uint32_t)v; break;
    default: ((uint64_t *)x->data)[at] = v;
    }
}

void tn_kernel_gemm_int(const tn_gemm *g, int64_t alpha, int64_t beta, int32_t ith, int32_t nth) {
    int64_t first, last;
    tn_slice(g->batch * g->m, ith, nth, &first, &last);
    for (int64_t row = first; row < last; row++) {
        int64_t b = row / g->m, i = row % g->m;
        int64_t a0 = b * g->a.batch_stride + i * g->a.row_stride, b0 = b * g->b.batch_stride;
        int64_t c0 = b * g->c.batch_stride + i * g->c.row_stride;
        for (int64_t j = 0; j < g->n; j++) {
            uint64_t sum = 0;
            for (int64_t p = 0; p < g->k; p++)
                sum += load(&g->a, a0 + p * g->a.col_stride) *
                       load(&g->b, b0 + p * g->b.row_stride + j * g->b.col_stride);
            uint64_t v = (uint64_t)alpha * sum;
            if (beta != 0) v += (uint64_t)beta * load(&g->c, c0 + j * g->c.col_stride);
            store(&g->c, c0 + j * g->c.col_stride, v);
        }
    }
}
