/* Launching _foreach_* lists (see tn/foreach.h): the items travel with the task, and every
 * kernel thread runs its share of each item with the single-tensor kernels. */
#include <stdlib.h>
#include <string.h>

#include "../kernels/elem.h"
#include "internal.h"
#include "tn/foreach.h"
#include "tn/parallel.h"

typedef struct foreach_task {
    tn_foreach op;
    int32_t count;
    int64_t total;
    int32_t failed;   /* a kernel refused an item (integer division by zero); UNSCALE: an
                       * element was not finite */
    int32_t nth;      /* NORM: the threads that ran */
    double *partials; /* NORM: item k's partial of thread i at k * nth + i, during the run */
    tn_foreach_item items[]; /* count entries */
} foreach_task;

/* An item's span as a one-dimensional view; stride 0 for a value every element shares. */
static tn_tensor span(const void *data, tn_dtype dtype, int64_t numel, int64_t stride) {
    tn_tensor t = {0};
    t.data = (void *)data;
    t.dtype = dtype;
    t.ndim = 1;
    t.sizes[0] = numel;
    t.strides[0] = stride;
    return t;
}

static double scalar_value(const tn_scalar *s) {
    return s->kind == TN_SCALAR_KIND_FLOAT ? s->f : (double)s->i;
}

static tn_status run_item(const foreach_task *t, const tn_foreach_item *it, int32_t ith, int32_t nth) {
    const tn_foreach *op = &t->op;
    tn_tensor out = span(it->out, op->dtype, it->numel, 1), a = span(it->a, op->dtype, it->numel, 1);
    switch (op->kind) {
    case TN_FOREACH_UNARY:
        return tn_kernel_unary((tn_unary_op)op->op, &out, &a, op->compute, ith, nth);
    case TN_FOREACH_BINARY: {
        _Alignas(16) unsigned char value[16]; /* a scalar operand, in the compute dtype */
        tn_tensor b;
        if (it->b) {
            b = span(it->b, op->dtype, it->numel, 1);
        } else if (op->other) {
            b = span(op->other, op->other_dtype, it->numel, 0);
        } else {
            const tn_scalar *s = &it->scalar;
            tn_value v = {s->f, 0, s->i, s->kind != TN_SCALAR_KIND_FLOAT};
            if (v.is_int) v.re = (double)s->i;
            tn_store(value, op->compute, v);
            b = span(value, op->compute, it->numel, 0);
        }
        return tn_kernel_binary((tn_binary_op)op->op, &out, &a, &b, &op->alpha, op->compute, ith, nth);
    }
    case TN_FOREACH_TERNARY: {
        tn_tensor b = span(it->b, op->dtype, it->numel, 1), c = span(it->c, op->dtype, it->numel, 1);
        tn_kernel_ternary((tn_ternary_op)op->op, &out, &a, &b, it->c ? &c : NULL, scalar_value(&it->scalar),
                          op->compute, ith, nth);
        return TN_STATUS_OK;
    }
    case TN_FOREACH_FILL:
        tn_kernel_fill(&out, &it->scalar, ith, nth);
        return TN_STATUS_OK;
    case TN_FOREACH_COPY: {
        tn_tensor dst = span(it->out, op->out_dtype, it->numel, 1);
        tn_kernel_copy(&dst, &a, ith, nth);
        return TN_STATUS_OK;
    }
    default:
        return TN_STATUS_OK;
    }
}

static void foreach_slice(void *p, int32_t ith, int32_t nth) {
    foreach_task *t = p;
    if (t->op.kind == TN_FOREACH_NORM) {
        if (ith == 0) t->nth = nth; /* every thread sees the same nth */
        tn_kernel_norm_partials(t->op.op, t->op.dtype, t->count, t->items, t->partials, ith, nth);
        return;
    }
    if (t->op.kind == TN_FOREACH_UNSCALE) {
        if (tn_kernel_unscale(t->op.dtype, t->count, t->items, *(const float *)t->op.other, ith, nth))
            t->failed = 1; /* benign race, as below */
        return;
    }
    for (int32_t k = 0; k < t->count; k++)
        if (t->items[k].numel && run_item(t, &t->items[k], ith, nth) != TN_STATUS_OK)
            t->failed = 1; /* benign race: every writer stores 1 */
}

