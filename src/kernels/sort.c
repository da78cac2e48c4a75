/* Stable row sorts and top-k (see tn/sort.h): each row is copied into (value, position)
 * pairs and merge-sorted bottom-up in caller scratch. */
#include <string.h>

#include "elem.h"
#include "strided.h"
#include "tn/sort.h"

typedef struct item {
    double v;
    int64_t pos;
} item;

/* True when a must come before b (ties keep the original order). */
static inline int before(const item *a, const item *b, int descending) {
    int an = a->v != a->v, bn = b->v != b->v;
    if (an || bn) {
        if (an && bn) return a->pos < b->pos;
        return descending ? an : bn; /* NaN first descending, last ascending */
    }
    if (a->v == b->v) return a->pos < b->pos;
    return descending ? a->v > b->v : a->v < b->v;
}

static void merge_sort(item *x, item *tmp, int64_t n, int descending) {
    for (int64_t width = 1; width < n; width *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * width) {
            int64_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) tmp[k++] = before(&x[j], &x[i], descending) ? x[j++] : x[i++];
            while (i < mid) tmp[k++] = x[i++];
            while (j < hi) tmp[k++] = x[j++];
        }
        memcpy(x, tmp, sizeof(item) * (size_t)n);
    }
}

void tn_kernel_sort(const tn_tensor *values, const tn_tensor *indices, const tn_tensor *in,
                    int32_t descending, void *scratch, int32_t ith, int32_t nth) {
    int32_t nd = in->ndim;
    int64_t n = nd ? in->sizes[nd - 1] : 1, k = nd ? values->sizes[nd - 1] : 1;
    int64_t rows = n ? tn_tensor_numel(in) / n : 0, first, last;
    int64_t is = nd ? in->strides[nd - 1] : 0, vs = nd ? values->strides[nd - 1] : 0,
            xs = nd ? indices->strides[nd - 1] : 0;
    int32_t ies = tn_dtype_size(in->dtype), ves = tn_dtype_size(values->dtype);
    item *items = scratch, *tmp = items + n;
    tn_slice(rows, ith, nth, &first, &last);
    for (int64_t r = first; r < last; r++) {
        const char *x = (const char *)in->data + tn_row_offset(in, r, 1) * ies;
        for (int64_t i = 0; i < n; i++) {
            tn_value v = tn_load(x + i * is * ies, in->dtype);
            items[i].v = v.is_int ? (double)v.i : v.re;
            items[i].pos = i;
        }
        merge_sort(items, tmp, n, descending);
        char *vo = (char *)values->data + tn_row_offset(values, r, 1) * ves;
        int64_t *io = (int64_t *)indices->data + tn_row_offset(indices, r, 1);
        for (int64_t i = 0; i < k; i++) {
            /* integers are re-read from the input: a double may not hold an int64 exactly */
            tn_value v = tn_load(x + items[i].pos * is * ies, in->dtype);
            tn_store(vo + i * vs * ves, values->dtype, v);
            io[i * xs] = items[i].pos;
        }
    }
}
