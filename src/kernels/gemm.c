/* Blocked, packed GEMM (see tn/gemm.h).
 *
 * Loop nest (BLIS order): columns of C in blocks of NC, the k dimension in blocks of KC (B's
 * block packed into NR-wide panels), rows in blocks of MC (A's block packed, scaled by alpha,
 * into MR-tall panels), then MR x NR tiles by the ISA's micro-kernel. Edge tiles go through a
 * small buffer. Threads split the batch when it is large enough, else the larger of m and n.
 * Small m uses no packing (it would cost more than it saves): dot products when B's columns
 * are contiguous (x @ W.T with W row-major, nn.Linear), scaled row sums when B's rows are. */
#include <string.h>

#include "elem.h"
#include "strided.h"
#include "table.h"
#include "tn/gemm.h"
#include "half.h"
#include "tn/kernels.h"

enum { KC = 256, MC = 96, NC = 1024 };

int64_t tn_gemm_scratch_floats(void) {
    return (int64_t)MC * KC + (int64_t)KC * NC + TN_GEMM_MAX_MR * TN_GEMM_MAX_NR;
}

static inline float load_f32(const char *base, int64_t index, tn_dtype t) {
    switch (t) {
    case TN_DTYPE_F32: return ((const float *)base)[index];
    case TN_DTYPE_BF16: return tn_bf16_to_f32_inline(((const uint16_t *)base)[index]);
    case TN_DTYPE_F16: return tn_f16_to_f32_inline(((const uint16_t *)base)[index]);
    default: return (float)tn_load(base + index * tn_dtype_size(t), t).re;
    }
}

/* ap[(panel * kc + p) * mr + r] = alpha * A[i0 + panel*mr + r, p0 + p], zero past the edge. */
static void pack_a(float *ap, const tn_matrix *a, const char *base, int64_t i0, int64_t mc,
                   int64_t p0, int64_t kc, int32_t mr, float alpha) {
    for (int64_t panel = 0; panel * mr < mc; panel++) {
        float *dst = ap + panel * kc * mr;
        for (int32_t r = 0; r < mr; r++) {
            int64_t i = panel * mr + r;
            if (i >= mc) {
                for (int64_t p = 0; p < kc; p++) dst[p * mr + r] = 0.0f;
                continue;
            }
            int64_t row = (i0 + i) * a->row_stride + p0 * a->col_stride;
            if (a->dtype == TN_DTYPE_F32 && a->col_stride == 1) {
                const float *src = (const float *)base + row;
                for (int64_t p = 0; p < kc; p++) dst[p * mr + r] = alpha * src[p];
            } else if (a->dtype == TN_DTYPE_BF16 && a->col_stride == 1) {
                const uint16_t *src = (const uint16_t *)base + row;
                for (int64_t p = 0; p < kc; p++) dst[p * mr + r] = alpha * tn_bf16_to_f32_inline(src[p]);
            } else {
                for (int64_t p = 0; p < kc; p++)
                    dst[p * mr + r] = alpha * load_f32(base, row + p * a->col_stride, a->dtype);
            }
        }
    }
}

/* bp[(panel * kc + p) * nr + c] = B[p0 + p, j0 + panel*nr + c], zero past the edge. */
static void pack_b(float *bp, const tn_matrix *b, const char *base, int64_t p0, int64_t kc,
                   int64_t j0, int64_t nc, int32_t nr) {
    for (int64_t panel = 0; panel * nr < nc; panel++) {
        float *dst = bp + panel * kc * nr;
        int64_t width = nc - panel * nr < nr ? nc - panel * nr : nr;
        int64_t col0 = j0 + panel * nr;
        if (b->dtype == TN_DTYPE_F32 && b->col_stride == 1) {
            for (int64_t p = 0; p < kc; p++) {
                const float *src = (const float *)base + (p0 + p) * b->row_stride + col0;
                memcpy(dst + p * nr, src, (size_t)width * sizeof(float));
                for (int64_t c = width; c < nr; c++) dst[p * nr + c] = 0.0f;
            }
            continue;
        }
        if (b->dtype == TN_DTYPE_BF16 && b->col_stride == 1) {
            for (int64_t p = 0; p < kc; p++) {
                const uint16_t *src = (const uint16_t *)base + (p0 + p) * b->row_stride + col0;
                for (int64_t c = 0; c < width; c++) dst[p * nr + c] = tn_bf16_to_f32_inline(src[c]);
                for (int64_t c = width; c < nr; c++) dst[p * nr + c] = 0.0f;
            }
            continue;
        }
        for (int64_t c = 0; c < nr; c++) {
            if (c >= width) {
                for (int64_t p = 0; p < kc; p++) dst[p * nr + c] = 0.0f;
                continue;
            }
            int64_t col = (col0 + c) * b->col_stride + p0 * b->row_stride;
            if (b->row_stride == 1 && b->dtype == TN_DTYPE_BF16) { /* W.T of a bf16 weight */
                const uint16_t *src = (const uint16_t *)base + col;
                for (int64_t p = 0; p < kc; p++) dst[p * nr + c] = tn_bf16_to_f32_inline(src[p]);
            } else if (b->row_stride == 1 && b->dtype == TN_DTYPE_F32) {
                const float *src = (const float *)base + col;
                for (int64_t p = 0; p < kc; p++) dst[p * nr + c] = src[p];
            } else {
                for (int64_t p = 0; p < kc; p++)
                    dst[p * nr + c] = load_f32(base, col + p * b->row_stride, b->dtype);
            }
        }
    }
}

