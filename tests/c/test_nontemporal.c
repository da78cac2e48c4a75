/* Non-temporal stores: copies, fills, cheap elementwise ops and softmax rows (forward and
 * backward) write the same bytes with the threshold at 0 (every output streamed) as with
 * normal stores, at every alignment, length and thread split, and nothing outside the output. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tn/tn.h"

#define GUARD 64 /* bytes checked untouched on either side of an output */

enum kind { COPY, FILL, NEG, RELU, ADD, ADD_BROADCAST, MUL, SOFTMAX, LOG_SOFTMAX, SOFTMAX_BACKWARD, LOG_SOFTMAX_BACKWARD };

/* Runs one kernel over rows x cols elements of dt (row stride ld >= cols), output at byte
 * offset `off` of out (a buffer of GUARD + bytes + GUARD), split into nth slices. */
static void run(enum kind k, tn_dtype dt, tn_dtype src_dt, int64_t rows, int64_t cols, int64_t ld,
                const void *a, const void *b, char *out, int32_t nth) {
    tn_tensor o = {.data = out, .dtype = dt, .ndim = 2, .sizes = {rows, cols}, .strides = {ld, 1}};
    tn_tensor x = {.data = (void *)a, .dtype = src_dt, .ndim = 2, .sizes = {rows, cols}, .strides = {ld, 1}};
    tn_tensor y = x;
    y.data = (void *)b;
    if (k == ADD_BROADCAST) y.strides[0] = y.strides[1] = 0;
    tn_scalar two = {.kind = TN_SCALAR_KIND_FLOAT, .f = 2.0};
    tn_scalar value = {.kind = TN_SCALAR_KIND_FLOAT, .f = -1.25};
    double *scratch = malloc((size_t)(2 * cols + 1) * sizeof(double)); /* slices run one by one */
    for (int32_t ith = 0; ith < nth; ith++) {
        switch (k) {
        case COPY: tn_kernel_copy(&o, &x, ith, nth); break;
        case FILL: tn_kernel_fill(&o, &value, ith, nth); break;
        case NEG: CHECK_OK(tn_kernel_unary(TN_UNARY_NEG, &o, &x, dt, ith, nth)); break;
        case RELU: CHECK_OK(tn_kernel_unary(TN_UNARY_RELU, &o, &x, dt, ith, nth)); break;
        case ADD:
        case ADD_BROADCAST: CHECK_OK(tn_kernel_binary(TN_BINARY_ADD, &o, &x, &y, &two, dt, ith, nth)); break;
        case MUL: CHECK_OK(tn_kernel_binary(TN_BINARY_MUL, &o, &x, &y, &two, dt, ith, nth)); break;
        case SOFTMAX: tn_kernel_softmax(TN_SOFTMAX, &o, &x, NULL, scratch, ith, nth); break;
        case LOG_SOFTMAX: tn_kernel_softmax(TN_LOG_SOFTMAX, &o, &x, NULL, scratch, ith, nth); break;
        case SOFTMAX_BACKWARD: tn_kernel_softmax(TN_SOFTMAX_BACKWARD, &o, &x, &y, scratch, ith, nth); break;
        case LOG_SOFTMAX_BACKWARD:
            tn_kernel_softmax(TN_LOG_SOFTMAX_BACKWARD, &o, &x, &y, scratch, ith, nth);
            break;
        }
    }
    free(scratch);
}

static void fill_source(void *p, tn_dtype dt, int64_t n, uint32_t seed) {
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        float v = (float)((int32_t)(seed >> 8) % 2001 - 1000) / 64.0f;
        if (dt == TN_DTYPE_F32) ((float *)p)[i] = v;
        else if (dt == TN_DTYPE_BF16) ((uint16_t *)p)[i] = tn_f32_to_bf16(v);
        else if (dt == TN_DTYPE_F16) ((uint16_t *)p)[i] = tn_f32_to_f16(v);
    }
}

