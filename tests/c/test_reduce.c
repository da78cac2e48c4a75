/* Reductions and softmax kernels against direct computations. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "tn/tn.h"

static tn_tensor t2(void *d, tn_dtype dt, int64_t s0, int64_t s1, int64_t st0, int64_t st1) {
    tn_tensor t = {.data = d, .dtype = dt, .ndim = 2};
    t.sizes[0] = s0;
    t.sizes[1] = s1;
    t.strides[0] = st0;
    t.strides[1] = st1;
    return t;
}

void test_reductions(void) {
    float x[3][5] = {{1, 2, 3, 4, 5}, {-1, 7, 7, -3, 0}, {2, NAN, 1, 9, 9}};
    float sums[3];
    /* sum over dim 1: out has stride 0 along dim 1 */
    tn_tensor in = t2(x, TN_DTYPE_F32, 3, 5, 5, 1), out = t2(sums, TN_DTYPE_F32, 3, 5, 1, 0);
    for (int k = 0; k < 2; k++) tn_kernel_reduce(TN_REDUCE_SUM, &out, NULL, &in, 1.0, k, 2);
    CHECK(sums[0] == 15 && sums[1] == 10 && isnan(sums[2]));
    /* max with indices: first extreme, NaN wins */
    float mx[3];
    int64_t pos[3];
    tn_tensor omx = t2(mx, TN_DTYPE_F32, 3, 5, 1, 0), opos = t2(pos, TN_DTYPE_I64, 3, 5, 1, 0);
    tn_kernel_reduce(TN_REDUCE_MAX, &omx, &opos, &in, 1.0, 0, 1);
    CHECK(mx[0] == 5 && pos[0] == 4 && mx[1] == 7 && pos[1] == 1 && isnan(mx[2]) && pos[2] == 1);
    /* argmin over dim 0 (column-wise): out has stride 0 along dim 0 */
    int64_t amin[5];
    tn_tensor oam = t2(amin, TN_DTYPE_I64, 3, 5, 0, 1);
    tn_kernel_reduce(TN_REDUCE_ARGMIN, &oam, NULL, &in, 1.0, 0, 1);
    CHECK(amin[0] == 1 && amin[1] == 2 && amin[2] == 2 && amin[3] == 1 && amin[4] == 1);
    /* mean over everything of a transposed view, into a double */
    double mean;
    tn_tensor tin = t2(x, TN_DTYPE_F32, 5, 2, 1, 5), omean = t2(&mean, TN_DTYPE_F64, 5, 2, 0, 0);
    tn_kernel_reduce(TN_REDUCE_SUM, &omean, NULL, &tin, 0.1, 0, 1);
    CHECK(fabs(mean - 2.5) < 1e-12);
    /* integer product wraps; all/any */
    int64_t v[4] = {INT64_MAX, 2, 1, 1}, prod;
    tn_tensor iv = {.data = v, .dtype = TN_DTYPE_I64, .ndim = 1, .sizes = {4}, .strides = {1}};
    tn_tensor ip = {.data = &prod, .dtype = TN_DTYPE_I64, .ndim = 1, .sizes = {4}, .strides = {0}};
    tn_kernel_reduce(TN_REDUCE_PROD, &ip, NULL, &iv, 1.0, 0, 1);
    CHECK(prod == -2);
    uint8_t all, any;
    tn_tensor oall = {.data = &all, .dtype = TN_DTYPE_BOOL, .ndim = 1, .sizes = {4}, .strides = {0}};
    tn_tensor oany = oall;
    oany.data = &any;
    tn_kernel_reduce(TN_REDUCE_ALL, &oall, NULL, &iv, 1.0, 0, 1);
    tn_kernel_reduce(TN_REDUCE_ANY, &oany, NULL, &iv, 1.0, 0, 1);
    CHECK(all == 1 && any == 1);
    /* long float32 rows take the partial-sum path */
    static float big[1000];
    for (int i = 0; i < 1000; i++) big[i] = 0.5f;
    float s;
    tn_tensor bin = {.data = big, .dtype = TN_DTYPE_F32, .ndim = 1, .sizes = {1000}, .strides = {1}};
    tn_tensor bout = {.data = &s, .dtype = TN_DTYPE_F32, .ndim = 1, .sizes = {1000}, .strides = {0}};
    tn_kernel_reduce(TN_REDUCE_SUM, &bout, NULL, &bin, 1.0, 0, 1);
    CHECK(s == 500.0f);
}

void test_var_kernel(void) {
    float x[2][4] = {{1, 2, 3, 4}, {-2, -2, -2, -2}};
    float var[2], mean[2];
    tn_tensor in = t2(x, TN_DTYPE_F32, 2, 4, 4, 1);
    tn_tensor ov = t2(var, TN_DTYPE_F32, 2, 4, 1, 0), om = t2(mean, TN_DTYPE_F32, 2, 4, 1, 0);
    for (int k = 0; k < 2; k++) tn_kernel_var(&ov, &om, &in, 1.0, 0, k, 2);
    CHECK(fabsf(var[0] - 5.0f / 3.0f) < 1e-6f && var[1] == 0 && mean[0] == 2.5f && mean[1] == -2);
    /* std over dim 0 of the columns, no correction */
    double sd[4];
    tn_tensor osd = t2(sd, TN_DTYPE_F64, 2, 4, 0, 1);
    tn_kernel_var(&osd, NULL, &in, 0.0, 1, 0, 1);
    CHECK(fabs(sd[0] - 1.5) < 1e-12 && fabs(sd[3] - 3.0) < 1e-12);
    /* N - correction <= 0: 0/0 is NaN, x/0 is inf */
    tn_kernel_var(&ov, NULL, &in, 4.0, 0, 0, 1);
    CHECK(isinf(var[0]) && isnan(var[1]));
}

