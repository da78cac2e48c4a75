/* The SVD kernel: A = U diag(S) Vh with orthonormal factors, descending singular values, for
 * tall, wide, square, rank-deficient and zero matrices, full and reduced, float32 and
 * float64; NaN flags its matrix. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tn/tn.h"

static tn_tensor view3(void *d, tn_dtype dt, int64_t b, int64_t r, int64_t c) {
    tn_tensor t = {.data = d, .dtype = dt, .ndim = 3, .sizes = {b, r, c}, .strides = {r * c, c, 1}};
    return t;
}

static double get(const tn_tensor *t, int64_t b, int64_t i, int64_t j) {
    int64_t off = b * t->strides[0] + i * t->strides[1] + j * t->strides[2];
    return t->dtype == TN_DTYPE_F64 ? ((double *)t->data)[off] : ((float *)t->data)[off];
}

/* Decomposes a batch of two m x n matrices (the second of rank 1, or zero when rank1 is 0). */
static void check_svd(int64_t m, int64_t n, int full, tn_dtype dt, int rank1) {
    int64_t k = m < n ? m : n, uc = full ? m : k, vr = full ? n : k, es = dt == TN_DTYPE_F64 ? 8 : 4;
    double tol = dt == TN_DTYPE_F64 ? 1e-12 : 2e-5;
    char *a = calloc((size_t)(2 * m * n), (size_t)es), *u = calloc((size_t)(2 * m * uc), (size_t)es);
    char *s = calloc((size_t)(2 * k), (size_t)es), *vh = calloc((size_t)(2 * vr * n), (size_t)es);
    double *work = malloc(sizeof(double) * (size_t)tn_svd_scratch_doubles(m, n, full));
    uint8_t bad[2] = {7, 7};
    tn_tensor ta = view3(a, dt, 2, m, n), tu = view3(u, dt, 2, m, uc), ts = view3(s, dt, 2, 1, k),
              tv = view3(vh, dt, 2, vr, n);
    ts.strides[1] = 0;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double x = sin((double)(3 * i + 7 * j + 1)), y = rank1 ? (double)(i + 1) * (double)(j % 3 - 1) : 0.0;
            if (dt == TN_DTYPE_F64) ((double *)a)[i * n + j] = x, ((double *)a)[m * n + i * n + j] = y;
            else ((float *)a)[i * n + j] = (float)x, ((float *)a)[m * n + i * n + j] = (float)y;
        }
    CHECK(tn_kernel_svd(&ta, &tu, &ts, &tv, work, bad, 0, 1) == 0);
    CHECK(bad[0] == 0 && bad[1] == 0);
    for (int64_t b = 0; b < 2; b++) {
        for (int64_t j = 0; j + 1 < k; j++) CHECK(get(&ts, b, 0, j) >= get(&ts, b, 0, j + 1) - tol);
        for (int64_t i = 0; i < m; i++) /* A = U[:, :k] S Vh[:k] */
            for (int64_t j = 0; j < n; j++) {
                double x = 0;
                for (int64_t p = 0; p < k; p++) x += get(&tu, b, i, p) * get(&ts, b, 0, p) * get(&tv, b, p, j);
                CHECK(fabs(x - get(&ta, b, i, j)) < tol * 10);
            }
        for (int64_t p = 0; p < uc; p++) /* U^T U = I */
            for (int64_t q = 0; q < uc; q++) {
                double x = 0;
                for (int64_t i = 0; i < m; i++) x += get(&tu, b, i, p) * get(&tu, b, i, q);
                CHECK(fabs(x - (p == q)) < tol * 10);
            }
        for (int64_t p = 0; p < vr; p++) /* Vh Vh^T = I */
            for (int64_t q = 0; q < vr; q++) {
                double x = 0;
                for (int64_t j = 0; j < n; j++) x += get(&tv, b, p, j) * get(&tv, b, q, j);
                CHECK(fabs(x - (p == q)) < tol * 10);
            }
    }
    /* singular values alone, and a NaN */
    if (dt == TN_DTYPE_F64) ((double *)a)[m * n] = NAN;
    else ((float *)a)[m * n] = NAN;
    CHECK(tn_kernel_svd(&ta, NULL, &ts, NULL, work, bad, 0, 1) == 1);
    CHECK(bad[0] == 0 && bad[1] == 1 && isnan(get(&ts, 1, 0, 0)));
    free(a), free(u), free(s), free(vh), free(work);
}

void test_svd_kernel(void) {
    const int64_t shapes[][2] = {{5, 3}, {3, 5}, {4, 4}, {9, 2}, {1, 6}, {1, 1}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int full = 0; full < 2; full++) {
            check_svd(shapes[i][0], shapes[i][1], full, TN_DTYPE_F64, 1);
            check_svd(shapes[i][0], shapes[i][1], full, TN_DTYPE_F32, 0);
        }
}
