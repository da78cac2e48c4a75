/* Copies and fills launched on streams (see tn/copy.h). */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tn/capture.h"
#include "tn/copy.h"
#include "tn/kernels.h"
#include "tn/parallel.h"

typedef struct copy_task {
    tn_tensor dst;
    tn_tensor src;
    void *staging; /* owned by the task */
} copy_task;

static void copy_slice(void *p, int32_t ith, int32_t nth) {
    copy_task *t = p;
    tn_kernel_copy(&t->dst, &t->src, ith, nth);
}

static tn_status run_copy(void *p) {
    copy_task *t = p;
    tn_parallel_run(copy_slice, t, tn_tensor_numel(&t->dst));
    free(t->staging);
    return TN_STATUS_OK;
}

static tn_status check_view(const tn_tensor *t, const char *what) {
    if (t->ndim < 0 || t->ndim > TN_MAX_DIMS)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "%s has %d dimensions; at most %d supported",
                        what, (int)t->ndim, TN_MAX_DIMS);
    if (tn_dtype_size(t->dtype) == 0)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "%s has an unknown dtype", what);
    for (int32_t d = 0; d < t->ndim; d++)
        if (t->sizes[d] < 0)
            return tn_error(TN_STATUS_INVALID_ARGUMENT, "%s has a negative size", what);
    if (tn_tensor_numel(t) > 0 && !t->data)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "%s has no data", what);
    return TN_STATUS_OK;
}

/* Lowest and one-past-highest byte the view touches (numel > 0). */
static void view_span(const tn_tensor *t, char **lo, char **hi) {
    int64_t min = 0, max = 0;
    for (int32_t d = 0; d < t->ndim; d++) {
        int64_t reach = (t->sizes[d] - 1) * t->strides[d];
        if (reach < 0)
            min += reach;
        else
            max += reach;
    }
    int64_t es = tn_dtype_size(t->dtype);
    *lo = (char *)t->data + min * es;
    *hi = (char *)t->data + (max + 1) * es;
}

tn_status tn_copy_async(tn_stream_t stream, const tn_tensor *dst, const tn_tensor *src,
                        uint32_t flags) {
    tn_status st;
    if ((st = check_view(dst, "copy destination")) != TN_STATUS_OK) return st;
    if ((st = check_view(src, "copy source")) != TN_STATUS_OK) return st;
    if (dst->ndim != src->ndim || memcmp(dst->sizes, src->sizes, sizeof(int64_t) * (size_t)dst->ndim))
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "copy source and destination differ in shape");
    if (tn_tensor_numel(dst) == 0) return TN_STATUS_OK;
    copy_task t = {*dst, *src, NULL};
    if (flags & (TN_COPY_FLAGS_STAGE_SRC | TN_COPY_FLAGS_BLOCKING)) {
        /* An idle stream lets us copy on this thread before returning: for a pageable source
         * that is what staging would achieve, with one copy instead of two; for a copy the
         * caller waits for anyway, it saves the hand-over to the worker thread. */
        st = tn_stream_run_if_idle(stream, "copy", run_copy, &t);
        if (st != TN_STATUS_NOT_READY) return st;
    }
    if (flags & TN_COPY_FLAGS_STAGE_SRC) {
        tn_capture_refuse("a copy from host memory");
        char *lo, *hi;
        view_span(src, &lo, &hi);
        t.staging = malloc((size_t)(hi - lo));
        if (!t.staging)
            return tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory to stage a %lld-byte copy",
                            (long long)(hi - lo));
        memcpy(t.staging, lo, (size_t)(hi - lo));
        t.src.data = (char *)t.staging + ((char *)src->data - lo);
    }
    st = tn_stream_launch(stream, "copy", run_copy, &t, sizeof t);
    return st;
}

/* Several device copies in one launch (a concatenation): views[2i] <- views[2i + 1]. */
typedef struct copy_many_task {
    int32_t count, at;
    tn_tensor views[];
} copy_many_task;

static void copy_many_slice(void *p, int32_t ith, int32_t nth) {
    copy_many_task *t = p;
    tn_kernel_copy(&t->views[2 * t->at], &t->views[2 * t->at + 1], ith, nth);
}

static tn_status run_copy_many(void *p) {
    copy_many_task *t = p;
    for (t->at = 0; t->at < t->count; t->at++)
        tn_parallel_run(copy_many_slice, t, tn_tensor_numel(&t->views[2 * t->at]));
    return TN_STATUS_OK;
}

tn_status tn_copy_many_async(tn_stream_t stream, const char *name, const tn_tensor *dst, const tn_tensor *src,
                             int32_t count) {
    tn_status st;
    if (count < 0) return tn_error(TN_STATUS_INVALID_ARGUMENT, "copy_many with a negative count");
    int32_t kept = 0;
    for (int32_t i = 0; i < count; i++) {
        if ((st = check_view(&dst[i], "copy destination")) != TN_STATUS_OK) return st;
        if ((st = check_view(&src[i], "copy source")) != TN_STATUS_OK) return st;
        if (dst[i].ndim != src[i].ndim || memcmp(dst[i].sizes, src[i].sizes, sizeof(int64_t) * (size_t)dst[i].ndim))
            return tn_error(TN_STATUS_INVALID_ARGUMENT, "copy %d: source and destination differ in shape", (int)i);
        kept += tn_tensor_numel(&dst[i]) > 0;
    }
    if (!kept) return TN_STATUS_OK;
    size_t size = sizeof(copy_many_task) + sizeof(tn_tensor) * 2 * (size_t)kept;
    copy_many_task *t = malloc(size);
    if (!t) return tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory to launch %d copies", (int)count);
    t->count = kept;
    t->at = 0;
    for (int32_t i = 0, j = 0; i < count; i++)
        if (tn_tensor_numel(&dst[i]) > 0) {
            t->views[2 * j] = dst[i];
            t->views[2 * j + 1] = src[i];
            j++;
        }
    st = tn_stream_launch(stream, name ? name : "copy_many", run_copy_many, t, size);
    free(t);
    return st;
}

typedef struct memcpy_task {
    void *dst;
    const void *src;
    uint64_t size;
} memcpy_task;

static tn_status run_memcpy(void *p) {
    memcpy_task *t = p;
    return tn_driver()->memcpy(tn_driver()->ctx, t->dst, t->src, t->size);
}

tn_status tn_memcpy_async(tn_stream_t stream, void *dst, const void *src, uint64_t size) {
    if (!size) return TN_STATUS_OK;
    if (!dst || !src) return tn_error(TN_STATUS_INVALID_ARGUMENT, "memcpy with a NULL pointer");
    memcpy_task t = {dst, src, size};
    return tn_stream_launch(stream, "memcpy", run_memcpy, &t, sizeof t);
}

typedef struct fill_task {
    tn_tensor dst;
    tn_scalar value;
} fill_task;

static void fill_slice(void *p, int32_t ith, int32_t nth) {
    fill_task *t = p;
    tn_kernel_fill(&t->dst, &t->value, ith, nth);
}

static tn_status run_fill(void *p) {
    fill_task *t = p;
    tn_parallel_run(fill_slice, t, tn_tensor_numel(&t->dst));
    return TN_STATUS_OK;
}

tn_status tn_fill_async(tn_stream_t stream, const tn_tensor *dst, const tn_scalar *value) {
    tn_status st = check_view(dst, "fill destination");
    if (st != TN_STATUS_OK || tn_tensor_numel(dst) == 0) return st;
    fill_task t = {*dst, *value};
    return tn_stream_launch(stream, "fill", run_fill, &t, sizeof t);
}
