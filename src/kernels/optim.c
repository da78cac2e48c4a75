/* Fused Adam / AdamW, fused SGD and GradScaler's scale update (see tn/optim.h). */
#include <math.h>

#include "elem.h"
#include "half.h"
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

/* bfloat16 and float16 groups: each block of elements widened to float, stepped by the float32
 * row kernel and rounded back, as PyTorch's fused Adam computes reduced-precision parameters in
 * float (its opmath). The unscaled gradient is written back only with a grad scale. */
enum { ADAM_BLOCK = 512 };

static void widen(int32_t dtype, const uint16_t *src, float *dst, int64_t n) {
    if (dtype == TN_DTYPE_BF16)
        for (int64_t i = 0; i < n; i++) dst[i] = tn_bf16_to_f32_inline(src[i]);
    else
        for (int64_t i = 0; i < n; i++) dst[i] = tn_f16_to_f32_inline(src[i]);
}

static void narrow(int32_t dtype, const float *src, uint16_t *dst, int64_t n) {
    if (dtype == TN_DTYPE_BF16)
        for (int64_t i = 0; i < n; i++) dst[i] = tn_f32_to_bf16_inline(src[i]);
    else
        for (int64_t i = 0; i < n; i++) dst[i] = tn_f32_to_f16_inline(src[i]);
}

static void adam_half(const adam_consts *c, const tn_adam_config *cfg, const tn_adam_group *g,
                      int64_t lo, int64_t hi) {
    uint16_t *half[5] = {(uint16_t *)g->param, (uint16_t *)g->grad, (uint16_t *)g->exp_avg,
                         (uint16_t *)g->exp_avg_sq, (uint16_t *)g->max_exp_avg_sq};
    int written[5] = {1, cfg->grad_scale != NULL, 1, 1, 1};
    float wide[5][ADAM_BLOCK];
    tn_adam_group block = *g;
    block.dtype = TN_DTYPE_F32;
    for (int64_t start = lo; start < hi; start += ADAM_BLOCK) {
        int64_t n = hi - start < ADAM_BLOCK ? hi - start : ADAM_BLOCK;
        for (int j = 0; j < 5; j++)
            if (half[j]) widen(g->dtype, half[j] + start, wide[j], n);
        block.param = wide[0], block.grad = wide[1], block.exp_avg = wide[2], block.exp_avg_sq = wide[3];
        block.max_exp_avg_sq = half[4] ? wide[4] : NULL;
        adam_f32(c, cfg, &block, 0, n);
        for (int j = 0; j < 5; j++)
            if (half[j] && written[j]) narrow(g->dtype, wide[j], half[j] + start, n);
    }
}

/* A thread's share of the concatenated elements of a list of groups, taken group by group. */
typedef struct group_share {
    int64_t first, last, start;
} group_share;

static group_share share_of(int64_t total, int32_t ith, int32_t nth) {
    group_share s = {0, 0, 0};
    tn_slice(total, ith, nth, &s.first, &s.last);
    return s;
}

/* The share's elements [*lo, *hi) of the next group (of numel elements); 0 if none. */
static int next_group(group_share *s, int64_t numel, int64_t *lo, int64_t *hi) {
    *lo = s->first > s->start ? s->first - s->start : 0;
    *hi = s->last - s->start < numel ? s->last - s->start : numel;
    s->start += numel;
    return *lo < *hi;
}

