/* Layer normalisation, forward and input gradient (see tn/norm.h). Rows are split across
 * threads; each row is read as double. */
#include <math.h>

#include "elem.h"
#include "strided.h"
#include "tn/norm.h"

static inline double at(const void *p, int64_t i, tn_dtype t) {
    return tn_load((const char *)p + i * tn_dtype_size(t), t).re;
}

static inline void put(void *p, int64_t i, tn_dtype t, double v) {
    tn_value x = {v, 0, 0, 0};
    tn_store((char *)p + i * tn_dtype_size(t), t, x);
}

void tn_kernel_layer_norm(const tn_layer_norm *ln, int backward, int32_t ith, int32_t nth) {
    int64_t first, last, n = ln->n;
    tn_dtype t = ln->dtype;
    tn_slice(ln->rows, ith, nth, &first, &last);
    for (int64_t r = first; r < last; r++) {
        int64_t base = r * n;
        if (!backward) {
            double sum = 0, sq = 0;
            for (int64_t i = 0; i < n; i++) sum += at(ln->x, base + i, t);
            double mean = n ? sum / (double)n : 0.0;
            for (int64_t i = 0; i < n; i++) {
                double d = at(ln->x, base + i, t) - mean;
                sq += d * d;
            }
            double rstd = 1.0 / sqrt((n ? sq / (double)n : 0.0) + ln->eps);
            for (int64_t i = 0; i < n; i++) {
                double v = (at(ln->x, base + i, t) - mean) * rstd;
                if (ln->weight) v *= at(ln->weight, i, t);
                if (ln->bias) v += at(ln->bias, i, t);
                put(ln->y, base + i, t, v);
            }
            put(ln->mean, r, t, mean);
            put(ln->rstd, r, t, rstd);
            continue;
        }
        double mean = at(ln->mean, r, t), rstd = at(ln->rstd, r, t);
        double a = 0, b = 0; /* mean of g*w and of g*w*xhat */
        for (int64_t i = 0; i < n; i++) {
            double gw = at(ln->grad, base + i, t) * (ln->weight ? at(ln->weight, i, t) : 1.0);
            double xhat = (at(ln->x, base + i, t) - mean) * rstd;
            a += gw;
            b += gw * xhat;
        }
        a /= (double)n;
        b /= (double)n;
        for (int64_t i = 0; i < n; i++) {
            double gw = at(ln->grad, base + i, t) * (ln->weight ? at(ln->weight, i, t) : 1.0);
            double xhat = (at(ln->x, base + i, t) - mean) * rstd;
            put(ln->y, base + i, t, rstd * (gw - a - xhat * b));
        }
    }
}
