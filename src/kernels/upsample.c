/* 2-D nearest, bilinear and bicubic upsampling and their input gradients (see tn/upsample.h), planes
 * split across threads. Each slice maps the output rows and columns to their sources once
 * (into its scratch), then walks its planes; values go through doubles. */
#include <math.h>
#include <string.h>

#include "strided.h"
#include "table.h"
#include "tn/upsample.h"

enum { TAPS = 4 }; /* the most an output index reads per axis (bicubic) */

/* Where output index o of an axis reads: idx[t][o] with weight w[t][o], for t < taps. */
typedef struct axis {
    int taps;
    int64_t *idx[TAPS];
    double *w[TAPS];
} axis;

/* The CPU's nearest index (a float computation) */
static int64_t nearest_index(tn_upsample_mode mode, int64_t o, int64_t in, int64_t out, double scale) {
    float s = scale > 0 ? (float)(1.0 / scale) : (float)in / (float)out;
    int64_t i;
    if (mode == TN_UPSAMPLE_NEAREST_EXACT)
        i = (int64_t)floorf((float)(((double)o + 0.5) * s));
    else if (out == in)
        i = o;
    else if (out == 2 * in)
        i = o >> 1;
    else
        i = (int64_t)floorf((float)o * s);
    return i < in - 1 ? i : in - 1;
}

/* The CPU's source position of output o (linear and cubic interpolation), in float (f64 0) or
 * double (f64 1); bilinear clamps it at 0, bicubic does not */
static double source_position(int f64, int align, int cubic, int64_t o, int64_t in, int64_t out, double scale) {
    if (f64) {
        double s = align ? (out > 1 ? (double)(in - 1) / (double)(out - 1) : 0.0)
                         : (scale > 0 ? 1.0 / scale : (double)in / (double)out);
        double r = align ? s * (double)o : s * ((double)o + 0.5) - 0.5;
        return !cubic && r < 0 ? 0 : r;
    }
    float s = align ? (out > 1 ? (float)(in - 1) / (float)(out - 1) : 0.0f)
                    : (scale > 0 ? (float)(1.0 / scale) : (float)in / (float)out);
    float r = align ? s * (float)o : s * ((float)o + 0.5f) - 0.5f;
    return !cubic && r < 0 ? 0 : r;
}

/* The bilinear source i0 and weight l1 of output o (the CPU's float or double arithmetic) */
static void linear_source(int f64, int align, int64_t o, int64_t in, int64_t out, double scale, int64_t *i0,
                          double *l1) {
    if (out == in) {
        *i0 = o, *l1 = 0.0;
        return;
    }
    double r = source_position(f64, align, 0, o, in, out, scale);
    int64_t i = (int64_t)floorf((float)r);
    *i0 = i < in - 1 ? i : in - 1;
    double l = f64 ? r - (double)*i0 : (double)((float)r - (float)*i0);
    *l1 = l < 0 ? 0 : (l > 1 ? 1 : l);
}

/* Keys' cubic convolution weights (a = -0.75) of the four taps around t in [0, 1], as the
 * CPU computes them (in float, or double for float64) */
#define TN_CUBIC_WEIGHTS(T)                                                                  \
    do {                                                                                     \
        const T a = (T)-0.75, x = (T)t, y = (T)1 - x;                                        \
        w[0] = (double)(((a * (x + 1) - 5 * a) * (x + 1) + 8 * a) * (x + 1) - 4 * a);        \
        w[1] = (double)(((a + 2) * x - (a + 3)) * x * x + 1);                                \
        w[2] = (double)(((a + 2) * y - (a + 3)) * y * y + 1);                                \
        w[3] = (double)(((a * (y + 1) - 5 * a) * (y + 1) + 8 * a) * (y + 1) - 4 * a);        \
    } while (0)
static void cubic_weights(int f64, double t, double w[4]) {
    if (f64)
        TN_CUBIC_WEIGHTS(double);
    else
        TN_CUBIC_WEIGHTS(float);
}
#undef TN_CUBIC_WEIGHTS

