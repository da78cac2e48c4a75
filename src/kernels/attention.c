/* Fused scaled dot-product attention, forward and backward (see tn/attention.h).
 *
 * Like rows.c, the Makefile builds this file once per ISA (TN_ROWS_ISA names the install
 * function), so the loops below vectorize to that ISA's width with FMA.
 *
 * The forward takes a tile of QB query rows against blocks of KB keys, as two small GEMMs on
 * the ISA's GEMM micro-kernel: scores S = (scale q) k^T, then O += P v, where P holds the
 * probabilities relative to each row's running maximum (online softmax: the accumulator and
 * normaliser are rescaled whenever the maximum grows). Q, K, P and V are packed into the
 * micro-kernel's panels (converted to float32 on the way). */
#include <math.h>
#include <string.h>

#include "elem.h"
#include "half.h"
#include "math_f32.h"
#include "strided.h"
#include "table.h"
#include "tn/attention.h"

#ifndef TN_ROWS_ISA
#error "compile with -DTN_ROWS_ISA=ref|avx2|avx512"
#endif
#define TN_CONCAT_(a, b) a##b
#define TN_CONCAT(a, b) TN_CONCAT_(a, b)

enum { QB = 48, KB = 64 }; /* multiples of every ISA's micro-tile (MR <= 8, NR <= 32) */
enum { ROWS_BELOW = 8 };   /* fewer query rows per head than this: forward_rows */

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

/* Forward: packed q tile, packed keys, scores, packed probabilities, packed values, output
 * accumulators, maxima, normalisers. Backward: q, dO and dq rows. */
static int64_t scratch_floats(const tn_attention *a) {
    int64_t e = a->q.sizes[3], ev = a->v.sizes[3];
    int64_t forward = QB * e + e * KB + 2 * QB * KB + KB * ev + QB * ev + 2 * QB; /* >= rows' */
    int64_t backward = 2 * e + ev;
    return forward > backward ? forward : backward;
}

/* Scaled score of query row (b, h, i) (already scaled in qf) against key j, with the bias. */
static inline float score(const tn_attention *a, const float *qf, int64_t b, int64_t h, int64_t hk, int64_t i,
                          int64_t j, int64_t e) {
    float s = dot_row(qf, &a->k, row_off(&a->k, b, hk, j), e);
    if (a->has_bias) s += load_f(&a->bias, row_off(&a->bias, b, h, i) + j * a->bias.strides[3]);
    return s;
}

/* Few query rows (decoding): each row against the keys directly, dot products and axpys over
 * the head dimension; packing tiles for one row would cost more than it saves. */
