/* Batch and group normalisation (see tn/channel_norm.h): per-plane sums split across threads,
 * the statistics and per-plane coefficients once, then one pass of y = a x + b (forward) or
 * dx = A dy + B x + C (backward) per plane. Elements go through chunks of doubles, so every
 * dtype shares one code path and sums never lose the small terms. */
#include <math.h>
#include <string.h>

#include "elem.h"
#include "strided.h"
#include "table.h"
#include "tn/channel_norm.h"

enum { CHUNK = 256 };

/* elements [off, off + m) of p as doubles */
static void load(tn_dtype t, const void *p, int64_t off, int64_t m, double *d, float *f) {
    if (t == TN_DTYPE_F64) {
        memcpy(d, (const double *)p + off, (size_t)m * sizeof(double));
        return;
    }
    const float *src = (const float *)p + off;
    if (t != TN_DTYPE_F32) {
        tn_kernels()->widen_half(t, m, f, 1, (const uint16_t *)p + off, 1);
        src = f;
    }
    for (int64_t i = 0; i < m; i++) d[i] = src[i];
}

static void store(tn_dtype t, void *p, int64_t off, int64_t m, const double *d, float *f) {
    if (t == TN_DTYPE_F64) {
        memcpy((double *)p + off, d, (size_t)m * sizeof(double));
        return;
    }
    float *dst = t == TN_DTYPE_F32 ? (float *)p + off : f;
    for (int64_t i = 0; i < m; i++) dst[i] = (float)d[i];
    if (t != TN_DTYPE_F32) tn_kernels()->narrow_half(t, m, (uint16_t *)p + off, 1, f, 1);
}

static double param(const tn_channel_norm *cn, const void *p, int64_t i, double none) {
    return p ? tn_load((const char *)p + i * tn_dtype_size(cn->param_dtype), cn->param_dtype).re : none;
}

static void put(const tn_channel_norm *cn, void *p, int64_t i, double v) {
    if (!p) return;
    tn_value x = {v, 0, 0, 0};
    tn_store((char *)p + i * tn_dtype_size(cn->param_dtype), cn->param_dtype, x);
}

/* The statistics group of plane p: its channel (batch norm) or its sample's group. */
static int64_t stat_of(const tn_channel_norm *cn, int64_t p) {
    int64_t ci = p % cn->c;
    return cn->groups ? (p / cn->c) * cn->groups + ci / (cn->c / cn->groups) : ci;
}

/* mean and rstd of a statistics group, as the backward (and batch norm's evaluation) reads
 * them: the running statistics in evaluation, else what the forward wrote */
static void read_stats(const tn_channel_norm *cn, int64_t k, double *mean, double *rstd) {
    if (!cn->groups && !cn->training) {
        *mean = param(cn, cn->running_mean, k, 0.0);
        *rstd = 1.0 / sqrt(param(cn, cn->running_var, k, 1.0) + cn->eps);
    } else {
        *mean = param(cn, cn->mean, k, 0.0);
        *rstd = param(cn, cn->rstd, k, 1.0);
    }
}

void tn_kernel_channel_norm_sums(const tn_channel_norm *cn, int backward, double *work, int32_t ith, int32_t nth) {
    int64_t first, last, s = cn->s;
    tn_slice(cn->n * cn->c, ith, nth, &first, &last);
    double xs[CHUNK], gs[CHUNK];
    float f[CHUNK];
    for (int64_t p = first; p < last; p++) {
        int64_t base = p * s;
        double a = 0, b = 0;
        if (!backward) { /* the plane's mean, then its sum of squared deviations */
            for (int64_t i = 0; i < s; i += CHUNK) {
                int64_t m = s - i < CHUNK ? s - i : CHUNK;
                load(cn->dtype, cn->x, base + i, m, xs, f);
                for (int64_t j = 0; j < m; j++) a += xs[j];
            }
            a /= (double)s;
            for (int64_t i = 0; i < s; i += CHUNK) {
                int64_t m = s - i < CHUNK ? s - i : CHUNK;
                load(cn->dtype, cn->x, base + i, m, xs, f);
                for (int64_t j = 0; j < m; j++) b += (xs[j] - a) * (xs[j] - a);
            }
        } else { /* sum of dy, and of dy * (x - mean) about the forward's mean */
            double mean, rstd;
            read_stats(cn, stat_of(cn, p), &mean, &rstd);
            for (int64_t i = 0; i < s; i += CHUNK) {
                int64_t m = s - i < CHUNK ? s - i : CHUNK;
                load(cn->dtype, cn->x, base + i, m, xs, f);
                load(cn->dtype, cn->grad, base + i, m, gs, f);
                for (int64_t j = 0; j < m; j++) {
                    a += gs[j];
                    b += gs[j] * (xs[j] - mean);
                }
            }
        }
        work[3 * p] = a;
        work[3 * p + 1] = b;
    }
}

/* The planes of statistics group k: count of them, first, and the step between them. */
static void group_planes(const tn_channel_norm *cn, int64_t k, int64_t *count, int64_t *first, int64_t *step) {
    if (cn->groups) {
        int64_t per = cn->c / cn->groups;
        *count = per, *first = (k / cn->groups) * cn->c + (k % cn->groups) * per, *step = 1;
    } else {
        *count = cn->n, *first = k, *step = cn->c;
    }
}

