/* Fused scaled dot-product attention, forward and backward (see tn/attention.h). */
#include <math.h>
#include <string.h>

#include "elem.h"
#include "half.h"
#include "strided.h"
#include "tn/attention.h"

#define KEY_BLOCK 64

static inline float load_f(const tn_tensor *t, int64_t off) {
    switch (t->dtype) {
    case TN_DTYPE_F32: return ((const float *)t->data)[off];
    case TN_DTYPE_BF16: return tn_bf16_to_f32_inline(((const uint16_t *)t->data)[off]);
    case TN_DTYPE_F16: return tn_f16_to_f32_inline(((const uint16_t *)t->data)[off]);
    default: return (float)tn_load((const char *)t->data + off * tn_dtype_size(t->dtype), t->dtype).re;
    }
}

static inline void store_f(const tn_tensor *t, int64_t off, float x) {
    switch (t->dtype) {
    case TN_DTYPE_F32: ((float *)t->data)[off] = x; break;
    case TN_DTYPE_BF16: ((uint16_t *)t->data)[off] = tn_f32_to_bf16_inline(x); break;
    default: ((uint16_t *)t->data)[off] = tn_f32_to_f16_inline(x); break;
    }
}

/* Offset of row (b, h, i) of a 4-D view (the last dimension runs along the row). */
static inline int64_t row_off(const tn_tensor *t, int64_t b, int64_t h, int64_t i) {
    return b * t->strides[0] + h * t->strides[1] + i * t->strides[2];
}

/* A row of a view into floats. */
static void load_row(float *dst, const tn_tensor *t, int64_t off, int64_t n) {
    int64_t s = t->strides[3];
    if (t->dtype == TN_DTYPE_F32 && s == 1) {
        memcpy(dst, (const float *)t->data + off, sizeof(float) * (size_t)n);
        return;
    }
    for (int64_t e = 0; e < n; e++) dst[e] = load_f(t, off + e * s);
}

/* Eight partial sums, so the loop vectorizes without reassociating a single sum. */
static inline float dot_f32(const float *x, const float *y, int64_t n) {
    float part[8] = {0}, acc = 0;
    int64_t e = 0;
    for (; e + 8 <= n; e += 8)
        for (int l = 0; l < 8; l++) part[l] += x[e + l] * y[e + l];
    for (; e < n; e++) acc += x[e] * y[e];
    for (int l = 0; l < 8; l++) acc += part[l];
    return acc;
}

static float dot_row(const float *x, const tn_tensor *t, int64_t off, int64_t n) {
    int64_t s = t->strides[3];
    if (s == 1 && t->dtype == TN_DTYPE_F32) return dot_f32(x, (const float *)t->data + off, n);
    if (s == 1 && t->dtype == TN_DTYPE_BF16) {
        const uint16_t *y = (const uint16_t *)t->data + off;
        float part[8] = {0}, acc = 0;
        int64_t e = 0;
        for (; e + 8 <= n; e += 8)
            for (int l = 0; l < 8; l++) part[l] += x[e + l] * tn_bf16_to_f32_inline(y[e + l]);
        for (; e < n; e++) acc += x[e] * tn_bf16_to_f32_inline(y[e]);
        for (int l = 0; l < 8; l++) acc += part[l];
        return acc;
    }
    float acc = 0;
    for (int64_t e = 0; e < n; e++) acc += x[e] * load_f(t, off + e * s);
    return acc;
}

/* acc += w * row */
static void axpy_row(float *acc, float w, const tn_tensor *t, int64_t off, int64_t n) {
    int64_t s = t->strides[3];
    if (s == 1 && t->dtype == TN_DTYPE_F32) {
        const float *y = (const float *)t->data + off;
        for (int64_t e = 0; e < n; e++) acc[e] += w * y[e];
        return;
    }
    if (s == 1 && t->dtype == TN_DTYPE_BF16) {
        const uint16_t *y = (const uint16_t *)t->data + off;
        for (int64_t e = 0; e < n; e++) acc[e] += w * tn_bf16_to_f32_inline(y[e]);
        return;
    }
    for (int64_t e = 0; e < n; e++) acc[e] += w * load_f(t, off + e * s);
}

int64_t tn_attention_scratch_floats(const tn_attention *a) {
    int64_t e = a->q.sizes[3], ev = a->v.sizes[3];
    return 2 * e + 2 * ev + KEY_BLOCK;
}

/* Scaled score of query row (b, h, i) (already scaled in qf) against key j, with the bias. */
static inline float score(const tn_attention *a, const float *qf, int64_t b, int64_t h, int64_t hk, int64_t i,
                          int64_t j, int64_t e) {
    float s = dot_row(qf, &a->k, row_off(&a->k, b, hk, j), e);
    if (a->has_bias) s += load_f(&a->bias, row_off(&a->bias, b, h, i) + j * a->bias.strides[3]);
    return s;
}

