/* Launching 2-D max and average pooling and their backward on a stream, planes split across
 * threads. */
#include "internal.h"
#include "tn/parallel.h"
#include "tn/pool.h"

typedef struct pool_task {
    tn_pool2d shape;
    tn_dtype dtype;
    void *out;
    int64_t *indices; /* NULL: average pooling */
    const void *in;
    int backward, bad;
    int count_include_pad;
    int64_t divisor;
} pool_task;

static void pool_slice(void *p, int32_t ith, int32_t nth) {
    pool_task *t = p;
    if (!t->indices) {
        float *scratch = NULL;
        if (t->backward && (t->dtype == TN_DTYPE_BF16 || t->dtype == TN_DTYPE_F16)) {
            scratch = tn_thread_scratch((size_t)(t->shape.in_h * t->shape.in_w) * sizeof(float));
            if (!scratch) {
                t->bad = 2;
                return;
            }
        }
        tn_kernel_avg_pool2d(&t->shape, t->count_include_pad, t->divisor, t->dtype, t->backward, t->out, t->in,
                             scratch, ith, nth);
        return;
    }
    if (t->backward) {
        if (tn_kernel_max_pool2d_backward(&t->shape, t->dtype, t->out, t->in, t->indices, ith, nth)) t->bad = 1;
    } else
        tn_kernel_max_pool2d(&t->shape, t->dtype, t->out, t->indices, t->in, ith, nth);
}

static tn_status run_pool(void *p) {
    pool_task *t = p;
    const tn_pool2d *s = &t->shape;
    int64_t window = t->backward ? 1 : s->kernel_h * s->kernel_w;
    tn_parallel_run(pool_slice, t, s->planes * (s->in_h * s->in_w + s->out_h * s->out_w * window));
    if (t->bad == 2) return tn_error(TN_STATUS_OUT_OF_MEMORY, "avg_pool2d_backward: no host memory for a plane");
    return t->bad ? tn_error(TN_STATUS_INVALID_ARGUMENT, "max_pool2d_backward: an index lies outside its plane")
                  : TN_STATUS_OK;
}

static int floating(tn_dtype dt) {
    return dt == TN_DTYPE_F32 || dt == TN_DTYPE_F64 || dt == TN_DTYPE_BF16 || dt == TN_DTYPE_F16;
}

/* op's dtype (floating, or int64 too when int64_ok) and geometry */
static tn_status check_shape(const tn_pool2d *s, tn_dtype dt, int int64_ok, const char *op) {
    if (!floating(dt) && !(int64_ok && dt == TN_DTYPE_I64))
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "%s: floating dtype expected", op);
    if (s->planes < 0 || s->in_h < 1 || s->in_w < 1 || s->out_h < 1 || s->out_w < 1 || s->kernel_h < 1 ||
        s->kernel_w < 1 || s->stride_h < 1 || s->stride_w < 1 || s->dilation_h < 1 || s->dilation_w < 1 ||
        s->pad_h < 0 || s->pad_w < 0 || (s->out_h - 1) * s->stride_h - s->pad_h >= s->in_h ||
        (s->out_w - 1) * s->stride_w - s->pad_w >= s->in_w)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "%s: inconsistent shape", op);
    return TN_STATUS_OK;
}

tn_status tn_max_pool2d_async(tn_stream_t stream, const tn_pool2d *shape, tn_dtype dtype, void *out,
                              int64_t *indices, const void *in) {
    tn_status st = check_shape(shape, dtype, 0, "max_pool2d");
    if (st != TN_STATUS_OK || shape->planes == 0) return st;
    pool_task t = {*shape, dtype, out, indices, in, 0, 0, 0, 0};
    return tn_stream_launch(stream, "aten::max_pool2d_with_indices.out", run_pool, &t, sizeof t);
}

tn_status tn_max_pool2d_backward_async(tn_stream_t stream, const tn_pool2d *shape, tn_dtype dtype,
                                       void *grad_in, const void *grad_out, const int64_t *indices) {
    tn_status st = check_shape(shape, dtype, 0, "max_pool2d_backward");
    if (st != TN_STATUS_OK || shape->planes == 0) return st;
    if (!indices) return tn_error(TN_STATUS_INVALID_ARGUMENT, "max_pool2d_backward: indices expected");
    pool_task t = {*shape, dtype, grad_in, (int64_t *)indices, grad_out, 1, 0, 0, 0};
    return tn_stream_launch(stream, "aten::max_pool2d_with_indices_backward.grad_input", run_pool, &t, sizeof t);
}

static tn_status launch_avg(tn_stream_t stream, const char *name, const tn_pool2d *shape, int count_include_pad,
                            int64_t divisor, tn_dtype dtype, int backward, void *dst, const void *src) {
    tn_status st = check_shape(shape, dtype, !backward, name); /* int64 sums: the forward only */
    if (st != TN_STATUS_OK) return st;
    if (shape->dilation_h != 1 || shape->dilation_w != 1)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "%s: dilation 1 expected", name);
    if (shape->planes == 0) return TN_STATUS_OK;
    pool_task t = {*shape, dtype, dst, NULL, src, backward, 0, count_include_pad, divisor};
    return tn_stream_launch(stream, name, run_pool, &t, sizeof t);
}

tn_status tn_avg_pool2d_async(tn_stream_t stream, const tn_pool2d *shape, int count_include_pad, int64_t divisor,
                              tn_dtype dtype, void *out, const void *in) {
    return launch_avg(stream, "aten::avg_pool2d.out", shape, count_include_pad, divisor, dtype, 0, out, in);
}

tn_status tn_avg_pool2d_backward_async(tn_stream_t stream, const tn_pool2d *shape, int count_include_pad,
                                       int64_t divisor, tn_dtype dtype, void *grad_in, const void *grad_out) {
    return launch_avg(stream, "aten::avg_pool2d_backward.grad_input", shape, count_include_pad, divisor, dtype, 1,
                      grad_in, grad_out);
}
