/* Fused optimizer steps: one launch updates every parameter of a list in place, as
 * torch.optim's fused=True path expects (`_fused_adam_` / `_fused_adamw_`, `_fused_sgd_`).
 *
 * Each tensor of a group is dense and contiguous, of the group's dtype; `step` points to the
 * parameter's float32 step count, already incremented for this step. The math runs in float
 * (double for float64 parameters), PyTorch's formulation:
 *   g = grad / grad_scale (written back to grad when a scale is given), negated with maximize
 *   AdamW: p -= lr * weight_decay * p     Adam: g += weight_decay * p
 *   m = m + (1 - beta1) * (g - m)          v = beta2 * v + (1 - beta2) * g * g
 *   vmax = max(vmax, v) with amsgrad
 *   p -= lr / (1 - beta1^step) * m / (sqrt(v or vmax) / sqrt(1 - beta2^step) + eps)
 * With found_inf pointing to a non-zero value the whole step is skipped. */
#ifndef TN_OPTIM_H
#define TN_OPTIM_H
#include <stdint.h>
#include "tn/dtype.h"
#include "tn/status.h"
#include "tn/stream.h"
#ifdef __cplusplus
extern "C" {
#endif
typedef struct tn_adam_group {
    void *param, *grad, *exp_avg, *exp_avg_sq, *max_exp_avg_sq; /* max_exp_avg_sq: amsgrad only */
    const float *step;
    int64_t numel;
    tn_dtype dtype;
} tn_adam_group;

typedef struct tn_adam_config {
    double lr, beta1, beta2, weight_decay, eps;
    int32_t amsgrad, maximize, decoupled_weight_decay; /* decoupled: AdamW */
    const float *grad_scale, *found_inf;                /* device float32 scalars, or NULL */
} tn_adam_config;

tn_status tn_fused_adam_async(tn_stream_t stream, const char *name, const tn_adam_config *config,
                              int32_t count, const tn_adam_group *groups);
/* One thread's share of the elements of all the groups, taken in order. */
void tn_kernel_adam(const tn_adam_config *config, int32_t count, const tn_adam_group *groups,
                    int32_t ith, int32_t nth);

/* Fused SGD (`_fused_sgd_`), per element, in float (double for float64 parameters):
 *   g = grad / grad_scale (written back to grad when a scale is given), negated with maximize
 *   g += weight_decay * p
 *   with momentum: buf = g on the first step, else momentum * buf + (1 - dampening) * g;
 *                  g = g + momentum * buf with nesterov, else buf
 *   p -= lr * g
 * With found_inf pointing to a non-zero value the step is skipped. */
typedef struct tn_sgd_group {
    void *param, *grad, *momentum_buffer; /* momentum_buffer: with momentum only */
    int64_t numel;
    tn_dtype dtype;
} tn_sgd_group;

typedef struct tn_sgd_config {
    double lr, weight_decay, momentum, dampening;
    int32_t nesterov, maximize, is_first_step;
    const float *grad_scale, *found_inf; /* device float32 scalars, or NULL */
} tn_sgd_config;

tn_status tn_fused_sgd_async(tn_stream_t stream, const char *name, const tn_sgd_config *config, int32_t count,
                             const tn_sgd_group *groups);
/* One thread's share of the elements of all the groups, taken in order. */
void tn_kernel_sgd(const tn_sgd_config *config, int32_t count, const tn_sgd_group *groups, int32_t ith,
                   int32_t nth);

/* GradScaler's scale update (PyTorch's _amp_update_scale_) on device scalars. After a step
 * that found an inf or NaN (*found_inf != 0) the scale is multiplied by backoff_factor and the
 * tracker reset; otherwise the tracker counts the clean step, and at growth_interval clean
 * steps in a row the scale is multiplied by growth_factor (unless that overflows to inf) and
 * the tracker reset. Products are taken in double and stored as float, as PyTorch does. */
typedef struct tn_amp_scale {
    float *scale;
    int32_t *growth_tracker;
    const float *found_inf;
    double growth_factor, backoff_factor;
    int64_t growth_interval;
} tn_amp_scale;

tn_status tn_amp_update_scale_async(tn_stream_t stream, const tn_amp_scale *update);
void tn_kernel_amp_update_scale(const tn_amp_scale *update);
#ifdef __cplusplus
}
#endif
#endif
