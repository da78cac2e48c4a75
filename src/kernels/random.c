/* Philox-4x32-10 and the uniform / normal kernels built on it (see tn/random.h). */
#include <math.h>

#include <string.h>

#include "elem.h"
#include "philox.h"
#include "strided.h"
#include "table.h"
#include "tn/kernels.h"

void tn_philox4x32_10(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]) {
    uint64_t blk = counter[0] | (uint64_t)counter[1] << 32, offset = counter[2] | (uint64_t)counter[3] << 32;
    tn_philox_block(key[0] | (uint64_t)key[1] << 32, offset, blk, out);
}

/* Four uniform draws in (0, 1] for block `blk`, 24 bits for float dtypes, 32 for double. */
static void block_uniforms(uint64_t seed, uint64_t offset, int64_t blk, double u[4]) {
    uint32_t ctr[4] = {(uint32_t)blk, (uint32_t)((uint64_t)blk >> 32), (uint32_t)offset,
                       (uint32_t)(offset >> 32)};
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    uint32_t r[4];
    tn_philox4x32_10(ctr, key, r);
    for (int k = 0; k < 4; k++) u[k] = ((double)r[k] + 1.0) * (1.0 / 4294967296.0);
}

/* Value of element `i` (in logical order) of a draw. */
static double draw(uint64_t seed, uint64_t offset, int64_t i, int normal, double a, double b) {
    double u[4];
    block_uniforms(seed, offset, i / 4, u);
    int lane = (int)(i % 4);
    if (!normal) return a + (b - a) * (1.0 - u[lane]); /* [a, b) */
    /* Box-Muller on lane pairs (0,1) and (2,3). */
    int pair = lane & 2;
    double radius = sqrt(-2.0 * log(u[pair]));
    double angle = 6.283185307179586 * u[pair + 1];
    return a + b * radius * ((lane & 1) ? sin(angle) : cos(angle));
}

static void fill_random(const tn_tensor *dst, uint64_t seed, uint64_t offset, int normal,
                        double a, double b, int32_t ith, int32_t nth) {
    /* Elements are numbered in logical (row-major) order, so a draw does not depend on the
     * destination's strides. */
    int64_t numel = tn_tensor_numel(dst), first, last;
    int32_t es = tn_dtype_size(dst->dtype);
    tn_slice(numel, ith, nth, &first, &last);
    if (dst->dtype == TN_DTYPE_F32 || dst->dtype == TN_DTYPE_BF16 || dst->dtype == TN_DTYPE_F16) {
        enum { N = 4 * TN_PHILOX_LANES };
        const tn_kernel_table *k = tn_kernels();
        int contiguous = tn_row_major(dst);
        float v[N];
        for (int64_t base = first / 4 * 4; base < last; base += N) {
            k->draw_floats(seed, offset, base, normal, a, b, v);
            int64_t lo = base > first ? base : first, hi = last < base + N ? last : base + N;
            if (contiguous && dst->dtype == TN_DTYPE_F32) {
                memcpy((float *)dst->data + lo, v + (lo - base), sizeof(float) * (size_t)(hi - lo));
            } else if (contiguous) {
                k->narrow_half(dst->dtype, hi - lo, (uint16_t *)dst->data + lo, 1, v + (lo - base), 1);
            } else {
                for (int64_t i = lo; i < hi; i++) {
                    tn_value x = {v[i - base], 0, 0, 0};
                    tn_store((char *)dst->data + tn_row_offset(dst, i, 0) * es, dst->dtype, x);
                }
            }
        }
        return;
    }
    for (int64_t i = first; i < last; i++) {
        int64_t off = tn_row_offset(dst, i, 0);
        tn_value v = {draw(seed, offset, i, normal, a, b), 0, 0, 0};
        tn_store((char *)dst->data + off * es, dst->dtype, v);
    }
}

void tn_kernel_uniform(const tn_tensor *dst, uint64_t seed, uint64_t offset, double from,
                       double to, int32_t ith, int32_t nth) {
    fill_random(dst, seed, offset, 0, from, to, ith, nth);
}

void tn_kernel_normal(const tn_tensor *dst, uint64_t seed, uint64_t offset, double mean,
                      double std, int32_t ith, int32_t nth) {
    fill_random(dst, seed, offset, 1, mean, std, ith, nth);
}

int tn_kernel_multinomial(const tn_tensor *out, const tn_tensor *probs, int32_t replacement,
                          uint64_t seed, uint64_t offset, double *weights, int32_t ith, int32_t nth) {
    int64_t rows = probs->ndim == 2 ? probs->sizes[0] : 1;
    int64_t n = probs->sizes[probs->ndim - 1], k = out->sizes[out->ndim - 1];
    int64_t ps = probs->strides[probs->ndim - 1], prs = probs->ndim == 2 ? probs->strides[0] : 0;
    int64_t os = out->strides[out->ndim - 1], ors = out->ndim == 2 ? out->strides[0] : 0;
    int32_t es = tn_dtype_size(probs->dtype);
    int bad = 0;
    int64_t first, last;
    tn_slice(rows, ith, nth, &first, &last);
    for (int64_t r = first; r < last; r++) {
        const char *p = (const char *)probs->data + r * prs * es;
        double total = 0;
        for (int64_t i = 0; i < n; i++) {
            double w = tn_load(p + i * ps * es, probs->dtype).re;
            if (!(w >= 0) || w == INFINITY) bad = 1;
            weights[i] = w;
            total += w;
        }
        int64_t *o = (int64_t *)out->data + r * ors;
        for (int64_t s = 0; s < k; s++) {
            if (!(total > 0)) {
                bad = 1;
                o[s * os] = 0;
                continue;
            }
            double u[4];
            block_uniforms(seed, offset, r * k + s, u);
            double target = (1.0 - u[0]) * total, acc = 0;
            int64_t pick = -1;
            for (int64_t i = 0; i < n; i++) {
                acc += weights[i];
                if (weights[i] > 0) pick = i; /* the last positive weight catches rounding */
                if (weights[i] > 0 && acc > target) break;
            }
            o[s * os] = pick;
            if (!replacement && pick >= 0) {
                total -= weights[pick];
                weights[pick] = 0;
            }
        }
    }
    return bad;
}

