/* arange, cumsum and triu/tril (see tn/sequence.h). */
#include <string.h>

#include "elem.h"
#include "strided.h"
#include "tn/kernels.h"
#include "tn/sequence.h"

static tn_value scalar_value(const tn_scalar *s) {
    tn_value v = {s->f, 0, s->i, 0};
    if (s->kind == TN_SCALAR_KIND_INT || s->kind == TN_SCALAR_KIND_BOOL) {
        v.is_int = 1;
        v.re = (double)s->i;
    }
    return v;
}

void tn_kernel_arange(const tn_tensor *out, const tn_scalar *start, const tn_scalar *step,
                      int32_t ith, int32_t nth) {
    tn_value a = scalar_value(start), d = scalar_value(step);
    int exact = a.is_int && d.is_int;
    int32_t es = tn_dtype_size(out->dtype);
    int64_t n = out->ndim ? out->sizes[0] : 1, st = out->ndim ? out->strides[0] : 0, first, last;
    tn_slice(n, ith, nth, &first, &last);
    if (exact && out->dtype == TN_DTYPE_I64) { /* positions and indices: no per-element store dispatch */
        int64_t *o = out->data;
        for (int64_t i = first; i < last; i++) o[i * st] = (int64_t)((uint64_t)a.i + (uint64_t)i * (uint64_t)d.i);
        return;
    }
    for (int64_t i = first; i < last; i++) {
        tn_value v = {0, 0, 0, exact};
        if (exact) {
            v.i = (int64_t)((uint64_t)a.i + (uint64_t)i * (uint64_t)d.i);
            v.re = (double)v.i;
        } else {
            v.re = a.re + (double)i * d.re;
        }
        tn_store((char *)out->data + i * st * es, out->dtype, v);
    }
}

/* A row of the common cumsums as typed loops, the generic loop's results: int64 sums of int64,
 * int32 or bool (positions from an attention mask) wrapping around, float32 sums of float32
 * accumulated in double (as the CPU does). Returns 0 for other dtypes. */
#define CUMSUM_INT_ROW(T)                                                          \
    do {                                                                           \
        const T *v = (const T *)x;                                                 \
        for (int64_t i = 0; i < n; i++) o[i * os] = (int64_t)(s += (uint64_t)v[i * is]); \
    } while (0)

static int cumsum_row_typed(tn_dtype od, tn_dtype id, int64_t n, char *y, int64_t os, const char *x, int64_t is) {
    if (od == TN_DTYPE_F32 && id == TN_DTYPE_F32) {
        const float *v = (const float *)x;
        float *o = (float *)y;
        double s = 0;
        for (int64_t i = 0; i < n; i++) o[i * os] = (float)(s += v[i * is]);
        return 1;
    }
    if (od != TN_DTYPE_I64) return 0;
    int64_t *o = (int64_t *)y;
    uint64_t s = 0;
    switch (id) {
    case TN_DTYPE_I64: CUMSUM_INT_ROW(int64_t); return 1;
    case TN_DTYPE_I32: CUMSUM_INT_ROW(int32_t); return 1;
    case TN_DTYPE_BOOL: {
        const uint8_t *v = (const uint8_t *)x;
        for (int64_t i = 0; i < n; i++) o[i * os] = (int64_t)(s += v[i * is] != 0);
        return 1;
    }
    default: return 0;
    }
}

void tn_kernel_cumsum(const tn_tensor *out, const tn_tensor *in, int32_t ith, int32_t nth) {
    int64_t n = out->ndim ? out->sizes[out->ndim - 1] : 1;
    int64_t rows = n ? tn_tensor_numel(out) / n : 0, first, last;
    int64_t os = out->ndim ? out->strides[out->ndim - 1] : 0, is = in->ndim ? in->strides[in->ndim - 1] : 0;
    int32_t oes = tn_dtype_size(out->dtype), ies = tn_dtype_size(in->dtype);
    int as_int = out->dtype <= TN_DTYPE_I64;
    tn_slice(rows, ith, nth, &first, &last);
    for (int64_t r = first; r < last; r++) {
        const char *x = (const char *)in->data + tn_row_offset(in, r, 1) * ies;
        char *y = (char *)out->data + tn_row_offset(out, r, 1) * oes;
        if (cumsum_row_typed(out->dtype, in->dtype, n, y, os, x, is)) continue;
        double fsum = 0;
        int64_t isum = 0;
        for (int64_t i = 0; i < n; i++) {
            tn_value v = tn_load(x + i * is * ies, in->dtype);
            tn_value s = {0, 0, 0, as_int};
            if (as_int) {
                isum = (int64_t)((uint64_t)isum + (uint64_t)tn_value_to_i64(v));
                s.i = isum;
                s.re = (double)isum;
            } else {
                fsum += v.re;
                s.re = fsum;
            }
            tn_store(y + i * os * oes, out->dtype, s);
        }
    }
}

void tn_kernel_triangle(const tn_tensor *out, const tn_tensor *in, int64_t k, int32_t upper,
                        int32_t ith, int32_t nth) {
    int32_t nd = out->ndim;
    int64_t rows = nd >= 2 ? out->sizes[nd - 2] : 1, cols = nd >= 1 ? out->sizes[nd - 1] : 1;
    int64_t mats = (rows > 0 && cols > 0) ? tn_tensor_numel(out) / (rows * cols) : 0, first, last;
    int32_t es = tn_dtype_size(out->dtype);
    unsigned char zero[16] = {0};
    tn_slice(mats * rows, ith, nth, &first, &last);
    for (int64_t mr = first; mr < last; mr++) {
        int64_t m = mr / rows, i = mr % rows;
        const char *x = (const char *)in->data + (tn_row_offset(in, m, 2) + i * in->strides[nd - 2]) * es;
        char *y = (char *)out->data + (tn_row_offset(out, m, 2) + i * out->strides[nd - 2]) * es;
        for (int64_t j = 0; j < cols; j++) {
            int keep = upper ? j - i >= k : j - i <= k;
            memmove(y + j * out->strides[nd - 1] * es, keep ? x + j * in->strides[nd - 1] * es : (const char *)zero,
                    (size_t)es);
        }
    }
}
