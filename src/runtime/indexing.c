/* Launching index_select, index_add, scatter, advanced-index gathers and where on a stream,
 * split across the kernel thread pool. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tn/parallel.h"
#include "tn/index.h"

typedef struct index_task {
    tn_tensor out, in, index;
    int32_t dim;
    int bad;
} index_task;

static void index_slice(void *p, int32_t ith, int32_t nth) {
    index_task *t = p;
    if (tn_kernel_index_select(&t->out, &t->in, t->dim, &t->index, ith, nth) != TN_STATUS_OK)
        t->bad = 1;
}

static tn_status run_index(void *p) {
    index_task *t = p;
    tn_parallel_run(index_slice, t, tn_tensor_numel(&t->out));
    return t->bad ? tn_error(TN_STATUS_INVALID_ARGUMENT, "index out of range in self") : TN_STATUS_OK;
}

tn_status tn_index_select_async(tn_stream_t stream, const char *name, const tn_tensor *out,
                                const tn_tensor *in, int32_t dim, const tn_tensor *index) {
    if (in->ndim != out->ndim || dim < 0 || dim >= in->ndim || index->ndim > 1 ||
        (index->dtype != TN_DTYPE_I64 && index->dtype != TN_DTYPE_I32) || in->dtype != out->dtype)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "index_select: bad operands");
    if (tn_tensor_numel(out) == 0) return TN_STATUS_OK;
    index_task t = {*out, *in, *index, dim, 0};
    return tn_stream_launch(stream, name ? name : "index_select", run_index, &t, sizeof t);
}

typedef struct index_add_task {
    tn_tensor out, index, src;
    int64_t skip;
    int bad;
} index_add_task;

static void index_add_slice(void *p, int32_t ith, int32_t nth) {
    index_add_task *t = p;
    if (tn_kernel_index_add_rows(&t->out, &t->index, &t->src, t->skip, ith, nth) != TN_STATUS_OK) t->bad = 1;
}

static tn_status run_index_add(void *p) {
    index_add_task *t = p;
    tn_parallel_run(index_add_slice, t, tn_tensor_numel(&t->src));
    return t->bad ? tn_error(TN_STATUS_INVALID_ARGUMENT, "index out of range in self") : TN_STATUS_OK;
}

tn_status tn_index_add_rows_async(tn_stream_t stream, const char *name, const tn_tensor *out,
                                  const tn_tensor *index, const tn_tensor *src, int64_t skip) {
    if (out->ndim != 2 || src->ndim != 2 || index->ndim != 1 || src->sizes[0] != index->sizes[0] ||
        src->sizes[1] != out->sizes[1] || out->dtype != src->dtype ||
        (index->dtype != TN_DTYPE_I64 && index->dtype != TN_DTYPE_I32))
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "index_add: bad operands");
    if (tn_tensor_numel(src) == 0) return TN_STATUS_OK;
    index_add_task t = {*out, *index, *src, skip, 0};
    return tn_stream_launch(stream, name ? name : "index_add", run_index_add, &t, sizeof t);
}

typedef struct scatter_task {
    tn_tensor out, index, src;
    int32_t dim;
    tn_scatter_reduce reduce;
} scatter_task;

static tn_status run_scatter(void *p) {
    scatter_task *t = p;
    if (tn_kernel_scatter(&t->out, t->dim, &t->index, &t->src, t->reduce) != TN_STATUS_OK)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "index out of range in self");
    return TN_STATUS_OK;
}

tn_status tn_scatter_async(tn_stream_t stream, const char *name, const tn_tensor *out,
                           int32_t dim, const tn_tensor *index, const tn_tensor *src,
                           tn_scatter_reduce reduce) {
    if (out->ndim != index->ndim || src->ndim != index->ndim || dim < 0 || dim >= out->ndim ||
        index->dtype != TN_DTYPE_I64 || memcmp(src->sizes, index->sizes, sizeof(int64_t) * (size_t)index->ndim))
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "scatter: bad operands");
    for (int32_t d = 0; d < out->ndim; d++)
        if (d != dim && index->sizes[d] > out->sizes[d])
            return tn_error(TN_STATUS_INVALID_ARGUMENT, "scatter: index is larger than the output");
    if (tn_tensor_numel(index) == 0) return TN_STATUS_OK;
    scatter_task t = {*out, *index, *src, dim, reduce};
    return tn_stream_launch(stream, name ? name : "scatter", run_scatter, &t, sizeof t);
}

typedef struct gather_dim_task {
    tn_tensor out, in, index;
    int32_t dim;
    int bad;
} gather_dim_task;

static void gather_dim_slice(void *p, int32_t ith, int32_t nth) {
    gather_dim_task *t = p;
    if (tn_kernel_gather(&t->out, &t->in, t->dim, &t->index, ith, nth) != TN_STATUS_OK) t->bad = 1;
}

static tn_status run_gather_dim(void *p) {
    gather_dim_task *t = p;
    tn_parallel_run(gather_dim_slice, t, tn_tensor_numel(&t->out));
    return t->bad ? tn_error(TN_STATUS_INVALID_ARGUMENT, "index out of range in self") : TN_STATUS_OK;
}

tn_status tn_gather_async(tn_stream_t stream, const char *name, const tn_tensor *out,
                          const tn_tensor *in, int32_t dim, const tn_tensor *index) {
    if (out->ndim != index->ndim || in->ndim != index->ndim || dim < 0 || dim >= in->ndim ||
        index->dtype != TN_DTYPE_I64 || out->dtype != in->dtype ||
        memcmp(out->sizes, index->sizes, sizeof(int64_t) * (size_t)index->ndim))
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "gather: bad operands");
    for (int32_t d = 0; d < in->ndim; d++)
        if (d != dim && index->sizes[d] > in->sizes[d])
            return tn_error(TN_STATUS_INVALID_ARGUMENT, "gather: index is larger than the input");
    if (tn_tensor_numel(out) == 0) return TN_STATUS_OK;
    gather_dim_task t = {*out, *in, *index, dim, 0};
    return tn_stream_launch(stream, name ? name : "gather", run_gather_dim, &t, sizeof t);
}

static tn_status check_index_views(const tn_tensor *self, int32_t k, const tn_tensor *indices) {
    if (k < 1 || k > TN_GATHER_MAX || k > self->ndim)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "advanced indexing: 1 to %d index views expected",
                        TN_GATHER_MAX);
    for (int32_t j = 0; j < k; j++)
        if (indices[j].dtype != TN_DTYPE_I64 || indices[j].ndim != indices[0].ndim ||
            memcmp(indices[j].sizes, indices[0].sizes, sizeof(int64_t) * (size_t)indices[0].ndim))
            return tn_error(TN_STATUS_INVALID_ARGUMENT, "advanced indexing: index views differ");
    return TN_STATUS_OK;
}

typedef struct gather_task {
    tn_tensor out, self;
    int32_t k;
    tn_tensor indices[TN_GATHER_MAX];
    int bad;
} gather_task;

static void gather_slice(void *p, int32_t ith, int32_t nth) {
    gather_task *t = p;
    if (tn_kernel_gather_nd(&t->out, &t->self, t->k, t->indices, ith, nth) != TN_STATUS_OK) t->bad = 1;
}

static tn_status run_gather(void *p) {
    gather_task *t = p;
    tn_parallel_run(gather_slice, t, tn_tensor_numel(&t->out));
    return t->bad ? tn_error(TN_STATUS_INVALID_ARGUMENT, "index is out of bounds for a dimension of self")
                  : TN_STATUS_OK;
}

tn_status tn_gather_nd_async(tn_stream_t stream, const char *name, const tn_tensor *out,
                             const tn_tensor *self, int32_t k, const tn_tensor *indices) {
    tn_status st = check_index_views(self, k, indices);
    if (st != TN_STATUS_OK) return st;
    if (out->dtype != self->dtype || out->ndim != indices[0].ndim + self->ndim - k)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "gather_nd: out must match self's dtype and rank");
    if (tn_tensor_numel(out) == 0) return TN_STATUS_OK;
    gather_task t = {*out, *self, k, {{0}}, 0};
    for (int32_t j = 0; j < k; j++) t.indices[j] = indices[j];
    return tn_stream_launch(stream, name ? name : "gather_nd", run_gather, &t, sizeof t);
}

typedef struct index_put_task {
    tn_tensor self, values;
    int32_t k;
    tn_tensor indices[TN_GATHER_MAX];
    int accumulate, bad;
} index_put_task;

static void index_put_slice(void *p, int32_t ith, int32_t nth) {
    index_put_task *t = p;
    if (tn_kernel_index_put(&t->self, t->k, t->indices, &t->values, t->accumulate, ith, nth) !=
        TN_STATUS_OK)
        t->bad = 1;
}

static tn_status run_index_put(void *p) {
    index_put_task *t = p;
    /* accumulation stays on one thread: repeated indices must add up, not race */
    tn_parallel_run(index_put_slice, t, t->accumulate ? 0 : tn_tensor_numel(&t->values));
    return t->bad ? tn_error(TN_STATUS_INVALID_ARGUMENT, "index is out of bounds for a dimension of self")
                  : TN_STATUS_OK;
}

