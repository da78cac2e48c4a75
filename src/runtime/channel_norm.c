/* Launching batch and group normalisation on a stream: the per-plane sums and the element pass
 * split across threads by planes, the statistics in between on the stream's thread. */
#include "internal.h"
#include "tn/channel_norm.h"
#include "tn/parallel.h"

typedef struct channel_norm_task {
    tn_channel_norm cn;
    int backward;
    double *work;
} channel_norm_task;

static void sums_slice(void *p, int32_t ith, int32_t nth) {
    channel_norm_task *t = p;
    tn_kernel_channel_norm_sums(&t->cn, t->backward, t->work, ith, nth);
}

static void apply_slice(void *p, int32_t ith, int32_t nth) {
    channel_norm_task *t = p;
    tn_kernel_channel_norm_apply(&t->cn, t->backward, t->work, ith, nth);
}

static tn_status run_channel_norm(void *p) {
    channel_norm_task *t = p;
    const tn_channel_norm *cn = &t->cn;
    int64_t planes = cn->n * cn->c, elements = planes * cn->s;
    /* the stream thread's scratch: the slices use none of their own, so they can share it */
    t->work = tn_thread_scratch(sizeof(double) * (size_t)(4 * planes + 2 * cn->c));
    if (!t->work) return tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory for normalisation statistics");
    /* batch norm's evaluation forward needs no sums: its statistics are the running ones */
    if (t->backward || cn->groups || cn->training) tn_parallel_run(sums_slice, t, elements);
    tn_kernel_channel_norm_coefficients(cn, t->backward, t->work);
    if (cn->y) tn_parallel_run(apply_slice, t, elements); /* a backward may want only the weight's */
    return TN_STATUS_OK;
}

static tn_status launch(tn_stream_t stream, const char *name, const tn_channel_norm *cn, int backward) {
    const char *what = cn->groups ? "group_norm" : "batch_norm";
    if (cn->n < 0 || cn->c < 1 || cn->s < 0 || cn->groups < 0 || (cn->groups && cn->c % cn->groups))
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "%s: bad shape", what);
    tn_dtype dt = cn->dtype;
    if (dt != TN_DTYPE_F32 && dt != TN_DTYPE_F64 && dt != TN_DTYPE_BF16 && dt != TN_DTYPE_F16)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "%s: floating dtype expected", what);
    if (cn->param_dtype != cn->dtype && cn->param_dtype != TN_DTYPE_F32)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "%s: parameters must have the data's dtype or float32", what);
    if (!cn->groups && !cn->training && (!cn->running_mean || !cn->running_var))
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "%s: evaluation needs the running statistics", what);
    if (cn->n == 0 || cn->s == 0) return TN_STATUS_OK;
    channel_norm_task t = {*cn, backward, NULL};
    return tn_stream_launch(stream, name ? name : what, run_channel_norm, &t, sizeof t);
}

tn_status tn_channel_norm_async(tn_stream_t stream, const char *name, const tn_channel_norm *cn) {
    return launch(stream, name, cn, 0);
}

tn_status tn_channel_norm_backward_async(tn_stream_t stream, const char *name, const tn_channel_norm *cn) {
    return launch(stream, name, cn, 1);
}