/* C[i0:i1, j0:j1] *= beta (beta == 0: set to zero without reading). */
static void scale_c(const tn_matrix *c, float *base, int64_t i0, int64_t i1, int64_t j0,
                    int64_t j1, float beta) {
    for (int64_t i = i0; i < i1; i++)
        for (int64_t j = j0; j < j1; j++) {
            float *x = base + i * c->row_stride + j * c->col_stride;
            *x = beta == 0.0f ? 0.0f : beta * *x;
        }
}

static void block(const tn_gemm *g, const tn_kernel_table *k, float *scratch, int64_t batch,
                  int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    const char *abase = (const char *)g->a.data + batch * g->a.batch_stride * tn_dtype_size(g->a.dtype);
    const char *bbase = (const char *)g->b.data + batch * g->b.batch_stride * tn_dtype_size(g->b.dtype);
    float *cbase = (float *)g->c.data + batch * g->c.batch_stride;
    const int32_t mr = k->gemm_mr, nr = k->gemm_nr;
    float *ap = scratch, *bp = scratch + MC * KC, *tile = bp + (int64_t)KC * NC;
    scale_c(&g->c, cbase, i0, i1, j0, j1, g->beta);
    if (g->k == 0) return;
    for (int64_t jc = j0; jc < j1; jc += NC) {
        int64_t nc = j1 - jc < NC ? j1 - jc : NC;
        for (int64_t pc = 0; pc < g->k; pc += KC) {
            int64_t kc = g->k - pc < KC ? g->k - pc : KC;
            pack_b(bp, &g->b, bbase, pc, kc, jc, nc, nr);
            for (int64_t ic = i0; ic < i1; ic += MC) {
                int64_t mc = i1 - ic < MC ? i1 - ic : MC;
                pack_a(ap, &g->a, abase, ic, mc, pc, kc, mr, g->alpha);
                for (int64_t jr = 0; jr < nc; jr += nr) {
                    for (int64_t ir = 0; ir < mc; ir += mr) {
                        const float *a_panel = ap + (ir / mr) * kc * mr;
                        const float *b_panel = bp + (jr / nr) * kc * nr;
                        float *c = cbase + (ic + ir) * g->c.row_stride + (jc + jr) * g->c.col_stride;
                        int64_t rows = mc - ir < mr ? mc - ir : mr;
                        int64_t cols = nc - jr < nr ? nc - jr : nr;
                        if (rows == mr && cols == nr && g->c.col_stride == 1) {
                            k->gemm_ukernel(kc, a_panel, b_panel, c, g->c.row_stride);
                            continue;
                        }
                        memset(tile, 0, sizeof(float) * (size_t)(mr * nr));
                        k->gemm_ukernel(kc, a_panel, b_panel, tile, nr);
                        for (int64_t r = 0; r < rows; r++)
                            for (int64_t q = 0; q < cols; q++)
                                c[r * g->c.row_stride + q * g->c.col_stride] += tile[r * nr + q];
                    }
                }
            }
        }
    }
}

/* Small m, contiguous rows of A and columns of B (both float32 or both bfloat16): one dot
 * product per output. */
static int dot_path(const tn_gemm *g) {
    int types = (g->a.dtype == TN_DTYPE_F32 && g->b.dtype == TN_DTYPE_F32) ||
                (g->a.dtype == TN_DTYPE_BF16 && g->b.dtype == TN_DTYPE_BF16);
    return g->m <= 4 && types && (g->a.col_stride == 1 || g->k == 1) &&
           (g->b.row_stride == 1 || g->k == 1);
}