static void forward_rows(const tn_attention *a, float *scratch, int32_t ith, int32_t nth) {
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
        for (int64_t j0 = 0; j0 < keys; j0 += KB) {
            int64_t n = keys - j0 < KB ? keys - j0 : KB;
            float bm = -INFINITY;
            for (int64_t j = 0; j < n; j++) {
                s[j] = score(a, qf, b, h, hk, i, j0 + j, E);
                if (s[j] > bm) bm = s[j];
            }
            float m_new = bm > m ? bm : m;
            if (m_new == -INFINITY) continue; /* every score so far is -inf: nothing to add */
            float alpha = tn_expf(m - m_new);
            l *= alpha;
            for (int64_t e = 0; e < Ev; e++) acc[e] *= alpha;
            for (int64_t j = 0; j < n; j++) {
                float p = tn_expf(s[j] - m_new);
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

static void forward(const tn_kernel_table *k, const tn_attention *a, float *scratch, int32_t ith,
                    int32_t nth) {
    int64_t B = a->q.sizes[0], Hq = a->q.sizes[1], L = a->q.sizes[2], E = a->q.sizes[3];
    int64_t Hkv = a->k.sizes[1], S = a->k.sizes[2], Ev = a->v.sizes[3], group = Hq / Hkv;
    const int64_t mr = k->gemm_mr, nr = k->gemm_nr, tiles = (L + QB - 1) / QB;
    const int pv_gemm = Ev % nr == 0; /* O += P v on the micro-kernel (else a plain loop) */
    float *qp = scratch, *kp = qp + QB * E, *s = kp + E * KB, *pp = s + QB * KB, *vp = pp + QB * KB;
    float *acc = vp + KB * Ev, *m = acc + QB * Ev, *l = m + QB;
    float scale = (float)a->scale;
    if (L < ROWS_BELOW) {
        forward_rows(a, scratch, ith, nth);
        return;
    }
    int64_t first, last;
    tn_slice(B * Hq * tiles, ith, nth, &first, &last);
    for (int64_t unit = first; unit < last; unit++) {
        int64_t tile = unit % tiles, h = (unit / tiles) % Hq, b = unit / (tiles * Hq), hk = h / group;
        int64_t i0 = tile * QB, nq = L - i0 < QB ? L - i0 : QB, panels = (nq + mr - 1) / mr;
        /* qp[(i / mr) * E * mr + e * mr + i % mr] = scale * q[i0 + i, e], zero rows past nq */
        for (int64_t i = 0; i < panels * mr; i++) {
            float *dst = qp + (i / mr) * E * mr + i % mr;
            int64_t o = i < nq ? row_off(&a->q, b, h, i0 + i) : 0;
            for (int64_t e = 0; e < E; e++)
                dst[e * mr] = i < nq ? scale * load_f(&a->q, o + e * a->q.strides[3]) : 0.0f;
            m[i] = -INFINITY;
            l[i] = 0;
        }
        memset(acc, 0, sizeof(float) * (size_t)(QB * Ev));
        int64_t keys = a->causal ? (i0 + nq < S ? i0 + nq : S) : S; /* the tile's last row sees most */
        for (int64_t j0 = 0; j0 < keys; j0 += KB) {
            int64_t n = keys - j0 < KB ? keys - j0 : KB, kpanels = (n + nr - 1) / nr;
            /* kp[(j / nr) * E * nr + e * nr + j % nr] = k[j0 + j, e];
             * vp[(e / nr) * KB * nr + j * nr + e % nr] = v[j0 + j, e]; zero past n */
            for (int64_t j = 0; j < kpanels * nr; j++) {
                float *kd = kp + (j / nr) * E * nr + j % nr;
                int64_t ko = j < n ? row_off(&a->k, b, hk, j0 + j) : 0;
                for (int64_t e = 0; e < E; e++)
                    kd[e * nr] = j < n ? load_f(&a->k, ko + e * a->k.strides[3]) : 0.0f;
            }
            for (int64_t j = 0; j < KB; j++) {
                int64_t vo = j < n ? row_off(&a->v, b, hk, j0 + j) : 0;
                for (int64_t e = 0; e < Ev; e++) {
                    float x = j < n ? load_f(&a->v, vo + e * a->v.strides[3]) : 0.0f;
                    if (pv_gemm)
                        vp[(e / nr) * KB * nr + j * nr + e % nr] = x;
                    else
                        vp[j * Ev + e] = x;
                }
            }
            /* S is written, not accumulated: the rows and columns past the panels are never read
             * (the columns past this row's visible keys are zeroed below) */
            for (int64_t ip = 0; ip < panels; ip++)
                for (int64_t jp = 0; jp < kpanels; jp++)
                    k->gemm_ukernel(E, qp + ip * E * mr, kp + jp * E * nr, s + ip * mr * KB + jp * nr, KB, 0);
            for (int64_t i = 0; i < nq; i++) {
                int64_t row = i0 + i;
                int64_t vis = a->causal ? (row + 1 < S ? row + 1 : S) - j0 : n; /* keys this row sees */
                if (vis > n) vis = n;
                float *si = s + i * KB;
                float bm = -INFINITY;
                if (vis > 0 && a->has_bias) {
                    int64_t bo = row_off(&a->bias, b, h, row) + j0 * a->bias.strides[3];
                    for (int64_t j = 0; j < vis; j++) si[j] += load_f(&a->bias, bo + j * a->bias.strides[3]);
                }
                for (int64_t j = 0; j < vis; j++) bm = si[j] > bm ? si[j] : bm;
                float m_new = bm > m[i] ? bm : m[i];
                if (m_new == -INFINITY) vis = 0; /* every score so far is -inf: nothing to add */
                float alpha = vis > 0 ? tn_expf(m[i] - m_new) : 1.0f, sum = 0.0f;
                for (int64_t j = 0; j < vis; j++) {
                    si[j] = tn_expf(si[j] - m_new);
                    sum += si[j];
                }
                for (int64_t j = vis < 0 ? 0 : vis; j < KB; j++) si[j] = 0.0f;
                if (vis <= 0) continue;
                float *ai = acc + i * Ev;
                if (alpha != 1.0f)
                    for (int64_t e = 0; e < Ev; e++) ai[e] *= alpha;
                l[i] = l[i] * alpha + sum;
                m[i] = m_new;
            }
            if (pv_gemm) {
                for (int64_t i = 0; i < panels * mr; i++)
                    for (int64_t j = 0; j < KB; j++)
                        pp[(i / mr) * KB * mr + j * mr + i % mr] = i < nq ? s[i * KB + j] : 0.0f;
                for (int64_t ip = 0; ip < panels; ip++)
                    for (int64_t ep = 0; ep < Ev / nr; ep++)
                        k->gemm_ukernel(KB, pp + ip * KB * mr, vp + ep * KB * nr, acc + ip * mr * Ev + ep * nr, Ev, 1);
            } else {
                for (int64_t i = 0; i < nq; i++)
                    for (int64_t j = 0; j < n; j++) {
                        float p = s[i * KB + j];
                        for (int64_t e = 0; e < Ev; e++) acc[i * Ev + e] += p * vp[j * Ev + e];
                    }
            }
        }
        /* a row that sees no key (no keys, or every score -inf) gives zeros, as PyTorch's
         * math path does with its safe softmax */
        for (int64_t i = 0; i < nq; i++) {
            float inv = l[i] > 0 ? 1.0f / l[i] : 0.0f;
            int64_t o = row_off(&a->out, b, h, i0 + i);
            for (int64_t e = 0; e < Ev; e++) store_f(&a->out, o + e * a->out.strides[3], acc[i * Ev + e] * inv);
            ((float *)a->lse.data)[b * a->lse.strides[0] + h * a->lse.strides[1] + (i0 + i) * a->lse.strides[2]] =
                l[i] > 0 ? m[i] + logf(l[i]) : -INFINITY;
        }
    }
}

static void backward(const tn_kernel_table *k, const tn_attention *a, float *scratch, int32_t ith,
                     int32_t nth) {
    (void)k;
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
                    float p = tn_expf(score(a, qf, b, h, hk, i, j, E) - lse);
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

void TN_CONCAT(tn_attention_install_, TN_ROWS_ISA)(tn_kernel_table *t) {
    t->attention_scratch_floats = scratch_floats;
    t->attention_forward = forward;
    t->attention_backward = backward;
}