void tn_kernel_attention_forward(const tn_attention *a, float *scratch, int32_t ith, int32_t nth) {
    int64_t B = a->q.sizes[0], Hq = a->q.sizes[1], L = a->q.sizes[2], E = a->q.sizes[3];
    int64_t Hkv = a->k.sizes[1], S = a->k.sizes[2], Ev = a->v.sizes[3], group = Hq / Hkv;
    float *qf = scratch, *acc = qf + E, *s = acc + Ev;
    float scale = (float)a->scale;
    int64_t first, last;
    tn_slice(B * Hq * L, ith, nth, &first, &last);
    for (int64_t r = first; r < last; r++) {
        int64_t i = r % L, h = (r / L) % Hq, b = r / (L * Hq), hk = h / group;
        load_row(qf, &a->q, row_off(&a->q, b, h, i), E);
        for (int64_t e = 0; e < E; e++) qf[e] *= scale;
        memset(acc, 0, sizeof(float) * (size_t)Ev);
        float m = -INFINITY, l = 0;
        int64_t keys = a->causal ? (i + 1 < S ? i + 1 : S) : S;
        for (int64_t j0 = 0; j0 < keys; j0 += KEY_BLOCK) {
            int64_t n = keys - j0 < KEY_BLOCK ? keys - j0 : KEY_BLOCK;
            float bm = -INFINITY;
            for (int64_t j = 0; j < n; j++) {
                s[j] = score(a, qf, b, h, hk, i, j0 + j, E);
                if (s[j] > bm) bm = s[j];
            }
            float m_new = bm > m ? bm : m;
            if (m_new == -INFINITY) continue; /* every score so far is -inf: nothing to add */
            float alpha = expf(m - m_new);
            l *= alpha;
            for (int64_t e = 0; e < Ev; e++) acc[e] *= alpha;
            for (int64_t j = 0; j < n; j++) {
                float p = expf(s[j] - m_new);
                l += p;
                axpy_row(acc, p, &a->v, row_off(&a->v, b, hk, j0 + j), Ev);
            }
            m = m_new;
        }
        /* a row that sees no key (no keys, or every score -inf) gives zeros, as PyTorch's
         * math path does with its safe softmax */
        float inv = l > 0 ? 1.0f / l : 0.0f;
        int64_t o = row_off(&a->out, b, h, i);
        for (int64_t e = 0; e < Ev; e++) store_f(&a->out, o + e * a->out.strides[3], acc[e] * inv);
        ((float *)a->lse.data)[b * a->lse.strides[0] + h * a->lse.strides[1] + i * a->lse.strides[2]] =
            l > 0 ? m + logf(l) : -INFINITY;
    }
}

void tn_kernel_attention_backward(const tn_attention *a, float *scratch, int32_t ith, int32_t nth) {
    int64_t B = a->q.sizes[0], Hq = a->q.sizes[1], L = a->q.sizes[2], E = a->q.sizes[3];
    int64_t Hkv = a->k.sizes[1], S = a->k.sizes[2], Ev = a->v.sizes[3], group = Hq / Hkv;
    float *qf = scratch, *dof = qf + E, *dqf = dof + Ev;
    float scale = (float)a->scale;
    int64_t first, last;
    tn_slice(B * Hkv, ith, nth, &first, &last);
    for (int64_t g = first; g < last; g++) {
        int64_t b = g / Hkv, hk = g % Hkv;
        float *dk = a->dk + (b * Hkv + hk) * S * E, *dv = a->dv + (b * Hkv + hk) * S * Ev;
        memset(dk, 0, sizeof(float) * (size_t)(S * E));
        memset(dv, 0, sizeof(float) * (size_t)(S * Ev));
        for (int64_t h = hk * group; h < (hk + 1) * group; h++) {
            for (int64_t i = 0; i < L; i++) {
                load_row(qf, &a->q, row_off(&a->q, b, h, i), E);
                for (int64_t e = 0; e < E; e++) qf[e] *= scale;
                load_row(dof, &a->grad_out, row_off(&a->grad_out, b, h, i), Ev);
                float d = dot_row(dof, &a->out, row_off(&a->out, b, h, i), Ev);
                float lse = ((const float *)a->lse.data)[b * a->lse.strides[0] + h * a->lse.strides[1] +
                                                          i * a->lse.strides[2]];
                memset(dqf, 0, sizeof(float) * (size_t)E);
                int64_t keys = a->causal ? (i + 1 < S ? i + 1 : S) : S;
                for (int64_t j = 0; j < keys; j++) {
                    float p = expf(score(a, qf, b, h, hk, i, j, E) - lse);
                    if (!(p > 0)) continue; /* masked out (or a row with no visible key) */
                    float dp = dot_row(dof, &a->v, row_off(&a->v, b, hk, j), Ev);
                    float ds = p * (dp - d) * scale;
                    axpy_row(dqf, ds, &a->k, row_off(&a->k, b, hk, j), E);
                    /* dk_j += ds * q_i (unscaled q: qf / scale), dv_j += p * dO_i */
                    float *dkj = dk + j * E, *dvj = dv + j * Ev;
                    for (int64_t e = 0; e < E; e++) dkj[e] += ds * qf[e] / scale;
                    for (int64_t e = 0; e < Ev; e++) dvj[e] += p * dof[e];
                }
                float *dq = a->dq + ((b * Hq + h) * L + i) * E;
                memcpy(dq, dqf, sizeof(float) * (size_t)E);
            }
        }
    }
}
