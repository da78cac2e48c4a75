/* GEMM: every ISA's micro-kernel through the blocked driver, against a double-precision
 * reference, over edge shapes, strides (transposes), dtypes, alpha/beta, batches and thread
 * splits; and the launch with a bfloat16 output. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/table.h"
#include "tn/tn.h"

static float value(int64_t i, int salt) {
    uint32_t x = (uint32_t)(i * 2654435761u + (uint32_t)salt * 40503u);
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    x ^= x >> 15;
    return (float)(x % 2001) / 1000.0f - 1.0f;
}

typedef struct shape {
    int64_t batch, m, n, k;
    int a_trans, b_trans;
    float alpha, beta;
    tn_dtype in;
    tn_dtype out; /* C's dtype (0: float32) */
} shape;

static float get(const void *p, int64_t i, tn_dtype t) {
    if (t == TN_DTYPE_F16) return tn_f16_to_f32(((const uint16_t *)p)[i]);
    return t == TN_DTYPE_F32 ? ((const float *)p)[i] : tn_bf16_to_f32(((const uint16_t *)p)[i]);
}

static void put(void *p, int64_t i, tn_dtype t, float x) {
    if (t == TN_DTYPE_F32) ((float *)p)[i] = x;
    else if (t == TN_DTYPE_BF16) ((uint16_t *)p)[i] = tn_f32_to_bf16(x);
    else ((uint16_t *)p)[i] = tn_f32_to_f16(x);
}

static int run_case(const tn_kernel_table *k, const shape *s, int32_t nth, int packed) {
    int64_t asz = s->batch * s->m * s->k, bsz = s->batch * s->k * s->n, csz = s->batch * s->m * s->n;
    int es = tn_dtype_size(s->in);
    char *a = malloc((size_t)(asz * es) + 1), *b = malloc((size_t)(bsz * es) + 1);
    tn_dtype out = s->out ? s->out : TN_DTYPE_F32;
    void *c = malloc((size_t)csz * sizeof(float) + 4);
    float *c0 = malloc((size_t)csz * sizeof(float) + 4);
    float *scratch = NULL;
    if (posix_memalign((void **)&scratch, 64, (size_t)tn_gemm_scratch_floats() * sizeof(float))) return 0;
    for (int64_t i = 0; i < asz; i++) put(a, i, s->in, value(i, 1));
    for (int64_t i = 0; i < bsz; i++) put(b, i, s->in, value(i, 2));
    for (int64_t i = 0; i < csz; i++) {
        put(c, i, out, s->beta == 0.0f ? NAN : value(i, 3));
        c0[i] = get(c, i, out);
    }
    tn_gemm g = {.batch = s->batch, .m = s->m, .n = s->n, .k = s->k, .alpha = s->alpha, .beta = s->beta};
    /* A stored m x k (or k x m when transposed), B k x n (or n x k) */
    g.a = (tn_matrix){a, s->in, s->a_trans ? 1 : s->k, s->a_trans ? s->m : 1, s->m * s->k};
    g.b = (tn_matrix){b, s->in, s->b_trans ? 1 : s->n, s->b_trans ? s->k : 1, s->k * s->n};
    g.c = (tn_matrix){c, out, s->n, 1, s->m * s->n};
    if (out != TN_DTYPE_F32 && !tn_gemm_half_c_with(k, &g)) { /* this variant writes float32 C only */
        free(a), free(b), free(c), free(c0), free(scratch);
        return 1;
    }
    void *bp = NULL;
    int64_t bytes = packed ? tn_gemm_packed_b_bytes_with(k, &g) : 0;
    if (bytes > 0) { /* packed by two threads: the layout does not depend on the split;
                      * packed == 2 also rewrites B afterwards */
        bp = malloc((size_t)bytes);
        memset(bp, 0xff, (size_t)bytes); /* NaN: a gap the packing misses shows in C */
        for (int32_t ith = 0; ith < 2; ith++) tn_gemm_pack_b_with(k, &g, bp, ith, 2);
        g.b_packed = bp;
        if (packed == 2) /* B rewritten after packing (as through .data): the packing is stale */
            for (int64_t i = 0; i < bsz; i++) put(b, i, s->in, value(i, 4));
    }
    for (int32_t ith = 0; ith < nth; ith++) tn_gemm_with(k, &g, scratch, ith, nth);
    free(bp);
    int ok = 1;
    for (int64_t bt = 0; bt < s->batch && ok; bt++)
        for (int64_t i = 0; i < s->m && ok; i++)
            for (int64_t j = 0; j < s->n && ok; j++) {
                double want = 0, mag = 0;
                for (int64_t p = 0; p < s->k; p++) {
                    double x = get(a, bt * s->m * s->k + i * g.a.row_stride + p * g.a.col_stride, s->in);
                    double y = get(b, bt * s->k * s->n + p * g.b.row_stride + j * g.b.col_stride, s->in);
                    want += x * y;
                    mag += fabs(x * y);
                }
                int64_t ci = bt * s->m * s->n + i * s->n + j;
                want = s->alpha * want + (s->beta == 0.0f ? 0.0 : s->beta * c0[ci]);
                double got = get(c, ci, out), tol = 1e-5 * (mag + 1.0);
                if (out != TN_DTYPE_F32) tol += fabs(want) * (out == TN_DTYPE_BF16 ? 1.0 / 256 : 1.0 / 2048);
                if (fabs(got - want) > tol) {
                    fprintf(stderr, "  gemm b%lld m%lld n%lld k%lld at (%lld,%lld,%lld): %g vs %g\n",
                            (long long)s->batch, (long long)s->m,
                            (long long)s->n, (long long)s->k, (long long)bt, (long long)i,
                            (long long)j, got, want);
                    ok = 0;
                }
            }
    free(a);
    free(b);
    free(c);
    free(c0);
    free(scratch);
    return ok;
}

