/* Launching reductions and softmax on a stream, split across the kernel thread pool. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tn/parallel.h"
#include "tn/reduce.h"

typedef struct reduce_task {
    tn_reduce_op op;
    tn_tensor out;
    tn_tensor idx;
    int has_idx;
    tn_tensor in;
    double scale;
} reduce_task;

static void reduce_slice(void *p, int32_t ith, int32_t nth) {
    reduce_task *t = p;
    tn_kernel_reduce(t->op, &t->out, t->has_idx ? &t->idx : NULL, &t->in, t->scale, ith, nth);
}

typedef struct part_task {
    const reduce_task *r;
    int64_t o;
    int32_t nth;
    tn_reduce_part parts[TN_MAX_THREADS];
} part_task;

static void part_slice(void *p, int32_t ith, int32_t nth) {
    part_task *t = p;
    const reduce_task *r = t->r;
    tn_kernel_reduce_part(r->op, &r->out, r->has_idx ? &r->idx : NULL, &r->in, t->o, ith, nth,
                          &t->parts[ith]);
    if (ith == 0) t->nth = nth;
}

typedef struct columns_task {
    const reduce_task *r;
    int64_t outputs;
    int32_t nth;
    double partials[]; /* a row of `outputs` per thread */
} columns_task;

static void columns_slice(void *p, int32_t ith, int32_t nth) {
    columns_task *t = p;
    tn_kernel_reduce_columns_part(t->r->op, &t->r->out, &t->r->in, ith, nth, t->partials + ith * t->outputs);
    if (ith == 0) t->nth = nth;
}

/* Sums over outer dimensions (x.sum(0), a bias's gradient) with enough rows: the threads split
 * the rows, so each reads whole rows (split by outputs, each thread read half of every row,
 * a run the hardware prefetcher hardly follows: 1000 x 1000 took 1.8x the CPU's time), into a
 * partial row of sums added at the end. Returns 0 where it does not apply. */
static int run_columns(reduce_task *t, int64_t outputs, int64_t numel) {
    int32_t threads = tn_parallel_threads();
    if (t->has_idx || threads < 2 || outputs > ((int64_t)1 << 16) || numel / outputs < 64 * (int64_t)threads ||
        numel < 2 * TN_PARALLEL_GRAIN || !tn_kernel_reduce_columns_part(t->op, &t->out, &t->in, 0, 1, NULL))
        return 0;
    columns_task *ct = malloc(sizeof *ct + sizeof(double) * (size_t)(threads * outputs));
    if (!ct) return 0; /* the split by outputs needs no memory */
    ct->r = t;
    ct->outputs = outputs;
    ct->nth = 1;
    tn_parallel_run(columns_slice, ct, numel);
    tn_kernel_reduce_columns_finish(t->op, &t->out, &t->in, t->scale, ct->partials, ct->nth);
    free(ct);
    return 1;
}

static tn_status run_reduce(void *p) {
    reduce_task *t = p;
    int64_t outputs = 1;
    for (int32_t d = 0; d < t->out.ndim; d++)
        if (t->out.strides[d] != 0 || t->out.sizes[d] == 0) outputs *= t->out.sizes[d];
    int64_t numel = tn_tensor_numel(&t->in);
    if (outputs > 0 && run_columns(t, outputs, numel)) return TN_STATUS_OK;
    if (outputs >= tn_parallel_threads() || numel < 2 * TN_PARALLEL_GRAIN) {
        tn_parallel_run(reduce_slice, t, numel); /* a slice of the outputs each */
        return TN_STATUS_OK;
    }
    /* few outputs (a full reduction): each one's elements are split across the threads */
    part_task *pt = malloc(sizeof *pt);
    if (!pt) return tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory for a reduction");
    pt->r = t;
    for (int64_t o = 0; o < outputs; o++) {
        pt->o = o;
        tn_parallel_run(part_slice, pt, numel / outputs);
        tn_kernel_reduce_finish(t->op, &t->out, t->has_idx ? &t->idx : NULL, &t->in, t->scale, o,
                                pt->parts, pt->nth);
    }
    free(pt);
    return TN_STATUS_OK;
}

static tn_status same_shape(const tn_tensor *a, const tn_tensor *b) {
    if (a->ndim != b->ndim || a->ndim > TN_MAX_DIMS ||
        memcmp(a->sizes, b->sizes, sizeof(int64_t) * (size_t)a->ndim))
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "operands of a reduction differ in shape");
    return TN_STATUS_OK;
}

tn_status tn_reduce_async(tn_stream_t stream, const char *name, tn_reduce_op op,
                          const tn_tensor *out, const tn_tensor *indices, const tn_tensor *in,
                          double scale) {
    tn_status st = same_shape(out, in);
    if (st == TN_STATUS_OK && indices) st = same_shape(indices, in);
    if (st != TN_STATUS_OK) return st;
    if (op < 0 || op >= TN_REDUCE_COUNT_) return tn_error(TN_STATUS_INVALID_ARGUMENT, "bad reduction");
    /* no early return on an empty input: a sum over an empty dimension still writes zeros */
    reduce_task t = {op, *out, indices ? *indices : *out, indices != NULL, *in, scale};
    return tn_stream_launch(stream, name ? name : "reduce", run_reduce, &t, sizeof t);
}

