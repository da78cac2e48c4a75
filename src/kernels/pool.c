/* 2-D max pooling with indices, average pooling, and their backward (see tn/pool.h), one plane
 * at a time. */
#include <math.h>

#include "elem.h"
#include "half.h"
#include "strided.h"
#include "table.h"
#include "tn/pool.h"

static float load_float(const void *p, tn_dtype dt, int64_t i) {
    switch (dt) {
    case TN_DTYPE_BF16: return tn_bf16_to_f32_inline(((const uint16_t *)p)[i]);
    case TN_DTYPE_F16: return tn_f16_to_f32_inline(((const uint16_t *)p)[i]);
    default: return ((const float *)p)[i];
    }
}

/* One plane: the window maximum of each output position. float32 and the half types compare
 * in float (exactly: the halves widen without rounding), float64 in double. */
#define MAX_POOL_PLANE(T, LOAD, STORE)                                                                 \
    for (int64_t oh = 0; oh < s->out_h; oh++)                                                          \
        for (int64_t ow = 0; ow < s->out_w; ow++) {                                                    \
            int64_t h0 = oh * s->stride_h - s->pad_h, w0 = ow * s->stride_w - s->pad_w;                \
            int64_t h1 = h0 + (s->kernel_h - 1) * s->dilation_h + 1, w1 = w0 + (s->kernel_w - 1) * s->dilation_w + 1; \
            if (h1 > s->in_h) h1 = s->in_h;                                                            \
            if (w1 > s->in_w) w1 = s->in_w;                                                            \
            while (h0 < 0) h0 += s->dilation_h;                                                        \
            while (w0 < 0) w0 += s->dilation_w;                                                        \
            int64_t best = h0 * s->in_w + w0;                                                          \
            T m = -(T)INFINITY;                                                                        \
            for (int64_t ih = h0; ih < h1; ih += s->dilation_h)                                        \
                for (int64_t iw = w0; iw < w1; iw += s->dilation_w) {                                  \
                    int64_t i = ih * s->in_w + iw;                                                     \
                    T v = LOAD(i);                                                                     \
                    if (v > m || isnan(v)) m = v, best = i;                                            \
                }                                                                                      \
            int64_t o = oh * s->out_w + ow;                                                            \
            STORE(o, m);                                                                               \
            ind[o] = best;                                                                             \
        }

void tn_kernel_max_pool2d(const tn_pool2d *s, tn_dtype dt, void *out, int64_t *indices, const void *in,
                          int32_t ith, int32_t nth) {
    int64_t first, last, in_plane = s->in_h * s->in_w, out_plane = s->out_h * s->out_w;
    int32_t es = tn_dtype_size(dt);
    tn_slice(s->planes, ith, nth, &first, &last);
    for (int64_t p = first; p < last; p++) {
        const char *x = (const char *)in + p * in_plane * es;
        char *y = (char *)out + p * out_plane * es;
        int64_t *ind = indices + p * out_plane;
        if (dt == TN_DTYPE_F64) {
#define LOAD_D(i) (((const double *)x)[i])
#define STORE_D(o, v) (((double *)y)[o] = (v))
            MAX_POOL_PLANE(double, LOAD_D, STORE_D)
        } else if (dt == TN_DTYPE_F32) {
#define LOAD_F(i) (((const float *)x)[i])
#define STORE_F(o, v) (((float *)y)[o] = (v))
            MAX_POOL_PLANE(float, LOAD_F, STORE_F)
        } else {
#define LOAD_H(i) load_float(x, dt, i)
#define STORE_H(o, v) tn_store(y + (o) * es, dt, (tn_value){(v), 0, 0, 0})
            MAX_POOL_PLANE(float, LOAD_H, STORE_H)
#undef LOAD_D
#undef STORE_D
#undef LOAD_F
#undef STORE_F
#undef LOAD_H
#undef STORE_H
        }
    }
}

int tn_kernel_max_pool2d_backward(const tn_pool2d *s, tn_dtype dt, void *grad_in, const void *grad_out,
                                  const int64_t *indices, int32_t ith, int32_t nth) {
    int64_t first, last, in_plane = s->in_h * s->in_w, out_plane = s->out_h * s->out_w;
    int32_t es = tn_dtype_size(dt);
    tn_slice(s->planes, ith, nth, &first, &last);
    /* indices from a caller rather than from the forward may point outside their plane */
    for (int64_t p = first; p < last; p++)
        for (int64_t o = 0; o < out_plane; o++)
            if (indices[p * out_plane + o] < 0 || indices[p * out_plane + o] >= in_plane) return 1;
    for (int64_t p = first; p < last; p++) {
        char *gi = (char *)grad_in + p * in_plane * es;
        const char *go = (const char *)grad_out + p * out_plane * es;
        const int64_t *ind = indices + p * out_plane;
        if (dt == TN_DTYPE_F64) {
            double *g = (double *)gi;
            for (int64_t i = 0; i < in_plane; i++) g[i] = 0.0;
            for (int64_t o = 0; o < out_plane; o++) g[ind[o]] += ((const double *)go)[o];
        } else if (dt == TN_DTYPE_F32) {
            float *g = (float *)gi;
            for (int64_t i = 0; i < in_plane; i++) g[i] = 0.0f;
            for (int64_t o = 0; o < out_plane; o++) g[ind[o]] += ((const float *)go)[o];
        } else {
            /* the half types accumulate in place, rounding after each addition as the CPU */
            for (int64_t i = 0; i < in_plane; i++) tn_store(gi + i * es, dt, (tn_value){0, 0, 0, 0});
            for (int64_t o = 0; o < out_plane; o++) {
                float sum = load_float(gi, dt, ind[o]) + load_float(go, dt, o);
                tn_store(gi + ind[o] * es, dt, (tn_value){sum, 0, 0, 0});
            }
        }
    }
    return 0;
}

