/* What the fused attention's forward (attention.c) and backward (attention_backward.c) share:
 * tile sizes, loading and storing rows of the views in float32, dot products, the dropout
 * factors and the micro-kernel panel layout. Both files are built once per ISA, so these
 * inline helpers vectorize to that ISA's width. */
#ifndef TN_KERNELS_ATTENTION_IMPL_H
#define TN_KERNELS_ATTENTION_IMPL_H

#include <math.h>
#include <string.h>

#include "elem.h"
#include "half.h"
#include "math_f32.h"
#include "philox.h"
#include "strided.h"
#include "table.h"
#include "tn/attention.h"
#include "vec16.h"

#define TN_CONCAT_(a, b) a##b
#define TN_CONCAT(a, b) TN_CONCAT_(a, b)

enum { QB = 96, KB = 48 }; /* QB: a multiple of every ISA's MR and NR (12 and 32, 6 and 16, 4 and 8); KB of MR */
enum { ROWS_BELOW = 8 };   /* fewer query rows per head than this: forward_rows */
/* Keys per block of the bfloat16 tiles (forward_bf16): whole AMX tiles of 16 pairs and a
 * multiple of either bf16 kernel's columns. KB_ROWS: the longest block, forward_rows' too
 * (a decode step's per-block work, the maximum, the sum, the rescaling, over more keys). */
enum { KB16 = 128, KB_ROWS = KB16 > KB ? KB16 : KB };

static inline float load_f(const tn_tensor *t, int64_t off) {
    switch (t->dtype) {
    case TN_DTYPE_F32: return ((const float *)t->data)[off];
    case TN_DTYPE_BF16: return tn_bf16_to_f32_inline(((const uint16_t *)t->data)[off]);
    case TN_DTYPE_F16: return tn_f16_to_f32_inline(((const uint16_t *)t->data)[off]);
    default: return (float)tn_load((const char *)t->data + off * tn_dtype_size(t->dtype), t->dtype).re;
    }
}

static inline void store_f(const tn_tensor *t, int64_t off, float x) {
    switch (t->dtype) {
    case TN_DTYPE_F32: ((float *)t->data)[off] = x; break;
    case TN_DTYPE_BF16: ((uint16_t *)t->data)[off] = tn_f32_to_bf16_inline(x); break;
    default: ((uint16_t *)t->data)[off] = tn_f32_to_f16_inline(x); break;
    }
}

/* Offset of row (b, h, i) of a 4-D view (the last dimension runs along the row). */
static inline int64_t row_off(const tn_tensor *t, int64_t b, int64_t h, int64_t i) {
    return b * t->strides[0] + h * t->strides[1] + i * t->strides[2];
}

/* A row of a view into floats (contiguous float32, bfloat16 and float16 rows vectorize; a
 * float16 attention converting element by element took 3x the CPU's time). */
static inline void load_row(float *dst, const tn_tensor *t, int64_t off, int64_t n) {
    int64_t s = t->strides[3];
    if (s == 1 && t->dtype == TN_DTYPE_F32) {
        memcpy(dst, (const float *)t->data + off, sizeof(float) * (size_t)n);
    } else if (s == 1 && t->dtype == TN_DTYPE_BF16) {
        const uint16_t *src = (const uint16_t *)t->data + off;
        for (int64_t e = 0; e < n; e++) dst[e] = tn_bf16_to_f32_inline(src[e]);
    } else if (s == 1 && t->dtype == TN_DTYPE_F16) { /* the ISA's row: F16C where it has it */
        tn_kernels()->widen_half(TN_DTYPE_F16, n, dst, 1, (const uint16_t *)t->data + off, 1);
    } else {
        for (int64_t e = 0; e < n; e++) dst[e] = load_f(t, off + e * s);
    }
}

/* A float32 row into a row of a view (contiguous float32, bfloat16 and float16 rows vectorize). */
static inline void store_row(const tn_tensor *t, int64_t off, const float *src, float scale, int64_t n) {
    int64_t s = t->strides[3];
    if (s == 1 && t->dtype == TN_DTYPE_F32) {
        float *d = (float *)t->data + off;
        for (int64_t e = 0; e < n; e++) d[e] = scale * src[e];
    } else if (s == 1 && t->dtype == TN_DTYPE_BF16) {
        uint16_t *d = (uint16_t *)t->data + off;
        for (int64_t e = 0; e < n; e++) d[e] = tn_f32_to_bf16_inline(scale * src[e]);
    } else if (s == 1 && t->dtype == TN_DTYPE_F16) { /* branch-free: the loop vectorizes */
        uint16_t *d = (uint16_t *)t->data + off;
        for (int64_t e = 0; e < n; e++) d[e] = tn_f32_to_f16_inline(scale * src[e]);
    } else {
        for (int64_t e = 0; e < n; e++) store_f(t, off + e * s, scale * src[e]);
    }
}

/* Eight partial sums, so the loop vectorizes without reassociating a single sum. */
static inline float dot_f32(const float *x, const float *y, int64_t n) {
    float part[8] = {0}, acc = 0;
    int64_t e = 0;
    for (; e + 8 <= n; e += 8)
        for (int l = 0; l < 8; l++) part[l] += x[e + l] * y[e + l];
    for (; e < n; e++) acc += x[e] * y[e];
    for (int l = 0; l < 8; l++) acc += part[l];
    return acc;
}