tn_status tn_index_put_async(tn_stream_t stream, const char *name, const tn_tensor *self,
                             int32_t k, const tn_tensor *indices, const tn_tensor *values,
                             int accumulate) {
    tn_status st = check_index_views(self, k, indices);
    if (st != TN_STATUS_OK) return st;
    if (values->dtype != self->dtype || values->ndim != indices[0].ndim + self->ndim - k)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "index_put: values must match self's dtype and rank");
    if (tn_tensor_numel(values) == 0) return TN_STATUS_OK;
    index_put_task t = {*self, *values, k, {{0}}, accumulate, 0};
    for (int32_t j = 0; j < k; j++) t.indices[j] = indices[j];
    return tn_stream_launch(stream, name ? name : "index_put", run_index_put, &t, sizeof t);
}

typedef struct nonzero_task {
    tn_tensor out, in;
} nonzero_task;

static tn_status run_count_nonzero(void *p) {
    nonzero_task *t = p;
    *(int64_t *)t->out.data = tn_kernel_count_nonzero(&t->in);
    return TN_STATUS_OK;
}

static tn_status run_nonzero(void *p) {
    nonzero_task *t = p;
    return tn_kernel_nonzero(&t->out, &t->in) == TN_STATUS_OK
               ? TN_STATUS_OK
               : tn_error(TN_STATUS_INVALID_ARGUMENT, "nonzero: the input changed between counting and writing");
}

