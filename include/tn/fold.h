/* im2col and col2im over 2-D planes (F.unfold and F.fold; the columns of a convolution, and the
 * overlap-add of a transposed one).
 *
 * Planes: batch x channels planes of height x width, contiguous. Columns: for each batch
 * element, channels * kernel_h * kernel_w rows of blocks_h * blocks_w positions; row
 * (c, i, j) at position (bh, bw) holds plane c's element at
 *   y = bh * stride_h - pad_h + i * dil_h,  x = bw * stride_w - pad_w + j * dil_w,
 * zero where that lies outside the plane. im2col writes contiguous columns, copying elements
 * (any dtype). col2im reads columns at any strides (in elements: per batch element, per row,
 * per position) and adds each into its plane element, rows in order and positions in order
 * within a row, as the CPU does: float32 and float64 in their own type, bfloat16 and float16
 * in float32 rounded once at the end. Both split the work by (batch, channel) planes. */
#ifndef TN_FOLD_H
#define TN_FOLD_H

#include <stdint.h>

#include "tn/dtype.h"
#include "tn/status.h"
#include "tn/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tn_fold2d {
    int64_t batch, channels, height, width;
    int64_t kernel_h, kernel_w, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w;
    int64_t blocks_h, blocks_w;
    int64_t col_batch_stride, col_row_stride, col_pos_stride; /* col2im's input */
} tn_fold2d;

/* Sets the column strides of contiguous columns. */
void tn_fold2d_contiguous_columns(tn_fold2d *f);

tn_status tn_im2col_async(tn_stream_t stream, const char *name, const tn_fold2d *f, tn_dtype dtype, void *cols,
                          const void *planes);
tn_status tn_col2im_async(tn_stream_t stream, const char *name, const tn_fold2d *f, tn_dtype dtype, void *planes,
                          const void *cols);

/* The (batch, channel) planes of slice ith of nth. col2im's scratch: one float32 plane (16-bit
 * dtypes only; NULL otherwise). */
void tn_kernel_im2col(const tn_fold2d *f, int32_t elem_size, void *cols, const void *planes, int32_t ith, int32_t nth);
void tn_kernel_col2im(const tn_fold2d *f, tn_dtype dtype, void *planes, const void *cols, float *scratch, int32_t ith,
                      int32_t nth);

#ifdef __cplusplus
}
#endif
#endif
