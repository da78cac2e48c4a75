/* index_select, where and layer norm kernels. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/table.h"
#include "tn/tn.h"

void test_index_select_and_where(void) {
    float table[4][3] = {{0, 1, 2}, {10, 11, 12}, {20, 21, 22}, {30, 31, 32}};
    int64_t idx[3] = {3, 0, 3};
    float out[3][3];
    tn_tensor tin = {.data = table, .dtype = TN_DTYPE_F32, .ndim = 2, .sizes = {4, 3}, .strides = {3, 1}};
    tn_tensor tout = {.data = out, .dtype = TN_DTYPE_F32, .ndim = 2, .sizes = {3, 3}, .strides = {3, 1}};
    tn_tensor tidx = {.data = idx, .dtype = TN_DTYPE_I64, .ndim = 1, .sizes = {3}, .strides = {1}};
    CHECK_OK(tn_kernel_index_select(&tout, &tin, 0, &tidx, 0, 1));
    CHECK(out[0][2] == 32 && out[1][0] == 0 && out[2][1] == 31);
    int64_t neg[1] = {-1};
    tn_tensor tneg = {.data = neg, .dtype = TN_DTYPE_I64, .ndim = 1, .sizes = {1}, .strides = {1}};
    tn_tensor one = tout;
    one.sizes[0] = 1;
    CHECK(tn_kernel_index_select(&one, &tin, 0, &tneg, 0, 1) == TN_STATUS_INVALID_ARGUMENT);
    /* along dim 1 (columns) */
    int32_t cols[2] = {2, 2};
    float o2[4][2];
    tn_tensor tcols = {.data = cols, .dtype = TN_DTYPE_I32, .ndim = 1, .sizes = {2}, .strides = {1}};
    tn_tensor to2 = {.data = o2, .dtype = TN_DTYPE_F32, .ndim = 2, .sizes = {4, 2}, .strides = {2, 1}};
    CHECK_OK(tn_kernel_index_select(&to2, &tin, 1, &tcols, 0, 1));
    CHECK(o2[3][0] == 32 && o2[1][1] == 12);
    int64_t bad[1] = {4};
    tn_tensor tbad = {.data = bad, .dtype = TN_DTYPE_I64, .ndim = 1, .sizes = {1}, .strides = {1}};
    tout.sizes[0] = 1;
    CHECK(tn_kernel_index_select(&tout, &tin, 0, &tbad, 0, 1) == TN_STATUS_INVALID_ARGUMENT);
    tn_stream_t s;
    CHECK_OK(tn_stream_get(0, 0, &s));
    CHECK_OK(tn_index_select_async(s, "aten::index_select.out", &tout, &tin, 0, &tbad));
    CHECK(tn_stream_synchronize(s) == TN_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(tn_last_error(), "index out of range in self") != NULL);
    /* where with a broadcast condition row */
    uint8_t cond[3] = {1, 0, 1};
    int16_t a[2][3] = {{1, 2, 3}, {4, 5, 6}}, b = -1, w[2][3];
    tn_tensor tc = {.data = cond, .dtype = TN_DTYPE_BOOL, .ndim = 2, .sizes = {2, 3}, .strides = {0, 1}};
    tn_tensor ta = {.data = a, .dtype = TN_DTYPE_I16, .ndim = 2, .sizes = {2, 3}, .strides = {3, 1}};
    tn_tensor tb = {.data = &b, .dtype = TN_DTYPE_I16, .ndim = 2, .sizes = {2, 3}, .strides = {0, 0}};
    tn_tensor tw = {.data = w, .dtype = TN_DTYPE_I16, .ndim = 2, .sizes = {2, 3}, .strides = {3, 1}};
    tn_kernel_where(&tw, &tc, &ta, &tb, 0, 1);
    CHECK(w[0][0] == 1 && w[0][1] == -1 && w[1][2] == 6 && w[1][1] == -1);
}

