/* Launching GEMMs: output-dtype conversion around the float32 kernel, per-thread scratch,
 * and the split across the kernel thread pool. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../kernels/elem.h"
#include "internal.h"
#include "tn/gemm.h"
#include "tn/kernels.h"
#include "tn/parallel.h"

typedef struct gemm_task {
    tn_gemm g;
    tn_matrix out; /* where the result goes when it is not float32 */
    int convert;
    int failed; /* a thread could not get its scratch */
    float *parts; /* split k: the partial rows of slices 1.. (m x n floats each) */
    int32_t slices; /* split k: how many slices ran */
} gemm_task;

static void gemm_slice(void *p, int32_t ith, int32_t nth) {
    gemm_task *t = p;
    float *scratch = tn_thread_scratch((size_t)tn_gemm_scratch_floats() * sizeof(float));
    if (!scratch) {
        t->failed = 1;
        return;
    }
    if (!t->parts) {
        tn_kernel_gemm(&t->g, scratch, ith, nth);
        return;
    }
    /* split k (tn_gemm_split_k): rows k0..k1 of B, whole, into C (slice 0, with beta) or
     * into this slice's partial rows */
    tn_gemm s = t->g;
    int64_t k0 = s.k * ith / nth, k1 = s.k * (ith + 1) / nth;
    s.a.data = (char *)s.a.data + k0 * s.a.col_stride * tn_dtype_size(s.a.dtype);
    s.b.data = (char *)s.b.data + k0 * s.b.row_stride * tn_dtype_size(s.b.dtype);
    s.k = k1 - k0;
    s.b_packed = NULL; /* m <= 4 reads B itself */
    if (ith > 0) {
        s.beta = 0.0f;
        s.c = (tn_matrix){t->parts + (ith - 1) * s.m * s.n, TN_DTYPE_F32, s.n, 1, s.m * s.n};
    }
    tn_kernel_gemm(&s, scratch, 0, 1);
    if (ith == 0) t->slices = nth;
}

/* Split k: the partial rows of slices 1.. added into C. */
static void add_parts(const gemm_task *t) {
    const tn_gemm *g = &t->g;
    float *c = (float *)g->c.data;
    for (int32_t part = 1; part < t->slices; part++)
        for (int64_t i = 0; i < g->m; i++) {
            const float *src = t->parts + ((part - 1) * g->m + i) * g->n;
            float *row = c + i * g->c.row_stride;
            for (int64_t j = 0; j < g->n; j++) row[j] += src[j];
        }
}

/* A 3-D view (batch, rows, cols) of a matrix operand, for dtype conversions. */
static tn_tensor view3(const tn_matrix *mat, int64_t batch, int64_t m, int64_t n) {
    tn_tensor t = {.data = mat->data, .dtype = mat->dtype, .ndim = 3};
    t.sizes[0] = batch;
    t.sizes[1] = m;
    t.sizes[2] = n;
    t.strides[0] = mat->batch_stride;
    t.strides[1] = mat->row_stride;
    t.strides[2] = mat->col_stride;
    return t;
}

typedef struct convert_task {
    tn_tensor dst, src;
} convert_task;

static void convert_slice(void *p, int32_t ith, int32_t nth) {
    convert_task *t = p;
    tn_kernel_copy(&t->dst, &t->src, ith, nth);
}

static tn_status run_gemm(void *p) {
    gemm_task *t = p;
    tn_gemm *g = &t->g;
    float *work = NULL;
    if (t->convert) {
        size_t count = (size_t)(g->batch * g->m * g->n);
        work = malloc(count * sizeof(float));
        if (!work) return tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory for a GEMM result");
        g->c = (tn_matrix){work, TN_DTYPE_F32, g->n, 1, g->m * g->n};
        if (g->beta != 0.0f) {
            tn_tensor dst = view3(&g->c, g->batch, g->m, g->n), src = view3(&t->out, g->batch, g->m, g->n);
            tn_kernel_copy(&dst, &src, 0, 1);
        }
    }
    /* A unit per multiply-add: a 256 x 256 matrix-vector product (256 KiB of float32 weights,
     * some 10 us of streaming) already takes two threads; the hand-over to a spinning worker
     * costs about a microsecond. */
    int64_t work_units = g->batch * g->m * g->n * (g->k > 0 ? g->k : 1);
    int32_t threads = tn_parallel_threads();
    t->parts = NULL;
    if (threads > 1 && tn_gemm_split_k(g)) /* without the memory: split by columns, as usual */
        t->parts = malloc(sizeof(float) * (size_t)((threads - 1) * g->m * g->n));
    t->slices = 1;
    tn_parallel_run(gemm_slice, t, work_units);
    if (t->parts) {
        add_parts(t);
        free(t->parts);
    }
    if (t->convert) {
        convert_task c = {view3(&t->out, g->batch, g->m, g->n), view3(&g->c, g->batch, g->m, g->n)};
        tn_parallel_run(convert_slice, &c, g->batch * g->m * g->n);
        free(work);
    }
    return t->failed ? tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory for GEMM scratch")
                     : TN_STATUS_OK;
}