void test_softmax_kernels(void) {
    float x[2][4] = {{1, 2, 3, 4}, {-1000, 0, 1000, 1000}};
    float y[2][4], ly[2][4], g[2][4] = {{1, 0, 0, 0}, {0.5f, 0.5f, 0.5f, 0.5f}}, gi[2][4];
    double scratch[8];
    tn_tensor in = t2(x, TN_DTYPE_F32, 2, 4, 4, 1), out = t2(y, TN_DTYPE_F32, 2, 4, 4, 1);
    tn_tensor lout = t2(ly, TN_DTYPE_F32, 2, 4, 4, 1);
    tn_kernel_softmax(TN_SOFTMAX, &out, &in, NULL, scratch, 0, 1);
    tn_kernel_softmax(TN_LOG_SOFTMAX, &lout, &in, NULL, scratch, 0, 1);
    double z = exp(1) + exp(2) + exp(3) + exp(4);
    for (int i = 0; i < 4; i++) {
        CHECK(fabs(y[0][i] - exp(i + 1) / z) < 1e-6);
        CHECK(fabs(ly[0][i] - (i + 1 - log(z))) < 1e-5);
    }
    CHECK(y[1][0] == 0.0f && fabsf(y[1][2] - 0.5f) < 1e-6f); /* no overflow at 1000 */
    tn_tensor gt = t2(g, TN_DTYPE_F32, 2, 4, 4, 1), git = t2(gi, TN_DTYPE_F32, 2, 4, 4, 1);
    tn_kernel_softmax(TN_SOFTMAX_BACKWARD, &git, &gt, &out, scratch, 0, 1);
    /* d softmax_0 / d x_i = y0 (delta_i0 - y_i) */
    for (int i = 0; i < 4; i++) CHECK(fabs(gi[0][i] - y[0][i] * ((i == 0) - y[0][0])) < 1e-6);
    tn_kernel_softmax(TN_LOG_SOFTMAX_BACKWARD, &git, &gt, &lout, scratch, 0, 1);
    for (int i = 0; i < 4; i++) CHECK(fabs(gi[1][i] - (0.5 - exp(ly[1][i]) * 2.0)) < 1e-6);
}

void test_histc_kernel(void) {
    int32_t ids[7] = {0, 3, 3, 7, 8, -1, 5};
    tn_tensor in = {.data = ids, .dtype = TN_DTYPE_I32, .ndim = 1, .sizes = {7}, .strides = {1}};
    int32_t counts[4];
    tn_tensor out = {.data = counts, .dtype = TN_DTYPE_I32, .ndim = 1, .sizes = {4}, .strides = {1}};
    tn_kernel_histc(&out, &in, 0.0, 7.0); /* bins of width 1.75; 8 and -1 are outside, 7 is the top edge */
    CHECK(counts[0] == 1 && counts[1] == 2 && counts[2] == 1 && counts[3] == 1);
}

/* Lower and upper substitution, in place on the right-hand side. */
void test_solve_triangular_kernel(void) {
    double a[3][3] = {{2, 0, 0}, {1, 4, 0}, {3, 5, 8}}; /* lower; its transpose read as upper */
    double x[3][1] = {{1}, {2}, {3}}, b[3][1];
    for (int i = 0; i < 3; i++) b[i][0] = a[i][0] * x[0][0] + a[i][1] * x[1][0] + a[i][2] * x[2][0];
    tn_tensor ta = {.data = a, .dtype = TN_DTYPE_F64, .ndim = 3, .sizes = {1, 3, 3}, .strides = {0, 3, 1}};
    tn_tensor tb = {.data = b, .dtype = TN_DTYPE_F64, .ndim = 3, .sizes = {1, 3, 1}, .strides = {0, 1, 1}};
    tn_kernel_solve_triangular(&tb, &ta, &tb, 0, 0, 0, 1);
    CHECK(fabs(b[0][0] - 1) < 1e-12 && fabs(b[1][0] - 2) < 1e-12 && fabs(b[2][0] - 3) < 1e-12);
    tn_tensor at = ta; /* a^T: upper triangular */
    at.strides[1] = 1;
    at.strides[2] = 3;
    for (int i = 0; i < 3; i++) b[i][0] = a[0][i] * x[0][0] + a[1][i] * x[1][0] + a[2][i] * x[2][0];
    tn_kernel_solve_triangular(&tb, &at, &tb, 1, 0, 0, 1);
    CHECK(fabs(b[0][0] - 1) < 1e-12 && fabs(b[1][0] - 2) < 1e-12 && fabs(b[2][0] - 3) < 1e-12);
}