static inline float dot_row(const float *x, const tn_tensor *t, int64_t off, int64_t n) {
    int64_t s = t->strides[3];
    if (s == 1 && t->dtype == TN_DTYPE_F32) return dot_f32(x, (const float *)t->data + off, n);
    if (s == 1 && t->dtype == TN_DTYPE_BF16) {
        const uint16_t *y = (const uint16_t *)t->data + off;
        float part[8] = {0}, acc = 0;
        int64_t e = 0;
        for (; e + 8 <= n; e += 8)
            for (int l = 0; l < 8; l++) part[l] += x[e + l] * tn_bf16_to_f32_inline(y[e + l]);
        for (; e < n; e++) acc += x[e] * tn_bf16_to_f32_inline(y[e]);
        for (int l = 0; l < 8; l++) acc += part[l];
        return acc;
    }
    float acc = 0;
    for (int64_t e = 0; e < n; e++) acc += x[e] * load_f(t, off + e * s);
    return acc;
}

/* acc += w * row */
static inline void axpy_row(float *acc, float w, const tn_tensor *t, int64_t off, int64_t n) {
    int64_t s = t->strides[3];
    if (s == 1 && t->dtype == TN_DTYPE_F32) {
        const float *y = (const float *)t->data + off;
        for (int64_t e = 0; e < n; e++) acc[e] += w * y[e];
        return;
    }
    if (s == 1 && t->dtype == TN_DTYPE_BF16) {
        const uint16_t *y = (const uint16_t *)t->data + off;
        for (int64_t e = 0; e < n; e++) acc[e] += w * tn_bf16_to_f32_inline(y[e]);
        return;
    }
    for (int64_t e = 0; e < n; e++) acc[e] += w * load_f(t, off + e * s);
}

/* The largest of x[0..n) (NaN never wins, as with a > b ? a : b), sixteen lanes at a time (the
 * loop over an array of sixteen partial maxima had stayed scalar). */
static inline float max_lanes(const float *x, int64_t n) {
    float part[16], best = -INFINITY;
    for (int l = 0; l < 16; l++) part[l] = -INFINITY;
    tn_v16 acc = v16_load(part);
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) acc = v16_max(acc, v16_load(x + j));
    v16_store(part, acc);
    for (; j < n; j++) best = x[j] > best ? x[j] : best;
    for (int l = 0; l < 16; l++) best = part[l] > best ? part[l] : best;
    return best;
}

/* Dropout (see tn/attention.h): f[j] = 1 / (1 - p) or 0 for keys j0 .. j0 + n of query row
 * (b, h, i), numbered as elements of the (B, Hq, L, S) probabilities; keep_from is
 * tn_philox_keep_from(1 - p). */
static inline void dropout_factors(const tn_attention *a, uint64_t keep_from, int64_t b, int64_t h, int64_t i, int64_t j0,
                            int64_t n, float *f) {
    int64_t Hq = a->q.sizes[1], L = a->q.sizes[2], S = a->k.sizes[2];
    float keep_scale = a->dropout_p < 1 ? (float)(1.0 / (1.0 - a->dropout_p)) : 0.0f;
    tn_dropout_factors(a->seed, a->offset, ((b * Hq + h) * L + i) * S + j0, n, keep_from, keep_scale, f);
}

/* Scaled score of query row (b, h, i) (already scaled in qf) against key j, with the bias. */
static inline float score(const tn_attention *a, const float *qf, int64_t b, int64_t h, int64_t hk, int64_t i,
                          int64_t j, int64_t e) {
    float s = dot_row(qf, &a->k, row_off(&a->k, b, hk, j), e);
    if (a->has_bias) s += load_f(&a->bias, row_off(&a->bias, b, h, i) + j * a->bias.strides[3]);
    return s;
}

static inline int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
static inline int64_t padded_keys(int64_t S) { return round_up(S, KB); }

/* How many of rows first .. first + w exist among total rows (0 past the end). */
static inline int64_t panel_rows(int64_t total, int64_t first, int64_t w) {
    return total - first < w ? (total - first > 0 ? total - first : 0) : w;
}

/* dst[e * w + r] = scale * rows[r * n + e] for r < count, zero for count <= r < w: a panel of w
 * rows (micro-kernel layout), written in order. */
static inline void to_panel(float *dst, const float *rows, int64_t count, int64_t w, int64_t n, float scale) {
    for (int64_t e = 0; e < n; e++) {
        int64_t r = 0;
        for (; r < count; r++) dst[e * w + r] = scale * rows[r * n + e];
        for (; r < w; r++) dst[e * w + r] = 0.0f;
    }
}

/* Rows first .. first + count (< w) of view x (b, h) into one panel of w rows over n (the
 * micro-kernel's layout dst[e * w + r]), times scale; zeros for the rest of the panel. */
static inline void rows_to_panel(float *dst, float *rows, const tn_tensor *x, int64_t b, int64_t h, int64_t first,
                          int64_t count, int64_t w, int64_t n, float scale) {
    for (int64_t r = 0; r < count; r++) load_row(rows + r * n, x, row_off(x, b, h, first + r), n);
    to_panel(dst, rows, count, w, n, scale);
}

/* The backward of this ISA (attention_backward.c), and its scratch in floats. */
void TN_CONCAT(tn_attention_backward_, TN_ROWS_ISA)(const tn_kernel_table *k, const tn_attention *a, float *scratch,
                                                    int32_t ith, int32_t nth);
int64_t TN_CONCAT(tn_attention_backward_scratch_, TN_ROWS_ISA)(const tn_attention *a);

#endif
