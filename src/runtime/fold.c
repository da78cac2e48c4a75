/* Launching im2col and col2im on a stream, (batch, channel) planes split across threads. */
#include "internal.h"
#include "tn/fold.h"
#include "tn/parallel.h"

typedef struct fold_task {
    tn_fold2d f;
    tn_dtype dtype;
    int to_columns, failed;
    void *dst;
    const void *src;
} fold_task;

static void fold_slice(void *p, int32_t ith, int32_t nth) {
    fold_task *t = p;
    if (t->to_columns) {
        tn_kernel_im2col(&t->f, tn_dtype_size(t->dtype), t->dst, t->src, ith, nth);
        return;
    }
    float *scratch = NULL;
    if (t->dtype == TN_DTYPE_BF16 || t->dtype == TN_DTYPE_F16) {
        scratch = tn_thread_scratch((size_t)(t->f.height * t->f.width) * sizeof(float));
        if (!scratch) {
            t->failed = 1;
            return;
        }
    }
    tn_kernel_col2im(&t->f, t->dtype, t->dst, t->src, scratch, ith, nth);
}

static tn_status run_fold(void *p) {
    fold_task *t = p;
    const tn_fold2d *f = &t->f;
    tn_parallel_run(fold_slice, t, f->batch * f->channels * f->kernel_h * f->kernel_w * f->blocks_h * f->blocks_w);
    return t->failed ? tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory for a col2im plane") : TN_STATUS_OK;
}

static tn_status launch(tn_stream_t stream, const char *name, const tn_fold2d *f, tn_dtype dtype, int to_columns,
                        void *dst, const void *src) {
    if (f->batch < 0 || f->channels < 0 || f->height < 1 || f->width < 1 || f->kernel_h < 1 || f->kernel_w < 1 ||
        f->stride_h < 1 || f->stride_w < 1 || f->dil_h < 1 || f->dil_w < 1 || f->pad_h < 0 || f->pad_w < 0 ||
        f->blocks_h < 0 || f->blocks_w < 0)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "%s: sizes, strides and dilations must be positive, padding "
                        "non-negative", to_columns ? "im2col" : "col2im");
    if (!to_columns && dtype != TN_DTYPE_F32 && dtype != TN_DTYPE_F64 && dtype != TN_DTYPE_BF16 &&
        dtype != TN_DTYPE_F16)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "col2im: floating dtype expected");
    if (f->batch * f->channels == 0) return TN_STATUS_OK;
    fold_task t = {*f, dtype, to_columns, 0, dst, src};
    if (to_columns) tn_fold2d_contiguous_columns(&t.f);
    return tn_stream_launch(stream, name ? name : (to_columns ? "im2col" : "col2im"), run_fold, &t, sizeof t);
}

tn_status tn_im2col_async(tn_stream_t stream, const char *name, const tn_fold2d *f, tn_dtype dtype, void *cols,
                          const void *planes) {
    return launch(stream, name, f, dtype, 1, cols, planes);
}

tn_status tn_col2im_async(tn_stream_t stream, const char *name, const tn_fold2d *f, tn_dtype dtype, void *planes,
                          const void *cols) {
    return launch(stream, name, f, dtype, 0, planes, cols);
}