static void forward_coefficients(const tn_channel_norm *cn, double *work) {
    int64_t stats = cn->groups ? cn->n * cn->groups : cn->c;
    for (int64_t k = 0; k < stats; k++) {
        int64_t count, first, step;
        group_planes(cn, k, &count, &first, &step);
        double mean, rstd;
        if (!cn->groups && !cn->training) {
            read_stats(cn, k, &mean, &rstd);
        } else { /* Chan's rule over planes of equal size s */
            double sum = 0, m2 = 0;
            for (int64_t q = 0; q < count; q++) sum += work[3 * (first + q * step)];
            mean = sum / (double)count;
            for (int64_t q = 0; q < count; q++) {
                const double *w = work + 3 * (first + q * step);
                m2 += w[1] + (double)cn->s * (w[0] - mean) * (w[0] - mean);
            }
            double elements = (double)count * (double)cn->s, var = m2 / elements;
            rstd = 1.0 / sqrt(var + cn->eps);
            put(cn, cn->mean, k, mean);
            put(cn, cn->rstd, k, rstd);
            if (!cn->groups && cn->running_mean) {
                double rm = param(cn, cn->running_mean, k, 0.0);
                put(cn, cn->running_mean, k, (1.0 - cn->momentum) * rm + cn->momentum * mean);
            }
            if (!cn->groups && cn->running_var) {
                double rv = param(cn, cn->running_var, k, 0.0), unbiased = m2 / (elements - 1.0);
                put(cn, cn->running_var, k, (1.0 - cn->momentum) * rv + cn->momentum * unbiased);
            }
        }
        for (int64_t q = 0; q < count; q++) {
            int64_t p = first + q * step, ci = p % cn->c;
            double a = rstd * param(cn, cn->weight, ci, 1.0);
            work[3 * p] = a;
            work[3 * p + 1] = param(cn, cn->bias, ci, 0.0) - mean * a;
        }
    }
}

/* dx = A dy + B x + C per plane, from sums of dy and dy * (x - mean); the weight and bias
 * gradients summed per channel in work's tail (2 * c doubles) */
static void backward_coefficients(const tn_channel_norm *cn, double *work) {
    int64_t stats = cn->groups ? cn->n * cn->groups : cn->c;
    double *gw = work + 3 * cn->n * cn->c, *gb = gw + cn->c;
    for (int64_t ci = 0; ci < 2 * cn->c; ci++) gw[ci] = 0;
    for (int64_t k = 0; k < stats; k++) {
        int64_t count, first, step;
        group_planes(cn, k, &count, &first, &step);
        double mean, rstd, sum_gw = 0, sum_gwx = 0; /* sums of dy w and dy w (x - mean) */
        read_stats(cn, k, &mean, &rstd);
        for (int64_t q = 0; q < count; q++) {
            int64_t p = first + q * step, ci = p % cn->c;
            double w = param(cn, cn->weight, ci, 1.0);
            sum_gw += w * work[3 * p];
            sum_gwx += w * work[3 * p + 1];
            gw[ci] += rstd * work[3 * p + 1];
            gb[ci] += work[3 * p];
        }
        double elements = (double)count * (double)cn->s;
        int centred = cn->groups || cn->training;
        double b = centred ? -rstd * rstd * rstd * sum_gwx / elements : 0.0;
        double c = centred ? -rstd * sum_gw / elements - b * mean : 0.0;
        for (int64_t q = 0; q < count; q++) {
            int64_t p = first + q * step;
            work[3 * p] = rstd * param(cn, cn->weight, p % cn->c, 1.0);
            work[3 * p + 1] = b;
            work[3 * p + 2] = c;
        }
    }
    for (int64_t ci = 0; ci < cn->c; ci++) {
        put(cn, cn->grad_weight, ci, gw[ci]);
        put(cn, cn->grad_bias, ci, gb[ci]);
    }
}

void tn_kernel_channel_norm_coefficients(const tn_channel_norm *cn, int backward, double *work) {
    if (backward)
        backward_coefficients(cn, work);
    else
        forward_coefficients(cn, work);
}

void tn_kernel_channel_norm_apply(const tn_channel_norm *cn, int backward, const double *work, int32_t ith,
                                  int32_t nth) {
    int64_t first, last, s = cn->s;
    tn_slice(cn->n * cn->c, ith, nth, &first, &last);
    double xs[CHUNK], gs[CHUNK];
    float f[CHUNK];
    for (int64_t p = first; p < last; p++) {
        const double *k = work + 3 * p;
        for (int64_t i = 0; i < s; i += CHUNK) {
            int64_t m = s - i < CHUNK ? s - i : CHUNK, at = p * s + i;
            load(cn->dtype, cn->x, at, m, xs, f);
            if (backward) {
                load(cn->dtype, cn->grad, at, m, gs, f);
                for (int64_t j = 0; j < m; j++) xs[j] = k[0] * gs[j] + k[1] * xs[j] + k[2];
            } else {
                for (int64_t j = 0; j < m; j++) xs[j] = k[0] * xs[j] + k[1];
            }
            store(cn->dtype, cn->y, at, m, xs, f);
        }
    }
}
