/* Matrix-vector products (m <= 4, see tn/gemm.h): no packing, which would cost more than it
 * saves. Dot products when B's columns are contiguous (x @ W.T with W row-major, nn.Linear),
 * scaled row sums when B's rows are (x @ W), and the split-k rule for the latter. */
#include "gemm_impl.h"

/* Small m, contiguous rows of A and columns of B (both float32, bfloat16 or float16): one dot
 * product per output. */
int tn_gemm_dot_path(const tn_gemm *g) {
    int types = (g->a.dtype == TN_DTYPE_F32 && g->b.dtype == TN_DTYPE_F32) ||
                (g->a.dtype == TN_DTYPE_BF16 && g->b.dtype == TN_DTYPE_BF16) ||
                (g->a.dtype == TN_DTYPE_F16 && g->b.dtype == TN_DTYPE_F16);
    return g->m <= 4 && types && (g->a.col_stride == 1 || g->k == 1) &&
           (g->b.row_stride == 1 || g->k == 1);
}

/* Small m, contiguous rows of A and of B (float32): rows of C as sums of scaled rows of B. */
int tn_gemm_axpy_path(const tn_gemm *g) {
    int types = (g->a.dtype == TN_DTYPE_F32 && g->b.dtype == TN_DTYPE_F32) ||
                (g->a.dtype == TN_DTYPE_BF16 && g->b.dtype == TN_DTYPE_BF16);
    return g->m <= 4 && types && g->b.col_stride == 1 && g->c.col_stride == 1;
}

/* Split-k products (tn/gemm.h): B's rows take 2 MB or more, so that a thread's share of
 * its columns would not stay in its L2 from one call to the next where a share of its rows
 * does (a contiguous block, spread evenly over the cache's sets). */
int tn_gemm_split_k(const tn_gemm *g) {
    return g->batch == 1 && !tn_gemm_dot_path(g) && tn_gemm_axpy_path(g) && g->k >= g->n &&
           g->k * g->n * tn_dtype_size(g->b.dtype) >= (2 << 20);
}

enum { AXPY_ROWS = 64 }; /* rows of B per call (the kernels take them four at a time) */

void tn_gemm_axpys(const tn_gemm *g, const tn_kernel_table *k, int64_t batch, int64_t j0, int64_t j1) {
    int32_t es = tn_dtype_size(g->a.dtype);
    const char *a = (const char *)g->a.data + batch * g->a.batch_stride * es;
    const char *b = (const char *)g->b.data + batch * g->b.batch_stride * es;
    float *c = (float *)g->c.data + batch * g->c.batch_stride;
    for (int64_t i = 0; i < g->m; i++) {
        float *row = c + i * g->c.row_stride;
        for (int64_t j = j0; j < j1; j++) row[j] = g->beta == 0.0f ? 0.0f : g->beta * row[j];
        for (int64_t p0 = 0; p0 < g->k; p0 += AXPY_ROWS) {
            int64_t rows = g->k - p0 < AXPY_ROWS ? g->k - p0 : AXPY_ROWS;
            float x[AXPY_ROWS];
            for (int64_t r = 0; r < rows; r++)
                x[r] = g->alpha * load_f32(a, i * g->a.row_stride + (p0 + r) * g->a.col_stride, g->a.dtype);
            const char *brows = b + (p0 * g->b.row_stride + j0) * es;
            if (g->a.dtype == TN_DTYPE_F32)
                k->axpy_rows_f32(j1 - j0, rows, x, (const float *)brows, g->b.row_stride, row + j0);
            else
                k->axpy_rows_bf16(j1 - j0, rows, x, (const uint16_t *)brows, g->b.row_stride, row + j0);
        }
    }
}

enum { DOT_CHUNK = 2048 }; /* float16 dot products: k widened this many at a time */

/* float16 dot products: a chunk of A's row and of each of B's columns widened on F16C into
 * the scratch (x and w), dotted as float32 and summed into C, which was float16's GEMV (a
 * decode step) packing the whole weight on every call: 3x the CPU's time per token. */
static void dots_f16(const tn_gemm *g, const tn_kernel_table *k, float *scratch, const uint16_t *a, const uint16_t *b,
                     float *c, int64_t j0, int64_t j1) {
    float *x = scratch, *w = scratch + DOT_CHUNK;
    for (int64_t i = 0; i < g->m; i++)
        for (int64_t p0 = 0; p0 < g->k || p0 == 0; p0 += DOT_CHUNK) {
            int64_t n = g->k - p0 < DOT_CHUNK ? g->k - p0 : DOT_CHUNK;
            k->widen_half(TN_DTYPE_F16, n, x, 1, a + i * g->a.row_stride + p0 * g->a.col_stride, g->a.col_stride);
            for (int64_t j = j0; j < j1; j++) {
                k->widen_half(TN_DTYPE_F16, n, w, 1, b + j * g->b.col_stride + p0 * g->b.row_stride, g->b.row_stride);
                float v = g->alpha * k->dot_f32(n, x, w);
                float *out = c + i * g->c.row_stride + j * g->c.col_stride;
                *out = p0 > 0 ? *out + v : (g->beta == 0.0f ? v : v + g->beta * *out);
            }
        }
}

void tn_gemm_dots(const tn_gemm *g, const tn_kernel_table *k, float *scratch, int64_t batch, int64_t j0, int64_t j1) {
    int32_t es = tn_dtype_size(g->a.dtype);
    const char *a = (const char *)g->a.data + batch * g->a.batch_stride * es;
    const char *b = (const char *)g->b.data + batch * g->b.batch_stride * es;
    float *c = (float *)g->c.data + batch * g->c.batch_stride;
    if (g->a.dtype == TN_DTYPE_F16) {
        dots_f16(g, k, scratch, (const uint16_t *)a, (const uint16_t *)b, c, j0, j1);
        return;
    }
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

