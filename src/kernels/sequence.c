/* arange, linspace, cumsum and triu/tril (see tn/sequence.h). */
#include <string.h>

#include "elem.h"
#include "half.h"
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

void tn_kernel_linspace(const tn_tensor *out, double start, double end, int32_t ith, int32_t nth) {
    int64_t n = out->sizes[0], st = out->strides[0], first, last, halfway = n / 2;
    int32_t es = tn_dtype_size(out->dtype);
    double step = n > 1 ? (end - start) / (double)(n - 1) : 0.0;
    tn_slice(n, ith, nth, &first, &last);
    for (int64_t i = first; i < last; i++) {
        double x = i < halfway || n == 1 ? start + step * (double)i : end - step * (double)(n - 1 - i);
        tn_value v = {x, 0, 0, 0};
        tn_store((char *)out->data + i * st * es, out->dtype, v);
    }
}

/* The common cumsums as typed loops, the CPU's results: int64 sums of int64, int32 or bool
 * (positions from an attention mask) wrapping around, float32 sums of float32 accumulated in
 * double, and bfloat16 and float16 sums accumulated in float (the CPU's accumulation types;
 * the generic loop accumulates in double). Scans b rows side by side, rows irs (ors) elements
 * apart: each step adds one element to each row's accumulator. Rows adjacent in memory (a
 * cumsum over an outer dimension, x.cumsum(0)) then read and write a contiguous run per step,
 * where scanning each alone read one element per line (1024 x 1024 float32 took 2x the CPU's
 * time); rows apart run as independent chains, so that one's additions wait on the others'
 * less (each step of one scan waits for the previous one's addition). Returns 0 (nothing
 * written) for other dtypes. */
enum { BLOCK = 64, CHAINS = 4 };

#define CUMSUM_BLOCK(A, TI, TO, LOAD, STORE)                                                          \
    do {                                                                                              \
        const TI *v = (const TI *)x;                                                                  \
        TO *o = (TO *)y;                                                                              \
        if (b == CHAINS && ors != 1) { /* the chains in registers */                                   \
            A s0 = 0, s1 = 0, s2 = 0, s3 = 0;                                                         \
            for (int64_t i = 0; i < n; i++) {                                                         \
                const TI *p = v + i * is;                                                             \
                TO *q = o + i * os;                                                                   \
                q[0] = STORE(s0 += LOAD(p[0])), q[ors] = STORE(s1 += LOAD(p[irs]));                   \
                q[2 * ors] = STORE(s2 += LOAD(p[2 * irs])), q[3 * ors] = STORE(s3 += LOAD(p[3 * irs])); \
            }                                                                                         \
        } else if (b == 1) { /* one scan: its sum in a register (in acc[] it waited on a store) */     \
            A s0 = 0;                                                                                 \
            for (int64_t i = 0; i < n; i++) o[i * os] = STORE(s0 += LOAD(v[i * is]));                \
        } else {                                                                                      \
            A acc[BLOCK] = {0};                                                                       \
            for (int64_t i = 0; i < n; i++)                                                           \
                for (int64_t j = 0; j < b; j++) o[i * os + j * ors] = STORE(acc[j] += LOAD(v[i * is + j * irs])); \
        }                                                                                             \
    } while (0)
#define CUMSUM_SAME(v) (v)
#define CUMSUM_WRAP(v) ((uint64_t)(v))
#define CUMSUM_AS_I64(v) ((int64_t)(v))
#define CUMSUM_BOOL(v) ((uint64_t)((v) != 0))

static inline __attribute__((always_inline)) int cumsum_block(tn_dtype od, tn_dtype id, int64_t n, int64_t b, char *y,
                                                             int64_t os, int64_t ors, const char *x, int64_t is,
                                                             int64_t irs) {
    if (od == TN_DTYPE_F32 && id == TN_DTYPE_F32) {
        CUMSUM_BLOCK(double, float, float, CUMSUM_SAME, (float));
        return 1;
    }
    if (od == TN_DTYPE_BF16 && id == od) {
        CUMSUM_BLOCK(float, uint16_t, uint16_t, tn_bf16_to_f32_inline, tn_f32_to_bf16_inline);
        return 1;
    }
    if (od == TN_DTYPE_F16 && id == od) {
        CUMSUM_BLOCK(float, uint16_t, uint16_t, tn_f16_to_f32_inline, tn_f32_to_f16_inline);
        return 1;
    }
    if (od != TN_DTYPE_I64) return 0;
    switch (id) {
    case TN_DTYPE_I64: CUMSUM_BLOCK(uint64_t, int64_t, int64_t, CUMSUM_WRAP, CUMSUM_AS_I64); return 1;
    case TN_DTYPE_I32: CUMSUM_BLOCK(uint64_t, int32_t, int64_t, CUMSUM_WRAP, CUMSUM_AS_I64); return 1;
    case TN_DTYPE_BOOL: CUMSUM_BLOCK(uint64_t, uint8_t, int64_t, CUMSUM_BOOL, CUMSUM_AS_I64); return 1;
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
    /* rows along the second-to-last dimension are evenly spaced: scanned side by side, BLOCK
     * at a time when adjacent in memory, else CHAINS */
    int32_t nd = out->ndim;
    int64_t ors = nd >= 2 ? out->strides[nd - 2] : 0, irs = nd >= 2 ? in->strides[nd - 2] : 0;
    int adjacent = ors == 1 && irs == 1 && os != 1;
    for (int64_t r = first, b = 1; r < last; r += b) {
        const char *x = (const char *)in->data + tn_row_offset(in, r, 1) * ies;
        char *y = (char *)out->data + tn_row_offset(out, r, 1) * oes;
        int64_t run = nd >= 2 ? out->sizes[nd - 2] - r % out->sizes[nd - 2] : 1; /* rows left in this run */
        b = last - r < run ? last - r : run;
        if (b > (adjacent ? BLOCK : CHAINS)) b = adjacent ? BLOCK : CHAINS;
        if (adjacent ? cumsum_block(out->dtype, in->dtype, n, b, y, os, 1, x, is, 1)
                     : cumsum_block(out->dtype, in->dtype, n, b, y, os, ors, x, is, irs))
            continue;
        b = 1;
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