void tn_kernel_random_int(const tn_tensor *dst, uint64_t seed, uint64_t offset, int64_t from,
                          uint64_t range, int32_t ith, int32_t nth) {
    int64_t numel = tn_tensor_numel(dst), first, last;
    int32_t es = tn_dtype_size(dst->dtype);
    tn_slice(numel, ith, nth, &first, &last);
    for (int64_t i = first; i < last; i++) {
        /* 64 random bits from two lanes of element i's block pair */
        uint32_t ctr[4] = {(uint32_t)i, (uint32_t)((uint64_t)i >> 32), (uint32_t)offset, (uint32_t)(offset >> 32)};
        uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)}, r[4];
        tn_philox4x32_10(ctr, key, r);
        uint64_t bits = ((uint64_t)r[0] << 32) | r[1];
        int64_t off = tn_row_offset(dst, i, 0);
        tn_value v = {0, 0, (int64_t)((uint64_t)from + bits % range), 1};
        v.re = (double)v.i;
        tn_store((char *)dst->data + off * es, dst->dtype, v);
    }
}

/* Uniform in [0, 1) for element i, reusing the block of four draws across calls. */
static double uniform01(uint64_t seed, uint64_t offset, int64_t i, int64_t *blk, double u[4]) {
    if (*blk != i / 4) {
        *blk = i / 4;
        block_uniforms(seed, offset, *blk, u);
    }
    return 1.0 - u[i % 4];
}

int tn_kernel_bernoulli(const tn_tensor *dst, const tn_tensor *probs, double p, uint64_t seed,
                        uint64_t offset, int32_t ith, int32_t nth) {
    int64_t numel = tn_tensor_numel(dst), first, last, blk = -1;
    int32_t es = tn_dtype_size(dst->dtype), pes = probs ? tn_dtype_size(probs->dtype) : 0;
    double u[4];
    int bad = 0;
    tn_slice(numel, ith, nth, &first, &last);
    for (int64_t i = first; i < last; i++) {
        double q = probs ? tn_load((const char *)probs->data + tn_row_offset(probs, i, 0) * pes, probs->dtype).re : p;
        if (!(q >= 0 && q <= 1)) bad = 1;
        tn_value v = {0, 0, uniform01(seed, offset, i, &blk, u) < q, 1};
        v.re = (double)v.i;
        tn_store((char *)dst->data + tn_row_offset(dst, i, 0) * es, dst->dtype, v);
    }
    return bad;
}

void tn_kernel_dropout(const tn_tensor *out, const tn_tensor *mask, const tn_tensor *in, double p,
                       uint64_t seed, uint64_t offset, int32_t ith, int32_t nth) {
    enum { CHUNK = 4 * TN_PHILOX_LANES };
    int64_t numel = tn_tensor_numel(out), first, last;
    int32_t es = tn_dtype_size(out->dtype);
    double scale = p < 1 ? 1.0 / (1.0 - p) : 0.0;
    uint64_t keep_from = tn_philox_keep_from(1.0 - p);
    int in_float = out->dtype != TN_DTYPE_F64; /* PyTorch scales halves and floats in float */
    float keep[CHUNK];
    tn_slice(numel, ith, nth, &first, &last);
    /* contiguous float32 or bfloat16 (activations): the ISA's typed rows (the per-element
     * loader and offset arithmetic below had made BERT's dropouts 6% of a training step) */
    int same = in->dtype == out->dtype && (out->dtype == TN_DTYPE_F32 || out->dtype == TN_DTYPE_BF16);
    if (same && tn_row_major(out) && tn_row_major(in) && tn_row_major(mask)) {
        if (first < last)
            tn_kernels()->dropout_rows(seed, offset, first, last - first, keep_from, (float)scale,
                                       out->dtype == TN_DTYPE_BF16, in->data, out->data, (uint8_t *)mask->data);
        return;
    }
    for (int64_t i0 = first; i0 < last; i0 += CHUNK) {
        int64_t n = last - i0 < CHUNK ? last - i0 : CHUNK;
        tn_dropout_factors(seed, offset, i0, n, keep_from, 1.0f, keep); /* philox.h's rule */
        for (int64_t j = 0; j < n; j++) {
            int64_t i = i0 + j;
            double x = tn_load((const char *)in->data + tn_row_offset(in, i, 0) * es, in->dtype).re;
            tn_value v = {keep[j] != 0 ? (in_float ? (double)((float)x * (float)scale) : x * scale) : 0.0, 0, 0, 0};
            tn_store((char *)out->data + tn_row_offset(out, i, 0) * es, out->dtype, v);
            ((uint8_t *)mask->data)[tn_row_offset(mask, i, 0)] = (uint8_t)(keep[j] != 0);
        }
    }
}
