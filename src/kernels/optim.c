/* Fused Adam / AdamW and GradScaler's scale update (see tn/optim.h). */
#include <math.h>

#include "elem.h"
#include "strided.h"
#include "table.h"
#include "tn/optim.h"

typedef struct adam_consts {
    double lr, beta1, beta2, wd, eps, step_size, bc2_sqrt, inv_scale;
} adam_consts;

/* One element: p, g, m, v, vmax in and out (vmax NULL without amsgrad). */
static inline void adam_element(const adam_consts *c, const tn_adam_config *cfg, double *p, double *g,
                                double *m, double *v, double *vmax) {
    double grad = *g * c->inv_scale;
    *g = grad;
    if (cfg->maximize) grad = -grad;
    if (cfg->decoupled_weight_decay)
        *p -= c->lr * c->wd * *p;
    else if (c->wd != 0)
        grad += c->wd * *p;
    *m += (1 - c->beta1) * (grad - *m);
    *v = c->beta2 * *v + (1 - c->beta2) * grad * grad;
    double second = *v;
    if (vmax) {
        if (*v > *vmax) *vmax = *v;
        second = *vmax;
    }
    *p -= c->step_size * *m / (sqrt(second) / c->bc2_sqrt + c->eps);
}

/* float32 groups: the same math in float, as PyTorch's opmath does, in the kernel table's
 * vectorized rows (rows.c). */
static void adam_f32(const adam_consts *c, const tn_adam_config *cfg, const tn_adam_group *g,
                     int64_t lo, int64_t hi) {
    const tn_adam_f32_step step = {(float)c->lr, (float)c->wd, (float)c->beta1, (float)c->beta2, (float)c->eps,
                                   (float)c->step_size, (float)c->bc2_sqrt, (float)c->inv_scale,
                                   cfg->maximize ? -1.0f : 1.0f, cfg->grad_scale != NULL, cfg->decoupled_weight_decay};
    float *vmax = g->max_exp_avg_sq;
    tn_kernels()->adam_f32(&step, hi - lo, (float *)g->param + lo, (float *)g->grad + lo, (float *)g->exp_avg + lo,
                           (float *)g->exp_avg_sq + lo, vmax ? vmax + lo : NULL);
}

void tn_kernel_adam(const tn_adam_config *cfg, int32_t count, const tn_adam_group *groups,
                    int32_t ith, int32_t nth) {
    if (cfg->found_inf && *cfg->found_inf != 0) return;
    int64_t total = 0, first, last, start = 0;
    for (int32_t k = 0; k < count; k++) total += groups[k].numel;
    tn_slice(total, ith, nth, &first, &last);
    for (int32_t k = 0; k < count && start < last; k++) {
        const tn_adam_group *g = &groups[k];
        int64_t lo = first > start ? first - start : 0, hi = last - start < g->numel ? last - start : g->numel;
        start += g->numel;
        if (lo >= hi) continue;
        double step = *g->step;
        adam_consts c = {cfg->lr, cfg->beta1, cfg->beta2, cfg->weight_decay, cfg->eps,
                         cfg->lr / (1 - pow(cfg->beta1, step)), sqrt(1 - pow(cfg->beta2, step)),
                         cfg->grad_scale ? 1.0 / *cfg->grad_scale : 1.0};
        if (g->dtype == TN_DTYPE_F32) {
            adam_f32(&c, cfg, g, lo, hi);
            continue;
        }
        int32_t es = tn_dtype_size(g->dtype);
        for (int64_t i = lo; i < hi; i++) {
            char *ptrs[5] = {(char *)g->param + i * es, (char *)g->grad + i * es, (char *)g->exp_avg + i * es,
                             (char *)g->exp_avg_sq + i * es,
                             g->max_exp_avg_sq ? (char *)g->max_exp_avg_sq + i * es : NULL};
            double x[5] = {0};
            for (int j = 0; j < 5; j++)
                if (ptrs[j]) x[j] = tn_load(ptrs[j], g->dtype).re;
            adam_element(&c, cfg, &x[0], &x[1], &x[2], &x[3], ptrs[4] ? &x[4] : NULL);
            for (int j = 0; j < 5; j++) {
                if (!ptrs[j] || (j == 1 && !cfg->grad_scale)) continue; /* grad written only when unscaled */
                tn_value val = {x[j], 0, 0, 0};
                tn_store(ptrs[j], g->dtype, val);
            }
        }
    }
}

void tn_kernel_amp_update_scale(const tn_amp_scale *u) {
    if (*u->found_inf != 0.0f) {
        *u->scale = (float)(*u->scale * u->backoff_factor);
        *u->growth_tracker = 0;
        return;
    }
    int64_t clean = (int64_t)*u->growth_tracker + 1;
    if (clean == u->growth_interval) {
        float grown = (float)(*u->scale * u->growth_factor);
        if (!isinf(grown)) *u->scale = grown;
        *u->growth_tracker = 0;
    } else {
        *u->growth_tracker = (int32_t)clean;
    }
}