static void map_axis(const tn_upsample2d *u, int f64, int64_t in, int64_t out, double scale, axis *a) {
    for (int64_t o = 0; o < out; o++) {
        if (u->mode == TN_UPSAMPLE_BICUBIC) {
            double r = source_position(f64, u->align_corners, 1, o, in, out, scale), w[4];
            int64_t i = (int64_t)floor(r);
            i = i < in - 1 ? i : in - 1;
            double t = f64 ? r - (double)i : (double)((float)r - (float)i);
            cubic_weights(f64, t < 0 ? 0 : (t > 1 ? 1 : t), w);
            for (int k = 0; k < 4; k++) {
                int64_t j = i - 1 + k;
                a->idx[k][o] = j < 0 ? 0 : (j > in - 1 ? in - 1 : j);
                a->w[k][o] = w[k];
            }
            continue;
        }
        int64_t i0;
        double l1;
        if (u->mode == TN_UPSAMPLE_BILINEAR) {
            linear_source(f64, u->align_corners, o, in, out, scale, &i0, &l1);
        } else {
            i0 = nearest_index(u->mode, o, in, out, scale);
            l1 = 0.0;
        }
        a->idx[0][o] = i0; /* a second source only where it has weight: 0 * inf would be NaN */
        a->idx[1][o] = u->mode == TN_UPSAMPLE_BILINEAR && out != in && i0 < in - 1 ? i0 + 1 : i0;
        a->w[1][o] = l1;
        a->w[0][o] = f64 ? 1.0 - l1 : (double)(1.0f - (float)l1);
    }
}

static int taps_of(tn_upsample_mode mode) {
    return mode == TN_UPSAMPLE_BICUBIC ? 4 : mode == TN_UPSAMPLE_BILINEAR ? 2 : 1;
}

int64_t tn_upsample2d_scratch_bytes(const tn_upsample2d *u) {
    int64_t maps = TAPS * (u->out_h + u->out_w) * (int64_t)(sizeof(int64_t) + sizeof(double));
    return maps + (u->in_h * u->in_w + u->out_w) * (int64_t)sizeof(double);
}

/* n elements of p from element `at` as doubles (16-bit ones widened through floats) */
static void load(tn_dtype t, const void *p, int64_t at, int64_t n, double *restrict d) {
    if (t == TN_DTYPE_F64) {
        memcpy(d, (const double *)p + at, (size_t)n * sizeof(double));
    } else if (t == TN_DTYPE_F32) {
        const float *f = (const float *)p + at;
        for (int64_t i = 0; i < n; i++) d[i] = f[i];
    } else {
        float f[256];
        for (int64_t i = 0; i < n; i += 256) {
            int64_t m = n - i < 256 ? n - i : 256;
            tn_kernels()->widen_half(t, m, f, 1, (const uint16_t *)p + at + i, 1);
            for (int64_t j = 0; j < m; j++) d[i + j] = f[j];
        }
    }
}

/* n doubles into p from element `at`, each rounded once to t */
static void store(tn_dtype t, void *p, int64_t at, int64_t n, const double *restrict d) {
    if (t == TN_DTYPE_F64) {
        memcpy((double *)p + at, d, (size_t)n * sizeof(double));
    } else if (t == TN_DTYPE_F32) {
        float *f = (float *)p + at;
        for (int64_t i = 0; i < n; i++) f[i] = (float)d[i];
    } else {
        float f[256];
        for (int64_t i = 0; i < n; i += 256) {
            int64_t m = n - i < 256 ? n - i : 256;
            for (int64_t j = 0; j < m; j++) f[j] = (float)d[i + j];
            tn_kernels()->narrow_half(t, m, (uint16_t *)p + at + i, 1, f, 1);
        }
    }
}

/* nearest forward: element copies, any dtype */
#define TN_NEAREST_ROWS(T)                                                                   \
    for (int64_t oh = 0; oh < u->out_h; oh++) {                                              \
        const T *row = (const T *)src + h->idx[0][oh] * u->in_w;                                \
        T *o = (T *)dst + oh * u->out_w;                                                     \
        for (int64_t ow = 0; ow < u->out_w; ow++) o[ow] = row[w->idx[0][ow]];                  \
    }
static void nearest_plane(const tn_upsample2d *u, const axis *h, const axis *w, int32_t es, void *dst,
                          const void *src) {
    switch (es) {
    case 1: TN_NEAREST_ROWS(uint8_t) break;
    case 2: TN_NEAREST_ROWS(uint16_t) break;
    case 4: TN_NEAREST_ROWS(uint32_t) break;
    default: TN_NEAREST_ROWS(uint64_t) break;
    }
}
#undef TN_NEAREST_ROWS

/* bilinear (taps 2) and bicubic (taps 4) forward: each output the row taps' weighted sum of
 * the column taps' weighted sums. Inlined with taps a constant, so the tap loops unroll (a
 * loop over a run-time count cost bilinear a third of its speed). */
