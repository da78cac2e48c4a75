/* Random-number launches (see tn/random.h). */
#include "internal.h"
#include "tn/kernels.h"
#include "tn/random.h"

typedef struct random_task {
    tn_tensor dst;
    uint64_t seed;
    uint64_t offset;
    double a;
    double b;
    int normal;
} random_task;

static tn_status run_random(void *p) {
    random_task *t = p;
    if (t->normal)
        tn_kernel_normal(&t->dst, t->seed, t->offset, t->a, t->b, 0, 1);
    else
        tn_kernel_uniform(&t->dst, t->seed, t->offset, t->a, t->b, 0, 1);
    return TN_STATUS_OK;
}

static tn_status launch(tn_stream_t stream, const tn_tensor *dst, random_task *t,
                        const char *op) {
    switch (dst->dtype) {
    case TN_DTYPE_F16:
    case TN_DTYPE_BF16:
    case TN_DTYPE_F32:
    case TN_DTYPE_F64:
        break;
    default:
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "%s expects a floating-point tensor, got %s",
                        op, tn_dtype_name(dst->dtype));
    }
    if (dst->ndim > TN_MAX_DIMS || dst->ndim < 0)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "%s: too many dimensions", op);
    if (tn_tensor_numel(dst) == 0) return TN_STATUS_OK;
    t->dst = *dst;
    return tn_stream_launch(stream, op, run_random, t, sizeof *t);
}

tn_status tn_random_uniform_async(tn_stream_t stream, const tn_tensor *dst, uint64_t seed,
                                  uint64_t offset, double from, double to) {
    random_task t = {.seed = seed, .offset = offset, .a = from, .b = to, .normal = 0};
    return launch(stream, dst, &t, "uniform_");
}

tn_status tn_random_normal_async(tn_stream_t stream, const tn_tensor *dst, uint64_t seed,
                                 uint64_t offset, double mean, double std) {
    random_task t = {.seed = seed, .offset = offset, .a = mean, .b = std, .normal = 1};
    return launch(stream, dst, &t, "normal_");
}
