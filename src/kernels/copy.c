/* Copy with conversion between any two strided views of the same shape.
 * Same dtype: a memcpy per row when both rows are contiguous, else an element move by size.
 * float32 <-> bfloat16 / float16: the ISA variant's conversion rows (see rows.c).
 * Other conversions: element by element through tn_load/tn_store. */
#include <string.h>

#include "elem.h"
#include "half.h"
#include "strided.h"
#include "table.h"
#include "tn/kernels.h"

static void move_row(char *d, int64_t ds, const char *s, int64_t ss, int64_t n, int32_t es) {
    if (ds == 1 && ss == 1) {
        memmove(d, s, (size_t)(n * es));
        return;
    }
    for (int64_t i = 0; i < n; i++) memcpy(d + i * ds * es, s + i * ss * es, (size_t)es);
}

void tn_kernel_copy(const tn_tensor *dst, const tn_tensor *src, int32_t ith, int32_t nth) {
    const tn_tensor *views[2] = {dst, src};
    tn_walk w;
    tn_walk_init(&w, views, 2);
    int32_t des = tn_dtype_size(dst->dtype), ses = tn_dtype_size(src->dtype);
    int64_t first, last, e0, e1;
    int64_t dstep = w.strides[0][w.ndim - 1], sstep = w.strides[1][w.ndim - 1];
    tn_walk_slice(&w, ith, nth, &first, &last, &e0, &e1);
    int64_t n = e1 - e0;
    const tn_kernel_table *k = tn_kernels();
    int widen = dst->dtype == TN_DTYPE_F32 && (src->dtype == TN_DTYPE_BF16 || src->dtype == TN_DTYPE_F16);
    int narrow = src->dtype == TN_DTYPE_F32 && (dst->dtype == TN_DTYPE_BF16 || dst->dtype == TN_DTYPE_F16);
    for (int64_t r = first; r < last; r++) {
        char *d = (char *)dst->data + (tn_walk_row_offset(&w, 0, r) + e0 * dstep) * des;
        const char *s = (const char *)src->data + (tn_walk_row_offset(&w, 1, r) + e0 * sstep) * ses;
        if (dst->dtype == src->dtype) {
            move_row(d, dstep, s, sstep, n, des);
            continue;
        }
        if (widen) {
            k->widen_half(src->dtype, n, (float *)d, dstep, (const uint16_t *)s, sstep);
            continue;
        }
        if (narrow) {
            k->narrow_half(dst->dtype, n, (uint16_t *)d, dstep, (const float *)s, sstep);
            continue;
        }
        for (int64_t i = 0; i < n; i++)
            tn_store(d + i * dstep * des, dst->dtype, tn_load(s + i * sstep * ses, src->dtype));
    }
}
