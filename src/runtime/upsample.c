/* Launching 2-D upsampling and its input gradient on a stream, planes split across threads. */
#include "internal.h"
#include "tn/parallel.h"
#include "tn/upsample.h"

typedef struct upsample_task {
    tn_upsample2d u;
    tn_dtype dtype;
    int backward, failed;
    void *dst;
    const void *src;
} upsample_task;

static void upsample_slice(void *p, int32_t ith, int32_t nth) {
    upsample_task *t = p;
    void *scratch = tn_thread_scratch((size_t)tn_upsample2d_scratch_bytes(&t->u));
    if (!scratch) {
        t->failed = 1;
        return;
    }
    tn_kernel_upsample2d(&t->u, t->dtype, t->backward, t->dst, t->src, scratch, ith, nth);
}

static tn_status run_upsample(void *p) {
    upsample_task *t = p;
    const tn_upsample2d *u = &t->u;
    tn_parallel_run(upsample_slice, t, u->planes * (u->in_h * u->in_w + u->out_h * u->out_w));
    return t->failed ? tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory for upsampling planes") : TN_STATUS_OK;
}

static tn_status launch(tn_stream_t stream, const char *name, const tn_upsample2d *u, tn_dtype dtype, int backward,
                        void *dst, const void *src) {
    int floating = dtype == TN_DTYPE_F32 || dtype == TN_DTYPE_F64 || dtype == TN_DTYPE_BF16 || dtype == TN_DTYPE_F16;
    if (u->planes < 0 || u->in_h < 1 || u->in_w < 1 || u->out_h < 1 || u->out_w < 1)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "upsample2d: sizes must be positive");
    if ((backward || u->mode == TN_UPSAMPLE_BILINEAR || u->mode == TN_UPSAMPLE_BICUBIC) && !floating)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "upsample2d: floating dtype expected");
    if (u->planes == 0) return TN_STATUS_OK;
    upsample_task t = {*u, dtype, backward, 0, dst, src};
    return tn_stream_launch(stream, name ? name : "upsample2d", run_upsample, &t, sizeof t);
}

tn_status tn_upsample2d_async(tn_stream_t stream, const char *name, const tn_upsample2d *u, tn_dtype dtype,
                              void *out, const void *in) {
    return launch(stream, name, u, dtype, 0, out, in);
}

tn_status tn_upsample2d_backward_async(tn_stream_t stream, const char *name, const tn_upsample2d *u, tn_dtype dtype,
                                       void *grad_in, const void *grad_out) {
    return launch(stream, name, u, dtype, 1, grad_in, grad_out);
}