static void compare(enum kind k, tn_dtype dt, tn_dtype src_dt, int64_t rows, int64_t cols,
                    int64_t ld, int64_t off, int32_t nth) {
    int32_t es = tn_dtype_size(dt), ses = tn_dtype_size(src_dt);
    int64_t span = (rows - 1) * ld + cols, bytes = off * es + span * es;
    char *a = malloc((size_t)(span * ses + 64)), *b = malloc((size_t)(span * ses + 64));
    char *normal = malloc((size_t)(bytes + 2 * GUARD)), *streamed = malloc((size_t)(bytes + 2 * GUARD));
    fill_source(a, src_dt, span, 1);
    fill_source(b, src_dt, span, 2);
    memset(normal, 0x5a, (size_t)(bytes + 2 * GUARD));
    memset(streamed, 0x5a, (size_t)(bytes + 2 * GUARD));
    tn_set_nontemporal_min_bytes(INT64_MAX);
    run(k, dt, src_dt, rows, cols, ld, a, b, normal + GUARD + off * es, nth);
    tn_set_nontemporal_min_bytes(0);
    run(k, dt, src_dt, rows, cols, ld, a, b, streamed + GUARD + off * es, nth);
    tn_set_nontemporal_min_bytes(-1);
    int same = memcmp(normal, streamed, (size_t)(bytes + 2 * GUARD)) == 0;
    int untouched = 1;
    for (int64_t i = 0; i < GUARD; i++)
        untouched &= streamed[i] == 0x5a && streamed[GUARD + bytes + i] == 0x5a;
    if (!same || !untouched)
        fprintf(stderr, "nontemporal: kind %d dtype %d <- %d, %lld x %lld (ld %lld), offset %lld, %d slices\n",
                (int)k, (int)dt, (int)src_dt, (long long)rows, (long long)cols, (long long)ld,
                (long long)off, nth);
    CHECK(same);
    CHECK(untouched);
    free(a);
    free(b);
    free(normal);
    free(streamed);
}

void test_nontemporal_stores(void) {
    CHECK(tn_nontemporal_min_bytes() > 0); /* a size, from the cache */
    static const int64_t lengths[] = {0, 1, 15, 16, 17, 63, 64, 100, 129, 257, 1000, 4099};
    static const int64_t offsets[] = {0, 1, 3, 8, 15};
    static const struct {
        enum kind k;
        tn_dtype dt, src;
    } cases[] = {
        {COPY, TN_DTYPE_F32, TN_DTYPE_F32},  {COPY, TN_DTYPE_F16, TN_DTYPE_F16},
        {COPY, TN_DTYPE_BF16, TN_DTYPE_F32}, {COPY, TN_DTYPE_F32, TN_DTYPE_BF16},
        {COPY, TN_DTYPE_F16, TN_DTYPE_F32},  {FILL, TN_DTYPE_F32, TN_DTYPE_F32},
        {FILL, TN_DTYPE_BF16, TN_DTYPE_BF16}, {FILL, TN_DTYPE_F64, TN_DTYPE_F64},
        {NEG, TN_DTYPE_F32, TN_DTYPE_F32},   {RELU, TN_DTYPE_BF16, TN_DTYPE_BF16},
        {ADD, TN_DTYPE_F32, TN_DTYPE_F32},   {ADD, TN_DTYPE_BF16, TN_DTYPE_BF16},
        {ADD_BROADCAST, TN_DTYPE_F32, TN_DTYPE_F32}, {MUL, TN_DTYPE_F16, TN_DTYPE_F16},
        {SOFTMAX, TN_DTYPE_F32, TN_DTYPE_F32}, {LOG_SOFTMAX, TN_DTYPE_F32, TN_DTYPE_F32},
        {SOFTMAX_BACKWARD, TN_DTYPE_F32, TN_DTYPE_F32}, {LOG_SOFTMAX_BACKWARD, TN_DTYPE_F32, TN_DTYPE_F32},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++)
            for (size_t o = 0; o < sizeof offsets / sizeof offsets[0]; o++)
                for (int32_t nth = 1; nth <= 3; nth += 2)
                    compare(cases[c].k, cases[c].dt, cases[c].src, 1, lengths[l], lengths[l],
                            offsets[o], nth);
        /* rows of 37 with a padded row stride: contiguous rows, not a contiguous tensor */
        compare(cases[c].k, cases[c].dt, cases[c].src, 5, 37, 40, 1, 3);
        compare(cases[c].k, cases[c].dt, cases[c].src, 3, 300, 333, 0, 2);
    }
}
