/* Average pooling by properties: a constant plane averages to itself where windows lie in the
 * plane, and to the constant times (elements in the plane) / (window in the padded plane) at
 * the border with count_include_pad; a divisor override divides the window's sum; the backward
 * is the forward's adjoint, <avg(x), g> = <x, avg'(g)>; bfloat16 gradients are float32 sums
 * rounded once. Max pooling: each output is its window's maximum at its index. Three slices
 * over three planes. */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "kernels/half.h"
#include "tn/tn.h"

enum { P = 3, IH = 6, IW = 5 };

static void avg(const tn_pool2d *s, int include_pad, int64_t divisor, tn_dtype t, int backward, void *dst,
                const void *src) {
    static float scratch[IH * IW];
    for (int i = 0; i < 3; i++) tn_kernel_avg_pool2d(s, include_pad, divisor, t, backward, dst, src, scratch, i, 3);
}

static tn_pool2d shape(int64_t k, int64_t stride, int64_t pad, int ceil_mode) {
    tn_pool2d s = {P, IH, IW, 0, 0, k, k, stride, stride, pad, pad, 1, 1};
    int64_t span_h = IH + 2 * pad - k, span_w = IW + 2 * pad - k;
    s.out_h = (span_h + (ceil_mode ? stride - 1 : 0)) / stride + 1;
    s.out_w = (span_w + (ceil_mode ? stride - 1 : 0)) / stride + 1;
    if ((s.out_h - 1) * stride >= IH + pad) s.out_h--; /* the last window starts inside the plane */
    if ((s.out_w - 1) * stride >= IW + pad) s.out_w--;
    return s;
}

void test_pool_kernels(void) {
    static double x[P * IH * IW], y[P * IH * IW], g[P * IH * IW], gx[P * IH * IW];
    /* a constant plane */
    for (int i = 0; i < P * IH * IW; i++) x[i] = 2.5;
    tn_pool2d s = shape(3, 2, 1, 0);
    avg(&s, 0, 0, TN_DTYPE_F64, 0, y, x);
    for (int i = 0; i < P * s.out_h * s.out_w; i++) CHECK(y[i] == 2.5);
    avg(&s, 1, 0, TN_DTYPE_F64, 0, y, x);
    for (int64_t oh = 0; oh < s.out_h; oh++)
        for (int64_t ow = 0; ow < s.out_w; ow++) {
            int64_t h0 = oh * 2 - 1, w0 = ow * 2 - 1, inside = 0, padded = 0;
            for (int64_t h = h0; h < h0 + 3; h++)
                for (int64_t w = w0; w < w0 + 3; w++) {
                    padded += h < IH + 1 && w < IW + 1; /* the window clipped to the padded plane */
                    inside += h >= 0 && h < IH && w >= 0 && w < IW;
                }
            CHECK(fabs(y[oh * s.out_w + ow] - 2.5 * (double)inside / (double)padded) < 1e-15);
        }
    /* a divisor override: the window sum over the divisor */
    for (int i = 0; i < P * IH * IW; i++) x[i] = (double)((i * 37) % 23) - 11.0;
    tn_pool2d u = shape(2, 2, 0, 0);
    avg(&u, 0, 7, TN_DTYPE_F64, 0, y, x);
    for (int p = 0; p < P; p++)
        for (int64_t oh = 0; oh < u.out_h; oh++)
            for (int64_t ow = 0; ow < u.out_w; ow++) {
                const double *q = x + p * IH * IW + oh * 2 * IW + ow * 2;
                CHECK(fabs(y[(p * u.out_h + oh) * u.out_w + ow] - (q[0] + q[1] + q[IW] + q[IW + 1]) / 7.0) < 1e-14);
            }
    /* every backward is its forward's adjoint */
    const int64_t geo[][4] = {{3, 2, 1, 0}, {3, 1, 1, 0}, {2, 2, 0, 1}, {3, 2, 1, 1}, {1, 1, 0, 0}};
    for (size_t gi = 0; gi < sizeof geo / sizeof *geo; gi++)
        for (int include_pad = 0; include_pad < 2; include_pad++) {
            tn_pool2d v = shape(geo[gi][0], geo[gi][1], geo[gi][2], (int)geo[gi][3]);
            int64_t n_out = P * v.out_h * v.out_w;
            for (int i = 0; i < n_out; i++) g[i] = (double)((i * 53) % 17) - 8.0;
            avg(&v, include_pad, 0, TN_DTYPE_F64, 0, y, x);
            avg(&v, include_pad, 0, TN_DTYPE_F64, 1, gx, g);
            double lhs = 0, rhs = 0;
            for (int i = 0; i < n_out; i++) lhs += y[i] * g[i];
            for (int i = 0; i < P * IH * IW; i++) rhs += x[i] * gx[i];
            CHECK(fabs(lhs - rhs) <= 1e-12 * (fabs(lhs) + 1));
        }
    /* bfloat16 gradients: float32 sums, rounded once */
    tn_pool2d b = shape(3, 1, 1, 0);
    static uint16_t gb[P * IH * IW], gxb[P * IH * IW];
    static float gf[P * IH * IW], gxf[P * IH * IW];
    for (int i = 0; i < P * b.out_h * b.out_w; i++) gb[i] = tn_f32_to_bf16_inline((float)g[i] / 3.0f);
    for (int i = 0; i < P * b.out_h * b.out_w; i++) gf[i] = tn_bf16_to_f32_inline(gb[i]);
    avg(&b, 1, 0, TN_DTYPE_BF16, 1, gxb, gb);
    avg(&b, 1, 0, TN_DTYPE_F32, 1, gxf, gf);
    for (int i = 0; i < P * IH * IW; i++) CHECK(gxb[i] == tn_f32_to_bf16_inline(gxf[i]));
    /* max pooling: the window's maximum, found at its index */
    static float xf[P * IH * IW], yf[P * IH * IW];
    static int64_t ind[P * IH * IW];
    for (int i = 0; i < P * IH * IW; i++) xf[i] = (float)((i * 37) % 23);
    tn_pool2d m = shape(3, 2, 1, 0);
    for (int i = 0; i < 3; i++) tn_kernel_max_pool2d(&m, TN_DTYPE_F32, yf, ind, xf, i, 3);
    for (int p = 0; p < P; p++)
        for (int64_t oh = 0; oh < m.out_h; oh++)
            for (int64_t ow = 0; ow < m.out_w; ow++) {
                float best = -INFINITY;
                for (int64_t h = oh * 2 - 1; h < oh * 2 + 2; h++)
                    for (int64_t w = ow * 2 - 1; w < ow * 2 + 2; w++)
                        if (h >= 0 && h < IH && w >= 0 && w < IW && xf[p * IH * IW + h * IW + w] > best)
                            best = xf[p * IH * IW + h * IW + w];
                int64_t o = (p * m.out_h + oh) * m.out_w + ow;
                CHECK(yf[o] == best && xf[p * IH * IW + ind[o]] == best);
            }
}
