/* Layer normalisation over the last `n` elements of each of `rows` contiguous rows.
 *
 * Forward: y = (x - mean) * rstd * weight + bias (weight, bias optional: NULL), also writing
 * the per-row mean and rstd = 1 / sqrt(var + eps) (biased variance); x, y, weight, bias share
 * a dtype (f32, bf16, f16, f64); mean and rstd have it too. float32, bfloat16 and float16
 * rows are computed in float32 (sums folded in double); float64 rows in double.
 * Backward for the input: dx = rstd * (g*w - mean(g*w) - xhat * mean(g*w*xhat)).
 *
 * With `rms` set, RMS norm: y = x * rstd * weight, rstd = 1 / sqrt(mean(x^2) + eps), no bias
 * and no mean (NULL); rstd is float32 (float64 for float64 rows), as PyTorch's
 * _fused_rms_norm returns it. Backward: dx = rstd * (g*w - xhat * mean(g*w*xhat)). */
#ifndef TN_NORM_H
#define TN_NORM_H

#include <stdint.h>

#include "tn/dtype.h"
#include "tn/status.h"
#include "tn/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tn_layer_norm {
    int64_t rows;
    int64_t n;
    tn_dtype dtype;
    double eps;
    void *x;
    void *y;           /* forward output, or dx for the backward */
    const void *grad;  /* backward only: dy */
    const void *weight;
    const void *bias;
    void *mean;
    void *rstd;
    int rms;
} tn_layer_norm;

tn_status tn_layer_norm_async(tn_stream_t stream, const char *name, const tn_layer_norm *ln);
tn_status tn_layer_norm_backward_async(tn_stream_t stream, const char *name, const tn_layer_norm *ln);
/* Floats of scratch each slice of tn_kernel_layer_norm needs (0 for float64). */
int64_t tn_layer_norm_scratch_floats(const tn_layer_norm *ln);
void tn_kernel_layer_norm(const tn_layer_norm *ln, int backward, float *scratch, int32_t ith, int32_t nth);

#ifdef __cplusplus
}
#endif
#endif
