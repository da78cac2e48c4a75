/* im2col and col2im (see tn/fold.h): each slice takes whole (batch, channel) planes, so that no
 * two threads write the same column row (im2col) or plane element (col2im). A row of blocks
 * reads the plane row y at x = x0 + bw * stride_w; the positions with x inside the plane are
 * one run [lo, hi), found once per kernel column, and the rest are zeros (im2col) or skipped
 * (col2im). */
#include <string.h>

#include "half.h"
#include "strided.h"
#include "table.h"
#include "tn/fold.h"

void tn_fold2d_contiguous_columns(tn_fold2d *f) {
    f->col_pos_stride = 1;
    f->col_row_stride = f->blocks_h * f->blocks_w;
    f->col_batch_stride = f->channels * f->kernel_h * f->kernel_w * f->col_row_stride;
}

/* The blocks [lo, hi) of a row whose x = x0 + bw * stride lies in [0, width). */
static void inside(int64_t x0, int64_t stride, int64_t width, int64_t blocks, int64_t *lo, int64_t *hi) {
    int64_t l = x0 >= 0 ? 0 : (-x0 + stride - 1) / stride;
    int64_t h = x0 <= width - 1 ? (width - 1 - x0) / stride + 1 : 0;
    *lo = l < blocks ? l : blocks;
    *hi = h < blocks ? h : blocks;
    if (*hi < *lo) *hi = *lo;
}

#define TN_GATHER(T)                                                                                 \
    for (int64_t k = 0; k < n; k++) ((T *)dst)[k] = ((const T *)src)[k * stride];
/* n elements of es bytes from src at element stride `stride` into dst */
static void gather(int32_t es, char *dst, const char *src, int64_t n, int64_t stride) {
    if (stride == 1) {
        memcpy(dst, src, (size_t)(n * es));
        return;
    }
    switch (es) {
    case 1: TN_GATHER(uint8_t) break;
    case 2: TN_GATHER(uint16_t) break;
    case 4: TN_GATHER(uint32_t) break;
    default: TN_GATHER(uint64_t) break;
    }
}
#undef TN_GATHER

static void im2col_plane(const tn_fold2d *f, int32_t es, char *cols, const char *plane) {
    int64_t bh_n = f->blocks_h, bw_n = f->blocks_w, positions = bh_n * bw_n;
    for (int64_t i = 0; i < f->kernel_h; i++)
        for (int64_t j = 0; j < f->kernel_w; j++) {
            char *row = cols + (i * f->kernel_w + j) * positions * es;
            int64_t x0 = j * f->dil_w - f->pad_w, lo, hi;
            inside(x0, f->stride_w, f->width, bw_n, &lo, &hi);
            for (int64_t bh = 0; bh < bh_n; bh++) {
                char *dst = row + bh * bw_n * es;
                int64_t y = bh * f->stride_h - f->pad_h + i * f->dil_h;
                if (y < 0 || y >= f->height) {
                    memset(dst, 0, (size_t)(bw_n * es));
                    continue;
                }
                memset(dst, 0, (size_t)(lo * es));
                gather(es, dst + lo * es, plane + (y * f->width + x0 + lo * f->stride_w) * es, hi - lo, f->stride_w);
                memset(dst + hi * es, 0, (size_t)((bw_n - hi) * es));
            }
        }
}

void tn_kernel_im2col(const tn_fold2d *f, int32_t es, void *cols, const void *planes, int32_t ith, int32_t nth) {
    int64_t first, last, plane = f->height * f->width;
    int64_t rows = f->kernel_h * f->kernel_w * f->blocks_h * f->blocks_w; /* a channel's column elements */
    tn_slice(f->batch * f->channels, ith, nth, &first, &last);
    for (int64_t p = first; p < last; p++)
        im2col_plane(f, es, (char *)cols + p * rows * es, (const char *)planes + p * plane * es);
}

/* acc[y * width + x] += column element, for one channel's rows (T the column's type, A the
 * accumulator's, L the load) */
#define TN_COL2IM(T, A, L)                                                                                   \
    do {                                                                                                     \
        const T *c = (const T *)cols;                                                                        \
        A *a = (A *)acc;                                                                                     \
        for (int64_t i = 0; i < f->kernel_h; i++)                                                            \
            for (int64_t j = 0; j < f->kernel_w; j++) {                                                      \
                const T *row = c + (i * f->kernel_w + j) * f->col_row_stride;                                \
                int64_t x0 = j * f->dil_w - f->pad_w, lo, hi;                                                \
                inside(x0, f->stride_w, f->width, f->blocks_w, &lo, &hi);                                    \
                for (int64_t bh = 0; bh < f->blocks_h; bh++) {                                               \
                    int64_t y = bh * f->stride_h - f->pad_h + i * f->dil_h;                                  \
                    if (y < 0 || y >= f->height) continue;                                                   \
                    A *dst = a + y * f->width + x0;                                                          \
                    const T *src = row + bh * f->blocks_w * f->col_pos_stride;                               \
                    for (int64_t bw = lo; bw < hi; bw++) dst[bw * f->stride_w] += L(src[bw * f->col_pos_stride]); \
                }                                                                                            \
            }                                                                                                \
    } while (0)
#define TN_SAME(v) (v)

static void col2im_plane(const tn_fold2d *f, tn_dtype t, void *acc, const void *cols) {
    switch (t) {
    case TN_DTYPE_F64: TN_COL2IM(double, double, TN_SAME); break;
    case TN_DTYPE_F32: TN_COL2IM(float, float, TN_SAME); break;
    case TN_DTYPE_BF16: TN_COL2IM(uint16_t, float, tn_bf16_to_f32_inline); break;
    default: TN_COL2IM(uint16_t, float, tn_f16_to_f32_inline); break;
    }
}
#undef TN_COL2IM
#undef TN_SAME

void tn_kernel_col2im(const tn_fold2d *f, tn_dtype t, void *planes, const void *cols, float *scratch, int32_t ith,
                      int32_t nth) {
    int64_t first, last, plane = f->height * f->width, taps = f->kernel_h * f->kernel_w;
    int32_t es = tn_dtype_size(t);
    int half = t == TN_DTYPE_BF16 || t == TN_DTYPE_F16;
    tn_slice(f->batch * f->channels, ith, nth, &first, &last);
    for (int64_t p = first; p < last; p++) {
        int64_t n = p / f->channels, c = p % f->channels;
        const char *rows = (const char *)cols + (n * f->col_batch_stride + c * taps * f->col_row_stride) * es;
        char *out = (char *)planes + p * plane * es;
        void *acc = half ? (void *)scratch : (void *)out;
        memset(acc, 0, (size_t)(plane * (half ? 4 : es)));
        col2im_plane(f, t, acc, rows);
        if (half) tn_kernels()->narrow_half(t, plane, (uint16_t *)(void *)out, 1, scratch, 1);
    }
}