void test_index_add_rows(void) {
    float out[3][2] = {{0}}, src[4][2] = {{1, 2}, {3, 4}, {5, 6}, {7, 8}};
    int64_t idx[4] = {2, 0, 2, 1};
    tn_tensor to = {.data = out, .dtype = TN_DTYPE_F32, .ndim = 2, .sizes = {3, 2}, .strides = {2, 1}};
    tn_tensor ts = {.data = src, .dtype = TN_DTYPE_F32, .ndim = 2, .sizes = {4, 2}, .strides = {2, 1}};
    tn_tensor ti = {.data = idx, .dtype = TN_DTYPE_I64, .ndim = 1, .sizes = {4}, .strides = {1}};
    for (int k = 0; k < 2; k++) CHECK_OK(tn_kernel_index_add_rows(&to, &ti, &ts, 1, k, 2)); /* skip row 1 */
    CHECK(out[2][0] == 6 && out[2][1] == 8 && out[0][1] == 4 && out[1][0] == 0);
    idx[0] = 3;
    CHECK(tn_kernel_index_add_rows(&to, &ti, &ts, -1, 0, 1) == TN_STATUS_INVALID_ARGUMENT);
}

void test_layer_norm_kernel(void) {
    float x[2][4] = {{1, 2, 3, 4}, {-1, -1, -1, -1}}, y[2][4], mean[2], rstd[2];
    float wt[4] = {1, 2, 1, 1}, bias[4] = {0, 0, 1, 0};
    tn_layer_norm ln = {2, 4, TN_DTYPE_F32, 1e-5, x, y, NULL, wt, bias, mean, rstd, 0};
    float scratch[16];
    tn_kernel_layer_norm(&ln, 0, scratch, 0, 1);
    double r = 1.0 / sqrt(1.25 + 1e-5);
    CHECK(fabsf(mean[0] - 2.5f) < 1e-6f && fabs(rstd[0] - r) < 1e-5);
    CHECK(fabs(y[0][1] - (2 - 2.5) * r * 2) < 1e-5 && fabs(y[0][2] - ((3 - 2.5) * r + 1)) < 1e-5);
    CHECK(y[1][0] == 0.0f && y[1][2] == 1.0f); /* constant row: xhat = 0 */
    /* input gradient against a finite difference of sum(g * y) */
    float g[2][4] = {{0.3f, -1, 2, 0.5f}, {1, 1, 1, 1}}, dx[2][4];
    tn_layer_norm back = {2, 4, TN_DTYPE_F32, 1e-5, x, dx, g, wt, bias, mean, rstd, 0};
    tn_kernel_layer_norm(&back, 1, scratch, 0, 1);
    for (int i = 0; i < 4; i++) {
        double h = 1e-3, f[2];
        for (int sgn = 0; sgn < 2; sgn++) {
            double xs[4], m = 0, v = 0;
            for (int j = 0; j < 4; j++) xs[j] = x[0][j] + (j == i ? (sgn ? h : -h) : 0);
            for (int j = 0; j < 4; j++) m += xs[j] / 4;
            for (int j = 0; j < 4; j++) v += (xs[j] - m) * (xs[j] - m) / 4;
            f[sgn] = 0;
            for (int j = 0; j < 4; j++) f[sgn] += g[0][j] * ((xs[j] - m) / sqrt(v + 1e-5) * wt[j] + bias[j]);
        }
        CHECK(fabs(dx[0][i] - (f[1] - f[0]) / (2 * h)) < 1e-3);
    }
}

/* Layer norm (RMS norm when rms) of n-element rows (tn_kernel_layer_norm on float64 data:
 * the double path) and its input gradient, as the reference for the float32 row kernels. */
static void layer_norm_ref(int64_t rows, int64_t n, int rms, const double *x, const double *g, const double *w,
                           const double *b, double *y, double *dx, double *mean, double *rstd) {
    tn_layer_norm f = {rows, n, TN_DTYPE_F64, 1e-5, (void *)x, y, NULL, w, b, rms ? NULL : mean, rstd, rms};
    tn_kernel_layer_norm(&f, 0, NULL, 0, 1);
    tn_layer_norm back = {rows, n, TN_DTYPE_F64, 1e-5, (void *)x, dx, g, w, b, rms ? NULL : mean, rstd, rms};
    tn_kernel_layer_norm(&back, 1, NULL, 0, 1);
    if (rms) *mean = 0;
}

static int near(double got, double want, double tol) { return fabs(got - want) <= tol * (1 + fabs(want)); }

