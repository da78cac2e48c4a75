/* Layer normalisation, forward and input gradient (see tn/norm.h). Rows are split across
 * threads. float32, bfloat16 and float16 rows go through the ISA's float32 row kernels
 * (rows.c; 16-bit rows widened into the scratch and narrowed back); float64 rows are
 * computed in double here. */
#include <math.h>

#include "elem.h"
#include "nontemporal.h"
#include "strided.h"
#include "table.h"
#include "tn/norm.h"

static inline double at(const void *p, int64_t i, tn_dtype t) {
    return tn_load((const char *)p + i * tn_dtype_size(t), t).re;
}

static inline void put(void *p, int64_t i, tn_dtype t, double v) {
    tn_value x = {v, 0, 0, 0};
    tn_store((char *)p + i * tn_dtype_size(t), t, x);
}

/* The dtype of the mean and rstd: the rows' for layer norm, float32 or float64 for RMS norm. */
static tn_dtype stats_dtype(const tn_layer_norm *ln) {
    return !ln->rms || ln->dtype == TN_DTYPE_F64 ? ln->dtype : TN_DTYPE_F32;
}

static void double_rows(const tn_layer_norm *ln, int backward, int64_t first, int64_t last) {
    int64_t n = ln->n;
    tn_dtype t = ln->dtype;
    for (int64_t r = first; r < last; r++) {
        int64_t base = r * n;
        if (!backward) {
            double sum = 0, sq = 0;
            for (int64_t i = 0; i < n && !ln->rms; i++) sum += at(ln->x, base + i, t);
            double mean = sum / (double)n;
            for (int64_t i = 0; i < n; i++) {
                double d = at(ln->x, base + i, t) - mean;
                sq += d * d;
            }
            double rstd = 1.0 / sqrt(sq / (double)n + ln->eps);
            for (int64_t i = 0; i < n; i++) {
                double v = (at(ln->x, base + i, t) - mean) * rstd;
                if (ln->weight) v *= at(ln->weight, i, t);
                if (ln->bias) v += at(ln->bias, i, t);
                put(ln->y, base + i, t, v);
            }
            if (!ln->rms) put(ln->mean, r, t, mean);
            put(ln->rstd, r, t, rstd);
            continue;
        }
        double mean = ln->rms ? 0.0 : at(ln->mean, r, t), rstd = at(ln->rstd, r, t);
        double a = 0, b = 0; /* mean of g*w and of g*w*xhat */
        for (int64_t i = 0; i < n; i++) {
            double gw = at(ln->grad, base + i, t) * (ln->weight ? at(ln->weight, i, t) : 1.0);
            double xhat = (at(ln->x, base + i, t) - mean) * rstd;
            a += gw;
            b += gw * xhat;
        }
        a = ln->rms ? 0.0 : a / (double)n;
        b /= (double)n;
        for (int64_t i = 0; i < n; i++) {
            double gw = at(ln->grad, base + i, t) * (ln->weight ? at(ln->weight, i, t) : 1.0);
            double xhat = (at(ln->x, base + i, t) - mean) * rstd;
            put(ln->y, base + i, t, rstd * (gw - a - xhat * b));
        }
    }
}

/* A float32 view of a row of p (16-bit rows widened into buf). */
static const float *f32_row(const tn_kernel_table *k, tn_dtype t, const void *p, int64_t off, int64_t n,
                            float *buf) {
    if (t == TN_DTYPE_F32) return (const float *)p + off;
    k->widen_half(t, n, buf, 1, (const uint16_t *)p + off, 1);
    return buf;
}

static void float_rows(const tn_layer_norm *ln, int backward, float *scratch, int64_t first, int64_t last) {
    const tn_kernel_table *k = tn_kernels();
    int64_t n = ln->n;
    tn_dtype t = ln->dtype;
    int half = t != TN_DTYPE_F32;
    tn_dtype st = stats_dtype(ln);
    /* scratch: the row of x; the row of g in the backward, or b widened once in the forward
     * (which has no g); the row of the result; w widened once */
    float *xs = scratch, *gs = scratch + n, *ys = scratch + 2 * n, *ws = scratch + 3 * n, *bs = gs;
    const float *w = ln->weight ? f32_row(k, t, ln->weight, 0, n, ws) : NULL;
    const float *b = !backward && ln->bias ? f32_row(k, t, ln->bias, 0, n, bs) : NULL;
    /* a float32 output too large for the cache is computed in the scratch and streamed out
     * (nontemporal.h): normal stores would read every output line first */
    int nt = !half && tn_nontemporal(ln->rows * n * (int64_t)sizeof(float));
    for (int64_t r = first; r < last; r++) {
        int64_t off = r * n;
        const float *x = f32_row(k, t, ln->x, off, n, xs);
        float *y = half || nt ? ys : (float *)ln->y + off;
        if (!backward) {
            double stats[2];
            k->layer_norm_f32(n, x, y, w, b, ln->eps, ln->rms, stats);
            if (!ln->rms) put(ln->mean, r, st, stats[0]);
            put(ln->rstd, r, st, stats[1]);
        } else {
            const float *g = f32_row(k, t, ln->grad, off, n, gs);
            float mean = ln->rms ? 0.0f : (float)at(ln->mean, r, st);
            k->layer_norm_backward_f32(n, x, g, w, mean, (float)at(ln->rstd, r, st), ln->rms, y);
        }
        if (half)
            k->narrow_half(t, n, (uint16_t *)ln->y + off, 1, y, 1);
        else if (nt)
            tn_copy_nontemporal((float *)ln->y + off, y, n * (int64_t)sizeof(float));
    }
    if (nt) tn_nontemporal_fence();
}

int64_t tn_layer_norm_scratch_floats(const tn_layer_norm *ln) {
    return ln->dtype == TN_DTYPE_F64 ? 0 : 4 * ln->n;
}

void tn_kernel_layer_norm(const tn_layer_norm *ln, int backward, float *scratch, int32_t ith, int32_t nth) {
    int64_t first, last;
    tn_slice(ln->n ? ln->rows : 0, ith, nth, &first, &last);
    if (first >= last) return;
    if (ln->dtype == TN_DTYPE_F64)
        double_rows(ln, backward, first, last);
    else
        float_rows(ln, backward, scratch, first, last);
}