void test_gemm_every_isa(void) {
    const shape shapes[] = {
        {1, 1, 1, 1, 0, 0, 1.0f, 0.0f, TN_DTYPE_F32, 0},
        {1, 7, 5, 3, 0, 0, 1.0f, 0.0f, TN_DTYPE_F32, 0},
        {1, 37, 53, 600, 0, 0, 1.0f, 0.0f, TN_DTYPE_F32, 0},   /* two k blocks, edge tiles */
        {1, 13, 1100, 20, 0, 1, 0.5f, 0.0f, TN_DTYPE_F32, 0},  /* n past one block, B transposed */
        {1, 101, 9, 17, 1, 1, 1.0f, 2.0f, TN_DTYPE_F32, 0},    /* both transposed, beta */
        {3, 10, 20, 30, 0, 0, 1.0f, 1.0f, TN_DTYPE_F32, 0},    /* batch */
        {1, 1, 300, 257, 0, 1, 1.0f, 0.0f, TN_DTYPE_F32, 0},   /* dot path: x @ W.T */
        {1, 3, 333, 65, 0, 0, 2.0f, 0.0f, TN_DTYPE_F32, 0},    /* row path: x @ B */
        {2, 2, 40, 9, 1, 0, 1.0f, 1.5f, TN_DTYPE_F32, 0},      /* row path, A transposed, beta */
        {2, 3, 70, 64, 0, 1, 1.0f, 0.5f, TN_DTYPE_F32, 0},     /* dot path, batch, beta */
        {1, 19, 45, 70, 0, 1, 1.0f, 0.0f, TN_DTYPE_BF16, 0},   /* bf16 inputs */
        {1, 2, 45, 70, 0, 1, 1.0f, 0.0f, TN_DTYPE_BF16, 0},    /* bf16 dot path */
        {1, 30, 45, 70, 1, 0, 1.0f, 0.0f, TN_DTYPE_BF16, 0},   /* bf16, A transposed */
        {1, 37, 70, 601, 0, 0, 1.0f, 0.0f, TN_DTYPE_BF16, 0},  /* bf16: odd k over two k blocks */
        {1, 17, 40, 33, 0, 1, 0.5f, 2.0f, TN_DTYPE_BF16, 0},   /* bf16: W.T, alpha, beta, odd k */
        {2, 9, 1100, 20, 1, 1, 1.0f, 1.0f, TN_DTYPE_BF16, 0},  /* bf16: batch, n past a block */
        {1, 3, 333, 65, 0, 0, 2.0f, 0.0f, TN_DTYPE_BF16, 0},   /* bf16 row path: x @ B */
        {1, 1, 100, 77, 0, 1, 1.0f, 0.0f, TN_DTYPE_BF16, 0},   /* bf16 dot path, odd k tail */
        {1, 21, 70, 300, 0, 1, 1.0f, 0.0f, TN_DTYPE_BF16, 0},  /* bf16 W.T: transposed 16x16 packs */
        {1, 70, 1100, 600, 0, 1, 1.0f, 0.0f, TN_DTYPE_F32, 0}, /* W.T over k and n blocks */
        {1, 70, 1100, 601, 0, 1, 1.0f, 0.0f, TN_DTYPE_BF16, 0}, /* the same in bf16, odd k */
        {3, 10, 20, 30, 0, 0, 1.0f, 0.0f, TN_DTYPE_F32, 0},    /* batch: B is not packed */
        {1, 19, 45, 70, 0, 1, 1.0f, 0.0f, TN_DTYPE_BF16, TN_DTYPE_BF16},  /* bf16 C written directly */
        {1, 37, 70, 601, 0, 0, 1.0f, 0.0f, TN_DTYPE_BF16, TN_DTYPE_F16},  /* f16 C over two k blocks */
        {1, 17, 40, 33, 0, 1, 0.5f, 2.0f, TN_DTYPE_BF16, TN_DTYPE_BF16},  /* alpha, beta, odd k */
        {2, 9, 1100, 20, 1, 1, 1.0f, 1.0f, TN_DTYPE_BF16, TN_DTYPE_BF16}, /* batch, n past a block */
        {1, 100, 1100, 600, 0, 1, 1.0f, 0.0f, TN_DTYPE_BF16, TN_DTYPE_BF16}, /* m, n and k past blocks */
        {1, 200, 1100, 40, 0, 0, 1.0f, 0.0f, TN_DTYPE_F32, 0},  /* m past MC: rows split when B is packed; n past NC */
        {1, 150, 1300, 40, 0, 0, 1.0f, 0.0f, TN_DTYPE_F32, 0},  /* n > 8 m: columns split, B packed or not */
        {1, 200, 50, 600, 0, 1, 0.5f, 2.0f, TN_DTYPE_F32, 0},   /* the same with alpha, beta, two k blocks */
        {1, 605, 1100, 40, 0, 0, 1.0f, 0.5f, TN_DTYPE_F32, 0},  /* B packed: a thread's rows past one A block, n past NC */
        /* the last rows of a block in short panels (6-row kernels: 16 = 6 + 6 + 4, 20 = 6 + 6 + 4
         * + 4, 139 = 22 * 6 + 4 + 3, 142 = 23 * 6 + 4), A contiguous, transposed, bf16 */
        {1, 16, 300, 48, 0, 1, 0.5f, 0.0f, TN_DTYPE_F32, 0},
        {1, 20, 37, 40, 0, 0, 1.0f, 1.0f, TN_DTYPE_F32, 0},
        {1, 139, 70, 33, 0, 1, 1.0f, 0.0f, TN_DTYPE_F32, 0},
        {1, 142, 300, 20, 1, 0, 2.0f, 0.5f, TN_DTYPE_F32, 0},
        {1, 20, 301, 40, 0, 1, 1.0f, 0.0f, TN_DTYPE_BF16, 0},
        {1, 9, 13, 17, 0, 0, 1.0f, 0.0f, TN_DTYPE_F32, 0},
        /* AMX's 32-row tiles: whole tiles of k with C loaded (beta, second k block); a k tail
         * of 6 pairs after one tile, and 6 rows past two panels */
        {1, 64, 96, 512, 0, 1, 1.0f, 1.0f, TN_DTYPE_BF16, 0},
        {1, 70, 64, 300, 0, 1, 1.0f, 0.0f, TN_DTYPE_BF16, 0},
        {1, 64, 96, 512, 0, 0, 1.0f, 0.0f, TN_DTYPE_BF16, TN_DTYPE_BF16},
        /* float16 inputs (widened while packing): A's rows, B's rows, W.T, A transposed, edges */
        {1, 37, 53, 300, 0, 0, 1.0f, 0.0f, TN_DTYPE_F16, 0},
        {1, 70, 1100, 601, 0, 1, 0.5f, 0.0f, TN_DTYPE_F16, 0},
        {1, 30, 45, 70, 1, 0, 1.0f, 2.0f, TN_DTYPE_F16, 0},
        {2, 3, 40, 9, 0, 0, 1.0f, 0.0f, TN_DTYPE_F16, 0},
        /* float16 dot path (x @ W.T, m <= 4): batch and beta; k past one widened chunk */
        {1, 1, 300, 257, 0, 1, 1.0f, 0.0f, TN_DTYPE_F16, 0},
        {2, 3, 70, 64, 0, 1, 0.5f, 1.5f, TN_DTYPE_F16, 0},
        {1, 2, 45, 5000, 0, 1, 1.0f, 2.0f, TN_DTYPE_F16, 0},
        {1, 4, 0, 5, 0, 0, 1.0f, 0.0f, TN_DTYPE_F32, 0},       /* empty */
        {1, 5, 6, 0, 0, 0, 1.0f, 0.0f, TN_DTYPE_F32, 0},       /* k = 0: C = 0 */
    };
    /* every ISA's table; the reference table once more with the other order of micro-tiles
     * (gemm_a_panel_outer), so both orders run on any CPU; with AMX, the AVX-512 table once
     * more with the AVX512-BF16 kernel that AMX's replaced */
    const tn_kernel_table *tables[TN_ISA_COUNT_ + 2];
    const char *names[TN_ISA_COUNT_ + 2];
    int n = 0;
    for (int isa = 0; isa < TN_ISA_COUNT_; isa++)
        if (tn_kernels_for((tn_isa)isa)) tables[n] = tn_kernels_for((tn_isa)isa), names[n++] = tn_isa_name((tn_isa)isa);
    tn_kernel_table other_order = *tn_kernels_for(TN_ISA_REF);
    other_order.gemm_a_panel_outer = !other_order.gemm_a_panel_outer;
    tables[n] = &other_order, names[n++] = "ref, other micro-tile order";
    tn_kernel_table no_amx;
    if (tn_isa_amx()) {
        no_amx = *tn_kernels_for(TN_ISA_AVX512);
        tn_gemm_install_avx512bf16(&no_amx);
        tables[n] = &no_amx, names[n++] = "avx512 without AMX";
    }
    for (int t = 0; t < n; t++)
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            for (int32_t nth = 1; nth <= 3; nth += 2)
                for (int packed = 0; packed < 3; packed++)
                    if (!run_case(tables[t], &shapes[i], nth, packed)) {
                        fprintf(stderr, "  (isa %s, case %zu, nth %d, B packed %d)\n", names[t], i, (int)nth, packed);
                        CHECK(0);
                    }
}