void test_layer_norm_rows_every_isa(void) {
    enum { MAXN = 1000 };
    static const int64_t lengths[] = {1, 7, 16, 17, 64, 100, MAXN}; /* the 64-lane pass, its 16 tail, the rest */
    static double x[MAXN], g[MAXN], w[MAXN], b[MAXN], y[MAXN], dx[MAXN];
    static float xf[MAXN + 64], gf[MAXN + 64], wf[MAXN], bf[MAXN], yf[MAXN], dxf[MAXN];
    uint32_t seed = 7;
    for (int i = 0; i < MAXN; i++) {
        seed = seed * 1664525u + 1013904223u;
        xf[i] = (float)((int32_t)(seed >> 8) % 2001 - 1000) / 100.0f + 3.0f; /* a mean far from 0 */
        gf[i] = (float)((int32_t)(seed >> 4) % 201 - 100) / 50.0f;
        wf[i] = 0.5f + (float)(i % 7) / 8.0f;
        bf[i] = (float)(i % 5) / 4.0f - 0.5f;
        x[i] = xf[i], g[i] = gf[i], w[i] = wf[i], b[i] = bf[i];
    }
    for (int isa = 0; isa < TN_ISA_COUNT_; isa++) {
        const tn_kernel_table *k = tn_kernels_for((tn_isa)isa);
        if (!k) continue;
        for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++)
            for (int variant = 0; variant < 6; variant++) { /* 0-3: weight, bias; 4-5: RMS, weight */
                int64_t n = lengths[l];
                int rms = variant >= 4, weighted = variant & 1, biased = variant == 2 || variant == 3;
                const double *wd = weighted ? w : NULL, *bd = biased ? b : NULL;
                const float *wp = weighted ? wf : NULL, *bp = biased ? bf : NULL;
                double mean, rstd, stats[2];
                layer_norm_ref(1, n, rms, x, g, wd, bd, y, dx, &mean, &rstd);
                k->layer_norm_f32(n, xf, yf, wp, bp, 1e-5, rms, stats);
                k->layer_norm_backward_f32(n, xf, gf, wp, (float)mean, (float)rstd, rms, dxf);
                int ok = near(stats[0], mean, 1e-6) && near(stats[1], rstd, 1e-5);
                for (int64_t i = 0; i < n; i++) ok &= near(yf[i], y[i], 1e-5) && near(dxf[i], dx[i], 2e-4);
                if (!ok)
                    fprintf(stderr, "  layer norm %s: n %lld, rms %d, weight %d, bias %d\n",
                            tn_isa_name((tn_isa)isa), (long long)n, rms, weighted, biased);
                CHECK(ok);
            }
    }
    /* bfloat16 rows through the kernel: widened, computed in float32, rounded once; rows
     * split over three slices */
    enum { ROWS = 5, N = 33 };
    uint16_t xb[ROWS * N], wb[N], yb[ROWS * N], mb[ROWS], rb[ROWS];
    double xd[ROWS * N], wd[N], yd[ROWS * N], dxd[ROWS * N], gd[ROWS * N] = {0}, md[ROWS], rd[ROWS];
    for (int i = 0; i < ROWS * N; i++) xb[i] = tn_f32_to_bf16(xf[i]), xd[i] = tn_bf16_to_f32(xb[i]);
    for (int i = 0; i < N; i++) wb[i] = tn_f32_to_bf16(wf[i]), wd[i] = tn_bf16_to_f32(wb[i]);
    layer_norm_ref(ROWS, N, 0, xd, gd, wd, NULL, yd, dxd, md, rd);
    tn_layer_norm lb = {ROWS, N, TN_DTYPE_BF16, 1e-5, xb, yb, NULL, wb, NULL, mb, rb, 0};
    float scratch[4 * N];
    CHECK(tn_layer_norm_scratch_floats(&lb) == 4 * N);
    for (int ith = 0; ith < 3; ith++) tn_kernel_layer_norm(&lb, 0, scratch, ith, 3);
    for (int i = 0; i < ROWS * N; i++) CHECK(near(tn_bf16_to_f32(yb[i]), yd[i], 1.0 / 128));
    for (int r = 0; r < ROWS; r++) CHECK(near(tn_bf16_to_f32(mb[r]), md[r], 1.0 / 128));
    /* float32 rows streamed past the cache (threshold 0) write the same bytes as normal
     * stores, into an output that starts mid-line */
    static float normal[ROWS * N + 1], streamed[ROWS * N + 1];
    float mf[ROWS], rf[ROWS];
    for (int nt = 0; nt < 2; nt++) {
        float *out = nt ? streamed : normal;
        tn_layer_norm lf = {ROWS, N, TN_DTYPE_F32, 1e-5, xf, out + 1, NULL, wf, bf, mf, rf, 0};
        tn_set_nontemporal_min_bytes(nt ? 0 : INT64_MAX);
        for (int ith = 0; ith < 2; ith++) tn_kernel_layer_norm(&lf, 0, scratch, ith, 2);
    }
    tn_set_nontemporal_min_bytes(-1);
    CHECK(memcmp(normal, streamed, sizeof normal) == 0);
}

