/* 2-D max and average pooling and their backward, over contiguous planes (N * C planes of
 * H x W).
 *
 * Forward: out[p, oh, ow] is the maximum of in[p] over the window of kernel (kh, kw) at
 * (oh * sh - ph, ow * sw - pw) with dilation (dh, dw), the window clipped to the plane;
 * indices[p, oh, ow] its flat position ih * W + iw in the plane. NaN wins (the last NaN in
 * the window, in row-major order), and of equal values the first: the CPU's rule. float32,
 * float64, bfloat16 and float16.
 * Backward: grad_in = 0, then grad_in[p, indices[p, o]] += grad_out[p, o] in output order;
 * returns nonzero, writing nothing, when a slice's index lies outside its plane.
 *
 * Average pooling (dilation 1): out[p, oh, ow] is the sum of in[p] over the window at
 * (oh * sh - ph, ow * sw - pw) clipped to the plane, in row-major order, in float (double
 * for float64), divided by `divisor` when it is nonzero, else by the window's size clipped
 * to the padded plane (count_include_pad) or to the plane; 0 for a window outside the plane.
 * Backward: grad_in = 0, then each grad_out / that divisor is added to its window's elements,
 * in output order (16-bit gradients summed in float, rounded once). The CPU's rules; float32,
 * float64, bfloat16 and float16, and int64 forward (an integer sum, divided with truncation). */
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

tn_status tn_avg_pool2d_async(tn_stream_t stream, const tn_pool2d *shape, int count_include_pad, int64_t divisor,
                              tn_dtype dtype, void *out, const void *in);
tn_status tn_avg_pool2d_backward_async(tn_stream_t stream, const tn_pool2d *shape, int count_include_pad,
                                       int64_t divisor, tn_dtype dtype, void *grad_in, const void *grad_out);

void tn_kernel_max_pool2d(const tn_pool2d *shape, tn_dtype dtype, void *out, int64_t *indices,
                          const void *in, int32_t ith, int32_t nth);
int tn_kernel_max_pool2d_backward(const tn_pool2d *shape, tn_dtype dtype, void *grad_in,
                                  const void *grad_out, const int64_t *indices, int32_t ith,
                                  int32_t nth);
/* forward (dst = out, src = in) or backward (dst = grad_in, src = grad_out); scratch: one
 * float32 input plane, for the 16-bit backward (NULL otherwise) */
void tn_kernel_avg_pool2d(const tn_pool2d *shape, int count_include_pad, int64_t divisor, tn_dtype dtype,
                          int backward, void *dst, const void *src, float *scratch, int32_t ith, int32_t nth);

#ifdef __cplusplus
}
#endif
#endif
