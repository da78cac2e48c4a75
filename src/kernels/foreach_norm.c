/* Partial vector norms of a list of dense tensors (see tn/foreach.h): each thread reduces its
 * slice of every item in double, in eight lanes so that the loop vectorizes without
 * reassociating (float32's 2-norm: the ISA's sum of squares, in float blocks added in double);
 * tn_kernel_norm_fold then combines the threads' partials into the norm. */
#include <math.h>

#include "half.h"
#include "strided.h"
#include "table.h"
#include "tn/foreach.h"

enum { LANES = 8 };

static inline double magnitude(double v, int32_t order) { return order == 2 ? v * v : fabs(v); }

/* NaN wins: a NaN element makes the largest magnitude NaN, as the sums become NaN */
static inline double larger(double m, double v) { return v > m || v != v ? v : m; }

#define TN_NORM_LOOP(T, LOAD)                                                              \
    static double norm_##T(const T *x, int64_t n, int32_t order) {                        \
        double lane[LANES] = {0};                                                          \
        int64_t i = 0;                                                                     \
        if (order == 0) {                                                                  \
            for (; i + LANES <= n; i += LANES)                                             \
                for (int l = 0; l < LANES; l++) lane[l] = larger(lane[l], fabs(LOAD(x[i + l]))); \
            for (; i < n; i++) lane[0] = larger(lane[0], fabs(LOAD(x[i])));                \
            double m = lane[0];                                                            \
            for (int l = 1; l < LANES; l++) m = larger(m, lane[l]);                        \
            return m;                                                                      \
        }                                                                                  \
        for (; i + LANES <= n; i += LANES)                                                 \
            for (int l = 0; l < LANES; l++) lane[l] += magnitude(LOAD(x[i + l]), order);   \
        for (; i < n; i++) lane[0] += magnitude(LOAD(x[i]), order);                        \
        double s = 0;                                                                      \
        for (int l = 0; l < LANES; l++) s += lane[l];                                      \
        return s;                                                                          \
    }

#define TN_AS_DOUBLE(v) ((double)(v))
#define TN_BF16(v) ((double)tn_bf16_to_f32_inline(v))
#define TN_F16(v) ((double)tn_f16_to_f32_inline(v))
typedef uint16_t bf16_bits;
typedef uint16_t f16_bits;
TN_NORM_LOOP(float, TN_AS_DOUBLE)
TN_NORM_LOOP(double, TN_AS_DOUBLE)
TN_NORM_LOOP(bf16_bits, TN_BF16)
TN_NORM_LOOP(f16_bits, TN_F16)

void tn_kernel_norm_partials(int32_t order, tn_dtype dtype, int32_t count, const tn_foreach_item *items,
                             double *partials, int32_t ith, int32_t nth) {
    for (int32_t k = 0; k < count; k++) {
        int64_t first, last;
        tn_slice(items[k].numel, ith, nth, &first, &last);
        int64_t n = last - first;
        double p = 0;
        switch (dtype) {
        case TN_DTYPE_F32:
            p = order == 2 ? tn_kernels()->sq_dev_f32(n, (const float *)items[k].a + first, 0.0f)
                           : norm_float((const float *)items[k].a + first, n, order);
            break;
        case TN_DTYPE_F64: p = norm_double((const double *)items[k].a + first, n, order); break;
        case TN_DTYPE_BF16: p = norm_bf16_bits((const uint16_t *)items[k].a + first, n, order); break;
        default: p = norm_f16_bits((const uint16_t *)items[k].a + first, n, order); break;
        }
        partials[(int64_t)k * nth + ith] = p;
    }
}

double tn_kernel_norm_fold(int32_t order, const double *partials, int32_t n) {
    double r = partials[0];
    for (int32_t i = 1; i < n; i++) r = order == 0 ? larger(r, partials[i]) : r + partials[i];
    return order == 2 ? sqrt(r) : r;
}