/* An average-pooling window: rows [h0, h1) and columns [w0, w1) of the plane, and its divisor
 * (0 when the window misses the plane). */
typedef struct window {
    int64_t h0, h1, w0, w1, divide;
} window;

static window avg_window(const tn_pool2d *s, int count_include_pad, int64_t divisor, int64_t oh, int64_t ow) {
    window w;
    w.h0 = oh * s->stride_h - s->pad_h, w.w0 = ow * s->stride_w - s->pad_w;
    w.h1 = w.h0 + s->kernel_h < s->in_h + s->pad_h ? w.h0 + s->kernel_h : s->in_h + s->pad_h;
    w.w1 = w.w0 + s->kernel_w < s->in_w + s->pad_w ? w.w0 + s->kernel_w : s->in_w + s->pad_w;
    int64_t padded = (w.h1 - w.h0) * (w.w1 - w.w0);
    w.h0 = w.h0 > 0 ? w.h0 : 0, w.w0 = w.w0 > 0 ? w.w0 : 0;
    w.h1 = w.h1 < s->in_h ? w.h1 : s->in_h, w.w1 = w.w1 < s->in_w ? w.w1 : s->in_w;
    if (w.h0 >= w.h1 || w.w0 >= w.w1)
        w.divide = 0;
    else
        w.divide = divisor ? divisor : count_include_pad ? padded : (w.h1 - w.h0) * (w.w1 - w.w0);
    return w;
}

/* One plane's average pooling (T the data type, A the sum's) */
#define AVG_POOL_PLANE(A, LOAD, STORE)                                                         \
    for (int64_t oh = 0; oh < s->out_h; oh++)                                                  \
        for (int64_t ow = 0; ow < s->out_w; ow++) {                                            \
            window w = avg_window(s, count_include_pad, divisor, oh, ow);                      \
            A sum = 0;                                                                         \
            for (int64_t ih = w.h0; ih < w.h1; ih++)                                           \
                for (int64_t iw = w.w0; iw < w.w1; iw++) sum += LOAD(ih * s->in_w + iw);       \
            STORE(oh * s->out_w + ow, w.divide ? sum / (A)w.divide : (A)0);                    \
        }

/* One plane's average-pooling gradient, into acc (zeroed here) */
#define AVG_POOL_GRAD_PLANE(A, LOAD)                                                           \
    for (int64_t i = 0; i < in_plane; i++) acc[i] = 0;                                         \
    for (int64_t oh = 0; oh < s->out_h; oh++)                                                  \
        for (int64_t ow = 0; ow < s->out_w; ow++) {                                            \
            window w = avg_window(s, count_include_pad, divisor, oh, ow);                      \
            if (!w.divide) continue;                                                           \
            A g = LOAD(oh * s->out_w + ow) / (A)w.divide;                                      \
            for (int64_t ih = w.h0; ih < w.h1; ih++)                                           \
                for (int64_t iw = w.w0; iw < w.w1; iw++) acc[ih * s->in_w + iw] += g;         \
        }

void tn_kernel_avg_pool2d(const tn_pool2d *s, int count_include_pad, int64_t divisor, tn_dtype dt, int backward,
                          void *dst, const void *src, float *scratch, int32_t ith, int32_t nth) {
    int64_t first, last, in_plane = s->in_h * s->in_w, out_plane = s->out_h * s->out_w;
    int32_t es = tn_dtype_size(dt);
    tn_slice(s->planes, ith, nth, &first, &last);
    for (int64_t p = first; p < last; p++) {
        const char *x = (const char *)src + p * (backward ? out_plane : in_plane) * es;
        char *y = (char *)dst + p * (backward ? in_plane : out_plane) * es;
        if (dt == TN_DTYPE_I64 && !backward) { /* integer sums and truncating division, as the CPU */
#define LOAD_I(i) (((const int64_t *)x)[i])
#define STORE_I(o, v) (((int64_t *)y)[o] = (v))
            AVG_POOL_PLANE(int64_t, LOAD_I, STORE_I)
#undef LOAD_I
#undef STORE_I
        } else if (dt == TN_DTYPE_F64) {
#define LOAD_D(i) (((const double *)x)[i])
#define STORE_D(o, v) (((double *)y)[o] = (v))
            if (backward) {
                double *acc = (double *)y;
                AVG_POOL_GRAD_PLANE(double, LOAD_D)
            } else {
                AVG_POOL_PLANE(double, LOAD_D, STORE_D)
            }
        } else if (dt == TN_DTYPE_F32) {
#define LOAD_F(i) (((const float *)x)[i])
#define STORE_F(o, v) (((float *)y)[o] = (v))
            if (backward) {
                float *acc = (float *)y;
                AVG_POOL_GRAD_PLANE(float, LOAD_F)
            } else {
                AVG_POOL_PLANE(float, LOAD_F, STORE_F)
            }
        } else {
#define LOAD_H(i) load_float(x, dt, i)
#define STORE_H(o, v) tn_store(y + (o) * es, dt, (tn_value){(v), 0, 0, 0})
            if (backward) {
                float *acc = scratch;
                AVG_POOL_GRAD_PLANE(float, LOAD_H)
                tn_kernels()->narrow_half(dt, in_plane, (uint16_t *)(void *)y, 1, acc, 1);
            } else {
                AVG_POOL_PLANE(float, LOAD_H, STORE_H)
            }
#undef LOAD_D
#undef STORE_D
#undef LOAD_F
#undef STORE_F
#undef LOAD_H
#undef STORE_H
        }
    }
}
