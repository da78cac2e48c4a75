/* 2-D max pooling with indices and its backward, over contiguous planes (N * C planes of H x W).
 *
 * Forward: out[p, oh, ow] is the maximum of in[p] over the window of kernel (kh, kw) at
 * (oh * sh - ph, ow * sw - pw) with dilation (dh, dw), the window clipped to the plane;
 * indices[p, oh, ow] its flat position ih * W + iw in the plane. NaN wins (the last NaN in
 * the window, in row-major order), and of equal values the first: the CPU's rule. float32,
 * float64, bfloat16 and float16.
 * Backward: grad_in = 0, then grad_in[p, indices[p, o]] += grad_out[p, o] in output order;
 * returns nonzero, writing nothing, when a slice's index lies outside its plane. */
#ifndef TN_POOL_H
#define TN_POOL_H

#include <stdint.h>

#include "tn/status.h"
#include "tn/stream.h"
#include "tn/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tn_pool2d {
    int64_t planes, in_h, in_w, out_h, out_w;
    int64_t kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;
} tn_pool2d;

/* in, out, grads: contiguous data of one floating dtype; indices int64. */
tn_status tn_max_pool2d_async(tn_stream_t stream, const tn_pool2d *shape, tn_dtype dtype, void *out,
                              int64_t *indices, const void *in);
tn_status tn_max_pool2d_backward_async(tn_stream_t stream, const tn_pool2d *shape, tn_dtype dtype,
                                       void *grad_in, const void *grad_out, const int64_t *indices);

void tn_kernel_max_pool2d(const tn_pool2d *shape, tn_dtype dtype, void *out, int64_t *indices,
                          const void *in, int32_t ith, int32_t nth);
int tn_kernel_max_pool2d_backward(const tn_pool2d *shape, tn_dtype dtype, void *grad_in,
                                  const void *grad_out, const int64_t *indices, int32_t ith,
                                  int32_t nth);

#ifdef __cplusplus
}
#endif
#endif
