/* Walking one or two strided views row by row: dimensions of size 1 are dropped and
 * neighbours that are contiguous in every view are merged, so a dense view becomes a single
 * row. A "row" is the innermost remaining dimension; the outer dimensions are visited in
 * order, rows [first, last) of them for a thread slice. */
#ifndef TN_KERNELS_STRIDED_H
#define TN_KERNELS_STRIDED_H

#include <stdint.h>

#include "tn/tensor.h"

#define TN_WALK_MAX_VIEWS 4

typedef struct tn_walk {
    int32_t ndim; /* >= 1 after coalescing */
    int32_t nviews;
    int64_t sizes[TN_MAX_DIMS];
    int64_t strides[TN_WALK_MAX_VIEWS][TN_MAX_DIMS]; /* in elements, per view */
} tn_walk;

static inline void tn_walk_init(tn_walk *w, const tn_tensor *const *views, int32_t nviews) {
    const tn_tensor *t0 = views[0];
    w->nviews = nviews;
    w->ndim = 0;
    for (int32_t d = 0; d < t0->ndim; d++) {
        if (t0->sizes[d] == 1) continue;
        int32_t k = w->ndim;
        if (k > 0) {
            int mergeable = 1;
            for (int32_t v = 0; v < nviews; v++)
                mergeable &= w->strides[v][k - 1] == views[v]->strides[d] * t0->sizes[d];
            if (mergeable) {
                w->sizes[k - 1] *= t0->sizes[d];
                for (int32_t v = 0; v < nviews; v++) w->strides[v][k - 1] = views[v]->strides[d];
                continue;
            }
        }
        w->sizes[k] = t0->sizes[d];
        for (int32_t v = 0; v < nviews; v++) w->strides[v][k] = views[v]->strides[d];
        w->ndim++;
    }
    if (w->ndim == 0) {
        w->ndim = 1;
        w->sizes[0] = 1;
        for (int32_t v = 0; v < nviews; v++) w->strides[v][0] = 1;
    }
}

static inline int64_t tn_walk_rows(const tn_walk *w) {
    int64_t rows = 1;
    for (int32_t d = 0; d < w->ndim - 1; d++) rows *= w->sizes[d];
    return rows;
}

/* Element offset of row r in view v. */
static inline int64_t tn_walk_row_offset(const tn_walk *w, int32_t v, int64_t r) {
    int64_t off = 0;
    for (int32_t d = w->ndim - 2; d >= 0; d--) {
        off += (r % w->sizes[d]) * w->strides[v][d];
        r /= w->sizes[d];
    }
    return off;
}

static inline void tn_slice(int64_t n, int32_t ith, int32_t nth, int64_t *first, int64_t *last) {
    int64_t per = (n + nth - 1) / nth;
    *first = per * ith < n ? per * ith : n;
    *last = *first + per < n ? *first + per : n;
}

/* Element offset of row r of a view whose last `inner` dimensions form the row (rows are
 * numbered over the remaining leading dimensions in row-major order). */
static inline int64_t tn_row_offset(const tn_tensor *t, int64_t r, int32_t inner) {
    int64_t off = 0;
    for (int32_t d = t->ndim - 1 - inner; d >= 0; d--) {
        off += (r % t->sizes[d]) * t->strides[d];
        r /= t->sizes[d];
    }
    return off;
}

/* A thread's part of a walk: rows [*r0, *r1) and, of each, elements [*e0, *e1). Many rows are
 * split by row; fewer rows than threads (a dense tensor is one row) split each row. */
static inline void tn_walk_slice(const tn_walk *w, int32_t ith, int32_t nth, int64_t *r0,
                                 int64_t *r1, int64_t *e0, int64_t *e1) {
    int64_t rows = tn_walk_rows(w), n = w->sizes[w->ndim - 1];
    if (rows >= nth) {
        tn_slice(rows, ith, nth, r0, r1);
        *e0 = 0;
        *e1 = n;
    } else {
        *r0 = 0;
        *r1 = rows;
        tn_slice(n, ith, nth, e0, e1);
    }
}

/* A tensor whose elements lie one after the other in row-major order (dimensions of size 1
 * may have any stride). */
static inline int tn_row_major(const tn_tensor *t) {
    int64_t expect = 1;
    for (int32_t d = t->ndim - 1; d >= 0; d--) {
        if (t->sizes[d] != 1 && t->strides[d] != expect) return 0;
        expect *= t->sizes[d];
    }
    return 1;
}

#endif
