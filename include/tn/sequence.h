/* Sequences and masks: arange, cumulative sums along the last dimension, triu / tril.
 *
 * arange: out[i] = start + i * step for a 1-D view, computed in double (integers exactly).
 * linspace: n = size points from start to end of a 1-D view, computed in double as PyTorch
 * does, from both ends: start + i * step for the first half, end - (n - 1 - i) * step for the
 * rest (step = (end - start) / (n - 1)), so that both ends are exact.
 * cumsum: along the last dimension of same-shaped views (callers permute the dimension
 * there), accumulated in double for floats and int64 for integers.
 * triangle: out = in with the elements on the wrong side of diagonal `k` of the last two
 * dimensions set to zero (upper: keep j - i >= k; lower: keep j - i <= k). */
#ifndef TN_SEQUENCE_H
#define TN_SEQUENCE_H

#include <stdint.h>

#include "tn/status.h"
#include "tn/stream.h"
#include "tn/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

tn_status tn_arange_async(tn_stream_t stream, const tn_tensor *out, const tn_scalar *start,
                          const tn_scalar *step);
tn_status tn_linspace_async(tn_stream_t stream, const tn_tensor *out, double start, double end);
tn_status tn_cumsum_async(tn_stream_t stream, const tn_tensor *out, const tn_tensor *in);
tn_status tn_triangle_async(tn_stream_t stream, const tn_tensor *out, const tn_tensor *in,
                            int64_t k, int32_t upper);

void tn_kernel_arange(const tn_tensor *out, const tn_scalar *start, const tn_scalar *step,
                      int32_t ith, int32_t nth);
void tn_kernel_linspace(const tn_tensor *out, double start, double end, int32_t ith, int32_t nth);
void tn_kernel_cumsum(const tn_tensor *out, const tn_tensor *in, int32_t ith, int32_t nth);
void tn_kernel_triangle(const tn_tensor *out, const tn_tensor *in, int64_t k, int32_t upper,
                        int32_t ith, int32_t nth);

#ifdef __cplusplus
}
#endif
#endif