typedef struct var_task {
    tn_tensor var, mean, in;
    int has_mean, take_sqrt;
    double correction;
} var_task;

static void var_slice(void *p, int32_t ith, int32_t nth) {
    var_task *t = p;
    tn_kernel_var(&t->var, t->has_mean ? &t->mean : NULL, &t->in, t->correction, t->take_sqrt,
                  ith, nth);
}

typedef struct var_part_task {
    const var_task *v;
    int64_t o;
    int32_t nth;
    tn_var_part parts[TN_MAX_THREADS];
} var_part_task;

static void var_part_slice(void *p, int32_t ith, int32_t nth) {
    var_part_task *t = p;
    const var_task *v = t->v;
    tn_kernel_var_part(&v->var, v->has_mean ? &v->mean : NULL, &v->in, t->o, ith, nth, &t->parts[ith]);
    if (ith == 0) t->nth = nth;
}

static tn_status run_var(void *p) {
    var_task *t = p;
    int64_t outputs = 1;
    for (int32_t d = 0; d < t->var.ndim; d++)
        if (t->var.strides[d] != 0 || t->var.sizes[d] == 0) outputs *= t->var.sizes[d];
    int64_t numel = tn_tensor_numel(&t->in);
    if (outputs >= tn_parallel_threads() || numel < 2 * TN_PARALLEL_GRAIN) {
        tn_parallel_run(var_slice, t, 2 * numel);
        return TN_STATUS_OK;
    }
    /* few outputs (var of a whole tensor): each one's elements are split across the threads */
    var_part_task *pt = malloc(sizeof *pt);
    if (!pt) return tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory for a variance");
    pt->v = t;
    const tn_tensor *mean = t->has_mean ? &t->mean : NULL;
    for (int64_t o = 0; o < outputs; o++) {
        pt->o = o;
        tn_parallel_run(var_part_slice, pt, 2 * numel / outputs);
        tn_kernel_var_finish(&t->var, mean, &t->in, t->correction, t->take_sqrt, o, pt->parts, pt->nth);
    }
    free(pt);
    return TN_STATUS_OK;
}

tn_status tn_var_async(tn_stream_t stream, const char *name, const tn_tensor *var,
                       const tn_tensor *mean, const tn_tensor *in, double correction, int take_sqrt) {
    tn_status st = same_shape(var, in);
    if (st == TN_STATUS_OK && mean) st = same_shape(mean, in);
    if (st != TN_STATUS_OK) return st;
    if (!tn_dtype_is_float(var->dtype) || (mean && !tn_dtype_is_float(mean->dtype)))
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "variance outputs must be floating point");
    var_task t = {*var, mean ? *mean : *var, *in, mean != NULL, take_sqrt, correction};
    return tn_stream_launch(stream, name ? name : "var", run_var, &t, sizeof t);
}

typedef struct histc_task {
    tn_tensor out, in;
    double lo, hi;
} histc_task;

static tn_status run_histc(void *p) {
    histc_task *t = p;
    tn_kernel_histc(&t->out, &t->in, t->lo, t->hi);
    return TN_STATUS_OK;
}

tn_status tn_histc_async(tn_stream_t stream, const char *name, const tn_tensor *out,
                         const tn_tensor *in, double lo, double hi) {
    if (out->ndim != 1 || out->sizes[0] < 1 || !(lo < hi) || in->ndim > TN_MAX_DIMS)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "histc: one bin or more over a range lo < hi expected");
    histc_task t = {*out, *in, lo, hi};
    return tn_stream_launch(stream, name ? name : "histc", run_histc, &t, sizeof t);
}

typedef struct softmax_task {
    tn_softmax_kind kind;
    tn_tensor out, in, y;
    int failed;
} softmax_task;

static void softmax_slice(void *p, int32_t ith, int32_t nth) {
    softmax_task *t = p;
    int64_t n = t->out.ndim ? t->out.sizes[t->out.ndim - 1] : 1;
    double *row_scratch = tn_thread_scratch(sizeof(double) * (size_t)(2 * n));
    if (!row_scratch) {
        t->failed = 1;
        return;
    }
    tn_kernel_softmax(t->kind, &t->out, &t->in, &t->y, row_scratch, ith, nth);
}

static tn_status run_softmax(void *p) {
    softmax_task *t = p;
    tn_parallel_run(softmax_slice, t, tn_tensor_numel(&t->out));
    return t->failed ? tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory for softmax rows")
                     : TN_STATUS_OK;
}

tn_status tn_softmax_async(tn_stream_t stream, const char *name, tn_softmax_kind kind,
                           const tn_tensor *out, const tn_tensor *in, const tn_tensor *y) {
    tn_status st = same_shape(out, in);
    if (st == TN_STATUS_OK && y) st = same_shape(out, y);
    if (st != TN_STATUS_OK) return st;
    if (tn_tensor_numel(out) == 0) return TN_STATUS_OK;
    softmax_task t = {kind, *out, *in, y ? *y : *in, 0};
    return tn_stream_launch(stream, name ? name : "softmax", run_softmax, &t, sizeof t);
}
