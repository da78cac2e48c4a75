/* 2-D upsampling over contiguous planes (N * C planes of H x W), nearest and bilinear, and the
 * input gradient of each.
 *
 * Each output row oh (column ow likewise) reads input rows i0 and i1 with weights l0 and l1,
 * computed as the CPU's kernels compute them (in float for float32 and 16-bit data, in double
 * for float64), from the call's scale (scale_h, scale_w: the user's scale factors, 0 when the
 * output size was given instead):
 *   - nearest: i0 = min(floor(oh * s), in_h - 1), s = 1 / scale or in_h / out_h (the output
 *     index itself when the sizes are equal, oh / 2 when the output is twice the input);
 *   - nearest-exact: i0 = min(floor((oh + 0.5) * s), in_h - 1);
 *   - bilinear: the source position r = s' oh (align_corners, s' = (in_h - 1) / (out_h - 1))
 *     or max(s (oh + 0.5) - 0.5, 0); i0 = floor(r), i1 = i0 + 1 inside the plane, l1 = r - i0;
 *   - bicubic: r as bilinear's but not clamped at 0; rows floor(r) - 1 .. floor(r) + 2, each
 *     clamped to the plane, weighted by Keys' cubic convolution (a = -0.75) at t = r - floor(r).
 * Forward: out = sum over the row taps of wh (sum over the column taps of ww x), in double and
 * rounded once; nearest copies elements and takes any dtype. Backward: grad_in = 0, then each
 * output's gradient is added to the inputs it read, with their weights (accumulated in
 * double). Bilinear, bicubic and the backward take float32, float64, bfloat16 and float16. */
#ifndef TN_UPSAMPLE_H
#define TN_UPSAMPLE_H

#include <stdint.h>

#include "tn/dtype.h"
#include "tn/status.h"
#include "tn/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tn_upsample_mode {
    TN_UPSAMPLE_NEAREST,
    TN_UPSAMPLE_NEAREST_EXACT,
    TN_UPSAMPLE_BILINEAR,
    TN_UPSAMPLE_BICUBIC,
} tn_upsample_mode;

typedef struct tn_upsample2d {
    int64_t planes, in_h, in_w, out_h, out_w;
    tn_upsample_mode mode;
    int align_corners; /* bilinear and bicubic */
    double scale_h, scale_w;
} tn_upsample2d;

tn_status tn_upsample2d_async(tn_stream_t stream, const char *name, const tn_upsample2d *u, tn_dtype dtype,
                              void *out, const void *in);
tn_status tn_upsample2d_backward_async(tn_stream_t stream, const char *name, const tn_upsample2d *u, tn_dtype dtype,
                                       void *grad_in, const void *grad_out);

/* Bytes of scratch each slice of the kernel needs. */
int64_t tn_upsample2d_scratch_bytes(const tn_upsample2d *u);
/* The planes of slice ith of nth: forward (dst = out, src = in) or backward (dst = grad_in,
 * src = grad_out). */
void tn_kernel_upsample2d(const tn_upsample2d *u, tn_dtype dtype, int backward, void *dst, const void *src,
                          void *scratch, int32_t ith, int32_t nth);

#ifdef __cplusplus
}
#endif
#endif