void test_sequence_kernels(void) {
    float ar[5];
    tn_tensor tar = {.data = ar, .dtype = TN_DTYPE_F32, .ndim = 1, .sizes = {5}, .strides = {1}};
    tn_scalar start = {.kind = TN_SCALAR_KIND_FLOAT, .f = 0.5}, step = {.kind = TN_SCALAR_KIND_FLOAT, .f = 0.25};
    for (int k = 0; k < 2; k++) tn_kernel_arange(&tar, &start, &step, k, 2);
    for (int i = 0; i < 5; i++) CHECK(ar[i] == 0.5f + 0.25f * (float)i);
    int64_t big[3];
    tn_tensor tbig = {.data = big, .dtype = TN_DTYPE_I64, .ndim = 1, .sizes = {3}, .strides = {1}};
    tn_scalar s0 = {.kind = TN_SCALAR_KIND_INT, .i = INT64_MAX - 1}, s1 = {.kind = TN_SCALAR_KIND_INT, .i = 1};
    tn_kernel_arange(&tbig, &s0, &s1, 0, 1);
    CHECK(big[0] == INT64_MAX - 1 && big[1] == INT64_MAX); /* exact integers, no double rounding */
    /* cumsum of rows, int32 in, int64 out, along the last dimension of a transposed view */
    int32_t x[2][3] = {{1, 2, 3}, {4, 5, 6}};
    int64_t cs[3][2];
    tn_tensor tx = {.data = x, .dtype = TN_DTYPE_I32, .ndim = 2, .sizes = {3, 2}, .strides = {1, 3}};
    tn_tensor tcs = {.data = cs, .dtype = TN_DTYPE_I64, .ndim = 2, .sizes = {3, 2}, .strides = {2, 1}};
    tn_kernel_cumsum(&tcs, &tx, 0, 1);
    CHECK(cs[0][0] == 1 && cs[0][1] == 5 && cs[2][1] == 9);
    /* triu with k = 1, in place */
    float m[3][3] = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}};
    tn_tensor tm = {.data = m, .dtype = TN_DTYPE_F32, .ndim = 2, .sizes = {3, 3}, .strides = {3, 1}};
    tn_kernel_triangle(&tm, &tm, 1, 1, 0, 1);
    CHECK(m[0][0] == 0 && m[0][1] == 2 && m[1][1] == 0 && m[1][2] == 6 && m[2][2] == 0);
}

void test_sort_kernel(void) {
    float x[2][5] = {{3, NAN, 1, 3, -2}, {5, 4, 3, 2, 1}};
    float v[2][5], top[2][2];
    int64_t idx[2][5], tidx[2][2];
    unsigned char scratch[2 * 5 * 16];
    tn_tensor tin = {.data = x, .dtype = TN_DTYPE_F32, .ndim = 2, .sizes = {2, 5}, .strides = {5, 1}};
    tn_tensor tv = {.data = v, .dtype = TN_DTYPE_F32, .ndim = 2, .sizes = {2, 5}, .strides = {5, 1}};
    tn_tensor ti = {.data = idx, .dtype = TN_DTYPE_I64, .ndim = 2, .sizes = {2, 5}, .strides = {5, 1}};
    tn_kernel_sort(&tv, &ti, &tin, 0, scratch, 0, 1);
    CHECK(v[0][0] == -2 && v[0][1] == 1 && v[0][2] == 3 && idx[0][2] == 0 && idx[0][3] == 3 && isnan(v[0][4]));
    CHECK(v[1][0] == 1 && idx[1][0] == 4);
    tn_tensor ttop = {.data = top, .dtype = TN_DTYPE_F32, .ndim = 2, .sizes = {2, 2}, .strides = {2, 1}};
    tn_tensor ttidx = {.data = tidx, .dtype = TN_DTYPE_I64, .ndim = 2, .sizes = {2, 2}, .strides = {2, 1}};
    tn_kernel_sort(&ttop, &ttidx, &tin, 1, scratch, 0, 1);
    CHECK(isnan(top[0][0]) && top[0][1] == 3 && tidx[0][1] == 0 && top[1][0] == 5 && tidx[1][1] == 1);
}