static int supported(tn_dtype t) {
    return t == TN_DTYPE_F32 || t == TN_DTYPE_BF16 || t == TN_DTYPE_F16;
}

tn_status tn_gemm_async(tn_stream_t stream, const char *name, const tn_gemm *g) {
    if (g->batch < 0 || g->m < 0 || g->n < 0 || g->k < 0)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "GEMM with a negative dimension");
    if (!supported(g->a.dtype) || !supported(g->b.dtype) || !supported(g->c.dtype))
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "GEMM supports float32/bfloat16/float16 operands");
    if (g->batch == 0 || g->m == 0 || g->n == 0) return TN_STATUS_OK;
    gemm_task t = {*g, g->c, g->c.dtype != TN_DTYPE_F32 && !tn_gemm_half_c(g), 0, NULL, 1};
    return tn_stream_launch(stream, name ? name : "gemm", run_gemm, &t, sizeof t);
}

typedef struct gemm_int_task {
    tn_gemm g;
    int64_t alpha, beta;
} gemm_int_task;

static void gemm_int_slice(void *p, int32_t ith, int32_t nth) {
    gemm_int_task *t = p;
    tn_kernel_gemm_int(&t->g, t->alpha, t->beta, ith, nth);
}

static tn_status run_gemm_int(void *p) {
    const tn_gemm *g = &((gemm_int_task *)p)->g;
    tn_parallel_run(gemm_int_slice, p, g->batch * g->m * g->n * (g->k > 0 ? g->k : 1));
    return TN_STATUS_OK;
}

tn_status tn_gemm_int_async(tn_stream_t stream, const char *name, const tn_gemm *g, int64_t alpha,
                            int64_t beta) {
    if (g->batch < 0 || g->m < 0 || g->n < 0 || g->k < 0)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "GEMM with a negative dimension");
    if (g->a.dtype == TN_DTYPE_BOOL || !tn_dtype_is_int(g->a.dtype) || g->b.dtype != g->a.dtype || g->c.dtype != g->a.dtype)
        return tn_error(TN_STATUS_INVALID_ARGUMENT,
                        "integer GEMM: A, B and C must share one integer dtype (u8, i8, i16, i32, i64)");
    if (g->batch == 0 || g->m == 0 || g->n == 0) return TN_STATUS_OK;
    gemm_int_task t = {*g, alpha, beta};
    return tn_stream_launch(stream, name ? name : "gemm_int", run_gemm_int, &t, sizeof t);
}

typedef struct pack_task {
    tn_gemm g;
    void *dst;
} pack_task;

static void pack_slice(void *p, int32_t ith, int32_t nth) {
    pack_task *t = p;
    tn_kernel_gemm_pack_b(&t->g, t->dst, ith, nth);
}

static tn_status run_pack(void *p) {
    pack_task *t = p;
    tn_parallel_run(pack_slice, t, t->g.k * t->g.n);
    return TN_STATUS_OK;
}

tn_status tn_gemm_pack_b_async(tn_stream_t stream, const tn_gemm *g, void *dst) {
    if (!supported(g->b.dtype) || !supported(g->a.dtype))
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "GEMM supports float32/bfloat16/float16 operands");
    if (g->k < 0 || g->n < 0) return tn_error(TN_STATUS_INVALID_ARGUMENT, "GEMM with a negative dimension");
    if (tn_gemm_packed_b_bytes(g) == 0) return TN_STATUS_OK;
    if (!dst) return tn_error(TN_STATUS_INVALID_ARGUMENT, "packing B into NULL");
    pack_task t = {*g, dst};
    return tn_stream_launch(stream, "gemm_pack_b", run_pack, &t, sizeof t);
}

typedef struct peak_task {
    int64_t iters;
    double ops[TN_MAX_THREADS];
    float sink[TN_MAX_THREADS];
} peak_task;

static void peak_slice(void *p, int32_t ith, int32_t nth) {
    (void)nth;
    peak_task *t = p;
    t->ops[ith] = tn_kernel_fma_burst(t->iters, &t->sink[ith]);
}

static double seconds_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double tn_fma_peak_gflops(double seconds) {
    peak_task t = {.iters = 100000}; /* about a millisecond on one thread: sizes the tries */
    double start = seconds_now();
    tn_kernel_fma_burst(t.iters, &t.sink[0]);
    const int tries = 5;
    double iters_per_second = (double)t.iters / (seconds_now() - start + 1e-9), best = 0;
    t.iters = (int64_t)(iters_per_second * (seconds > 0 ? seconds : 0.1) / tries) + 1;
    for (int r = 0; r < tries; r++) {
        memset(t.ops, 0, sizeof t.ops);
        start = seconds_now();
        tn_parallel_run(peak_slice, &t, INT64_MAX); /* every thread of the pool */
        double elapsed = seconds_now() - start, total = 0;
        for (int32_t i = 0; i < TN_MAX_THREADS; i++) total += t.ops[i];
        if (total / elapsed > best) best = total / elapsed;
    }
    return best / 1e9;
}
