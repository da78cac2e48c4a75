/* Stable row sorts and top-k (see tn/sort.h): each row is copied into (value, position)
 * pairs and merge-sorted bottom-up in caller scratch; a top-k of fewer than half the row
 * keeps a heap of the best k instead. */
#include <string.h>

#include "elem.h"
#include "half.h"
#include "table.h"
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

/* Element i of a row of type t, `is` elements apart: float rows read directly, others through
 * the generic loader. */
static inline double fetch(const char *x, int64_t i, int64_t is, tn_dtype t) {
    switch (t) {
    case TN_DTYPE_F32: return ((const float *)(const void *)x)[i * is];
    case TN_DTYPE_BF16: return tn_bf16_to_f32_inline(((const uint16_t *)(const void *)x)[i * is]);
    default: {
        tn_value v = tn_load(x + i * is * tn_dtype_size(t), t);
        return v.is_int ? (double)v.i : v.re;
    }
    }
}

/* Restores the heap below slot i: in a heap of the k items kept so far, each parent comes
 * after its children in the sorted order, so the root is the one a better item displaces. */
static void sift_down(item *h, int64_t count, int64_t i, int descending) {
    for (;;) {
        int64_t l = 2 * i + 1, r = l + 1, latest = i;
        if (l < count && before(&h[latest], &h[l], descending)) latest = l;
        if (r < count && before(&h[latest], &h[r], descending)) latest = r;
        if (latest == i) return;
        item t = h[i];
        h[i] = h[latest];
        h[latest] = t;
        i = latest;
    }
}

/* The first k of a row of n in sorted order, into items[0 .. k): a heap of the best k seen so
 * far (most elements only meet its root), then those k sorted. O(n + k log k log n) instead
 * of a sort of the whole row: top-k sampling over a vocabulary of 49152 took 4.9 ms. */
static void select_first(item *items, item *tmp, const char *x, int64_t n, int64_t is, tn_dtype t, int64_t k,
                         int descending) {
    for (int64_t i = 0; i < k; i++) items[i] = (item){fetch(x, i, is, t), i};
    for (int64_t i = k / 2 - 1; i >= 0; i--) sift_down(items, k, i, descending);
    const tn_kernel_table *kt = tn_kernels();
    for (int64_t c0 = k, c1; c0 < n; c0 = c1) {
        c1 = n - c0 < 64 ? n : c0 + 64;
        /* a contiguous float32 chunk whose extreme cannot displace the root is skipped whole
         * (the ISA's vector extreme; NaN, which would, comes back as NaN) */
        if (t == TN_DTYPE_F32 && is == 1 && items[0].v == items[0].v) {
            float m = kt->extreme_f32(c1 - c0, (const float *)(const void *)x + c0, descending);
            if (descending ? m <= items[0].v : m >= items[0].v) continue;
        }
        for (int64_t i = c0; i < c1; i++) {
            item c = {fetch(x, i, is, t), i};
            if (!before(&c, &items[0], descending)) continue;
            items[0] = c;
            sift_down(items, k, 0, descending);
        }
    }
    merge_sort(items, tmp, k, descending);
}

/* A float's sort key: unsigned order is the float order, -0 equals +0, every NaN is above
 * +inf (and equal to the others), and descending flips it all. */
static inline uint32_t float_key(float f, int descending) {
    uint32_t b;
    memcpy(&b, &f, 4);
    b = b == 0x80000000u ? 0 : b;
    uint32_t key = b >> 31 ? ~b : b | 0x80000000u;
    key = f != f ? 0xffffffffu : key;
    return descending ? ~key : key;
}

/* A stable sort of a float32, bfloat16 or float16 row by radix: the float keys in three passes
 * of 11 bits (least significant first, so equal keys keep their order), positions carried
 * along. pos and keys have room for 2n each (scratch); returns where the sorted positions
 * ended up. A merge sort of 49152 logits (top-p sampling) took 5 ms. */
static const uint32_t *radix_sort(const char *x, int64_t n, int64_t is, tn_dtype t, int descending, uint32_t *keys,
                                  uint32_t *pos) {
    uint32_t *k2 = keys + n, *p2 = pos + n;
    for (int64_t i = 0; i < n; i++) {
        keys[i] = float_key((float)fetch(x, i, is, t), descending);
        pos[i] = (uint32_t)i;
    }
    for (int shift = 0; shift < 32; shift += 11) {
        int64_t count[2048 + 1] = {0};
        for (int64_t i = 0; i < n; i++) count[((keys[i] >> shift) & 2047) + 1]++;
        if (count[((keys[0] >> shift) & 2047) + 1] == n) continue; /* one digit for all */
        for (int d = 0; d < 2048; d++) count[d + 1] += count[d];
        for (int64_t i = 0; i < n; i++) {
            int64_t at = count[(keys[i] >> shift) & 2047]++;
            k2[at] = keys[i];
            p2[at] = pos[i];
        }
        uint32_t *swap = keys;
        keys = k2;
        k2 = swap;
        swap = pos;
        pos = p2;
        p2 = swap;
    }
    return pos;
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
        if (k < n / 2) {
            select_first(items, tmp, x, n, is, in->dtype, k, descending);
        } else if (n >= 256 && n < ((int64_t)1 << 32) &&
                   (in->dtype == TN_DTYPE_F32 || in->dtype == TN_DTYPE_BF16 || in->dtype == TN_DTYPE_F16)) {
            uint32_t *keys = (uint32_t *)(void *)tmp, *pos = keys + 2 * n; /* the merge's half of the scratch */
            const uint32_t *sorted = radix_sort(x, n, is, in->dtype, descending, keys, pos);
            for (int64_t i = 0; i < k; i++) items[i].pos = sorted[i];
        } else {
            for (int64_t i = 0; i < n; i++) items[i] = (item){fetch(x, i, is, in->dtype), i};
            merge_sort(items, tmp, n, descending);
        }
        char *vo = (char *)values->data + tn_row_offset(values, r, 1) * ves;
        int64_t *io = (int64_t *)indices->data + tn_row_offset(indices, r, 1);
        for (int64_t i = 0; i < k; i++) {
            /* values are re-read from the input (a double may not hold an int64 exactly):
             * copied as they are when the dtypes match */
            const char *src = x + items[i].pos * is * ies;
            if (values->dtype == in->dtype)
                memcpy(vo + i * vs * ves, src, (size_t)ies);
            else
                tn_store(vo + i * vs * ves, values->dtype, tn_load(src, in->dtype));
            io[i * xs] = items[i].pos;
        }
    }
}