/* The FMA peak probe: every variant counts its operations (12 chains of 1, 8 or 16 lanes, two
 * operations per step), and its chains (x * m + a with a = 1 - m, started at 1 + i / 16) stay
 * between 1 and their start, so their sum is in [12, 16.125]; the measured peak is a
 * positive, finite rate. */
void test_gemm_fma_peak(void) {
    for (int isa = 0; isa < TN_ISA_COUNT_; isa++) {
        const tn_kernel_table *k = tn_kernels_for((tn_isa)isa);
        if (!k) continue;
        float sink = 0;
        double ops = k->fma_burst(1000, &sink);
        int lanes = (int)(ops / (2.0 * 12 * 1000));
        CHECK(ops == 2.0 * 12 * 1000 * lanes);
        CHECK(lanes == 1 || lanes == 8 || lanes == 16);
        CHECK(sink >= 12.0f && sink <= 16.125f);
    }
    double peak = tn_fma_peak_gflops(0.02);
    CHECK(peak > 0 && isfinite(peak));
}

void test_gemm_launch_bf16_output(void) {
    tn_stream_t s;
    CHECK_OK(tn_stream_get(0, 0, &s));
    enum { M = 9, N = 40, K = 33 };
    float a[M * K], b[K * N];
    uint16_t c[M * N];
    for (int i = 0; i < M * K; i++) a[i] = value(i, 5);
    for (int i = 0; i < K * N; i++) b[i] = value(i, 6);
    tn_gemm g = {.batch = 1, .m = M, .n = N, .k = K, .alpha = 1.0f, .beta = 0.0f};
    g.a = (tn_matrix){a, TN_DTYPE_F32, K, 1, 0};
    g.b = (tn_matrix){b, TN_DTYPE_F32, N, 1, 0};
    g.c = (tn_matrix){c, TN_DTYPE_BF16, N, 1, 0};
    CHECK_OK(tn_gemm_async(s, "aten::mm.out", &g));
    CHECK_OK(tn_stream_synchronize(s));
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float want = 0;
            for (int p = 0; p < K; p++) want += a[i * K + p] * b[p * N + j];
            CHECK(fabsf(tn_bf16_to_f32(c[i * N + j]) - want) <= 0.01f * fabsf(want) + 0.02f);
        }
    g.a.dtype = TN_DTYPE_I32;
    CHECK(tn_gemm_async(s, "aten::mm.out", &g) == TN_STATUS_INVALID_ARGUMENT);
}

