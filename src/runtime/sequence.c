/* Launching arange, cumsum and triu/tril on a stream. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tn/parallel.h"
#include "tn/sequence.h"

typedef struct seq_task {
    int kind; /* 0 arange, 1 cumsum, 2 triangle, 3 linspace (from start.f to step.f) */
    tn_tensor out, in;
    tn_scalar start, step;
    int64_t k;
    int32_t upper;
} seq_task;

static void seq_slice(void *p, int32_t ith, int32_t nth) {
    seq_task *t = p;
    if (t->kind == 0)
        tn_kernel_arange(&t->out, &t->start, &t->step, ith, nth);
    else if (t->kind == 1)
        tn_kernel_cumsum(&t->out, &t->in, ith, nth);
    else if (t->kind == 3)
        tn_kernel_linspace(&t->out, t->start.f, t->step.f, ith, nth);
    else
        tn_kernel_triangle(&t->out, &t->in, t->k, t->upper, ith, nth);
}

static tn_status run_seq(void *p) {
    seq_task *t = p;
    tn_parallel_run(seq_slice, t, tn_tensor_numel(&t->out));
    return TN_STATUS_OK;
}

static tn_status launch_seq(tn_stream_t stream, const char *name, const seq_task *t) {
    if (t->out.ndim > TN_MAX_DIMS || tn_tensor_numel(&t->out) == 0) return TN_STATUS_OK;
    return tn_stream_launch(stream, name, run_seq, t, sizeof *t);
}

tn_status tn_arange_async(tn_stream_t stream, const tn_tensor *out, const tn_scalar *start,
                          const tn_scalar *step) {
    if (out->ndim != 1) return tn_error(TN_STATUS_INVALID_ARGUMENT, "arange: 1-D output expected");
    seq_task t = {0, *out, *out, *start, *step, 0, 0};
    return launch_seq(stream, "aten::arange.start_out", &t);
}

tn_status tn_linspace_async(tn_stream_t stream, const tn_tensor *out, double start, double end) {
    if (out->ndim != 1) return tn_error(TN_STATUS_INVALID_ARGUMENT, "linspace: 1-D output expected");
    tn_scalar a = {0}, b = {0};
    a.f = start, b.f = end;
    seq_task t = {3, *out, *out, a, b, 0, 0};
    return launch_seq(stream, "aten::linspace.out", &t);
}

tn_status tn_cumsum_async(tn_stream_t stream, const tn_tensor *out, const tn_tensor *in) {
    if (out->ndim != in->ndim || memcmp(out->sizes, in->sizes, sizeof(int64_t) * (size_t)out->ndim))
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "cumsum: operands differ in shape");
    seq_task t = {1, *out, *in, {0}, {0}, 0, 0};
    return launch_seq(stream, "aten::cumsum.out", &t);
}

tn_status tn_triangle_async(tn_stream_t stream, const tn_tensor *out, const tn_tensor *in,
                            int64_t k, int32_t upper) {
    if (out->ndim < 2 || out->ndim != in->ndim ||
        memcmp(out->sizes, in->sizes, sizeof(int64_t) * (size_t)out->ndim) || out->dtype != in->dtype)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "triu/tril: operands differ or are not matrices");
    seq_task t = {2, *out, *in, {0}, {0}, k, upper};
    return launch_seq(stream, upper ? "aten::triu.out" : "aten::tril.out", &t);
}
