/* Launching 2-D max pooling and its backward on a stream, planes split across threads. */
#include "internal.h"
#include "tn/parallel.h"
#include "tn/pool.h"

typedef struct pool_task {
    tn_pool2d shape;
    tn_dtype dtype;
    void *out;
    int64_t *indices;
    const void *in;
    int backward, bad;
} pool_task;

static void pool_slice(void *p, int32_t ith, int32_t nth) {
    pool_task *t = p;
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
    return t->bad ? tn_error(TN_STATUS_INVALID_ARGUMENT, "max_pool2d_backward: an index lies outside its plane")
                  : TN_STATUS_OK;
}

static tn_status check_shape(const tn_pool2d *s, tn_dtype dt) {
    if (dt != TN_DTYPE_F32 && dt != TN_DTYPE_F64 && dt != TN_DTYPE_BF16 && dt != TN_DTYPE_F16)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "max_pool2d: floating dtype expected");
    if (s->planes < 0 || s->in_h < 1 || s->in_w < 1 || s->out_h < 1 || s->out_w < 1 || s->kernel_h < 1 ||
        s->kernel_w < 1 || s->stride_h < 1 || s->stride_w < 1 || s->dilation_h < 1 || s->dilation_w < 1 ||
        s->pad_h < 0 || s->pad_w < 0 || (s->out_h - 1) * s->stride_h - s->pad_h >= s->in_h ||
        (s->out_w - 1) * s->stride_w - s->pad_w >= s->in_w)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "max_pool2d: inconsistent shape");
    return TN_STATUS_OK;
}

tn_status tn_max_pool2d_async(tn_stream_t stream, const tn_pool2d *shape, tn_dtype dtype, void *out,
                              int64_t *indices, const void *in) {
    tn_status st = check_shape(shape, dtype);
    if (st != TN_STATUS_OK || shape->planes == 0) return st;
    pool_task t = {*shape, dtype, out, indices, in, 0, 0};
    return tn_stream_launch(stream, "aten::max_pool2d_with_indices.out", run_pool, &t, sizeof t);
}

tn_status tn_max_pool2d_backward_async(tn_stream_t stream, const tn_pool2d *shape, tn_dtype dtype,
                                       void *grad_in, const void *grad_out, const int64_t *indices) {
    tn_status st = check_shape(shape, dtype);
    if (st != TN_STATUS_OK || shape->planes == 0) return st;
    pool_task t = {*shape, dtype, grad_in, (int64_t *)indices, grad_out, 1, 0};
    return tn_stream_launch(stream, "aten::max_pool2d_with_indices_backward.grad_input", run_pool, &t, sizeof t);
}
