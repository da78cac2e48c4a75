/* The element loops of batch and group normalisation for one ISA variant (built once per ISA
 * like rows.c; channel_norm.c walks the planes and computes the statistics): a plane's moments
 * and its affine pass. float32 and 16-bit planes are computed in float about a pivot near the
 * mean (chunks' sums folded in double), float64 planes in double. */
#include <string.h>

#include "table.h"

#ifndef TN_ROWS_ISA
#error "compile with -DTN_ROWS_ISA=ref|avx2|avx512"
#endif
#define TN_CONCAT_(a, b) a##b
#define TN_CONCAT(a, b) TN_CONCAT_(a, b)

enum { CHUNK = 256 };

/* sum of v[0..m) in eight lanes: the adds vectorise, where one chain waits on each add */
static double lane_sum(const double *v, int64_t m) {
    double acc[8] = {0};
    int64_t j = 0;
    for (; j + 8 <= m; j += 8)
        for (int l = 0; l < 8; l++) acc[l] += v[j + l];
    for (; j < m; j++) acc[j % 8] += v[j];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/* the same over floats in sixteen lanes, folded in double: one chunk's partial sums stay short */
static double lane_sum_f32(const float *v, int64_t m) {
    float acc[16] = {0};
    int64_t j = 0;
    for (; j + 16 <= m; j += 16)
        for (int l = 0; l < 16; l++) acc[l] += v[j + l];
    for (; j < m; j++) acc[j % 16] += v[j];
    double d = 0;
    for (int l = 0; l < 16; l++) d += acc[l];
    return d;
}

/* chunk [off, off + m) of a float32 or 16-bit plane as floats (16-bit ones widened into f) */
static const float *chunk_f32(tn_dtype t, const void *p, int64_t off, int64_t m, float *f) {
    if (t == TN_DTYPE_F32) return (const float *)p + off;
    tn_kernels()->widen_half(t, m, f, 1, (const uint16_t *)p + off, 1);
    return f;
}

/* float64 planes, in double */
static void moments_f64(int64_t s, const double *x, const double *g, double mean, double out[2]) {
    _Alignas(64) double d[CHUNK];
    double a = 0, b = 0;
    if (!g) {
        for (int64_t i = 0; i < s; i += CHUNK) a += lane_sum(x + i, s - i < CHUNK ? s - i : CHUNK);
        a /= (double)s;
        for (int64_t i = 0; i < s; i += CHUNK) {
            int64_t m = s - i < CHUNK ? s - i : CHUNK;
            for (int64_t j = 0; j < m; j++) d[j] = (x[i + j] - a) * (x[i + j] - a);
            b += lane_sum(d, m);
        }
    } else {
        for (int64_t i = 0; i < s; i += CHUNK) {
            int64_t m = s - i < CHUNK ? s - i : CHUNK;
            a += lane_sum(g + i, m);
            for (int64_t j = 0; j < m; j++) d[j] = g[i + j] * (x[i + j] - mean);
            b += lane_sum(d, m);
        }
    }
    out[0] = a, out[1] = b;
}

/* Float32 and 16-bit planes in float, about a float pivot so that a large mean never meets the
 * small deviations in one float: the first pass sums x - x[0] (mean = x[0] + that / s), the
 * second (x - c)^2 for c = the mean rounded to float, and sum (x - mean)^2 = sum (x - c)^2 -
 * s (mean - c)^2 exactly; the backward's sum of g (x - mean) is sum g (x - c) - (mean - c)
 * sum g. Each chunk's sums are float lanes, folded into double. */
static void moments_f32(tn_dtype t, int64_t s, const void *x, const void *g, double mean, double out[2]) {
    _Alignas(64) float fx[CHUNK], fg[CHUNK], d[CHUNK];
    double a = 0, b = 0;
    if (!g) {
        float x0 = chunk_f32(t, x, 0, 1, fx)[0];
        for (int64_t i = 0; i < s; i += CHUNK) {
            int64_t m = s - i < CHUNK ? s - i : CHUNK;
            const float *v = chunk_f32(t, x, i, m, fx);
            for (int64_t j = 0; j < m; j++) d[j] = v[j] - x0;
            a += lane_sum_f32(d, m);
        }
        a = (double)x0 + a / (double)s;
        float c = (float)a;
        for (int64_t i = 0; i < s; i += CHUNK) {
            int64_t m = s - i < CHUNK ? s - i : CHUNK;
            const float *v = chunk_f32(t, x, i, m, fx);
            for (int64_t j = 0; j < m; j++) d[j] = (v[j] - c) * (v[j] - c);
            b += lane_sum_f32(d, m);
        }
        b -= (double)s * (a - (double)c) * (a - (double)c);
        b = b > 0 ? b : 0;
    } else {
        float c = (float)mean;
        double gx = 0;
        for (int64_t i = 0; i < s; i += CHUNK) {
            int64_t m = s - i < CHUNK ? s - i : CHUNK;
            const float *v = chunk_f32(t, x, i, m, fx), *w = chunk_f32(t, g, i, m, fg);
            a += lane_sum_f32(w, m);
            for (int64_t j = 0; j < m; j++) d[j] = w[j] * (v[j] - c);
            gx += lane_sum_f32(d, m);
        }
        b = gx - (mean - (double)c) * a;
    }
    out[0] = a, out[1] = b;
}

static void plane_moments(tn_dtype t, int64_t s, const void *x, const void *g, double mean, double out[2]) {
    if (t == TN_DTYPE_F64)
        moments_f64(s, x, g, mean, out);
    else
        moments_f32(t, s, x, g, mean, out);
}

/* y = k0 g + k1 (x - k3) + k2 (k0 (x - k3) + k1 without g), k3 the pivot: the float64 mean,
 * or the mean rounded to float, so x - k3 is small where x sits on a large mean */
static void plane_affine(tn_dtype t, int64_t s, const void *x, const void *g, const double k[4], void *y) {
    if (t == TN_DTYPE_F64) {
        const double *xd = x, *gd = g;
        double *yd = y;
        if (g)
            for (int64_t i = 0; i < s; i++) yd[i] = k[0] * gd[i] + k[1] * (xd[i] - k[3]) + k[2];
        else
            for (int64_t i = 0; i < s; i++) yd[i] = k[0] * (xd[i] - k[3]) + k[1];
        return;
    }
    _Alignas(64) float fx[CHUNK], fg[CHUNK], r[CHUNK];
    const float k0 = (float)k[0], k1 = (float)k[1], k2 = (float)k[2], c = (float)k[3];
    for (int64_t i = 0; i < s; i += CHUNK) {
        int64_t m = s - i < CHUNK ? s - i : CHUNK;
        const float *v = chunk_f32(t, x, i, m, fx);
        float *o = t == TN_DTYPE_F32 ? (float *)y + i : r;
        if (g) {
            const float *w = chunk_f32(t, g, i, m, fg);
            for (int64_t j = 0; j < m; j++) o[j] = k0 * w[j] + k1 * (v[j] - c) + k2;
        } else {
            for (int64_t j = 0; j < m; j++) o[j] = k0 * (v[j] - c) + k1;
        }
        if (t != TN_DTYPE_F32) tn_kernels()->narrow_half(t, m, (uint16_t *)y + i, 1, r, 1);
    }
}

void TN_CONCAT(tn_channel_norm_install_, TN_ROWS_ISA)(tn_kernel_table *t) {
    t->plane_moments = plane_moments;
    t->plane_affine = plane_affine;
}
