/* Triangular solves, batched: out = A^-1 B for triangular A (the linear-attention chunk
 * algorithms use them). */
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
#ifdef __cplusplus
}
#endif
#endif
