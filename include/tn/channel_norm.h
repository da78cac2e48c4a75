/* Batch normalisation and group normalisation over contiguous (n, c, s) data: n samples of c
 * channels of s elements (a channel's plane: the spatial dimensions flattened).
 *
 * Statistics: batch norm takes one mean and biased variance per channel over its n planes;
 * group norm (groups > 0) one per sample and group over the group's c / groups planes. Each
 * plane's mean and sum of squared deviations come from two passes over the plane (float32 and
 * 16-bit data in float about a pivot near the mean, chunks folded in double; float64 in double)
 * and the planes are combined by Chan's rule, so a large mean does not cancel the variance.
 *
 * Forward: y = (x - mean) * rstd * weight[c] + bias[c], rstd = 1 / sqrt(var + eps).
 *   - batch norm, training: mean and rstd are written per channel; running_mean and
 *     running_var (when given) become (1 - momentum) * running + momentum * batch, the
 *     variance unbiased (times m / (m - 1), m = n * s elements per channel).
 *   - batch norm, evaluation: the running statistics are used; mean and rstd are not written.
 *   - group norm: mean and rstd are written per (sample, group).
 * Backward (grad is dy; y receives dx), with xhat = (x - mean) * rstd:
 *   - grad_weight[c] = sum of dy * xhat, grad_bias[c] = sum of dy, over the channel's planes;
 *   - batch norm, training: dx = weight * rstd * (dy - mean(dy) - xhat * mean(dy * xhat)), the
 *     means over the channel; evaluation: dx = weight * rstd * dy (running statistics);
 *   - group norm: the same with the means over the sample's group.
 *   The mean and rstd read are those the forward wrote (evaluation: the running statistics).
 * x, y and grad share `dtype` (f32, f64, bf16, f16); weight, bias, the running statistics,
 * mean, rstd, grad_weight and grad_bias share `param_dtype` (dtype, or f32 with 16-bit data).
 * Any pointer but x and (backward) grad may be NULL: no weight is 1, no bias 0, and a NULL
 * output is not written (a backward with no y computes only the weight and bias gradients). */
#ifndef TN_CHANNEL_NORM_H
#define TN_CHANNEL_NORM_H

#include <stdint.h>

#include "tn/dtype.h"
#include "tn/status.h"
#include "tn/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tn_channel_norm {
    int64_t n, c, s;
    int64_t groups; /* 0: batch norm; else group norm with c % groups == 0 */
    int training;   /* batch norm only */
    tn_dtype dtype, param_dtype;
    double eps, momentum;
    const void *x;
    void *y;
    const void *grad;
    const void *weight, *bias;
    void *running_mean, *running_var;
    void *mean, *rstd;
    void *grad_weight, *grad_bias;
} tn_channel_norm;

tn_status tn_channel_norm_async(tn_stream_t stream, const char *name, const tn_channel_norm *cn);
tn_status tn_channel_norm_backward_async(tn_stream_t stream, const char *name, const tn_channel_norm *cn);

/* The kernel's three phases, for the runtime: per-plane sums over the planes of slice ith of
 * nth into work (4 doubles a plane, then 2 a channel); then, once, the statistics and per-plane coefficients
 * (written back into work); then the element pass over the slice's planes. */
void tn_kernel_channel_norm_sums(const tn_channel_norm *cn, int backward, double *work, int32_t ith, int32_t nth);
void tn_kernel_channel_norm_coefficients(const tn_channel_norm *cn, int backward, double *work);
void tn_kernel_channel_norm_apply(const tn_channel_norm *cn, int backward, const double *work, int32_t ith,
                                  int32_t nth);

#ifdef __cplusplus
}
#endif
#endif