/* Each item's norm from the threads' partials, stored as one value of out_dtype. */
static tn_status run_norms(foreach_task *t) {
    t->partials = malloc(sizeof(double) * (size_t)t->count * (size_t)tn_parallel_threads());
    if (!t->partials) return tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory for %d partial norms", t->count);
    tn_parallel_run(foreach_slice, t, t->total);
    for (int32_t k = 0; k < t->count; k++) {
        tn_value v = {tn_kernel_norm_fold(t->op.op, t->partials + (int64_t)k * t->nth, t->nth), 0, 0, 0};
        tn_store(t->items[k].out, t->op.out_dtype, v);
    }
    free(t->partials);
    t->partials = NULL;
    return TN_STATUS_OK;
}

static tn_status run_foreach(void *p) {
    foreach_task *t = p;
    if (t->op.kind == TN_FOREACH_NORM) return run_norms(t);
    tn_parallel_run(foreach_slice, t, t->total);
    if (t->op.kind == TN_FOREACH_UNSCALE) {
        if (t->failed) *t->op.found_inf = 1.0f;
        return TN_STATUS_OK;
    }
    return t->failed ? tn_error(TN_STATUS_INVALID_ARGUMENT, "ZeroDivisionError") : TN_STATUS_OK;
}

static int float_dtype(tn_dtype d) {
    return d == TN_DTYPE_F32 || d == TN_DTYPE_F64 || d == TN_DTYPE_BF16 || d == TN_DTYPE_F16;
}

static tn_status check_op(const tn_foreach *op) {
    switch (op->kind) {
    case TN_FOREACH_UNARY: return op->op >= 0 && op->op < TN_UNARY_COUNT_ ? TN_STATUS_OK : TN_STATUS_INVALID_ARGUMENT;
    case TN_FOREACH_BINARY: return op->op >= 0 && op->op < TN_BINARY_COUNT_ ? TN_STATUS_OK : TN_STATUS_INVALID_ARGUMENT;
    case TN_FOREACH_TERNARY:
        return op->op >= 0 && op->op < TN_TERNARY_COUNT_ && tn_dtype_is_float(op->compute) ? TN_STATUS_OK
                                                                                          : TN_STATUS_INVALID_ARGUMENT;
    case TN_FOREACH_NORM:
        return (op->op == 0 || op->op == 1 || op->op == 2) && float_dtype(op->dtype) && float_dtype(op->out_dtype)
                   ? TN_STATUS_OK
                   : TN_STATUS_INVALID_ARGUMENT;
    case TN_FOREACH_FILL: return TN_STATUS_OK;
    case TN_FOREACH_COPY: return tn_dtype_size(op->out_dtype) && op->out_dtype < TN_DTYPE_C64 ? TN_STATUS_OK
                                                                                       : TN_STATUS_INVALID_ARGUMENT;
    case TN_FOREACH_UNSCALE:
        return float_dtype(op->dtype) && op->other && op->found_inf ? TN_STATUS_OK : TN_STATUS_INVALID_ARGUMENT;
    }
    return TN_STATUS_INVALID_ARGUMENT;
}

tn_status tn_foreach_async(tn_stream_t stream, const char *name, const tn_foreach *op, int32_t count,
                           const tn_foreach_item *items) {
    name = name ? name : "foreach";
    if (count < 0 || !op || (count && !items) || check_op(op) != TN_STATUS_OK ||
        tn_dtype_size(op->dtype) == 0 || op->dtype >= TN_DTYPE_C64)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "%s: bad op, dtype or item count", name);
    int64_t total = 0;
    for (int32_t k = 0; k < count; k++) {
        const tn_foreach_item *it = &items[k];
        int needs_b = op->kind == TN_FOREACH_TERNARY, needs_c = op->kind == TN_FOREACH_TERNARY && op->op != TN_TERNARY_LERP;
        int needs_a = op->kind != TN_FOREACH_FILL;
        if (it->numel < 0 || (it->numel && (!it->out || (needs_a && !it->a) || (needs_b && !it->b) || (needs_c && !it->c))) ||
            (op->kind == TN_FOREACH_NORM && !it->out))
            return tn_error(TN_STATUS_INVALID_ARGUMENT, "%s: item %d lacks an operand", name, k);
        total += it->numel;
    }
    if (count == 0 || (total == 0 && op->kind != TN_FOREACH_NORM)) return TN_STATUS_OK;
    size_t size = sizeof(foreach_task) + sizeof(tn_foreach_item) * (size_t)count;
    foreach_task *t = calloc(1, size);
    if (!t) return tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory to launch %s", name);
    t->op = *op;
    t->count = count;
    t->total = op->kind == TN_FOREACH_TERNARY ? 4 * total : total;
    memcpy(t->items, items, sizeof(tn_foreach_item) * (size_t)count);
    tn_status st = tn_stream_launch(stream, name, run_foreach, t, size);
    free(t);
    return st;
}