void test_gather_nd_kernel(void) {
    float m[3][4] = {{0, 1, 2, 3}, {10, 11, 12, 13}, {20, 21, 22, 23}};
    int64_t rows[2] = {2, -3}, cols[3] = {0, 3, 1};
    float out[2][3];
    tn_tensor self = {.data = m, .dtype = TN_DTYPE_F32, .ndim = 2, .sizes = {3, 4}, .strides = {4, 1}};
    /* rows broadcast along the column axis, cols along the row axis: out[i][j] = m[rows[i]][cols[j]] */
    tn_tensor idx[2] = {{.data = rows, .dtype = TN_DTYPE_I64, .ndim = 2, .sizes = {2, 3}, .strides = {1, 0}},
                        {.data = cols, .dtype = TN_DTYPE_I64, .ndim = 2, .sizes = {2, 3}, .strides = {0, 1}}};
    tn_tensor to = {.data = out, .dtype = TN_DTYPE_F32, .ndim = 2, .sizes = {2, 3}, .strides = {3, 1}};
    CHECK_OK(tn_kernel_gather_nd(&to, &self, 2, idx, 0, 1));
    CHECK(out[0][0] == 20 && out[0][1] == 23 && out[1][2] == 1);
    /* one index on dim 0 keeps the rows whole */
    float rowsout[2][4];
    tn_tensor one = {.data = rows, .dtype = TN_DTYPE_I64, .ndim = 1, .sizes = {2}, .strides = {1}};
    tn_tensor tr = {.data = rowsout, .dtype = TN_DTYPE_F32, .ndim = 2, .sizes = {2, 4}, .strides = {4, 1}};
    CHECK_OK(tn_kernel_gather_nd(&tr, &self, 1, &one, 0, 1));
    CHECK(rowsout[0][3] == 23 && rowsout[1][1] == 1);
    rows[0] = 3;
    CHECK(tn_kernel_gather_nd(&tr, &self, 1, &one, 0, 1) == TN_STATUS_INVALID_ARGUMENT);
}

