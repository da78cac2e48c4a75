/* Launching batched triangular solves across the kernel thread pool. */
#include "internal.h"
#include "tn/linalg.h"
#include "tn/parallel.h"

typedef struct solve_task {
    tn_tensor out, a, b;
    int32_t upper, unit;
} solve_task;

static void solve_slice(void *p, int32_t ith, int32_t nth) {
    solve_task *t = p;
    tn_kernel_solve_triangular(&t->out, &t->a, &t->b, t->upper, t->unit, ith, nth);
}

static tn_status run_solve(void *p) {
    solve_task *t = p;
    int64_t n = t->out.sizes[1];
    tn_parallel_run(solve_slice, t, tn_tensor_numel(&t->out) * n);
    return TN_STATUS_OK;
}

tn_status tn_solve_triangular_async(tn_stream_t stream, const char *name, const tn_tensor *out,
                                    const tn_tensor *a, const tn_tensor *b, int32_t upper, int32_t unit) {
    if (a->ndim != 3 || b->ndim != 3 || out->ndim != 3 || a->sizes[1] != a->sizes[2] ||
        b->sizes[1] != a->sizes[1] || out->sizes[0] != a->sizes[0] || b->sizes[0] != a->sizes[0] ||
        out->sizes[1] != b->sizes[1] || out->sizes[2] != b->sizes[2] || !tn_dtype_is_float(out->dtype) ||
        a->dtype != out->dtype || b->dtype != out->dtype)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "solve_triangular: (batch, n, n) and (batch, n, k) float views expected");
    if (tn_tensor_numel(out) == 0) return TN_STATUS_OK;
    solve_task t = {*out, *a, *b, upper, unit};
    return tn_stream_launch(stream, name ? name : "solve_triangular", run_solve, &t, sizeof t);
}
