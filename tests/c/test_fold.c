/* im2col against its definition read directly (each column element from the plane, or zero
 * outside it), over strides, padding and dilation; col2im as its adjoint, <im2col(x), c> =
 * <x, col2im(c)>; col2im reading transposed columns through strides; bfloat16 columns added
 * in float32 and rounded once. Slices split the planes (three slices over four planes). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/half.h"
#include "tn/tn.h"

enum { NB = 2, CH = 2, H = 5, W = 7, MAXCOL = NB * CH * 9 * 64 };

static void im2col(const tn_fold2d *f, int32_t es, void *cols, const void *planes) {
    for (int s = 0; s < 3; s++) tn_kernel_im2col(f, es, cols, planes, s, 3);
}

static void col2im(const tn_fold2d *f, tn_dtype t, void *planes, const void *cols) {
    static float scratch[H * W];
    for (int s = 0; s < 3; s++) tn_kernel_col2im(f, t, planes, cols, scratch, s, 3);
}

static tn_fold2d geometry(int64_t k, int64_t pad, int64_t stride, int64_t dil) {
    tn_fold2d f = {NB, CH, H, W, k, k, pad, pad, stride, stride, dil, dil, 0, 0, 0, 0, 0};
    f.blocks_h = (H + 2 * pad - dil * (k - 1) - 1) / stride + 1;
    f.blocks_w = (W + 2 * pad - dil * (k - 1) - 1) / stride + 1;
    tn_fold2d_contiguous_columns(&f);
    return f;
}

void test_fold_kernels(void) {
    static double x[NB * CH * H * W], cols[MAXCOL], c[MAXCOL], back[NB * CH * H * W];
    for (int i = 0; i < NB * CH * H * W; i++) x[i] = (double)((i * 37) % 29) - 14.0;
    const int64_t shapes[][4] = {{3, 1, 1, 1}, {3, 0, 2, 1}, {2, 2, 3, 2}, {3, 1, 1, 2}, {1, 0, 1, 1}};
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        tn_fold2d f = geometry(shapes[si][0], shapes[si][1], shapes[si][2], shapes[si][3]);
        int64_t k = f.kernel_h, positions = f.blocks_h * f.blocks_w, ncols = NB * CH * k * k * positions;
        CHECK(ncols <= MAXCOL && positions > 0);
        for (int i = 0; i < ncols; i++) cols[i] = NAN;
        im2col(&f, 8, cols, x);
        int64_t at = 0;
        for (int64_t n = 0; n < NB; n++)
            for (int64_t ch = 0; ch < CH; ch++)
                for (int64_t i = 0; i < k; i++)
                    for (int64_t j = 0; j < k; j++)
                        for (int64_t bh = 0; bh < f.blocks_h; bh++)
                            for (int64_t bw = 0; bw < f.blocks_w; bw++, at++) {
                                int64_t y = bh * f.stride_h - f.pad_h + i * f.dil_h;
                                int64_t xx = bw * f.stride_w - f.pad_w + j * f.dil_w;
                                int in = y >= 0 && y < H && xx >= 0 && xx < W;
                                CHECK(cols[at] == (in ? x[((n * CH + ch) * H + y) * W + xx] : 0.0));
                            }
        /* the adjoint */
        for (int i = 0; i < ncols; i++) c[i] = (double)((i * 53) % 31) - 15.0;
        col2im(&f, TN_DTYPE_F64, back, c);
        double lhs = 0, rhs = 0;
        for (int i = 0; i < ncols; i++) lhs += cols[i] * c[i];
        for (int i = 0; i < NB * CH * H * W; i++) rhs += x[i] * back[i];
        CHECK(lhs == rhs);
        /* columns stored transposed per batch element (positions x rows), read through strides */
        static double ct[MAXCOL], back_t[NB * CH * H * W];
        int64_t rows = CH * k * k;
        for (int64_t n = 0; n < NB; n++)
            for (int64_t r = 0; r < rows; r++)
                for (int64_t q = 0; q < positions; q++) ct[(n * positions + q) * rows + r] = c[(n * rows + r) * positions + q];
        tn_fold2d ft = f;
        ft.col_batch_stride = rows * positions, ft.col_row_stride = 1, ft.col_pos_stride = rows;
        col2im(&ft, TN_DTYPE_F64, back_t, ct);
        CHECK(memcmp(back, back_t, sizeof back) == 0);
    }
    /* bfloat16: im2col copies bits, col2im adds in float32 and rounds once */
    tn_fold2d f = geometry(3, 1, 1, 1);
    int64_t ncols = NB * CH * 9 * f.blocks_h * f.blocks_w;
    static uint16_t xb[NB * CH * H * W], cb[MAXCOL], ob[NB * CH * H * W];
    static float cf[MAXCOL], of[NB * CH * H * W];
    for (int i = 0; i < NB * CH * H * W; i++) xb[i] = tn_f32_to_bf16_inline((float)x[i] / 7.0f);
    im2col(&f, 2, cb, xb);
    for (int i = 0; i < ncols; i++) cf[i] = tn_bf16_to_f32_inline(cb[i]) * 1.01f, cb[i] = tn_f32_to_bf16_inline(cf[i]);
    for (int i = 0; i < ncols; i++) cf[i] = tn_bf16_to_f32_inline(cb[i]);
    col2im(&f, TN_DTYPE_BF16, ob, cb);
    col2im(&f, TN_DTYPE_F32, of, cf);
    for (int i = 0; i < NB * CH * H * W; i++) CHECK(ob[i] == tn_f32_to_bf16_inline(of[i]));
}