void test_index_put_and_nonzero_kernels(void) {
    float m[3][2] = {{0, 0}, {0, 0}, {0, 0}};
    int64_t rows[3] = {1, -1, 1};
    float vals[3][2] = {{1, 2}, {10, 20}, {100, 200}};
    tn_tensor self = {.data = m, .dtype = TN_DTYPE_F32, .ndim = 2, .sizes = {3, 2}, .strides = {2, 1}};
    tn_tensor idx = {.data = rows, .dtype = TN_DTYPE_I64, .ndim = 1, .sizes = {3}, .strides = {1}};
    tn_tensor v = {.data = vals, .dtype = TN_DTYPE_F32, .ndim = 2, .sizes = {3, 2}, .strides = {2, 1}};
    /* accumulate: the repeated row 1 adds both of its values */
    CHECK_OK(tn_kernel_index_put(&self, 1, &idx, &v, 1, 0, 1));
    CHECK(m[1][0] == 101 && m[1][1] == 202 && m[2][0] == 10 && m[0][0] == 0);
    /* a broadcast value (stride 0) written, not added */
    tn_tensor b = v;
    b.strides[0] = b.strides[1] = 0;
    CHECK_OK(tn_kernel_index_put(&self, 1, &idx, &b, 0, 0, 1));
    CHECK(m[1][0] == 1 && m[1][1] == 1 && m[2][1] == 1);
    rows[0] = 3;
    CHECK(tn_kernel_index_put(&self, 1, &idx, &v, 0, 0, 1) == TN_STATUS_INVALID_ARGUMENT);
    /* nonzero of a transposed view: row-major coordinates of the view */
    uint8_t mask[2][3] = {{1, 0, 1}, {0, 1, 0}};
    tn_tensor mt = {.data = mask, .dtype = TN_DTYPE_BOOL, .ndim = 2, .sizes = {3, 2}, .strides = {1, 3}};
    CHECK(tn_kernel_count_nonzero(&mt) == 3);
    int64_t coords[3][2];
    tn_tensor co = {.data = coords, .dtype = TN_DTYPE_I64, .ndim = 2, .sizes = {3, 2}, .strides = {2, 1}};
    CHECK_OK(tn_kernel_nonzero(&co, &mt));
    CHECK(coords[0][0] == 0 && coords[0][1] == 0 && coords[1][0] == 1 && coords[1][1] == 1 &&
          coords[2][0] == 2 && coords[2][1] == 0);
    co.sizes[0] = 2; /* fewer rows than non-zeros: refused */
    CHECK(tn_kernel_nonzero(&co, &mt) == TN_STATUS_INVALID_ARGUMENT);
    /* dense masks of 8k + 5 bytes into outputs of exactly their count (ASan sees a write past
     * the end): all set, one in three set, and a last word of seven set then one clear (its
     * eighth position would be written past the end), in one and two dimensions; and too
     * few rows */
    enum { M = 8 * 40 + 5 };
    uint8_t *dense = malloc(M);
    for (int pattern = 0; pattern < 3; pattern++) {
        int64_t want = 0;
        for (int i = 0; i < M; i++)
            want += dense[i] = pattern == 0 ? 1 : pattern == 1 ? i % 3 == 0 : i < 8 * 40 - 1;
        for (int nd = 1; nd <= 2; nd++) {
            tn_tensor dm = {.data = dense, .dtype = TN_DTYPE_BOOL, .ndim = nd};
            dm.sizes[0] = nd == 1 ? M : 5;
            dm.sizes[1] = M / 5;
            dm.strides[0] = nd == 1 ? 1 : M / 5;
            dm.strides[1] = 1;
            CHECK(tn_kernel_count_nonzero(&dm) == want);
            int64_t *pos = malloc(sizeof(int64_t) * (size_t)(want * nd));
            tn_tensor po = {.data = pos, .dtype = TN_DTYPE_I64, .ndim = 2, .sizes = {want, nd}, .strides = {nd, 1}};
            CHECK_OK(tn_kernel_nonzero(&po, &dm));
            int ok = 1;
            for (int64_t f = 0, i = 0; i < M; i++) {
                if (!dense[i]) continue;
                ok &= nd == 1 ? pos[f] == i : pos[2 * f] == i / (M / 5) && pos[2 * f + 1] == i % (M / 5);
                f++;
            }
            CHECK(ok);
            po.sizes[0] = want - 1;
            CHECK(tn_kernel_nonzero(&po, &dm) == TN_STATUS_INVALID_ARGUMENT);
            free(pos);
        }
    }
    free(dense);
}

void test_gather_kernel(void) {
    float in[2][3] = {{1, 2, 3}, {4, 5, 6}}, out[2][2];
    int64_t idx[2][2] = {{2, 0}, {1, 1}};
    tn_tensor ti = {.data = in, .dtype = TN_DTYPE_F32, .ndim = 2, .sizes = {2, 3}, .strides = {3, 1}};
    tn_tensor tx = {.data = idx, .dtype = TN_DTYPE_I64, .ndim = 2, .sizes = {2, 2}, .strides = {2, 1}};
    tn_tensor to = {.data = out, .dtype = TN_DTYPE_F32, .ndim = 2, .sizes = {2, 2}, .strides = {2, 1}};
    CHECK_OK(tn_kernel_gather(&to, &ti, 1, &tx, 0, 1));
    CHECK(out[0][0] == 3 && out[0][1] == 1 && out[1][0] == 5 && out[1][1] == 5);
    idx[1][1] = 3;
    CHECK(tn_kernel_gather(&to, &ti, 1, &tx, 0, 1) == TN_STATUS_INVALID_ARGUMENT);
}
