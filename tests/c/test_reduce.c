/* Reductions and softmax kernels against direct computations. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "kernels/half.h"
#include "kernels/table.h"
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

/* reduce_rows.c on every ISA against direct loops: lengths across the vector widths and
 * tails, NaN anywhere, ties, and folds of rows into accumulators. */
void test_reduce_rows_every_isa(void) {
    enum { N = 300 };
    static float x[N];
    for (int i = 0; i < N; i++) x[i] = (float)((i * 37) % 101 - 50) / 16.0f;
    const int lengths[] = {1, 3, 15, 16, 17, 63, 64, 65, 130, N};
    for (int isa = 0; isa < TN_ISA_COUNT_; isa++) {
        const tn_kernel_table *k = tn_kernels_for((tn_isa)isa);
        if (!k) continue;
        for (size_t li = 0; li < sizeof lengths / sizeof *lengths; li++) {
            int n = lengths[li];
            double sq = 0, dev = 0, prod = 1;
            float hi = x[0], lo = x[0];
            for (int i = 0; i < n; i++) {
                sq += (double)x[i] * x[i];
                dev += ((double)x[i] - 0.25) * ((double)x[i] - 0.25);
                prod *= x[i] / 2.0;
                hi = x[i] > hi ? x[i] : hi;
                lo = x[i] < lo ? x[i] : lo;
            }
            static float half[N];
            for (int i = 0; i < n; i++) half[i] = x[i] / 2.0f;
            CHECK(fabs(k->sq_dev_f32(n, x, 0.0f) - sq) <= 1e-5 * sq);
            CHECK(fabs(k->sq_dev_f32(n, x, 0.25f) - dev) <= 1e-5 * dev);
            CHECK(fabs(k->prod_f32(n, half) - prod) <= 1e-9 * fabs(prod));
            CHECK(k->extreme_f32(n, x, 1) == hi && k->extreme_f32(n, x, 0) == lo);
            for (int at = 0; at < n; at += 7) { /* a NaN anywhere makes the extreme NaN */
                float keep = x[at];
                x[at] = NAN;
                CHECK(isnan(k->extreme_f32(n, x, 1)) && isnan(k->extreme_f32(n, x, 0)));
                x[at] = keep;
            }
        }
        /* rows of whole blocks multiply in float32 lanes: within (n - 1) 2^-24 of the product
         * (rounding as the CPU's lanes do). 3000 x 0.01 then 3000 x 100 leaves float's range
         * and comes back (the lanes' exponents are kept apart), and one near 1 */
        static float longrow[6000];
        for (int i = 0; i < 6000; i++) longrow[i] = i < 3000 ? 0.01f : 100.0f;
        double back = pow((double)0.01f * (double)100.0f, 3000), bound = 6000 * 0x1p-24;
        CHECK(fabs(k->prod_f32(6000, longrow) - back) <= bound * back);
        double near = 1;
        for (int i = 0; i < 6000; i++) {
            longrow[i] = 1.0f + (float)((i * 7919) % 201 - 100) * 1e-6f;
            near *= longrow[i];
        }
        CHECK(fabs(k->prod_f32(6000, longrow) - near) <= bound * near);
        /* a block whose lanes would leave float's range goes to the exact double lanes: 16 x
         * 300 to a lane overflows, 16 x (1/300) underflows, and a lane that falls below float's
         * normal range part way and comes back (6 x 1e-7 then 6 x 1e7) is flushed to zero there,
         * never kept with the few bits a subnormal holds. Those blocks are exact, and the
         * others multiply ones. */
        static float wide[4096];
        for (int i = 0; i < 4096; i++)
            wide[i] = i < 1024 ? 300.0f : i < 2048 ? 1.0f / 300.0f : i < 2048 + 384 ? 1e-7f
                                                                     : i < 2048 + 768 ? 1e7f : 1.0f;
        double wide_exact = 1; /* in pairs, which stay within double's range */
        for (int i = 0; i < 1024; i++) wide_exact *= (double)wide[i] * wide[i + 1024];
        for (int i = 2048; i < 2048 + 384; i++) wide_exact *= (double)wide[i] * wide[i + 384];
        for (int i = 2048 + 768; i < 4096; i++) wide_exact *= wide[i];
        CHECK(isfinite(wide_exact) && wide_exact > 0.5);
        CHECK(fabs(k->prod_f32(4096, wide) - wide_exact) <= 1e-12 * wide_exact);
        /* the same lanes in the same order on every ISA: bit for bit the reference's, across
         * the 32-lane steps and the blocks of 1024 */
        const tn_kernel_table *ref = tn_kernels_for(TN_ISA_REF);
        const int plens[] = {1, 31, 32, 33, 1023, 1024, 1025, 3001, 6000};
        for (size_t pi = 0; pi < sizeof plens / sizeof *plens; pi++) {
            double mine = k->prod_f32(plens[pi], longrow), want = ref->prod_f32(plens[pi], longrow);
            CHECK(memcmp(&mine, &want, sizeof mine) == 0);
        }
        /* and exact lanes that are not normal when a block ends, which keep their value: one goes
         * subnormal in the first block (16 x 1e-20) and comes back in the second, one is 0,
         * one infinite, with negative factors elsewhere */
        static float oddrow[3001];
        for (int i = 0; i < 3001; i++) oddrow[i] = (i % 3) ? 1.25f : -0.875f;
        for (int j = 0; j < 16; j++) oddrow[5 + 32 * j] = 1e-20f, oddrow[1024 + 5 + 32 * j] = 1e20f;
        oddrow[9 + 32 * 7] = 0.0f;
        oddrow[2048 + 14] = INFINITY;
        const int olens[] = {1024, 2048, 2100, 3001};
        for (size_t pi = 0; pi < sizeof olens / sizeof *olens; pi++) {
            double mine = k->prod_f32(olens[pi], oddrow), want = ref->prod_f32(olens[pi], oddrow);
            CHECK(memcmp(&mine, &want, sizeof mine) == 0);
        }
        oddrow[9 + 32 * 7] = 1.0f; /* with no zero: the subnormal lane's way back counts */
        double back_mine = k->prod_f32(2048, oddrow), back_ref = ref->prod_f32(2048, oddrow);
        CHECK(memcmp(&back_mine, &back_ref, sizeof back_mine) == 0 && isfinite(back_mine) && back_mine != 0);
        /* int64 extremes: the ends of the type anywhere, lengths across the vector widths */
        static int64_t iv[1100];
        for (int i = 0; i < 1100; i++) iv[i] = (int64_t)((i * 7919) % 2003 - 1001) * 4611686018427387LL;
        const int ilens[] = {1, 2, 7, 8, 9, 31, 64, 65, 1100};
        for (size_t li = 0; li < sizeof ilens / sizeof *ilens; li++) {
            int n = ilens[li];
            for (int at = -1; at < n; at += n / 3 + 1) {
                int64_t keep[2] = {at >= 0 ? iv[at] : 0, iv[n - 1]};
                if (at >= 0) iv[at] = INT64_MAX;
                iv[n - 1] = at >= 0 ? INT64_MIN : iv[n - 1];
                int64_t hi = iv[0], lo = iv[0];
                for (int i = 1; i < n; i++) hi = iv[i] > hi ? iv[i] : hi, lo = iv[i] < lo ? iv[i] : lo;
                CHECK(k->extreme_i64(n, iv, 1) == hi && k->extreme_i64(n, iv, 0) == lo);
                uint64_t sum = 0; /* wrapping past both ends of the type */
                for (int i = 0; i < n; i++) sum += (uint64_t)iv[i];
                CHECK(k->sum_i64(n, iv) == sum);
                if (at >= 0) iv[at] = keep[0];
                iv[n - 1] = keep[1];
            }
        }
        /* acc = op(acc, each of 5 rows of 70), rows 80 apart; a NaN in row 3, column 9 */
        static float rows[5 * 80];
        for (int i = 0; i < 5 * 80; i++) rows[i] = x[i % N] + (float)(i / 80);
        rows[3 * 80 + 9] = NAN;
        for (int op = TN_FOLD_SUM; op <= TN_FOLD_MIN; op++) {
            float acc[70];
            for (int c = 0; c < 70; c++) acc[c] = op == TN_FOLD_PROD ? 1.0f : op >= TN_FOLD_MAX ? rows[c] : 0.0f;
            k->fold_rows_f32((tn_fold_op)op, 70, op >= TN_FOLD_MAX ? 4 : 5, op >= TN_FOLD_MAX ? rows + 80 : rows, 80,
                             acc);
            for (int c = 0; c < 70; c++) {
                double want = op == TN_FOLD_PROD ? 1 : op >= TN_FOLD_MAX ? rows[c] : 0;
                for (int r = op >= TN_FOLD_MAX ? 1 : 0; r < 5; r++) {
                    double v = rows[r * 80 + c];
                    if (op == TN_FOLD_SUM) want += v;
                    if (op == TN_FOLD_SUM_SQUARES) want += v * v;
                    if (op == TN_FOLD_PROD) want *= v;
                    if (op == TN_FOLD_MAX) want = v > want || isnan(v) || isnan(want) ? (isnan(want) ? want : v) : want;
                    if (op == TN_FOLD_MIN) want = v < want || isnan(v) || isnan(want) ? (isnan(want) ? want : v) : want;
                }
                CHECK(c == 9 ? isnan(acc[c]) : fabs(acc[c] - want) <= 1e-5 * fabs(want) + 1e-6);
            }
        }
        /* the same sums over bfloat16 and float16 rows (widened in registers: 32 columns at a
         * time and a tail of 6), onto accumulators that already hold 0.5; extremes decline */
        static uint16_t half_rows[5 * 80];
        for (int t = 0; t < 2; t++) {
            tn_dtype dt = t ? TN_DTYPE_F16 : TN_DTYPE_BF16;
            for (int i = 0; i < 5 * 80; i++)
                half_rows[i] = t ? tn_f32_to_f16_inline(rows[i]) : tn_f32_to_bf16_inline(rows[i]);
            for (int op = TN_FOLD_SUM; op <= TN_FOLD_SUM_SQUARES; op++) {
                float acc[70];
                for (int c = 0; c < 70; c++) acc[c] = 0.5f;
                CHECK(k->fold_rows_half(dt, (tn_fold_op)op, 70, 5, half_rows, 80, acc));
                for (int c = 0; c < 70; c++) {
                    double want = 0.5;
                    for (int r = 0; r < 5; r++) {
                        uint16_t h = half_rows[r * 80 + c];
                        double v = t ? tn_f16_to_f32_inline(h) : tn_bf16_to_f32_inline(h);
                        want += op == TN_FOLD_SUM ? v : v * v;
                    }
                    CHECK(c == 9 ? isnan(acc[c]) : fabs(acc[c] - want) <= 1e-5 * fabs(want) + 1e-6);
                }
            }
            float acc[70] = {0};
            CHECK(!k->fold_rows_half(dt, TN_FOLD_MAX, 70, 5, half_rows, 80, acc));
        }
    }
}

