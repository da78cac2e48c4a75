/* Launching fused optimizer steps: the groups travel with the launch, split by element
 * across the kernel thread pool. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tn/capture.h"
#include "tn/optim.h"
#include "tn/parallel.h"

typedef struct adam_task {
    tn_adam_config config;
    int32_t count;
    int64_t total;
    tn_adam_group groups[]; /* count entries */
} adam_task;

static void adam_slice(void *p, int32_t ith, int32_t nth) {
    adam_task *t = p;
    tn_kernel_adam(&t->config, t->count, t->groups, ith, nth);
}

static tn_status run_adam(void *p) {
    adam_task *t = p;
    tn_parallel_run(adam_slice, t, 16 * t->total);
    return TN_STATUS_OK;
}

tn_status tn_fused_adam_async(tn_stream_t stream, const char *name, const tn_adam_config *config,
                              int32_t count, const tn_adam_group *groups) {
    if (count < 0) return tn_error(TN_STATUS_INVALID_ARGUMENT, "fused adam: negative tensor count");
    int64_t total = 0;
    for (int32_t k = 0; k < count; k++) {
        const tn_adam_group *g = &groups[k];
        if (!tn_dtype_is_float(g->dtype) || g->numel < 0 || !g->step ||
            (g->numel && (!g->param || !g->grad || !g->exp_avg || !g->exp_avg_sq ||
                          (config->amsgrad && !g->max_exp_avg_sq))))
            return tn_error(TN_STATUS_INVALID_ARGUMENT, "fused adam: tensor %d is incomplete or not floating point", k);
        total += g->numel;
    }
    if (total == 0) return TN_STATUS_OK;
    size_t size = sizeof(adam_task) + sizeof(tn_adam_group) * (size_t)count;
    adam_task *t = calloc(1, size); /* zeroed padding: see TN_TASKS_ZEROED */
    if (!t) return tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory to launch %s", name ? name : "fused adam");
    t->config = *config;
    t->count = count;
    t->total = total;
    memcpy(t->groups, groups, sizeof(tn_adam_group) * (size_t)count);
    tn_capture_refuse("an optimizer step (its step count is read at launch)");
    tn_status st = tn_stream_launch(stream, name ? name : "fused adam", run_adam, t, size);
    free(t);
    return st;
}

typedef struct sgd_task {
    tn_sgd_config config;
    int32_t count;
    int64_t total;
    tn_sgd_group groups[]; /* count entries */
} sgd_task;

static void sgd_slice(void *p, int32_t ith, int32_t nth) {
    sgd_task *t = p;
    tn_kernel_sgd(&t->config, t->count, t->groups, ith, nth);
}

static tn_status run_sgd(void *p) {
    sgd_task *t = p;
    tn_parallel_run(sgd_slice, t, 8 * t->total);
    return TN_STATUS_OK;
}

tn_status tn_fused_sgd_async(tn_stream_t stream, const char *name, const tn_sgd_config *config, int32_t count,
                             const tn_sgd_group *groups) {
    name = name ? name : "fused sgd";
    if (count < 0 || !config) return tn_error(TN_STATUS_INVALID_ARGUMENT, "%s: bad config or tensor count", name);
    int64_t total = 0;
    for (int32_t k = 0; k < count; k++) {
        const tn_sgd_group *g = &groups[k];
        if (!tn_dtype_is_float(g->dtype) || g->numel < 0 ||
            (g->numel && (!g->param || !g->grad || (config->momentum != 0 && !g->momentum_buffer))))
            return tn_error(TN_STATUS_INVALID_ARGUMENT, "%s: tensor %d is incomplete or not floating point", name, k);
        total += g->numel;
    }
    if (total == 0) return TN_STATUS_OK;
    size_t size = sizeof(sgd_task) + sizeof(tn_sgd_group) * (size_t)count;
    sgd_task *t = calloc(1, size); /* zeroed padding: see TN_TASKS_ZEROED */
    if (!t) return tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory to launch %s", name);
    t->config = *config;
    t->count = count;
    t->total = total;
    memcpy(t->groups, groups, sizeof(tn_sgd_group) * (size_t)count);
    if (config->is_first_step) tn_capture_refuse("an SGD first step (a replay would repeat it)");
    tn_status st = tn_stream_launch(stream, name, run_sgd, t, size);
    free(t);
    return st;
}

static tn_status run_amp_update_scale(void *p) {
    tn_kernel_amp_update_scale(p);
    return TN_STATUS_OK;
}

tn_status tn_amp_update_scale_async(tn_stream_t stream, const tn_amp_scale *update) {
    if (!update || !update->scale || !update->growth_tracker || !update->found_inf)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "amp update scale: a scalar is missing");
    return tn_stream_launch(stream, "aten::_amp_update_scale_", run_amp_update_scale, (void *)update,
                            sizeof *update);
}
