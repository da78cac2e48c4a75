/* Random-number launches (see tn/random.h). */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tn/capture.h"
#include "tn/parallel.h"
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

/* Every random launch: a replay would repeat the numbers (the seed and offset are in the
 * arguments), so a recording that draws them cannot be replayed. */
static tn_status launch_random(tn_stream_t stream, const char *op, tn_task_fn fn, const void *arg,
                               size_t size) {
    tn_capture_refuse("random numbers (a replay would repeat them)");
    return tn_stream_launch(stream, op, fn, arg, size);
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
    return launch_random(stream, op, run_random, t, sizeof *t);
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

typedef struct random_int_task {
    tn_tensor dst;
    uint64_t seed, offset, range;
    int64_t from;
} random_int_task;

static void random_int_slice(void *p, int32_t ith, int32_t nth) {
    random_int_task *t = p;
    tn_kernel_random_int(&t->dst, t->seed, t->offset, t->from, t->range, ith, nth);
}

static tn_status run_random_int(void *p) {
    random_int_task *t = p;
    tn_parallel_run(random_int_slice, t, tn_tensor_numel(&t->dst));
    return TN_STATUS_OK;
}

tn_status tn_random_int_async(tn_stream_t stream, const tn_tensor *dst, uint64_t seed,
                              uint64_t offset, int64_t from, uint64_t range) {
    if (range == 0 || dst->ndim > TN_MAX_DIMS || dst->dtype >= TN_DTYPE_C64)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "random_: empty range or bad tensor");
    if (tn_tensor_numel(dst) == 0) return TN_STATUS_OK;
    random_int_task t = {*dst, seed, offset, range, from};
    return launch_random(stream, "aten::random_", run_random_int, &t, sizeof t);
}

typedef struct multinomial_task {
    tn_tensor out, probs;
    int32_t replacement;
    uint64_t seed, offset;
    int bad, failed;
} multinomial_task;

static void multinomial_slice(void *p, int32_t ith, int32_t nth) {
    multinomial_task *t = p;
    int64_t n = t->probs.sizes[t->probs.ndim - 1];
    double *row_weights = tn_thread_scratch(sizeof(double) * (size_t)n);
    if (!row_weights) {
        t->failed = 1;
        return;
    }
    if (tn_kernel_multinomial(&t->out, &t->probs, t->replacement, t->seed, t->offset, row_weights, ith, nth))
        t->bad = 1;
}

static tn_status run_multinomial(void *p) {
    multinomial_task *t = p;
    tn_parallel_run(multinomial_slice, t, tn_tensor_numel(&t->probs));
    if (t->failed) return tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory for multinomial rows");
    if (t->bad)
        return tn_error(TN_STATUS_INVALID_ARGUMENT,
                        "invalid multinomial distribution (encountering probability entry < 0, inf or "
                        "nan, or sum of probabilities <= 0)");
    return TN_STATUS_OK;
}

tn_status tn_random_multinomial_async(tn_stream_t stream, const tn_tensor *out,
                                      const tn_tensor *probs, int32_t replacement, uint64_t seed,
                                      uint64_t offset) {
    if (probs->ndim < 1 || probs->ndim > 2 || out->ndim != probs->ndim || out->dtype != TN_DTYPE_I64 ||
        (probs->ndim == 2 && out->sizes[0] != probs->sizes[0]))
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "multinomial: bad operands");
    if (tn_tensor_numel(out) == 0) return TN_STATUS_OK;
    multinomial_task t = {*out, *probs, replacement, seed, offset, 0, 0};
    return launch_random(stream, "aten::multinomial", run_multinomial, &t, sizeof t);
}

typedef struct bernoulli_task {
    tn_tensor dst, probs, in;
    int has_probs, bad;
    double p;
    uint64_t seed, offset;
} bernoulli_task;

static void bernoulli_slice(void *p, int32_t ith, int32_t nth) {
    bernoulli_task *t = p;
    if (tn_kernel_bernoulli(&t->dst, t->has_probs ? &t->probs : NULL, t->p, t->seed, t->offset, ith, nth))
        t->bad = 1;
}

static tn_status run_bernoulli(void *p) {
    bernoulli_task *t = p;
    tn_parallel_run(bernoulli_slice, t, 8 * tn_tensor_numel(&t->dst));
    return t->bad ? tn_error(TN_STATUS_INVALID_ARGUMENT, "bernoulli_: expected all probabilities in [0, 1]")
                  : TN_STATUS_OK;
}

static int same_sizes(const tn_tensor *a, const tn_tensor *b) {
    return a->ndim == b->ndim && a->ndim <= TN_MAX_DIMS &&
           !memcmp(a->sizes, b->sizes, sizeof(int64_t) * (size_t)a->ndim);
}

tn_status tn_random_bernoulli_async(tn_stream_t stream, const tn_tensor *dst, const tn_tensor *probs,
                                    double p, uint64_t seed, uint64_t offset) {
    if (dst->ndim > TN_MAX_DIMS || (probs && (!same_sizes(dst, probs) || !tn_dtype_is_float(probs->dtype))))
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "bernoulli_: probabilities must be a float view of dst's shape");
    if (tn_tensor_numel(dst) == 0) return TN_STATUS_OK;
    bernoulli_task t = {*dst, probs ? *probs : *dst, *dst, probs != NULL, 0, p, seed, offset};
    return launch_random(stream, "aten::bernoulli_", run_bernoulli, &t, sizeof t);
}

static void dropout_slice(void *p, int32_t ith, int32_t nth) {
    bernoulli_task *t = p;
    tn_kernel_dropout(&t->dst, &t->probs, &t->in, t->p, t->seed, t->offset, ith, nth);
}

static tn_status run_dropout(void *p) {
    bernoulli_task *t = p;
    tn_parallel_run(dropout_slice, t, 8 * tn_tensor_numel(&t->dst));
    return TN_STATUS_OK;
}

tn_status tn_dropout_async(tn_stream_t stream, const tn_tensor *out, const tn_tensor *mask,
                           const tn_tensor *in, double p, uint64_t seed, uint64_t offset) {
    if (!same_sizes(out, mask) || !same_sizes(out, in) || mask->dtype != TN_DTYPE_BOOL ||
        out->dtype != in->dtype || !tn_dtype_is_float(out->dtype) || !(p >= 0 && p <= 1))
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "dropout: bad operands");
    if (tn_tensor_numel(out) == 0) return TN_STATUS_OK;
    /* the mask travels in the probs slot */
    bernoulli_task t = {*out, *mask, *in, 1, 0, p, seed, offset};
    return launch_random(stream, "aten::native_dropout", run_dropout, &t, sizeof t);
}
