/* Launching batched triangular solves and SVDs across the kernel thread pool. */
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

typedef struct svd_task {
    tn_tensor a, u, s, vh;
    int has_uv, failed;
    uint8_t *bad;
} svd_task;

static void svd_slice(void *p, int32_t ith, int32_t nth) {
    svd_task *t = p;
    int64_t m = t->a.sizes[1], n = t->a.sizes[2];
    int32_t full = t->has_uv && t->u.sizes[2] == m && t->vh.sizes[1] == n;
    double *work = tn_thread_scratch(sizeof(double) * (size_t)tn_svd_scratch_doubles(m, n, full));
    if (!work) {
        t->failed = 1;
        return;
    }
    tn_kernel_svd(&t->a, t->has_uv ? &t->u : NULL, &t->s, t->has_uv ? &t->vh : NULL, work, t->bad, ith, nth);
}

static tn_status run_svd(void *p) {
    svd_task *t = p;
    int64_t m = t->a.sizes[1], n = t->a.sizes[2], c = m < n ? m : n;
    tn_parallel_run(svd_slice, t, t->a.sizes[0] * c * c * (m + n) * 8); /* a few sweeps of c^2 / 2 rotations */
    return t->failed ? tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory for an SVD") : TN_STATUS_OK;
}

tn_status tn_svd_async(tn_stream_t stream, const char *name, const tn_tensor *a, const tn_tensor *u,
                       const tn_tensor *s, const tn_tensor *vh, uint8_t *bad) {
    if (a->ndim != 3 || (a->dtype != TN_DTYPE_F32 && a->dtype != TN_DTYPE_F64) || !bad)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "svd: a (batch, m, n) float32 or float64 view expected");
    int64_t batch = a->sizes[0], m = a->sizes[1], n = a->sizes[2], k = m < n ? m : n;
    if (s->ndim != 3 || s->sizes[0] != batch || s->sizes[1] != 1 || s->sizes[2] != k || !tn_dtype_is_float(s->dtype))
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "svd: s must be a float (batch, 1, min(m, n)) view");
    if ((u == NULL) != (vh == NULL))
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "svd: u and vh are both given or both NULL");
    if (u) { /* reduced (k columns of u, k rows of vh) or full (m and n) */
        if (u->ndim != 3 || vh->ndim != 3 || u->sizes[0] != batch || u->sizes[1] != m ||
            !((u->sizes[2] == m && vh->sizes[1] == n) || (u->sizes[2] == k && vh->sizes[1] == k)) || vh->sizes[0] != batch ||
            vh->sizes[2] != n || !tn_dtype_is_float(u->dtype) || !tn_dtype_is_float(vh->dtype))
            return tn_error(TN_STATUS_INVALID_ARGUMENT, "svd: u (batch, m, k or m) and vh (batch, k or n, n) expected");
    }
    if (batch == 0) return TN_STATUS_OK;
    svd_task t = {*a, u ? *u : *a, *s, vh ? *vh : *a, u != NULL, 0, bad};
    return tn_stream_launch(stream, name ? name : "svd", run_svd, &t, sizeof t);
}
