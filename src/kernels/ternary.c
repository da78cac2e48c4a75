/* Ternary elementwise kernels: addcmul, addcdiv and lerp (see tn/elementwise.h). Operands
 * of any dtype are read through the generic loader; the math runs in the compute dtype
 * (float for float32 and the halves, as PyTorch's opmath does; double; int64 for integers)
 * and is rounded once, on the store. */
#include <math.h>

#include "elem.h"
#include "strided.h"
#include "table.h"
#include "tn/elementwise.h"

enum { CHUNK = 256 };

/* Contiguous rows of one float dtype (float32, or a half type widened in chunks) take the
 * vectorized row of the kernel table, which computes what the loop below does. Returns 0 for
 * other rows. */
static int ternary_row_fast(const tn_kernel_table *k, tn_ternary_op op, tn_dtype t, int64_t n, char *const p[4],
                            int has_c, float s) {
    if (t == TN_DTYPE_F32) {
        k->ternary_f32(op, n, (float *)p[0], (const float *)p[1], (const float *)p[2],
                       has_c ? (const float *)p[3] : NULL, s);
        return 1;
    }
    if (t != TN_DTYPE_BF16 && t != TN_DTYPE_F16) return 0;
    float buf[3][CHUNK];
    for (int64_t i = 0; i < n; i += CHUNK) {
        int64_t m = n - i < CHUNK ? n - i : CHUNK;
        for (int v = 1; v < (has_c ? 4 : 3); v++) k->widen_half(t, m, buf[v - 1], 1, (const uint16_t *)p[v] + i, 1);
        k->ternary_f32(op, m, buf[0], buf[0], buf[1], has_c ? buf[2] : NULL, s);
        k->narrow_half(t, m, (uint16_t *)p[0] + i, 1, buf[0], 1);
    }
    return 1;
}

static double ternary_float(tn_ternary_op op, double a, double b, double c, double s, int single) {
    if (single) {
        float fa = (float)a, fb = (float)b, fc = (float)c, fs = (float)s;
        switch (op) {
        case TN_TERNARY_ADDCMUL: return fa + fs * fb * fc;
        case TN_TERNARY_ADDCDIV: return fa + fs * (fb / fc);
        default: {
            float diff = fb - fa; /* the two-sided form is exact at both ends */
            return fabsf(fc) < 0.5f ? fa + fc * diff : fb - diff * (1.0f - fc);
        }
        }
    }
    switch (op) {
    case TN_TERNARY_ADDCMUL: return a + s * b * c;
    case TN_TERNARY_ADDCDIV: return a + s * (b / c);
    default: {
        double diff = b - a;
        return fabs(c) < 0.5 ? a + c * diff : b - diff * (1.0 - c);
    }
    }
}

void tn_kernel_ternary(tn_ternary_op op, const tn_tensor *out, const tn_tensor *a, const tn_tensor *b,
                       const tn_tensor *c, double scalar, tn_dtype compute, int32_t ith, int32_t nth) {
    const tn_tensor *views[4] = {out, a, b, c ? c : b};
    tn_walk w;
    tn_walk_init(&w, views, 4);
    int64_t first, last, e0, e1;
    int32_t es[4];
    for (int v = 0; v < 4; v++) es[v] = tn_dtype_size(views[v]->dtype);
    int as_int = !tn_dtype_is_float(compute), single = compute != TN_DTYPE_F64;
    int fast = single && !as_int && a->dtype == out->dtype && b->dtype == out->dtype && (!c || c->dtype == out->dtype);
    for (int v = 0; v < 4; v++) fast = fast && w.strides[v][w.ndim - 1] == 1; /* views[3] is b without c */
    const tn_kernel_table *k = tn_kernels();
    tn_walk_slice(&w, ith, nth, &first, &last, &e0, &e1);
    for (int64_t r = first; r < last; r++) {
        char *p[4];
        for (int v = 0; v < 4; v++)
            p[v] = (char *)views[v]->data + (tn_walk_row_offset(&w, v, r) + e0 * w.strides[v][w.ndim - 1]) * es[v];
        if (fast && ternary_row_fast(k, op, out->dtype, e1 - e0, p, c != NULL, (float)scalar)) continue;
        for (int64_t i = e0; i < e1; i++) {
            tn_value x = tn_load(p[1], a->dtype), y = tn_load(p[2], b->dtype);
            tn_value z = c ? tn_load(p[3], c->dtype) : (tn_value){scalar, 0, (int64_t)scalar, 0};
            tn_value res = {0, 0, 0, 0};
            if (as_int) { /* addcmul on integers: wrap-around int64 math */
                uint64_t prod = (uint64_t)tn_value_to_i64(y) * (uint64_t)tn_value_to_i64(z);
                res.i = (int64_t)((uint64_t)tn_value_to_i64(x) + (uint64_t)(int64_t)scalar * prod);
                res.re = (double)res.i;
                res.is_int = 1;
            } else {
                double s = op == TN_TERNARY_LERP ? 0 : scalar;
                res.re = ternary_float(op, x.re, y.re, z.re, s, single);
            }
            tn_store(p[0], out->dtype, res);
            for (int v = 0; v < 4; v++) p[v] += w.strides[v][w.ndim - 1] * es[v];
        }
    }
}
