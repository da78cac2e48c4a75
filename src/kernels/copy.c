/* Copy with conversion between any two strided views of the same shape.
 * Same dtype: a memcpy per row when both rows are contiguous, else an element move by size.
 * float32 <-> bfloat16 / float16: typed loops (they vectorize when both rows are contiguous).
 * Other conversions: element by element through tn_load/tn_store. */
#include <string.h>

#include "elem.h"
#include "half.h"
#include "strided.h"
#include "tn/kernels.h"

static void move_row(char *d, int64_t ds, const char *s, int64_t ss, int64_t n, int32_t es) {
    if (ds == 1 && ss == 1) {
        memmove(d, s, (size_t)(n * es));
        return;
    }
    for (int64_t i = 0; i < n; i++) memcpy(d + i * ds * es, s + i * ss * es, (size_t)es);
}

#define CONVERT_ROW(name, D, S, expr)                                                  \
    static void name(void *dv, int64_t ds, const void *sv, int64_t ss, int64_t n) {     \
        D *d = dv;                                                                     \
        const S *s = sv;                                                               \
        if (ds == 1 && ss == 1)                                                        \
            for (int64_t i = 0; i < n; i++) {                                          \
                S x = s[i];                                                            \
                d[i] = expr;                                                           \
            }                                                                          \
        else                                                                           \
            for (int64_t i = 0; i < n; i++) {                                          \
                S x = s[i * ss];                                                       \
                d[i * ds] = expr;                                                      \
            }                                                                          \
    }
CONVERT_ROW(bf16_to_f32, float, uint16_t, tn_bf16_to_f32_inline(x))
CONVERT_ROW(f32_to_bf16, uint16_t, float, tn_f32_to_bf16_inline(x))
CONVERT_ROW(f16_to_f32, float, uint16_t, tn_f16_to_f32_inline(x))
CONVERT_ROW(f32_to_f16, uint16_t, float, tn_f32_to_f16_inline(x))

/* A typed row converter for (dst, src) dtypes, or NULL. */
typedef void (*convert_fn)(void *, int64_t, const void *, int64_t, int64_t);
static convert_fn converter(tn_dtype dst, tn_dtype src) {
    if (dst == TN_DTYPE_F32 && src == TN_DTYPE_BF16) return bf16_to_f32;
    if (dst == TN_DTYPE_BF16 && src == TN_DTYPE_F32) return f32_to_bf16;
    if (dst == TN_DTYPE_F32 && src == TN_DTYPE_F16) return f16_to_f32;
    if (dst == TN_DTYPE_F16 && src == TN_DTYPE_F32) return f32_to_f16;
    return NULL;
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
    convert_fn convert = converter(dst->dtype, src->dtype);
    for (int64_t r = first; r < last; r++) {
        char *d = (char *)dst->data + (tn_walk_row_offset(&w, 0, r) + e0 * dstep) * des;
        const char *s = (const char *)src->data + (tn_walk_row_offset(&w, 1, r) + e0 * sstep) * ses;
        if (dst->dtype == src->dtype) {
            move_row(d, dstep, s, sstep, n, des);
            continue;
        }
        if (convert) {
            convert(d, dstep, s, sstep, n);
            continue;
        }
        for (int64_t i = 0; i < n; i++)
            tn_store(d + i * dstep * des, dst->dtype, tn_load(s + i * sstep * ses, src->dtype));
    }
}
