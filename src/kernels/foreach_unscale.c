/* GradScaler's unscale step over a list of dense tensors (TN_FOREACH_UNSCALE, tn/foreach.h):
 * each element is multiplied by the inverse scale, and the loop notes whether any element was
 * not finite. The note is a bitwise OR of comparisons, so the loop vectorizes. */
#include <float.h>
#include <math.h>

#include "half.h"
#include "strided.h"
#include "tn/foreach.h"

/* |v| <= max is false for infinities and NaN */
#define TN_UNSCALE_LOOP(name, T, W, LOAD, STORE, ABS, MAX) \
    static int name(T *out, const T *a, int64_t n, W inv) {  \
        int bad = 0;                                         \
        for (int64_t i = 0; i < n; i++) {                    \
            W v = LOAD(a[i]);                                \
            bad |= !(ABS(v) <= MAX);                         \
            out[i] = STORE(v * inv);                         \
        }                                                    \
        return bad;                                          \
    }

#define TN_SAME(v) (v)
TN_UNSCALE_LOOP(unscale_f32, float, float, TN_SAME, TN_SAME, fabsf, FLT_MAX)
TN_UNSCALE_LOOP(unscale_f64, double, double, TN_SAME, TN_SAME, fabs, DBL_MAX)
TN_UNSCALE_LOOP(unscale_bf16, uint16_t, float, tn_bf16_to_f32_inline, tn_f32_to_bf16_inline, fabsf, FLT_MAX)
TN_UNSCALE_LOOP(unscale_f16, uint16_t, float, tn_f16_to_f32_inline, tn_f32_to_f16_inline, fabsf, FLT_MAX)

int tn_kernel_unscale(tn_dtype dtype, int32_t count, const tn_foreach_item *items, float inv_scale,
                      int32_t ith, int32_t nth) {
    int bad = 0;
    for (int32_t k = 0; k < count; k++) {
        int64_t first, last;
        tn_slice(items[k].numel, ith, nth, &first, &last);
        int64_t n = last - first;
        void *out = items[k].out;
        const void *a = items[k].a;
        switch (dtype) {
        case TN_DTYPE_F32: bad |= unscale_f32((float *)out + first, (const float *)a + first, n, inv_scale); break;
        case TN_DTYPE_F64: bad |= unscale_f64((double *)out + first, (const double *)a + first, n, inv_scale); break;
        case TN_DTYPE_BF16:
            bad |= unscale_bf16((uint16_t *)out + first, (const uint16_t *)a + first, n, inv_scale);
            break;
        default: bad |= unscale_f16((uint16_t *)out + first, (const uint16_t *)a + first, n, inv_scale); break;
        }
    }
    return bad;
}
