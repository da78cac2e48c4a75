/* Softmax and log-softmax, forward and backward, along the last dimension (see
 * tn/reduce.h). Contiguous float32 rows, and bfloat16 or float16 rows widened to float32, run
 * the float32 row kernels; any other row is read once into double scratch, so any dtype and
 * stride works. */
#include <math.h>

#include "elem.h"
#include "nontemporal.h"
#include "strided.h"
#include "table.h"
#include "tn/reduce.h"

static void load_row(double *dst, const tn_tensor *t, int64_t r, int64_t n) {
    int32_t es = tn_dtype_size(t->dtype);
    int64_t st = t->ndim ? t->strides[t->ndim - 1] : 1;
    const char *p = (const char *)t->data + tn_row_offset(t, r, 1) * es;
    for (int64_t i = 0; i < n; i++) dst[i] = tn_load(p + i * st * es, t->dtype).re;
}

void tn_kernel_softmax(tn_softmax_kind kind, const tn_tensor *out, const tn_tensor *in,
                       const tn_tensor *y, double *scratch, int32_t ith, int32_t nth) {
    int64_t n = out->ndim ? out->sizes[out->ndim - 1] : 1;
    int64_t rows = n ? tn_tensor_numel(out) / n : 0, first, last;
    int32_t oes = tn_dtype_size(out->dtype);
    int64_t ost = out->ndim ? out->strides[out->ndim - 1] : 1;
    /* float32 results are computed in float32 precision, as on the CPU */
    int single = out->dtype != TN_DTYPE_F64;
    double *x = scratch, *w = scratch + n;
    const tn_kernel_table *k = tn_kernels();
    int forward = kind == TN_SOFTMAX || kind == TN_LOG_SOFTMAX;
    int fast = out->dtype == TN_DTYPE_F32 && in->dtype == TN_DTYPE_F32 && ost == 1 &&
               (in->ndim == 0 || in->strides[in->ndim - 1] == 1) &&
               (forward || (y->dtype == TN_DTYPE_F32 && (y->ndim == 0 || y->strides[y->ndim - 1] == 1)));
    /* an output too large for the cache: each row is computed in the scratch (in L1) and
     * streamed out (nontemporal.h); normal stores would read every output line first */
    int nt = fast && tn_nontemporal(tn_tensor_numel(out) * oes);
    /* bfloat16 and float16 rows: widened into the scratch, computed as float32 rows (as the
     * CPU computes them), rounded on the way out */
    int half = (out->dtype == TN_DTYPE_BF16 || out->dtype == TN_DTYPE_F16) && in->dtype == out->dtype &&
               (forward || y->dtype == out->dtype);
    tn_slice(rows, ith, nth, &first, &last);
    for (int64_t r = first; r < last; r++) {
        if (half) {
            float *f = (float *)scratch; /* the scratch holds 2n doubles: 4n floats */
            k->widen_half(in->dtype, n, f, 1, (const uint16_t *)in->data + tn_row_offset(in, r, 1),
                          in->ndim ? in->strides[in->ndim - 1] : 1);
            if (forward) {
                k->softmax_f32(n, f, f + 2 * n, kind == TN_LOG_SOFTMAX);
            } else {
                k->widen_half(y->dtype, n, f + n, 1, (const uint16_t *)y->data + tn_row_offset(y, r, 1),
                              y->ndim ? y->strides[y->ndim - 1] : 1);
                k->softmax_backward_f32(n, f, f + n, f + 2 * n, kind == TN_LOG_SOFTMAX_BACKWARD);
            }
            k->narrow_half(out->dtype, n, (uint16_t *)out->data + tn_row_offset(out, r, 1), ost, f + 2 * n, 1);
            continue;
        }
        if (fast) {
            float *o = (float *)out->data + tn_row_offset(out, r, 1), *dst = nt ? (float *)scratch : o;
            const float *src = (const float *)in->data + tn_row_offset(in, r, 1);
            if (forward)
                k->softmax_f32(n, src, dst, kind == TN_LOG_SOFTMAX);
            else
                k->softmax_backward_f32(n, src, (const float *)y->data + tn_row_offset(y, r, 1), dst,
                                        kind == TN_LOG_SOFTMAX_BACKWARD);
            if (nt) tn_copy_nontemporal(o, scratch, n * (int64_t)sizeof(float));
            continue;
        }
        load_row(x, in, r, n);
        if (kind == TN_SOFTMAX || kind == TN_LOG_SOFTMAX) {
            double mx = -INFINITY;
            for (int64_t i = 0; i < n; i++) mx = x[i] > mx || x[i] != x[i] ? x[i] : mx;
            double sum = 0;
            for (int64_t i = 0; i < n; i++) {
                w[i] = single ? (double)expf((float)(x[i] - mx)) : exp(x[i] - mx);
                sum += w[i];
            }
            double lse = log(sum);
            for (int64_t i = 0; i < n; i++) w[i] = kind == TN_SOFTMAX ? w[i] / sum : x[i] - mx - lse;
        } else {
            load_row(w, y, r, n); /* x: grad, w: forward output */
            double dot = 0;
            for (int64_t i = 0; i < n; i++) dot += kind == TN_SOFTMAX_BACKWARD ? x[i] * w[i] : x[i];
            for (int64_t i = 0; i < n; i++)
                w[i] = kind == TN_SOFTMAX_BACKWARD ? w[i] * (x[i] - dot) : x[i] - exp(w[i]) * dot;
        }
        char *o = (char *)out->data + tn_row_offset(out, r, 1) * oes;
        for (int64_t i = 0; i < n; i++) {
            tn_value v = {w[i], 0, 0, 0};
            tn_store(o + i * ost * oes, out->dtype, v);
        }
    }
    if (nt) tn_nontemporal_fence();
}