/* A matrix-vector product whose threads split k (tn_gemm_split_k): the partial rows are added
 * once each, alpha scales every part and beta only C's old value, into a bfloat16 C too. */
void test_gemm_launch_split_k(void) {
    tn_stream_t s;
    CHECK_OK(tn_stream_get(0, 0, &s));
    enum { M = 3, N = 64, K = 8200 }; /* B: 2 MB */
    float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * K * N), c[M * N], c0[M * N];
    uint16_t h[M * N];
    for (int i = 0; i < M * K; i++) a[i] = value(i, 7);
    for (int i = 0; i < K * N; i++) b[i] = value(i, 8);
    for (int i = 0; i < M * N; i++) c[i] = c0[i] = value(i, 9);
    tn_gemm g = {.batch = 1, .m = M, .n = N, .k = K, .alpha = 0.5f, .beta = 2.0f};
    g.a = (tn_matrix){a, TN_DTYPE_F32, K, 1, 0};
    g.b = (tn_matrix){b, TN_DTYPE_F32, N, 1, 0};
    g.c = (tn_matrix){c, TN_DTYPE_F32, N, 1, 0};
    CHECK(tn_gemm_split_k(&g));
    CHECK_OK(tn_gemm_async(s, "aten::addmm.out", &g));
    g.beta = 0.0f;
    g.c = (tn_matrix){h, TN_DTYPE_BF16, N, 1, 0};
    CHECK_OK(tn_gemm_async(s, "aten::mm.out", &g));
    CHECK_OK(tn_stream_synchronize(s));
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double dot = 0, mag = 0;
            for (int p = 0; p < K; p++) {
                dot += (double)a[i * K + p] * b[p * N + j];
                mag += fabs((double)a[i * K + p] * b[p * N + j]);
            }
            CHECK(fabs(c[i * N + j] - (0.5 * dot + 2.0 * c0[i * N + j])) <= 1e-5 * (mag + 1));
            CHECK(fabs(tn_bf16_to_f32(h[i * N + j]) - 0.5 * dot) <= fabs(0.5 * dot) / 128 + 1e-5 * (mag + 1));
        }
    g.n = 2 * K; /* wider than deep: columns split as usual */
    CHECK(!tn_gemm_split_k(&g));
    free(a);
    free(b);
}

