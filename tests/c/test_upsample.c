/* The upsampling kernel by properties that do not restate its formulas: nearest at scale 2
 * repeats each element twice along each axis, and elsewhere reads floor(o * in / out);
 * bilinear reproduces a linear function of the position at its source points (align_corners,
 * and half-pixel centres clamped to the plane); bicubic takes the samples it lands on and Keys'
 * weights halfway between; and each backward is the forward's adjoint,
 * <up(x), g> = <x, up'(g)>, for every mode, with several planes split across slices. The exact
 * float indices of the CPU are checked against it in tests/test_upsample.py. */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "tn/tn.h"

enum { P = 3, IH = 5, IW = 4, OH = 9, OW = 11 };

static void run(const tn_upsample2d *u, int backward, double *dst, const double *src) {
    void *scratch = malloc((size_t)tn_upsample2d_scratch_bytes(u));
    for (int i = 0; i < 2; i++) tn_kernel_upsample2d(u, TN_DTYPE_F64, backward, dst, src, scratch, i, 2);
    free(scratch);
}

void test_upsample_kernels(void) {
    static double x[P * IH * IW], y[P * OH * OW], g[P * OH * OW], gx[P * IH * IW];
    /* nearest, scale 2 */
    tn_upsample2d u = {P, IH, IW, 2 * IH, 2 * IW, TN_UPSAMPLE_NEAREST, 0, 0, 0};
    for (int i = 0; i < P * IH * IW; i++) x[i] = (double)((i * 37) % 23);
    run(&u, 0, y, x);
    for (int p = 0; p < P; p++)
        for (int oh = 0; oh < 2 * IH; oh++)
            for (int ow = 0; ow < 2 * IW; ow++)
                CHECK(y[(p * 2 * IH + oh) * 2 * IW + ow] == x[(p * IH + oh / 2) * IW + ow / 2]);
    /* nearest at 5 -> 9 and 4 -> 11: floor(o * in / out) */
    tn_upsample2d v = {P, IH, IW, OH, OW, TN_UPSAMPLE_NEAREST, 0, 0, 0};
    run(&v, 0, y, x);
    for (int p = 0; p < P; p++)
        for (int oh = 0; oh < OH; oh++)
            for (int ow = 0; ow < OW; ow++)
                CHECK(y[(p * OH + oh) * OW + ow] == x[(p * IH + oh * IH / OH) * IW + ow * IW / OW]);
    /* bilinear on x = 3 h - 2 w + 1: the output is that function at the (clamped) source point */
    for (int align = 0; align < 2; align++) {
        tn_upsample2d b = {P, IH, IW, OH, OW, TN_UPSAMPLE_BILINEAR, align, 0, 0};
        for (int p = 0; p < P; p++)
            for (int h = 0; h < IH; h++)
                for (int w = 0; w < IW; w++) x[(p * IH + h) * IW + w] = 3.0 * h - 2.0 * w + 1.0 + p;
        run(&b, 0, y, x);
        for (int p = 0; p < P; p++)
            for (int oh = 0; oh < OH; oh++)
                for (int ow = 0; ow < OW; ow++) {
                    double rh = align ? oh * (IH - 1.0) / (OH - 1.0) : fmax((oh + 0.5) * IH / OH - 0.5, 0.0);
                    double rw = align ? ow * (IW - 1.0) / (OW - 1.0) : fmax((ow + 0.5) * IW / OW - 0.5, 0.0);
                    rh = fmin(rh, IH - 1.0), rw = fmin(rw, IW - 1.0);
                    CHECK(fabs(y[(p * OH + oh) * OW + ow] - (3.0 * rh - 2.0 * rw + 1.0 + p)) < 1e-5);
                }
    }
    /* bicubic (Keys' cubic convolution, a = -0.75): with corners aligned and 5 -> 9, every
     * other output lies on an input sample and takes it; halfway between samples whose taps
     * lie inside the plane, the weights are (-3, 19, 19, -3) / 32; a constant stays constant */
    {
        tn_upsample2d c = {1, 5, 5, 9, 9, TN_UPSAMPLE_BICUBIC, 1, 0, 0};
        for (int i = 0; i < 25; i++) x[i] = (double)((i * 37) % 23) - 11.0;
        run(&c, 0, y, x);
        const double half[4] = {-3.0 / 32, 19.0 / 32, 19.0 / 32, -3.0 / 32};
        for (int oh = 0; oh < 9; oh += 2)
            for (int ow = 0; ow < 9; ow++) {
                int h = oh / 2, w = ow / 2;
                double want = x[h * 5 + w];
                if (ow % 2) {
                    if (w < 1 || w + 2 > 4) continue;
                    want = 0;
                    for (int k = 0; k < 4; k++) want += half[k] * x[h * 5 + w - 1 + k];
                }
                CHECK(fabs(y[oh * 9 + ow] - want) < 1e-5);
            }
        for (int i = 0; i < 25; i++) x[i] = 3.25;
        for (int align = 0; align < 2; align++) {
            tn_upsample2d d = {1, 5, 4, 9, 11, TN_UPSAMPLE_BICUBIC, align, 0, 0};
            run(&d, 0, y, x);
            for (int i = 0; i < 99; i++) CHECK(fabs(y[i] - 3.25) < 1e-5);
        }
    }
    /* the backward is the adjoint of the forward, for every mode and both corner rules */
    const tn_upsample_mode modes[] = {TN_UPSAMPLE_NEAREST, TN_UPSAMPLE_NEAREST_EXACT, TN_UPSAMPLE_BILINEAR,
                                      TN_UPSAMPLE_BICUBIC};
    for (int m = 0; m < 4; m++)
        for (int align = 0; align < 2; align++) {
            tn_upsample2d a = {P, IH, IW, OH, OW, modes[m], align, 0, 0};
            for (int i = 0; i < P * IH * IW; i++) x[i] = sin(1.0 + i);
            for (int i = 0; i < P * OH * OW; i++) g[i] = cos(2.0 + 3.0 * i);
            run(&a, 0, y, x);
            run(&a, 1, gx, g);
            double lhs = 0, rhs = 0;
            for (int i = 0; i < P * OH * OW; i++) lhs += y[i] * g[i];
            for (int i = 0; i < P * IH * IW; i++) rhs += x[i] * gx[i];
            CHECK(fabs(lhs - rhs) < 1e-9 * (1.0 + fabs(lhs)));
        }
}
