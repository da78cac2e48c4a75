/* The graph compiler's fused regions: generated, built by the system compiler, cached, run on
 * a stream, against a reference computed here. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tn/tn.h"

enum { R = 3, C = 70 };

/* out0 (f32) = silu(a) * b + 1.5, out1 (bf16) = exp(-a) where mask else 0 (transposed store);
 * a: bf16 R x C; b: f32 C, broadcast over rows; mask: bool R x C. */
static void region(tn_graph *g, tn_graph_operand in[3], tn_graph_node nodes[10], tn_graph_operand out[2]) {
    memset(in, 0, sizeof(tn_graph_operand) * 3);
    memset(out, 0, sizeof(tn_graph_operand) * 2);
    in[0] = (tn_graph_operand){.dtype = TN_DTYPE_BF16, .strides = {C, 1}};
    in[1] = (tn_graph_operand){.dtype = TN_DTYPE_F32, .strides = {0, 1}};
    in[2] = (tn_graph_operand){.dtype = TN_DTYPE_BOOL, .strides = {C, 1}};
    tn_graph_node n[10] = {
        {TN_GRAPH_INPUT, {0}, 0, 0},         /* 0: a */
        {TN_GRAPH_INPUT, {1}, 0, 0},         /* 1: b */
        {TN_GRAPH_SILU, {0}, 0, 0},          /* 2 */
        {TN_GRAPH_MUL, {2, 1}, 0, 0},        /* 3 */
        {TN_GRAPH_CONST, {0}, 1.5, 0},       /* 4 */
        {TN_GRAPH_ADD, {3, 4}, 0, 0},        /* 5: out0 */
        {TN_GRAPH_NEG, {0}, 0, 0},           /* 6 */
        {TN_GRAPH_EXP, {6}, 0, 0},           /* 7 */
        {TN_GRAPH_INPUT, {2}, 0, 0},         /* 8: mask */
        {TN_GRAPH_WHERE, {8, 7, 4}, 0, 0},   /* 9: out1 (1.5 where not masked) */
    };
    memcpy(nodes, n, sizeof n);
    out[0] = (tn_graph_operand){.dtype = TN_DTYPE_F32, .strides = {C, 1}, .node = 5};
    out[1] = (tn_graph_operand){.dtype = TN_DTYPE_BF16, .strides = {1, R}, .node = 9};
    *g = (tn_graph){.ndim = 2, .sizes = {R, C}, .ninputs = 3, .nnodes = 10, .noutputs = 2,
                    .inputs = in, .nodes = nodes, .outputs = out};
}

void test_graph_fused_region(void) {
    char dir[] = "/tmp/tn_graph_test_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    tn_graph g;
    tn_graph_operand in[3], out[2];
    tn_graph_node nodes[10];
    region(&g, in, nodes, out);
    uint16_t a[R * C], o1[R * C];
    float b[C], o0[R * C];
    uint8_t mask[R * C];
    for (int i = 0; i < R * C; i++) {
        a[i] = tn_f32_to_bf16((float)(i % 17) * 0.25f - 2.0f);
        mask[i] = (uint8_t)(i % 3 != 0);
    }
    for (int j = 0; j < C; j++) b[j] = (float)j * 0.1f - 3.0f;
    tn_fused_kernel *k = NULL;
    int hit = -1;
    CHECK_OK(tn_graph_compile(&g, dir, NULL, &k, &hit));
    CHECK(k != NULL && hit == 0 && tn_fused_kernel_operands(k) == 5);
    tn_stream_t s;
    CHECK_OK(tn_stream_get(0, 0, &s));
    void *ptr[5] = {a, b, mask, o0, o1};
    if (k) CHECK_OK(tn_fused_launch(s, k, ptr));
    CHECK_OK(tn_stream_synchronize(s));
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) {
            float x = tn_bf16_to_f32(a[r * C + c]);
            float want0 = x / (1.0f + expf(-x)) * b[c] + 1.5f;
            float want1 = mask[r * C + c] ? expf(-x) : 1.5f;
            CHECK(fabsf(o0[r * C + c] - want0) <= 1e-5f * (1.0f + fabsf(want0)));
            CHECK(o1[c * R + r] == tn_f32_to_bf16(want1));
        }
    /* the same region again: found in the cache, same key */
    tn_fused_kernel *k2 = NULL;
    CHECK_OK(tn_graph_compile(&g, dir, NULL, &k2, &hit));
    CHECK(hit == 1 && k && k2 && strcmp(tn_fused_kernel_key(k), tn_fused_kernel_key(k2)) == 0);
    tn_fused_kernel_release(k);
    tn_fused_kernel_release(k2);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