/* Integer GEMM: int32 sums that overflow wrap as in the dtype; B transposed; alpha and beta;
 * a batch; uint8 wraps too. */
void test_gemm_integer(void) {
    enum { B = 2, M = 3, K = 5, N = 4 };
    int32_t a[B * M * K], bt[B * N * K], c[B * M * N], want[B * M * N];
    for (int i = 0; i < B * M * K; i++) a[i] = (int32_t)(0x7654321u * (uint32_t)(i + 1));
    for (int i = 0; i < B * N * K; i++) bt[i] = (int32_t)(0x1234567u * (uint32_t)(i + 3));
    for (int i = 0; i < B * M * N; i++) c[i] = i - 7;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                uint32_t s = 0;
                for (int p = 0; p < K; p++) s += (uint32_t)a[b * M * K + i * K + p] * (uint32_t)bt[b * N * K + j * K + p];
                want[b * M * N + i * N + j] = (int32_t)((uint32_t)-3 * s + 2u * (uint32_t)c[b * M * N + i * N + j]);
            }
    tn_gemm g = {.batch = B, .m = M, .n = N, .k = K, .a = {a, TN_DTYPE_I32, K, 1, M * K},
                 .b = {bt, TN_DTYPE_I32, 1, K, N * K}, .c = {c, TN_DTYPE_I32, N, 1, M * N}};
    tn_stream_t s;
    CHECK_OK(tn_stream_get(0, 0, &s));
    CHECK_OK(tn_gemm_int_async(s, "gemm_int", &g, -3, 2));
    CHECK_OK(tn_stream_synchronize(s));
    CHECK(memcmp(c, want, sizeof c) == 0);
    uint8_t x[4] = {200, 100, 3, 250}, y[4] = {2, 3, 5, 7}, z[1] = {9};
    tn_gemm u = {.batch = 1, .m = 1, .n = 1, .k = 4, .a = {x, TN_DTYPE_U8, 4, 1, 0},
                 .b = {y, TN_DTYPE_U8, 1, 1, 0}, .c = {z, TN_DTYPE_U8, 1, 1, 0}};
    CHECK_OK(tn_gemm_int_async(s, "gemm_int", &u, 1, 0));
    CHECK_OK(tn_stream_synchronize(s));
    CHECK(z[0] == (uint8_t)(400 + 300 + 15 + 1750));
    tn_gemm bad = u;
    bad.b.dtype = TN_DTYPE_I32;
    CHECK(tn_gemm_int_async(s, "gemm_int", &bad, 1, 0) == TN_STATUS_INVALID_ARGUMENT);
}
