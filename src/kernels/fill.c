/* dst[...] = scalar, converted once to dst's dtype and then replicated: contiguous rows by
 * memset (a zero, or one-byte elements) or a typed loop, strided rows element by element.
 * A large output with contiguous rows is copied non-temporally from a line-aligned buffer of
 * the value (nontemporal.h). */
#include <stdint.h>
#include <string.h>

#include "elem.h"
#include "nontemporal.h"
#include "strided.h"
#include "tn/kernels.h"

void tn_kernel_fill(const tn_tensor *dst, const tn_scalar *value, int32_t ith, int32_t nth) {
    tn_value v = {value->f, value->imag, value->i, 0};
    if (value->kind == TN_SCALAR_KIND_INT || value->kind == TN_SCALAR_KIND_BOOL) {
        v.is_int = 1;
        v.re = (double)value->i;
    }
    unsigned char bytes[16];
    tn_store(bytes, dst->dtype, v);
    int32_t es = tn_dtype_size(dst->dtype);
    const tn_tensor *views[1] = {dst};
    tn_walk w;
    tn_walk_init(&w, views, 1);
    int64_t step = w.strides[0][w.ndim - 1], first, last, e0, e1;
    tn_walk_slice(&w, ith, nth, &first, &last, &e0, &e1);
    int64_t n = e1 - e0;
    int zero = 1;
    for (int32_t b = 0; b < es; b++) zero &= bytes[b] == 0;
    uint16_t v2;
    uint32_t v4;
    uint64_t v8;
    memcpy(&v2, bytes, sizeof v2);
    memcpy(&v4, bytes, sizeof v4);
    memcpy(&v8, bytes, sizeof v8);
    int nt = step == 1 && tn_nontemporal(tn_tensor_numel(dst) * es);
    _Alignas(64) unsigned char pattern[TN_NT_CHUNK_BYTES];
    if (nt)
        for (int32_t b = 0; b < TN_NT_CHUNK_BYTES; b += es) memcpy(pattern + b, bytes, (size_t)es);
    for (int64_t r = first; r < last; r++) {
        char *d = (char *)dst->data + (tn_walk_row_offset(&w, 0, r) + e0 * step) * es;
        if (nt) {
            for (int64_t i = 0; i < n;) {
                int64_t m = tn_nontemporal_chunk(d + i * es, es, n - i);
                tn_copy_nontemporal(d + i * es, pattern, m * es);
                i += m;
            }
        } else if (step == 1 && (zero || es == 1)) {
            memset(d, bytes[0], (size_t)(n * es));
        } else if (step == 1 && es == 2) {
            for (int64_t i = 0; i < n; i++) memcpy(d + 2 * i, &v2, 2);
        } else if (step == 1 && es == 4) {
            for (int64_t i = 0; i < n; i++) memcpy(d + 4 * i, &v4, 4);
        } else if (step == 1 && es == 8) {
            for (int64_t i = 0; i < n; i++) memcpy(d + 8 * i, &v8, 8);
        } else {
            for (int64_t i = 0; i < n; i++) memcpy(d + i * step * es, bytes, (size_t)es);
        }
    }
    if (nt) tn_nontemporal_fence();
}
