/* Batch and group normalisation (see tn/channel_norm.h): per-plane sums split across threads,
 * the statistics and per-plane coefficients once, then one pass of y = a (x - p) + b (forward)
 * or dx = A dy + B (x - p) + C (backward) per plane, p a pivot near the mean. The planes' loops
 * are the ISA's (channel_norm_rows.c, through the kernel table). */
#include <math.h>

#include "elem.h"
#include "strided.h"
#include "table.h"
#include "tn/channel_norm.h"

static double param(const tn_channel_norm *cn, const void *p, int64_t i, double none) {
    return p ? tn_load((const char *)p + i * tn_dtype_size(cn->param_dtype), cn->param_dtype).re : none;
}

static void put(const tn_channel_norm *cn, void *p, int64_t i, double v) {
    if (!p) return;
    tn_value x = {v, 0, 0, 0};
    tn_store((char *)p + i * tn_dtype_size(cn->param_dtype), cn->param_dtype, x);
}

/* The point the element pass measures x from: the mean itself for float64 data, else the mean
 * rounded to float, which the float pass subtracts exactly (tn_kernel_table.plane_affine). */
static double pivot(const tn_channel_norm *cn, double mean) {
    return cn->dtype == TN_DTYPE_F64 ? mean : (double)(float)mean;
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
    int64_t first, last, s = cn->s, es = tn_dtype_size(cn->dtype);
    tn_slice(cn->n * cn->c, ith, nth, &first, &last);
    const tn_kernel_table *k = tn_kernels();
    for (int64_t p = first; p < last; p++) {
        double mean = 0, rstd;
        if (backward) read_stats(cn, stat_of(cn, p), &mean, &rstd); /* sums about the forward's mean */
        const char *g = backward ? (const char *)cn->grad + p * s * es : NULL;
        k->plane_moments(cn->dtype, s, (const char *)cn->x + p * s * es, g, mean, work + 4 * p);
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
            for (int64_t q = 0; q < count; q++) sum += work[4 * (first + q * step)];
            mean = sum / (double)count;
            for (int64_t q = 0; q < count; q++) {
                const double *w = work + 4 * (first + q * step);
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
            double c = pivot(cn, mean); /* y = a (x - c) + b - (mean - c) a */
            work[4 * p] = a;
            work[4 * p + 1] = param(cn, cn->bias, ci, 0.0) - (mean - c) * a;
            work[4 * p + 3] = c;
        }
    }
}

/* dx = A dy + B x + C per plane, from sums of dy and dy * (x - mean); the weight and bias
 * gradients summed per channel in work's tail (2 * c doubles) */
static void backward_coefficients(const tn_channel_norm *cn, double *work) {
    int64_t stats = cn->groups ? cn->n * cn->groups : cn->c;
    double *gw = work + 4 * cn->n * cn->c, *gb = gw + cn->c;
    for (int64_t ci = 0; ci < 2 * cn->c; ci++) gw[ci] = 0;
    for (int64_t k = 0; k < stats; k++) {
        int64_t count, first, step;
        group_planes(cn, k, &count, &first, &step);
        double mean, rstd, sum_gw = 0, sum_gwx = 0; /* sums of dy w and dy w (x - mean) */
        read_stats(cn, k, &mean, &rstd);
        for (int64_t q = 0; q < count; q++) {
            int64_t p = first + q * step, ci = p % cn->c;
            double w = param(cn, cn->weight, ci, 1.0);
            sum_gw += w * work[4 * p];
            sum_gwx += w * work[4 * p + 1];
            gw[ci] += rstd * work[4 * p + 1];
            gb[ci] += work[4 * p];
        }
        double elements = (double)count * (double)cn->s;
        int centred = cn->groups || cn->training;
        double b = centred ? -rstd * rstd * rstd * sum_gwx / elements : 0.0;
        double pv = pivot(cn, mean); /* dx = A dy + b (x - pv) + c */
        double c = centred ? -rstd * sum_gw / elements - b * (mean - pv) : 0.0;
        for (int64_t q = 0; q < count; q++) {
            int64_t p = first + q * step;
            work[4 * p] = rstd * param(cn, cn->weight, p % cn->c, 1.0);
            work[4 * p + 1] = b;
            work[4 * p + 2] = c;
            work[4 * p + 3] = pv;
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
    int64_t first, last, s = cn->s, es = tn_dtype_size(cn->dtype);
    tn_slice(cn->n * cn->c, ith, nth, &first, &last);
    const tn_kernel_table *k = tn_kernels();
    for (int64_t p = first; p < last; p++) {
        const char *g = backward ? (const char *)cn->grad + p * s * es : NULL;
        k->plane_affine(cn->dtype, s, (const char *)cn->x + p * s * es, g, work + 4 * p, (char *)cn->y + p * s * es);
    }
}