void tn_kernel_adam(const tn_adam_config *cfg, int32_t count, const tn_adam_group *groups,
                    int32_t ith, int32_t nth) {
    if (cfg->found_inf && *cfg->found_inf != 0) return;
    int64_t total = 0, lo, hi;
    for (int32_t k = 0; k < count; k++) total += groups[k].numel;
    group_share share = share_of(total, ith, nth);
    for (int32_t k = 0; k < count; k++) {
        const tn_adam_group *g = &groups[k];
        if (!next_group(&share, g->numel, &lo, &hi)) continue;
        double step = *g->step;
        adam_consts c = {cfg->lr, cfg->beta1, cfg->beta2, cfg->weight_decay, cfg->eps,
                         cfg->lr / (1 - pow(cfg->beta1, step)), sqrt(1 - pow(cfg->beta2, step)),
                         cfg->grad_scale ? 1.0 / *cfg->grad_scale : 1.0};
        if (g->dtype == TN_DTYPE_F32) {
            adam_f32(&c, cfg, g, lo, hi);
            continue;
        }
        if (g->dtype == TN_DTYPE_BF16 || g->dtype == TN_DTYPE_F16) {
            adam_half(&c, cfg, g, lo, hi);
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

/* The SGD step over elements lo .. hi of a group, in the compute type T (float, or double for
 * float64): the flags are the same for every element, so the compiler hoists their tests. */
#define TN_SGD_LOOP(T, name)                                                                        \
    static void name(const tn_sgd_config *cfg, const tn_sgd_group *g, int64_t lo, int64_t hi) {     \
        int32_t es = tn_dtype_size(g->dtype);                                                      \
        const T lr = (T)cfg->lr, wd = (T)cfg->weight_decay, mom = (T)cfg->momentum,                \
                damp = (T)(1.0 - cfg->dampening);                                                  \
        const T inv_scale = cfg->grad_scale ? (T)(1.0 / *cfg->grad_scale) : (T)1;                  \
        for (int64_t i = lo; i < hi; i++) {                                                        \
            char *pp = (char *)g->param + i * es, *gp = (char *)g->grad + i * es;                  \
            T p = (T)tn_load(pp, g->dtype).re, grad = (T)tn_load(gp, g->dtype).re * inv_scale;     \
            if (cfg->grad_scale) tn_store(gp, g->dtype, (tn_value){grad, 0, 0, 0});                \
            if (cfg->maximize) grad = -grad;                                                       \
            if (cfg->weight_decay != 0) grad += wd * p;                                            \
            if (cfg->momentum != 0) {                                                              \
                char *bp = (char *)g->momentum_buffer + i * es;                                    \
                T buf = cfg->is_first_step ? grad : mom * (T)tn_load(bp, g->dtype).re + damp * grad; \
                tn_store(bp, g->dtype, (tn_value){buf, 0, 0, 0});                                  \
                grad = cfg->nesterov ? grad + mom * buf : buf;                                     \
            }                                                                                      \
            tn_store(pp, g->dtype, (tn_value){p - lr * grad, 0, 0, 0});                            \
        }                                                                                          \
    }
TN_SGD_LOOP(float, sgd_float)
TN_SGD_LOOP(double, sgd_double)

/* float32 groups: the same math on float pointers, with the flags' tests outside the loops
 * (the compiler unswitches them) so that each loop vectorizes. */
static void sgd_f32(const tn_sgd_config *cfg, const tn_sgd_group *g, int64_t lo, int64_t hi) {
    float *restrict p = (float *)g->param + lo, *restrict grad = (float *)g->grad + lo;
    float *restrict buf = g->momentum_buffer ? (float *)g->momentum_buffer + lo : NULL;
    const float lr = (float)cfg->lr, wd = (float)cfg->weight_decay, mom = (float)cfg->momentum,
                damp = (float)(1.0 - cfg->dampening), sign = cfg->maximize ? -1.0f : 1.0f,
                inv_scale = cfg->grad_scale ? (float)(1.0 / *cfg->grad_scale) : 1.0f;
    const int scaled = cfg->grad_scale != NULL, decay = cfg->weight_decay != 0, first = cfg->is_first_step,
              nesterov = cfg->nesterov;
    int64_t n = hi - lo;
    for (int64_t i = 0; i < n; i++) {
        float x = grad[i] * inv_scale;
        if (scaled) grad[i] = x;
        x *= sign;
        if (decay) x += wd * p[i];
        if (buf) {
            float b = first ? x : mom * buf[i] + damp * x;
            buf[i] = b;
            x = nesterov ? x + mom * b : b;
        }
        p[i] -= lr * x;
    }
}

void tn_kernel_sgd(const tn_sgd_config *cfg, int32_t count, const tn_sgd_group *groups, int32_t ith, int32_t nth) {
    if (cfg->found_inf && *cfg->found_inf != 0) return;
    int64_t total = 0, lo, hi;
    for (int32_t k = 0; k < count; k++) total += groups[k].numel;
    group_share share = share_of(total, ith, nth);
    for (int32_t k = 0; k < count; k++) {
        const tn_sgd_group *g = &groups[k];
        if (next_group(&share, g->numel, &lo, &hi))
            (g->dtype == TN_DTYPE_F32 ? sgd_f32 : g->dtype == TN_DTYPE_F64 ? sgd_double : sgd_float)(cfg, g, lo, hi);
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
