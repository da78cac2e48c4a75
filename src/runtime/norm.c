/* Launching layer norm (forward and input gradient) on a stream. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tn/parallel.h"
#include "tn/norm.h"

typedef struct norm_task {
    tn_layer_norm ln;
    int backward;
    int failed;
} norm_task;

static void norm_slice(void *p, int32_t ith, int32_t nth) {
    norm_task *t = p;
    int64_t floats = tn_layer_norm_scratch_floats(&t->ln);
    float *scratch = floats ? tn_thread_scratch(sizeof(float) * (size_t)floats) : NULL;
    if (floats && !scratch) {
        t->failed = 1;
        return;
    }
    tn_kernel_layer_norm(&t->ln, t->backward, scratch, ith, nth);
}

static tn_status run_norm(void *p) {
    norm_task *t = p;
    tn_parallel_run(norm_slice, t, t->ln.rows * t->ln.n);
    return t->failed ? tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory for layer norm rows")
                     : TN_STATUS_OK;
}

static tn_status launch_norm(tn_stream_t stream, const char *name, const tn_layer_norm *ln, int backward) {
    if (ln->rows < 0 || ln->n < 0) return tn_error(TN_STATUS_INVALID_ARGUMENT, "layer_norm: bad shape");
    if (ln->rms && (ln->bias || ln->mean))
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "rms_norm: takes no bias and has no mean");
    if (ln->rows == 0) return TN_STATUS_OK;
    norm_task t = {*ln, backward, 0};
    return tn_stream_launch(stream, name ? name : "layer_norm", run_norm, &t, sizeof t);
}

tn_status tn_layer_norm_async(tn_stream_t stream, const char *name, const tn_layer_norm *ln) {
    return launch_norm(stream, name, ln, 0);
}

tn_status tn_layer_norm_backward_async(tn_stream_t stream, const char *name, const tn_layer_norm *ln) {
    return launch_norm(stream, name, ln, 1);
}
