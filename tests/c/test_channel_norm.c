/* The batch and group normalisation kernels against the definitions computed directly in double:
 * batch norm in training (with the running statistics' update) and in evaluation, group norm,
 * forward and backward, threads' slices of planes of several sizes. The data sit on a large
 * offset (1e4 with a spread of 0.05), where a variance taken as E[x^2] - E[x]^2 loses most of
 * its digits even in double; bfloat16 data with float32 parameters too. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/table.h"
#include "tn/tn.h"

enum { N = 3, C = 4, S = 37, G = 2 };

static void run(const tn_channel_norm *cn, int backward) {
    double *work = malloc(sizeof(double) * (4 * N * C + 2 * C));
    int sums = backward || cn->groups || cn->training;
    for (int i = 0; i < 3 && sums; i++) tn_kernel_channel_norm_sums(cn, backward, work, i, 3);
    tn_kernel_channel_norm_coefficients(cn, backward, work);
    for (int i = 0; i < 2 && cn->y; i++) tn_kernel_channel_norm_apply(cn, backward, work, i, 2);
    free(work);
}

/* Is element e (of N * C * S) in statistics group k? */
static int in_group(int groups, int64_t e, int k) {
    int ci = (int)(e / S % C), ni = (int)(e / (S * C));
    return groups ? ni * groups + ci / (C / groups) == k : ci == k;
}

/* The definitions: mean and rstd per group, y, and dx, dw, db for dy = g */
static void reference(int groups, int training, const double *x, const double *g, const double *w, const double *b,
                      const double *rm, const double *rv, double eps, double *mean, double *rstd, double *y,
                      double *dx, double *dw, double *db) {
    int stats = groups ? N * groups : C;
    for (int k = 0; k < stats; k++) {
        double sum = 0, count = 0, sq = 0;
        for (int64_t e = 0; e < N * C * S; e++)
            if (in_group(groups, e, k)) sum += x[e], count++;
        double mu = sum / count;
        for (int64_t e = 0; e < N * C * S; e++)
            if (in_group(groups, e, k)) sq += (x[e] - mu) * (x[e] - mu);
        mean[k] = groups || training ? mu : rm[k];
        rstd[k] = groups || training ? 1.0 / sqrt(sq / count + eps) : 1.0 / sqrt(rv[k] + eps);
        for (int64_t e = 0; e < N * C * S; e++)
            if (in_group(groups, e, k)) y[e] = (x[e] - mean[k]) * rstd[k] * w[(int)(e / S % C)] + b[(int)(e / S % C)];
        /* the backward reads the statistics as the forward stored them: float32 */
        mean[k] = (float)mean[k], rstd[k] = (float)rstd[k];
        double a = 0, c = 0; /* mean of g w and of g w xhat over the group */
        for (int64_t e = 0; e < N * C * S; e++) {
            if (!in_group(groups, e, k)) continue;
            int ci = (int)(e / S % C);
            double xhat = (x[e] - mean[k]) * rstd[k];
            a += g[e] * w[ci] / count;
            c += g[e] * w[ci] * xhat / count;
        }
        for (int64_t e = 0; e < N * C * S; e++) {
            if (!in_group(groups, e, k)) continue;
            int ci = (int)(e / S % C);
            double xhat = (x[e] - mean[k]) * rstd[k];
            dx[e] = groups || training ? rstd[k] * (g[e] * w[ci] - a - xhat * c) : rstd[k] * w[ci] * g[e];
        }
    }
    for (int ci = 0; ci < C; ci++) dw[ci] = db[ci] = 0;
    for (int64_t e = 0; e < N * C * S; e++) {
        int ci = (int)(e / S % C), k = 0;
        while (!in_group(groups, e, k)) k++;
        dw[ci] += g[e] * (x[e] - mean[k]) * rstd[k];
        db[ci] += g[e];
    }
}

static int close_to(double got, double want, double tol) { return fabs(got - want) <= tol * (1.0 + fabs(want)); }