static inline __attribute__((always_inline)) void taps_plane(const tn_upsample2d *u, const axis *h, const axis *w,
                                                             tn_dtype t, void *dst, const void *src, double *plane,
                                                             double *row, const int taps) {
    load(t, src, 0, u->in_h * u->in_w, plane);
    const int64_t *wi[TAPS];
    const double *ww[TAPS];
    for (int b = 0; b < taps; b++) wi[b] = w->idx[b], ww[b] = w->w[b];
    for (int64_t oh = 0; oh < u->out_h; oh++) {
        const double *r[TAPS];
        double wh[TAPS];
        for (int a = 0; a < taps; a++) r[a] = plane + h->idx[a][oh] * u->in_w, wh[a] = h->w[a][oh];
        for (int64_t ow = 0; ow < u->out_w; ow++) {
            double sum = 0;
            for (int a = 0; a < taps; a++) {
                double across = 0;
                for (int b = 0; b < taps; b++) across += ww[b][ow] * r[a][wi[b][ow]];
                sum += wh[a] * across;
            }
            row[ow] = sum;
        }
        store(t, dst, oh * u->out_w, u->out_w, row);
    }
}

static void linear_plane(const tn_upsample2d *u, const axis *h, const axis *w, tn_dtype t, void *dst,
                         const void *src, double *plane, double *row) {
    if (h->taps == 4)
        taps_plane(u, h, w, t, dst, src, plane, row, 4);
    else
        taps_plane(u, h, w, t, dst, src, plane, row, 2);
}

/* the input gradient of one plane, accumulated in double (taps a constant, as taps_plane) */
static inline __attribute__((always_inline)) void taps_backward(const tn_upsample2d *u, const axis *h,
                                                                const axis *w, double *plane, const double *row,
                                                                int64_t oh, const int taps) {
    double *r[TAPS], wh[TAPS];
    const int64_t *wi[TAPS];
    const double *ww[TAPS];
    for (int a = 0; a < taps; a++) r[a] = plane + h->idx[a][oh] * u->in_w, wh[a] = h->w[a][oh];
    for (int b = 0; b < taps; b++) wi[b] = w->idx[b], ww[b] = w->w[b];
    for (int64_t ow = 0; ow < u->out_w; ow++)
        for (int a = 0; a < taps; a++) {
            double g = row[ow] * wh[a];
            for (int b = 0; b < taps; b++) r[a][wi[b][ow]] += g * ww[b][ow];
        }
}

static void backward_plane(const tn_upsample2d *u, const axis *h, const axis *w, tn_dtype t, void *gin,
                           const void *gout, double *plane, double *row) {
    int64_t n = u->in_h * u->in_w;
    for (int64_t i = 0; i < n; i++) plane[i] = 0.0;
    for (int64_t oh = 0; oh < u->out_h; oh++) {
        load(t, gout, oh * u->out_w, u->out_w, row);
        if (h->taps == 1) { /* nearest: one source, weight 1 */
            double *r0 = plane + h->idx[0][oh] * u->in_w;
            for (int64_t ow = 0; ow < u->out_w; ow++) r0[w->idx[0][ow]] += row[ow];
        } else if (h->taps == 2) {
            taps_backward(u, h, w, plane, row, oh, 2);
        } else {
            taps_backward(u, h, w, plane, row, oh, 4);
        }
    }
    store(t, gin, 0, n, plane);
}

void tn_kernel_upsample2d(const tn_upsample2d *u, tn_dtype dtype, int backward, void *dst, const void *src,
                          void *scratch, int32_t ith, int32_t nth) {
    int64_t first, last;
    tn_slice(u->planes, ith, nth, &first, &last);
    if (first >= last) return;
    int f64 = dtype == TN_DTYPE_F64;
    int64_t *ints = scratch;
    double *reals = (double *)(ints + TAPS * (u->out_h + u->out_w));
    axis h, w;
    h.taps = w.taps = taps_of(u->mode);
    for (int k = 0; k < TAPS; k++) {
        h.idx[k] = ints + k * u->out_h, h.w[k] = reals + k * u->out_h;
        w.idx[k] = ints + TAPS * u->out_h + k * u->out_w, w.w[k] = reals + TAPS * u->out_h + k * u->out_w;
    }
    double *plane = reals + TAPS * (u->out_h + u->out_w), *row = plane + u->in_h * u->in_w;
    map_axis(u, f64, u->in_h, u->out_h, u->scale_h, &h);
    map_axis(u, f64, u->in_w, u->out_w, u->scale_w, &w);
    int32_t es = tn_dtype_size(dtype);
    int64_t in_plane = u->in_h * u->in_w, out_plane = u->out_h * u->out_w;
    for (int64_t p = first; p < last; p++) {
        if (backward)
            backward_plane(u, &h, &w, dtype, (char *)dst + p * in_plane * es, (const char *)src + p * out_plane * es,
                           plane, row);
        else if (u->mode == TN_UPSAMPLE_BILINEAR || u->mode == TN_UPSAMPLE_BICUBIC)
            linear_plane(u, &h, &w, dtype, (char *)dst + p * out_plane * es, (const char *)src + p * in_plane * es,
                         plane, row);
        else
            nearest_plane(u, &h, &w, es, (char *)dst + p * out_plane * es, (const char *)src + p * in_plane * es);
    }
}