tn_status tn_count_nonzero_async(tn_stream_t stream, const char *name, const tn_tensor *count,
                                 const tn_tensor *in) {
    if (count->dtype != TN_DTYPE_I64 || tn_tensor_numel(count) != 1)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "count_nonzero: an int64 scalar output expected");
    nonzero_task t = {*count, *in};
    return tn_stream_launch(stream, name ? name : "count_nonzero", run_count_nonzero, &t, sizeof t);
}

tn_status tn_nonzero_async(tn_stream_t stream, const char *name, const tn_tensor *out,
                           const tn_tensor *in) {
    if (out->dtype != TN_DTYPE_I64 || out->ndim != 2 || out->sizes[1] != in->ndim)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "nonzero: an int64 (count x ndim) output expected");
    if (out->sizes[0] == 0 && tn_tensor_numel(in) == 0) return TN_STATUS_OK;
    nonzero_task t = {*out, *in};
    return tn_stream_launch(stream, name ? name : "nonzero", run_nonzero, &t, sizeof t);
}

typedef struct where_task {
    tn_tensor out, cond, a, b;
} where_task;

static void where_slice(void *p, int32_t ith, int32_t nth) {
    where_task *t = p;
    tn_kernel_where(&t->out, &t->cond, &t->a, &t->b, ith, nth);
}

static tn_status run_where(void *p) {
    tn_parallel_run(where_slice, p, tn_tensor_numel(&((where_task *)p)->out));
    return TN_STATUS_OK;
}

tn_status tn_where_async(tn_stream_t stream, const char *name, const tn_tensor *out,
                         const tn_tensor *cond, const tn_tensor *a, const tn_tensor *b) {
    const tn_tensor *v[3] = {cond, a, b};
    for (int i = 0; i < 3; i++)
        if (v[i]->ndim != out->ndim || memcmp(v[i]->sizes, out->sizes, sizeof(int64_t) * (size_t)out->ndim))
            return tn_error(TN_STATUS_INVALID_ARGUMENT, "where: operands differ in shape");
    if (cond->dtype != TN_DTYPE_BOOL || a->dtype != out->dtype || b->dtype != out->dtype)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "where: bool condition and one value dtype expected");
    if (tn_tensor_numel(out) == 0) return TN_STATUS_OK;
    where_task t = {*out, *cond, *a, *b};
    return tn_stream_launch(stream, name ? name : "where", run_where, &t, sizeof t);
}

