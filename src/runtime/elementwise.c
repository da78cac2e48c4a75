/* Launching elementwise kernels on a stream, split across the kernel thread pool. */
#include <string.h>

#include "../kernels/elem.h"
#include "internal.h"
#include "tn/elementwise.h"
#include "tn/kernels.h"
#include "tn/parallel.h"

typedef struct unary_task {
    tn_unary_op op;
    tn_tensor out;
    tn_tensor in;
    tn_dtype compute;
} unary_task;

static void unary_slice(void *p, int32_t ith, int32_t nth) {
    unary_task *t = p;
    tn_kernel_unary(t->op, &t->out, &t->in, t->compute, ith, nth);
}

static tn_status run_unary(void *p) {
    unary_task *t = p;
    tn_parallel_run(unary_slice, t, tn_tensor_numel(&t->out));
    return TN_STATUS_OK;
}

static tn_status check_views(const tn_tensor *const *views, int32_t n) {
    for (int32_t i = 0; i < n; i++) {
        if (views[i]->ndim < 0 || views[i]->ndim > TN_MAX_DIMS || views[i]->ndim != views[0]->ndim)
            return tn_error(TN_STATUS_INVALID_ARGUMENT, "elementwise operands differ in rank");
        if (memcmp(views[i]->sizes, views[0]->sizes, sizeof(int64_t) * (size_t)views[0]->ndim))
            return tn_error(TN_STATUS_INVALID_ARGUMENT, "elementwise operands differ in shape");
        if (tn_dtype_size(views[i]->dtype) == 0 || views[i]->dtype >= TN_DTYPE_C64)
            return tn_error(TN_STATUS_INVALID_ARGUMENT, "elementwise operand has dtype %s",
                            tn_dtype_name(views[i]->dtype));
    }
    return TN_STATUS_OK;
}

tn_status tn_unary_async(tn_stream_t stream, const char *name, tn_unary_op op,
                         const tn_tensor *out, const tn_tensor *in, tn_dtype compute) {
    const tn_tensor *views[2] = {out, in};
    tn_status st = check_views(views, 2);
    if (st != TN_STATUS_OK || tn_tensor_numel(out) == 0) return st;
    if (op < 0 || op >= TN_UNARY_COUNT_) return tn_error(TN_STATUS_INVALID_ARGUMENT, "bad unary op");
    unary_task t = {op, *out, *in, compute};
    return tn_stream_launch(stream, name ? name : "unary", run_unary, &t, sizeof t);
}

typedef struct binary_task {
    tn_binary_op op;
    tn_tensor out;
    tn_input a;
    tn_input b;
    tn_scalar alpha;
    tn_dtype compute;
    int zero_div;
    _Alignas(16) unsigned char scalars[2][16]; /* values of scalar inputs, in their dtypes */
} binary_task;

static void binary_slice(void *p, int32_t ith, int32_t nth) {
    binary_task *t = p;
    if (tn_kernel_binary(t->op, &t->out, &t->a.t, &t->b.t, &t->alpha, t->compute, ith, nth) !=
        TN_STATUS_OK)
        t->zero_div = 1; /* benign race: every writer stores 1 */
}

/* Points a scalar input at its value inside the task (the task's own copy, which lives until
 * the work has run) with the output's shape and zero strides. */
static void bind_scalar(tn_input *in, unsigned char *storage, const tn_tensor *out) {
    if (!in->scalar) return;
    tn_value v = {in->value.f, in->value.imag, in->value.i, 0};
    if (in->value.kind == TN_SCALAR_KIND_INT || in->value.kind == TN_SCALAR_KIND_BOOL) {
        v.is_int = 1;
        v.re = (double)in->value.i;
    }
    tn_store(storage, in->t.dtype, v);
    in->t.data = storage;
    in->t.ndim = out->ndim;
    for (int32_t d = 0; d < out->ndim; d++) {
        in->t.sizes[d] = out->sizes[d];
        in->t.strides[d] = 0;
    }
}

static tn_status run_binary(void *p) {
    binary_task *t = p;
    /* a scalar joins the computation in the compute dtype (as PyTorch converts it), which
     * also lets same-dtype operands take the fast rows */
    if (t->a.scalar) t->a.t.dtype = t->compute;
    if (t->b.scalar) t->b.t.dtype = t->compute;
    bind_scalar(&t->a, t->scalars[0], &t->out);
    bind_scalar(&t->b, t->scalars[1], &t->out);
    tn_parallel_run(binary_slice, t, tn_tensor_numel(&t->out));
    if (t->zero_div) return tn_error(TN_STATUS_INVALID_ARGUMENT, "ZeroDivisionError");
    return TN_STATUS_OK;
}

tn_status tn_binary_async(tn_stream_t stream, const char *name, tn_binary_op op,
                          const tn_tensor *out, const tn_input *a, const tn_input *b,
                          const tn_scalar *alpha, tn_dtype compute) {
    if (op < 0 || op >= TN_BINARY_COUNT_) return tn_error(TN_STATUS_INVALID_ARGUMENT, "bad binary op");
    binary_task t = {op, *out, *a, *b, *alpha, compute, 0, {{0}}};
    const tn_tensor *views[3];
    int32_t n = 0;
    views[n++] = out;
    if (!a->scalar) views[n++] = &a->t;
    if (!b->scalar) views[n++] = &b->t;
    tn_status st = check_views(views, n);
    if (st != TN_STATUS_OK || tn_tensor_numel(out) == 0) return st;
    return tn_stream_launch(stream, name ? name : "binary", run_binary, &t, sizeof t);
}

typedef struct ternary_task {
    tn_ternary_op op;
    tn_tensor out, a, b, c;
    int has_c;
    double scalar;
    tn_dtype compute;
} ternary_task;

static void ternary_slice(void *p, int32_t ith, int32_t nth) {
    ternary_task *t = p;
    tn_kernel_ternary(t->op, &t->out, &t->a, &t->b, t->has_c ? &t->c : NULL, t->scalar, t->compute, ith, nth);
}

static tn_status run_ternary(void *p) {
    ternary_task *t = p;
    tn_parallel_run(ternary_slice, t, 4 * tn_tensor_numel(&t->out));
    return TN_STATUS_OK;
}

tn_status tn_ternary_async(tn_stream_t stream, const char *name, tn_ternary_op op,
                           const tn_tensor *out, const tn_tensor *a, const tn_tensor *b,
                           const tn_tensor *c, double scalar, tn_dtype compute) {
    if (op < 0 || op >= TN_TERNARY_COUNT_ || (!tn_dtype_is_float(compute) && op != TN_TERNARY_ADDCMUL) ||
        (!c && op != TN_TERNARY_LERP))
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "bad ternary op or operands");
    const tn_tensor *views[4] = {out, a, b, c};
    tn_status st = check_views(views, c ? 4 : 3);
    if (st != TN_STATUS_OK || tn_tensor_numel(out) == 0) return st;
    ternary_task t = {op, *out, *a, *b, c ? *c : *b, c != NULL, scalar, compute};
    return tn_stream_launch(stream, name ? name : "ternary", run_ternary, &t, sizeof t);
}