void test_graph_rejects_bad_regions(void) {
    tn_graph g;
    tn_graph_operand in[3], out[2];
    tn_graph_node nodes[10];
    region(&g, in, nodes, out);
    char *src = NULL;
    nodes[3].arg[1] = 7; /* reads a later node */
    CHECK(tn_graph_codegen(&g, &src) == TN_STATUS_INVALID_ARGUMENT && src == NULL);
    CHECK(strstr(tn_last_error(), "node 3 reads node 7") != NULL);
    region(&g, in, nodes, out);
    in[1].dtype = TN_DTYPE_I64;
    CHECK(tn_graph_codegen(&g, &src) == TN_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(tn_last_error(), "input 1 has dtype") != NULL);
    region(&g, in, nodes, out);
    CHECK_OK(tn_graph_codegen(&g, &src));
    CHECK(src && strstr(src, "void tn_fused(") != NULL);
    free(src);
    tn_fused_kernel *k = NULL;
    int hit;
    setenv("CC", "false", 1); /* a compiler that fails: the error says so */
    char dir[] = "/tmp/tn_graph_bad_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    nodes[4].value = 2.25; /* a new key, so nothing is cached */
    CHECK(tn_graph_compile(&g, dir, NULL, &k, &hit) == TN_STATUS_INTERNAL && k == NULL);
    CHECK(strstr(tn_last_error(), "the C compiler (false) failed") != NULL);
    unsetenv("CC");
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

/* Row sums: y = x * rsqrt(mean(x^2) + eps) * w over rows of N (an RMS norm), the per-row rsqrt
 * as a second output (stride 0 along the row), and the row sums of y (a second level) as a
 * third. N = 37 and 40 take the sixteen-lane loop and its tail. */
static void row_sum_region(int64_t rows, int64_t n) {
    char dir[] = "/tmp/tn_graph_sum_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    tn_graph_operand in[2] = {{.dtype = TN_DTYPE_F32, .strides = {n, 1}},
                              {.dtype = TN_DTYPE_BF16, .strides = {0, 1}}};
    tn_graph_node nodes[10] = {
        {TN_GRAPH_INPUT, {0}, 0, 0},               /* 0: x */
        {TN_GRAPH_MUL, {0, 0}, 0, 0},              /* 1: x^2 */
        {TN_GRAPH_ROW_SUM, {1}, 1.0 / (double)n, 0}, /* 2: mean(x^2) */
        {TN_GRAPH_CONST, {0}, 1e-5, 0},            /* 3 */
        {TN_GRAPH_ADD, {2, 3}, 0, 0},              /* 4 */
        {TN_GRAPH_RSQRT, {4}, 0, 0},               /* 5: out1 */
        {TN_GRAPH_MUL, {0, 5}, 0, 0},              /* 6 */
        {TN_GRAPH_INPUT, {1}, 0, 0},               /* 7: w */
        {TN_GRAPH_MUL, {6, 7}, 0, 0},              /* 8: out0 */
        {TN_GRAPH_ROW_SUM, {8}, 1.0, 0},           /* 9: out2 */
    };
    tn_graph_operand out[3] = {{.dtype = TN_DTYPE_F32, .strides = {n, 1}, .node = 8},
                               {.dtype = TN_DTYPE_F32, .strides = {1, 0}, .node = 5},
                               {.dtype = TN_DTYPE_F32, .strides = {1, 0}, .node = 9}};
    tn_graph g = {.ndim = 2, .sizes = {rows, n}, .ninputs = 2, .nnodes = 10, .noutputs = 3,
                  .inputs = in, .nodes = nodes, .outputs = out};
    float *x = malloc(sizeof(float) * (size_t)(rows * n)), *y = malloc(sizeof(float) * (size_t)(rows * n));
    float *scale = malloc(sizeof(float) * (size_t)rows), *sums = malloc(sizeof(float) * (size_t)rows);
    uint16_t *w = malloc(sizeof(uint16_t) * (size_t)n);
    for (int64_t i = 0; i < rows * n; i++) x[i] = (float)((i * 7) % 23) * 0.3f - 3.0f;
    for (int64_t j = 0; j < n; j++) w[j] = tn_f32_to_bf16(1.0f + (float)j * 0.01f);
    tn_fused_kernel *k = NULL;
    int hit;
    CHECK_OK(tn_graph_compile(&g, dir, NULL, &k, &hit));
    tn_stream_t s;
    CHECK_OK(tn_stream_get(0, 0, &s));
    void *ptr[5] = {x, w, y, scale, sums};
    if (k) CHECK_OK(tn_fused_launch(s, k, ptr));
    CHECK_OK(tn_stream_synchronize(s));
    for (int64_t r = 0; r < rows; r++) {
        double sq = 0, total = 0;
        for (int64_t j = 0; j < n; j++) sq += (double)x[r * n + j] * x[r * n + j];
        double rs = 1.0 / sqrt(sq / (double)n + 1e-5);
        CHECK(fabs(scale[r] - rs) <= 1e-5 * rs);
        for (int64_t j = 0; j < n; j++) {
            double want = x[r * n + j] * rs * tn_bf16_to_f32(w[j]);
            total += want;
            CHECK(fabs(y[r * n + j] - want) <= 1e-5 * (1.0 + fabs(want)));
        }
        CHECK(fabs(sums[r] - total) <= 1e-4 * (1.0 + fabs(total)));
    }
    tn_fused_kernel_release(k);
    free(x), free(y), free(scale), free(sums), free(w);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

void test_graph_row_sums(void) {
    row_sum_region(5, 37);
    row_sum_region(70, 40); /* rows split across threads */
    /* a row sum with a scale that is not finite is refused */
    tn_graph_operand in = {.dtype = TN_DTYPE_F32, .strides = {4, 1}};
    tn_graph_node nodes[2] = {{TN_GRAPH_INPUT, {0}, 0, 0}, {TN_GRAPH_ROW_SUM, {0}, INFINITY, 0}};
    tn_graph_operand out = {.dtype = TN_DTYPE_F32, .strides = {1, 0}, .node = 1};
    tn_graph g = {.ndim = 2, .sizes = {3, 4}, .ninputs = 1, .nnodes = 2, .noutputs = 1,
                  .inputs = &in, .nodes = nodes, .outputs = &out};
    char *src = NULL;
    CHECK(tn_graph_codegen(&g, &src) == TN_STATUS_INVALID_ARGUMENT && src == NULL);
    CHECK(strstr(tn_last_error(), "node 1 sums") != NULL);
}

/* out = (a + b) * bias on a channels-last N x C x H x W region (C innermost in memory, as a
 * convolution leaves it); bias broadcast over C (or absent). */
static void channels_last_region(int with_bias) {
    enum { N = 2, Cc = 3, H = 4, W = 5, E = N * Cc * H * W };
    const int64_t cl[4] = {H * W * Cc, 1, W * Cc, Cc}; /* strides of N, C, H, W */
    tn_graph_operand in[3], out;
    memset(in, 0, sizeof in);
    memset(&out, 0, sizeof out);
    for (int k = 0; k < 2; k++) {
        in[k].dtype = TN_DTYPE_F32;
        memcpy(in[k].strides, cl, sizeof cl);
    }
    in[2] = (tn_graph_operand){.dtype = TN_DTYPE_F32, .strides = {0, 1, 0, 0}};
    tn_graph_node nodes[5] = {
        {TN_GRAPH_INPUT, {0}, 0, 0}, {TN_GRAPH_INPUT, {1}, 0, 0}, {TN_GRAPH_ADD, {0, 1}, 0, 0},
        with_bias ? (tn_graph_node){TN_GRAPH_INPUT, {2}, 0, 0} : (tn_graph_node){TN_GRAPH_CONST, {0}, 0.5, 0},
        {TN_GRAPH_MUL, {2, 3}, 0, 0},
    };
    out.dtype = TN_DTYPE_F32;
    memcpy(out.strides, cl, sizeof cl);
    out.node = 4;
    tn_graph g = {.ndim = 4, .sizes = {N, Cc, H, W}, .ninputs = with_bias ? 3 : 2, .nnodes = 5,
                  .noutputs = 1, .inputs = in, .nodes = nodes, .outputs = &out};
    /* in memory order: without the bias one contiguous loop over every element; the bias,
     * which steps along C only, leaves N*H*W rows of C */
    char *src = NULL;
    CHECK_OK(tn_graph_codegen(&g, &src));
    if (src && !with_bias) CHECK(strstr(src, "rows = INT64_C(1), inner = INT64_C(120)") != NULL);
    if (src && with_bias) CHECK(strstr(src, "rows = INT64_C(40), inner = INT64_C(3)") != NULL);
    free(src);
    char dir[] = "/tmp/tn_graph_cl_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    tn_fused_kernel *k = NULL;
    int hit = -1;
    CHECK_OK(tn_graph_compile(&g, dir, NULL, &k, &hit));
    float a[E], b[E], bias[Cc] = {1.0f, -2.0f, 3.0f}, o[E];
    for (int i = 0; i < E; i++) {
        a[i] = (float)i * 0.5f;
        b[i] = (float)(i % 7) - 3.0f;
        o[i] = NAN;
    }
    tn_stream_t s;
    CHECK_OK(tn_stream_get(0, 0, &s));
    void *ptr[4] = {a, b, bias, o};
    if (!with_bias) ptr[2] = o; /* inputs, then the output */
    if (k) CHECK_OK(tn_fused_launch(s, k, ptr));
    CHECK_OK(tn_stream_synchronize(s));
    for (int n = 0; n < N; n++)
        for (int c = 0; c < Cc; c++)
            for (int h = 0; h < H; h++)
                for (int w = 0; w < W; w++) {
                    int64_t at = n * cl[0] + c * cl[1] + h * cl[2] + w * cl[3];
                    float want = (a[at] + b[at]) * (with_bias ? bias[c] : 0.5f);
                    CHECK(o[at] == want);
                }
    tn_fused_kernel_release(k);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

void test_graph_channels_last(void) {
    channels_last_region(0);
    channels_last_region(1);
}

/* out = 2 x over 16 floats, built in `dir`. */
static tn_fused_kernel *doubling_kernel(const char *dir) {
    tn_graph_operand in = {.dtype = TN_DTYPE_F32, .strides = {1}};
    tn_graph_node nodes[3] = {{TN_GRAPH_INPUT, {0}, 0, 0}, {TN_GRAPH_CONST, {0}, 2.0, 0}, {TN_GRAPH_MUL, {0, 1}, 0, 0}};
    tn_graph_operand out = {.dtype = TN_DTYPE_F32, .strides = {1}, .node = 2};
    tn_graph g = {.ndim = 1, .sizes = {16}, .ninputs = 1, .nnodes = 3, .noutputs = 1,
                  .inputs = &in, .nodes = nodes, .outputs = &out};
    tn_fused_kernel *k = NULL;
    int hit;
    CHECK_OK(tn_graph_compile(&g, dir, NULL, &k, &hit));
    return k;
}

/* A plan finds a kernel by build ID. The same kernel built in two cache folders is two loaded
 * objects with one build ID; the plan keeps the one it calls into loaded, so releasing that
 * kernel (its graph gone) leaves the plan's replays working. */
void test_graph_plan_keeps_its_kernel_loaded(void) {
    char dir1[] = "/tmp/tn_graph_pin_XXXXXX", dir2[] = "/tmp/tn_graph_pin_XXXXXX";
    CHECK(mkdtemp(dir1) != NULL && mkdtemp(dir2) != NULL);
    tn_fused_kernel *k1 = doubling_kernel(dir1), *k2 = doubling_kernel(dir2);
    CHECK(k1 && k2);
    if (!k1 || !k2) return;
    tn_stream_t s;
    CHECK_OK(tn_stream_get(0, 1, &s));
    void *x, *out;
    CHECK_OK(tn_memory_alloc(0, s, 16 * sizeof(float), &x));
    CHECK_OK(tn_memory_alloc(0, s, 16 * sizeof(float), &out));
    tn_capture_t c;
    CHECK_OK(tn_capture_begin(s, &c));
    void *ptr[2] = {x, out};
    CHECK_OK(tn_fused_launch(s, k1, ptr));
    CHECK_OK(tn_capture_end(c));
    uintptr_t start[2] = {(uintptr_t)x, (uintptr_t)out};
    uint64_t bytes[2] = {16 * sizeof(float), 16 * sizeof(float)};
    CHECK_OK(tn_capture_relocate(c, 2, start, bytes, NULL));
    void *plan = NULL;
    uint64_t size = 0;
    CHECK_OK(tn_capture_save(c, &plan, &size));
    tn_capture_destroy(c);
    tn_capture_t loaded = NULL;
    CHECK_OK(tn_capture_load(s, plan, size, &loaded));
    tn_fused_kernel_release(k1); /* the object the plan resolved to: loaded first */
    float host[16];
    for (int i = 0; i < 16; i++) host[i] = (float)i - 4.0f;
    CHECK_OK(tn_memcpy_async(s, x, host, sizeof host));
    CHECK_OK(tn_capture_replay_at(loaded, 2, start));
    CHECK_OK(tn_memcpy_async(s, host, out, sizeof host));
    CHECK_OK(tn_stream_synchronize(s));
    for (int i = 0; i < 16; i++) CHECK(host[i] == 2.0f * ((float)i - 4.0f));
    tn_capture_destroy(loaded);
    tn_fused_kernel_release(k2);
    free(plan);
    CHECK_OK(tn_memory_free(x));
    CHECK_OK(tn_memory_free(out));
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", dir1, dir2);
    CHECK(system(cmd) == 0);
}
