/* Batched triangular solves by substitution (see tn/linalg.h). Threads take whole
 * (batch, right-hand-side column) pairs. */
#include "elem.h"
#include "strided.h"
#include "tn/linalg.h"

void tn_kernel_solve_triangular(const tn_tensor *out, const tn_tensor *a, const tn_tensor *b, int32_t upper,
                                int32_t unit, int32_t ith, int32_t nth) {
    int64_t batch = out->sizes[0], n = out->sizes[1], k = out->sizes[2], first, last;
    tn_slice(batch * k, ith, nth, &first, &last);
    for (int64_t p = first; p < last; p++) {
        int64_t bi = p / k, c = p % k;
        for (int64_t s = 0; s < n; s++) {
            int64_t i = upper ? n - 1 - s : s; /* back substitution for upper, forward for lower */
            double x = tn_get3(b, bi, i, c);
            for (int64_t t = 0; t < s; t++) {
                int64_t j = upper ? n - 1 - t : t;
                x -= tn_get3(a, bi, i, j) * tn_get3(out, bi, j, c);
            }
            tn_set3(out, bi, i, c, unit ? x : x / tn_get3(a, bi, i, i));
        }
    }
}