/* Small m, contiguous rows of A and of B (float32): rows of C as sums of scaled rows of B. */
static int axpy_path(const tn_gemm *g) {
    return g->m <= 4 && g->a.dtype == TN_DTYPE_F32 && g->b.dtype == TN_DTYPE_F32 &&
           g->b.col_stride == 1 && g->c.col_stride == 1;
}

static void axpys(const tn_gemm *g, const tn_kernel_table *k, int64_t batch, int64_t j0, int64_t j1) {
    const float *a = (const float *)g->a.data + batch * g->a.batch_stride;
    const float *b = (const float *)g->b.data + batch * g->b.batch_stride;
    float *c = (float *)g->c.data + batch * g->c.batch_stride;
    for (int64_t i = 0; i < g->m; i++) {
        float *row = c + i * g->c.row_stride;
        for (int64_t j = j0; j < j1; j++) row[j] = g->beta == 0.0f ? 0.0f : g->beta * row[j];
        for (int64_t p = 0; p < g->k; p++)
            k->axpy_f32(j1 - j0, g->alpha * a[i * g->a.row_stride + p * g->a.col_stride],
                        b + p * g->b.row_stride + j0, row + j0);
    }
}

static void dots(const tn_gemm *g, const tn_kernel_table *k, int64_t batch, int64_t j0, int64_t j1) {
    int32_t es = tn_dtype_size(g->a.dtype);
    const char *a = (const char *)g->a.data + batch * g->a.batch_stride * es;
    const char *b = (const char *)g->b.data + batch * g->b.batch_stride * es;
    float *c = (float *)g->c.data + batch * g->c.batch_stride;
    for (int64_t i = 0; i < g->m; i++)
        for (int64_t j = j0; j < j1; j++) {
            const char *x = a + i * g->a.row_stride * es, *y = b + j * g->b.col_stride * es;
            float d = g->a.dtype == TN_DTYPE_F32
                          ? k->dot_f32(g->k, (const float *)x, (const float *)y)
                          : k->dot_bf16(g->k, (const uint16_t *)x, (const uint16_t *)y);
            float v = g->alpha * d;
            float *out = c + i * g->c.row_stride + j * g->c.col_stride;
            *out = g->beta == 0.0f ? v : v + g->beta * *out;
        }
}

void tn_kernel_gemm(const tn_gemm *g, float *scratch, int32_t ith, int32_t nth) {
    tn_gemm_with(tn_kernels(), g, scratch, ith, nth);
}

void tn_gemm_with(const tn_kernel_table *k, const tn_gemm *g, float *scratch, int32_t ith,
                  int32_t nth) {
    int64_t first, last;
    if (g->batch >= nth) { /* whole matrices per thread */
        tn_slice(g->batch, ith, nth, &first, &last);
        for (int64_t b = first; b < last; b++) {
            if (dot_path(g))
                dots(g, k, b, 0, g->n);
            else if (axpy_path(g))
                axpys(g, k, b, 0, g->n);
            else
                block(g, k, scratch, b, 0, g->m, 0, g->n);
        }
        return;
    }
    for (int64_t b = 0; b < g->batch; b++) {
        if (dot_path(g)) {
            tn_slice(g->n, ith, nth, &first, &last);
            dots(g, k, b, first, last);
        } else if (axpy_path(g)) {
            tn_slice((g->n + 15) / 16, ith, nth, &first, &last); /* whole cache lines each */
            int64_t j1 = last * 16 < g->n ? last * 16 : g->n;
            if (first * 16 < j1) axpys(g, k, b, first * 16, j1);
        } else if (g->n >= g->m) { /* split columns, in whole micro-tiles */
            int64_t tiles = (g->n + k->gemm_nr - 1) / k->gemm_nr;
            tn_slice(tiles, ith, nth, &first, &last);
            int64_t j1 = last * k->gemm_nr < g->n ? last * k->gemm_nr : g->n;
            if (first * k->gemm_nr < j1) block(g, k, scratch, b, 0, g->m, first * k->gemm_nr, j1);
        } else {
            int64_t tiles = (g->m + k->gemm_mr - 1) / k->gemm_mr;
            tn_slice(tiles, ith, nth, &first, &last);
            int64_t i1 = last * k->gemm_mr < g->m ? last * k->gemm_mr : g->m;
            if (first * k->gemm_mr < i1) block(g, k, scratch, b, first * k->gemm_mr, i1, 0, g->n);
        }
    }
}
