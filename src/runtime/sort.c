/* Launching row sorts and top-k on a stream, with per-thread scratch. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tn/parallel.h"
#include "tn/sort.h"

typedef struct sort_task {
    tn_tensor values, indices, in;
    int32_t descending;
    int failed;
} sort_task;

static void sort_slice(void *p, int32_t ith, int32_t nth) {
    sort_task *t = p;
    int64_t n = t->in.ndim ? t->in.sizes[t->in.ndim - 1] : 1;
    void *sort_scratch = tn_thread_scratch((size_t)(2 * n) * 16);
    if (!sort_scratch) {
        t->failed = 1;
        return;
    }
    tn_kernel_sort(&t->values, &t->indices, &t->in, t->descending, sort_scratch, ith, nth);
}

static tn_status run_sort(void *p) {
    sort_task *t = p;
    tn_parallel_run(sort_slice, t, tn_tensor_numel(&t->in) * 8);
    return t->failed ? tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory to sort rows") : TN_STATUS_OK;
}

tn_status tn_sort_async(tn_stream_t stream, const char *name, const tn_tensor *values,
                        const tn_tensor *indices, const tn_tensor *in, int32_t descending) {
    int32_t nd = in->ndim;
    if (values->ndim != nd || indices->ndim != nd || indices->dtype != TN_DTYPE_I64 ||
        (nd && (values->sizes[nd - 1] > in->sizes[nd - 1] || indices->sizes[nd - 1] != values->sizes[nd - 1])) ||
        (nd > 1 && memcmp(values->sizes, in->sizes, sizeof(int64_t) * (size_t)(nd - 1))))
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "sort: bad operands");
    if (tn_tensor_numel(values) == 0) return TN_STATUS_OK;
    sort_task t = {*values, *indices, *in, descending, 0};
    return tn_stream_launch(stream, name ? name : "sort", run_sort, &t, sizeof t);
}