/* The kernel's paths over a 300 x 70 matrix: rows (contiguous), columns (folded rows, split
 * between two threads mid-row of outputs), and a whole-matrix reduction in parts. */
void test_reduce_paths(void) {
    enum { R = 300, C = 70 };
    static float x[R][C];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) x[r][c] = (float)(((r * 31 + c * 17) % 97) - 48) / 8.0f;
    x[5][200 % C] = 30.0f; /* the largest element: row 5, column 60 */
    x[250][60] = 30.0f;    /* a tie later in the same column */
    tn_tensor in = t2(x, TN_DTYPE_F32, R, C, C, 1);
    /* columns: sum, norm, max, min over dim 0 */
    static float col[C];
    tn_tensor ocol = t2(col, TN_DTYPE_F32, R, C, 0, 1);
    const tn_reduce_op ops[] = {TN_REDUCE_SUM, TN_REDUCE_NORM2, TN_REDUCE_MAX, TN_REDUCE_MIN};
    for (int oi = 0; oi < 4; oi++) {
        for (int k = 0; k < 3; k++) tn_kernel_reduce(ops[oi], &ocol, NULL, &in, oi == 0 ? 0.5 : 1.0, k, 3);
        for (int c = 0; c < C; c++) {
            double s = 0, q = 0, hi = x[0][c], lo = x[0][c];
            for (int r = 0; r < R; r++) {
                s += x[r][c];
                q += (double)x[r][c] * x[r][c];
                hi = x[r][c] > hi ? x[r][c] : hi;
                lo = x[r][c] < lo ? x[r][c] : lo;
            }
            double want = oi == 0 ? 0.5 * s : oi == 1 ? sqrt(q) : oi == 2 ? hi : lo;
            CHECK(fabs(col[c] - want) <= 1e-5 * fabs(want) + 1e-5);
        }
    }
    /* the same sums and norms split by rows into three partial rows (the runtime's split for
     * outer-dimension sums), the first part ending inside the rows */
    for (int oi = 0; oi < 2; oi++) {
        static double partial[3 * C];
        for (int k = 0; k < 3; k++) CHECK(tn_kernel_reduce_columns_part(ops[oi], &ocol, &in, k, 3, partial + k * C));
        tn_kernel_reduce_columns_finish(ops[oi], &ocol, &in, oi == 0 ? 0.5 : 1.0, partial, 3);
        int good = 1;
        for (int c = 0; c < C; c++) {
            double s = 0, q = 0;
            for (int r = 0; r < R; r++) s += x[r][c], q += (double)x[r][c] * x[r][c];
            double want = oi == 0 ? 0.5 * s : sqrt(q);
            good &= fabs(col[c] - want) <= 1e-5 * fabs(want) + 1e-5;
        }
        CHECK(good);
    }
    CHECK(!tn_kernel_reduce_columns_part(TN_REDUCE_MAX, &ocol, &in, 0, 1, NULL)); /* sums only */
    /* argmax over dim 0 keeps the first of the tie */
    int64_t arg[C];
    tn_tensor oarg = t2(arg, TN_DTYPE_I64, R, C, 0, 1);
    tn_kernel_reduce(TN_REDUCE_ARGMAX, &oarg, NULL, &in, 1.0, 0, 1);
    CHECK(arg[60] == 5);
    /* rows: norm, prod, amax; max with positions over a row whose extreme repeats */
    static float row_out[R];
    int64_t row_pos[R];
    tn_tensor orow = t2(row_out, TN_DTYPE_F32, R, C, 1, 0), opos = t2(row_pos, TN_DTYPE_I64, R, C, 1, 0);
    tn_kernel_reduce(TN_REDUCE_NORM2, &orow, NULL, &in, 1.0, 0, 1);
    double q5 = 0;
    for (int c = 0; c < C; c++) q5 += (double)x[5][c] * x[5][c];
    CHECK(fabs(row_out[5] - sqrt(q5)) <= 1e-5 * sqrt(q5));
    x[7][3] = 30.0f;
    x[7][50] = 30.0f;
    tn_kernel_reduce(TN_REDUCE_MAX, &orow, &opos, &in, 1.0, 0, 1);
    CHECK(row_out[7] == 30.0f && row_pos[7] == 3 && row_out[5] == 30.0f && row_pos[5] == 60);
    x[7][40] = NAN;
    tn_kernel_reduce(TN_REDUCE_MAX, &orow, &opos, &in, 1.0, 0, 1);
    CHECK(isnan(row_out[7]) && row_pos[7] == 40);
    tn_kernel_reduce(TN_REDUCE_MIN, &orow, NULL, &in, 1.0, 0, 1);
    CHECK(isnan(row_out[7]) && !isnan(row_out[6]));
    x[7][40] = 0.0f;
    /* the whole matrix in parts of 4 threads: norm, argmax (the first 30), all of the bools */
    tn_tensor whole = t2(NULL, TN_DTYPE_F32, R, C, 0, 0);
    float total;
    int64_t where;
    whole.data = &total;
    tn_reduce_part parts[4];
    for (int k = 0; k < 4; k++) tn_kernel_reduce_part(TN_REDUCE_NORM2, &whole, NULL, &in, 0, k, 4, &parts[k]);
    tn_kernel_reduce_finish(TN_REDUCE_NORM2, &whole, NULL, &in, 1.0, 0, parts, 4);
    double q = 0;
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) q += (double)x[r][c] * x[r][c];
    CHECK(fabs(total - sqrt(q)) <= 1e-5 * sqrt(q));
    tn_tensor warg = t2(&where, TN_DTYPE_I64, R, C, 0, 0);
    for (int k = 0; k < 4; k++) tn_kernel_reduce_part(TN_REDUCE_ARGMAX, &warg, NULL, &in, 0, k, 4, &parts[k]);
    tn_kernel_reduce_finish(TN_REDUCE_ARGMAX, &warg, NULL, &in, 1.0, 0, parts, 4);
    CHECK(where == 5 * C + 60);
    static uint8_t flags[5000];
    flags[4321] = 1;
    uint8_t any = 0, all = 1;
    tn_tensor fin = {.data = flags, .dtype = TN_DTYPE_BOOL, .ndim = 1, .sizes = {5000}, .strides = {1}};
    tn_tensor fany = {.data = &any, .dtype = TN_DTYPE_BOOL, .ndim = 1, .sizes = {5000}, .strides = {0}};
    tn_tensor fall = fany;
    fall.data = &all;
    for (int k = 0; k < 2; k++) tn_kernel_reduce_part(TN_REDUCE_ANY, &fany, NULL, &fin, 0, k, 2, &parts[k]);
    tn_kernel_reduce_finish(TN_REDUCE_ANY, &fany, NULL, &fin, 1.0, 0, parts, 2);
    for (int k = 0; k < 2; k++) tn_kernel_reduce_part(TN_REDUCE_ALL, &fall, NULL, &fin, 0, k, 2, &parts[k]);
    tn_kernel_reduce_finish(TN_REDUCE_ALL, &fall, NULL, &fin, 1.0, 0, parts, 2);
    CHECK(any == 1 && all == 0);
    /* variance of the whole matrix in parts (blocks of contiguous rows) against two passes */
    double mu = 0, m2 = 0;
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) mu += x[r][c];
    mu /= R * C;
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) m2 += (x[r][c] - mu) * (x[r][c] - mu);
    float var, mean;
    tn_tensor ov = t2(&var, TN_DTYPE_F32, R, C, 0, 0), om = t2(&mean, TN_DTYPE_F32, R, C, 0, 0);
    tn_var_part vp[3];
    for (int k = 0; k < 3; k++) tn_kernel_var_part(&ov, &om, &in, 0, k, 3, &vp[k]);
    tn_kernel_var_finish(&ov, &om, &in, 1.0, 0, 0, vp, 3);
    CHECK(fabs(var - m2 / (R * C - 1)) <= 1e-5 * (m2 / (R * C - 1)) && fabs(mean - mu) <= 1e-5);
}
