/* Indexing and selection: index_select (embedding lookups) and where.
 *
 * index_select: out's slice i along `dim` is in's slice index[i]; index is a 1-D int64 or
 * int32 view; out and in share their dtype and all sizes but `dim`. An index outside
 * [0, size) fails with TN_STATUS_INVALID_ARGUMENT ("index out of range in self") at the
 * next synchronisation, as an asynchronous device reports it.
 * where: out = cond ? a : b over views of out's shape (broadcast inputs have stride 0); cond
 * is bool, a, b and out share a dtype. */
#ifndef TN_INDEX_H
#define TN_INDEX_H

#include <stdint.h>

#include "tn/status.h"
#include "tn/stream.h"
#include "tn/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

tn_status tn_index_select_async(tn_stream_t stream, const char *name, const tn_tensor *out,
                                const tn_tensor *in, int32_t dim, const tn_tensor *index);
/* Returns TN_STATUS_INVALID_ARGUMENT if an index of this thread's share is out of range. */
tn_status tn_kernel_index_select(const tn_tensor *out, const tn_tensor *in, int32_t dim,
                                 const tn_tensor *index, int32_t ith, int32_t nth);

/* out[index[i], j] += src[i, j] for 2-D views (out: rows x d, src: count x d, same float
 * dtype), skipping index == skip (pass -1 for none). Threads split the columns, so repeated
 * indices need no atomics. Indices outside [0, rows) fail like index_select's. */
tn_status tn_index_add_rows_async(tn_stream_t stream, const char *name, const tn_tensor *out,
                                  const tn_tensor *index, const tn_tensor *src, int64_t skip);
tn_status tn_kernel_index_add_rows(const tn_tensor *out, const tn_tensor *index,
                                   const tn_tensor *src, int64_t skip, int32_t ith, int32_t nth);

/* scatter: out[..., index[p], ...] = src[p] along `dim` for every position p of index (index
 * and src views share sizes, int64 index; out's other sizes are at least index's), or with
 * TN_SCATTER_ADD / TN_SCATTER_MUL / TN_SCATTER_MAX / TN_SCATTER_MIN combined with what is
 * there (the maximum and minimum propagate NaN, as PyTorch's scatter_reduce). Runs on one
 * thread, so with repeated indices the last write wins and reductions add up in order,
 * deterministically. Indices outside [0, out.size(dim)) fail like index_select's. */
typedef enum tn_scatter_reduce {
    TN_SCATTER_ASSIGN,
    TN_SCATTER_ADD,
    TN_SCATTER_MUL,
    TN_SCATTER_MAX,
    TN_SCATTER_MIN
} tn_scatter_reduce;
tn_status tn_scatter_async(tn_stream_t stream, const char *name, const tn_tensor *out,
                           int32_t dim, const tn_tensor *index, const tn_tensor *src,
                           tn_scatter_reduce reduce);
tn_status tn_kernel_scatter(const tn_tensor *out, int32_t dim, const tn_tensor *index,
                            const tn_tensor *src, tn_scatter_reduce reduce);
/* gather: out[p] = in[p with its `dim` coordinate replaced by index[p]] for every position p
 * of index (out and index share sizes, int64 index; in's other sizes are at least index's).
 * Indices outside [0, in.size(dim)) fail like index_select's. */
tn_status tn_gather_async(tn_stream_t stream, const char *name, const tn_tensor *out,
                          const tn_tensor *in, int32_t dim, const tn_tensor *index);
tn_status tn_kernel_gather(const tn_tensor *out, const tn_tensor *in, int32_t dim,
                           const tn_tensor *index, int32_t ith, int32_t nth);

/* Advanced indexing self[i0, i1, ..., i(k-1)] with k <= TN_GATHER_MAX index views on self's
 * first k dimensions: the index views are already broadcast to a common shape B (stride 0
 * where broadcast), out has shape B + self.shape[k:]. Negative indices count from the end;
 * others outside the dimension fail with TN_STATUS_INVALID_ARGUMENT at the next sync. */
#define TN_GATHER_MAX 4
tn_status tn_gather_nd_async(tn_stream_t stream, const char *name, const tn_tensor *out,
                             const tn_tensor *self, int32_t k, const tn_tensor *indices);
tn_status tn_kernel_gather_nd(const tn_tensor *out, const tn_tensor *self, int32_t k,
                              const tn_tensor *indices, int32_t ith, int32_t nth);

/* index_put: self[i0, ..., i(k-1)] = values (or += with accumulate), the index views laid
 * out as for gather_nd and values a view of shape B + self.shape[k:] (stride 0 where
 * broadcast), self's dtype. Accumulation runs on one thread, so repeated indices add up in
 * order; without it, which of the repeated writes wins is unspecified, as in PyTorch. */
tn_status tn_index_put_async(tn_stream_t stream, const char *name, const tn_tensor *self,
                             int32_t k, const tn_tensor *indices, const tn_tensor *values,
                             int accumulate);
tn_status tn_kernel_index_put(const tn_tensor *self, int32_t k, const tn_tensor *indices,
                              const tn_tensor *values, int accumulate, int32_t ith, int32_t nth);
/* nonzero in two launches: the count of non-zero elements of `in` into the int64 scalar
 * `count`, then (with the count read back, as a device must do to size the result) the
 * row-major coordinates of those elements into `out`, an int64 (count x in.ndim) view. A
 * count that no longer matches (in changed in between) fails at the next synchronisation. */
tn_status tn_count_nonzero_async(tn_stream_t stream, const char *name, const tn_tensor *count,
                                 const tn_tensor *in);
tn_status tn_nonzero_async(tn_stream_t stream, const char *name, const tn_tensor *out,
                           const tn_tensor *in);
int64_t tn_kernel_count_nonzero(const tn_tensor *in);
tn_status tn_kernel_nonzero(const tn_tensor *out, const tn_tensor *in);
tn_status tn_where_async(tn_stream_t stream, const char *name, const tn_tensor *out,
                         const tn_tensor *cond, const tn_tensor *a, const tn_tensor *b);
void tn_kernel_where(const tn_tensor *out, const tn_tensor *cond, const tn_tensor *a,
                     const tn_tensor *b, int32_t ith, int32_t nth);

#ifdef __cplusplus
}
#endif
#endif
