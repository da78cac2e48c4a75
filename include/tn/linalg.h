/* Triangular solves, batched: out = A^-1 B for triangular A (the linear-attention chunk
 * algorithms use them); singular value decompositions. */
#ifndef TN_LINALG_H
#define TN_LINALG_H
#include <stdint.h>
#include "tn/status.h"
#include "tn/stream.h"
#include "tn/tensor.h"
#ifdef __cplusplus
extern "C" {
#endif
/* a: (batch, n, n), b and out: (batch, n, k) views of one float dtype, any strides (stride 0
 * where broadcast); `upper` picks the triangle of a that is read, `unit` takes its diagonal
 * as ones. out may be b itself. Substitution in double; a zero pivot gives inf/NaN, as
 * PyTorch's CPU kernel does. */
tn_status tn_solve_triangular_async(tn_stream_t stream, const char *name, const tn_tensor *out,
                                    const tn_tensor *a, const tn_tensor *b, int32_t upper, int32_t unit);
void tn_kernel_solve_triangular(const tn_tensor *out, const tn_tensor *a, const tn_tensor *b, int32_t upper,
                                int32_t unit, int32_t ith, int32_t nth);

/* A = U diag(S) Vh for a batch of matrices a (batch, m, n), float32 or float64, any strides;
 * k = min(m, n). s: (batch, 1, k), descending singular values. u: (batch, m, k or m) and vh:
 * (batch, k or n, n), any strides (full matrices: u has m columns and vh n rows), or both
 * NULL for the singular values alone. One-sided Jacobi in double, after a QR of the tall
 * orientation. A matrix holding NaN
 * gets NaN outputs and sets bad[its batch index] (host memory of batch bytes, written when
 * the stream runs the task: read it after synchronising); one holding an infinity gets NaN
 * outputs, as LAPACK gives. */
tn_status tn_svd_async(tn_stream_t stream, const char *name, const tn_tensor *a, const tn_tensor *u,
                       const tn_tensor *s, const tn_tensor *vh, uint8_t *bad);
/* One thread's matrices; work holds tn_svd_scratch_doubles(m, n, full) doubles (full: u has m
 * columns and vh n rows). Returns non-zero if a matrix held NaN. */
int64_t tn_svd_scratch_doubles(int64_t m, int64_t n, int32_t full);
int tn_kernel_svd(const tn_tensor *a, const tn_tensor *u, const tn_tensor *s, const tn_tensor *vh, double *work,
                  uint8_t *bad, int32_t ith, int32_t nth);
#ifdef __cplusplus
}
#endif
#endif