/* One configuration in float32 data and parameters (or bfloat16 data), against reference(). */
static void check_case(int groups, int training, int bf16) {
    enum { E = N * C * S };
    static float xf[E], gf[E], yf[E], dxf[E];
    static uint16_t xh[E], gh[E], yh[E], dxh[E];
    static double x[E], g[E], y[E], dx[E];
    float w[C], b[C], rm[C], rv[C], mean[N * G > C ? N * G : C], rstd[N * G > C ? N * G : C], dw[C], db[C];
    double wd[C], bd[C], rmd[C], rvd[C], meand[N * C], rstdd[N * C], dwd[C], dbd[C];
    for (int e = 0; e < E; e++) {
        xf[e] = 1e4f + 0.05f * (float)((e * 7919) % 97) / 97.0f + (float)(e / S % C);
        gf[e] = (float)((e * 104729) % 89) / 89.0f - 0.4f;
        if (bf16) {
            xh[e] = tn_f32_to_bf16(xf[e]), gh[e] = tn_f32_to_bf16(gf[e]);
            xf[e] = tn_bf16_to_f32(xh[e]), gf[e] = tn_bf16_to_f32(gh[e]);
        }
        x[e] = xf[e], g[e] = gf[e];
    }
    for (int ci = 0; ci < C; ci++) {
        w[ci] = 0.5f + 0.25f * (float)ci, b[ci] = 0.1f * (float)ci - 0.2f;
        rm[ci] = 1e4f + (float)ci, rv[ci] = 0.001f * (float)(ci + 1);
        wd[ci] = w[ci], bd[ci] = b[ci], rmd[ci] = rm[ci], rvd[ci] = rv[ci];
    }
    tn_channel_norm cn = {.n = N, .c = C, .s = S, .groups = groups ? G : 0, .training = training,
                          .dtype = bf16 ? TN_DTYPE_BF16 : TN_DTYPE_F32, .param_dtype = TN_DTYPE_F32,
                          .eps = 1e-5, .momentum = 0.1, .x = bf16 ? (void *)xh : (void *)xf,
                          .y = bf16 ? (void *)yh : (void *)yf, .weight = w, .bias = b, .running_mean = rm,
                          .running_var = rv, .mean = mean, .rstd = rstd};
    reference(groups ? G : 0, training, x, g, wd, bd, rmd, rvd, 1e-5, meand, rstdd, y, dx, dwd, dbd);
    run(&cn, 0);
    double out_tol = bf16 ? 8e-3 : 2e-6;
    int stats = groups ? N * G : C;
    for (int e = 0; e < E; e++) {
        double got = bf16 ? (double)tn_bf16_to_f32(yh[e]) : yf[e];
        CHECK(close_to(got, y[e], out_tol));
    }
    for (int k = 0; k < stats && (groups || training); k++)
        CHECK(mean[k] == (float)meand[k] && close_to(rstd[k], rstdd[k], 1e-6));
    if (!groups && training) { /* running statistics: momentum 0.1, the variance unbiased */
        for (int ci = 0; ci < C; ci++) {
            double var = 1.0 / ((double)rstd[ci] * rstd[ci]) - 1e-5, m = (double)N * S;
            CHECK(close_to(rm[ci], 0.9 * rmd[ci] + 0.1 * meand[ci], 1e-7));
            CHECK(close_to(rv[ci], 0.9 * rvd[ci] + 0.1 * var * m / (m - 1), 1e-5));
        }
    }
    if (!groups && !training) /* the backward reads the running statistics as they were */
        for (int ci = 0; ci < C; ci++) rm[ci] = (float)rmd[ci], rv[ci] = (float)rvd[ci];
    cn.grad = bf16 ? (void *)gh : (void *)gf;
    cn.y = bf16 ? (void *)dxh : (void *)dxf;
    cn.grad_weight = dw, cn.grad_bias = db;
    run(&cn, 1);
    double scale = 0;
    for (int e = 0; e < E; e++) scale = fmax(scale, fabs(dx[e]));
    for (int e = 0; e < E; e++) {
        double got = bf16 ? (double)tn_bf16_to_f32(dxh[e]) : dxf[e];
        CHECK(fabs(got - dx[e]) <= (bf16 ? 8e-3 : 1e-5) * scale);
    }
    for (int ci = 0; ci < C; ci++) CHECK(close_to(dw[ci], dwd[ci], 1e-5) && close_to(db[ci], dbd[ci], 1e-6));
}

void test_channel_norm_kernels(void) {
    for (int bf16 = 0; bf16 < 2; bf16++) {
        check_case(0, 1, bf16); /* batch norm, training */
        check_case(0, 0, bf16); /* batch norm, evaluation */
        check_case(1, 1, bf16); /* group norm */
    }
}

/* Every ISA's plane loops give the reference's results bit for bit (the same lanes in the same
 * order), over lengths across the chunk and lane boundaries, in float32 and bfloat16. */
void test_channel_norm_rows_every_isa(void) {
    enum { M = 600 };
    static float x[M], g[M], y[M], want[M];
    static uint16_t xh[M], gh[M], yh[M], wanth[M];
    for (int i = 0; i < M; i++) {
        x[i] = 3.0f + (float)((i * 7919) % 101) / 50.0f, g[i] = (float)((i * 104729) % 89) / 89.0f - 0.4f;
        xh[i] = tn_f32_to_bf16(x[i]), gh[i] = tn_f32_to_bf16(g[i]);
    }
    const tn_kernel_table *ref = tn_kernels_for(TN_ISA_REF);
    const int lengths[] = {1, 7, 8, 9, 255, 256, 257, M};
    const double k[4] = {0.75, -0.5, 0.125, 3.5};
    for (int isa = 0; isa < TN_ISA_COUNT_; isa++) {
        const tn_kernel_table *t = tn_kernels_for((tn_isa)isa);
        if (!t) continue;
        for (size_t li = 0; li < sizeof lengths / sizeof *lengths; li++) {
            int n = lengths[li];
            for (int half = 0; half < 2; half++) {
                tn_dtype dt = half ? TN_DTYPE_BF16 : TN_DTYPE_F32;
                const void *xs = half ? (const void *)xh : (const void *)x, *gs = half ? (const void *)gh : (const void *)g;
                for (int bw = 0; bw < 2; bw++) {
                    double mine[2], base[2];
                    t->plane_moments(dt, n, xs, bw ? gs : NULL, 3.5, mine);
                    ref->plane_moments(dt, n, xs, bw ? gs : NULL, 3.5, base);
                    CHECK(memcmp(mine, base, sizeof mine) == 0);
                    t->plane_affine(dt, n, xs, bw ? gs : NULL, k, half ? (void *)yh : (void *)y);
                    ref->plane_affine(dt, n, xs, bw ? gs : NULL, k, half ? (void *)wanth : (void *)want);
                    CHECK(half ? memcmp(yh, wanth, n * sizeof *yh) == 0 : memcmp(y, want, n * sizeof *y) == 0);
                }
            }
        }
    }
}
