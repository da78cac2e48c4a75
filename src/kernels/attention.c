/* Fused scaled dot-product attention, the forward (see tn/attention.h; the backward is in
 * attention_backward.c).
 *
 * Like rows.c, the Makefile builds this file once per ISA (TN_ROWS_ISA names the install
 * function), so the loops below vectorize to that ISA's width with FMA.
 *
 * The forward takes a tile of QB query rows against blocks of KB keys, as two small GEMMs on
 * the ISA's GEMM micro-kernel: scores S^T = k (scale q)^T, then O += P v, where P holds the
 * probabilities relative to each row's running maximum (online softmax: the accumulator and
 * normaliser are rescaled whenever the maximum grows). Each thread packs a head's keys and
 * values into the micro-kernel's panels once (converted to float32 on the way) and reuses
 * them for every query tile and every query head of the group. */
#ifndef TN_ROWS_ISA
#error "compile with -DTN_ROWS_ISA=ref|avx2|avx512"
#endif
#include "attention_impl.h"
#include "vec16.h"

/* Scores of query row (b, h, i) against keys j0 .. j0+n into s. Contiguous float32 or bfloat16
 * keys without a bias go four at a time: four independent sums share each load of q. */
#define TN_DOT4(type, load)                                                                         \
    for (; j + 4 <= n; j += 4) {                                                                    \
        const type *k0 = (const type *)a->k.data + row_off(&a->k, b, hk, j0 + j), *k1 = k0 + ks,    \
                   *k2 = k1 + ks, *k3 = k2 + ks;                                                     \
        float p0[16] = {0}, p1[16] = {0}, p2[16] = {0}, p3[16] = {0}, t0 = 0, t1 = 0, t2 = 0, t3 = 0; \
        int64_t e = 0;                                                                              \
        for (; e + 16 <= E; e += 16)                                                                \
            for (int l = 0; l < 16; l++) {                                                          \
                float x = qf[e + l];                                                                \
                p0[l] += x * load(k0[e + l]);                                                       \
                p1[l] += x * load(k1[e + l]);                                                       \
                p2[l] += x * load(k2[e + l]);                                                       \
                p3[l] += x * load(k3[e + l]);                                                       \
            }                                                                                       \
        for (; e < E; e++) {                                                                        \
            t0 += qf[e] * load(k0[e]);                                                              \
            t1 += qf[e] * load(k1[e]);                                                              \
            t2 += qf[e] * load(k2[e]);                                                              \
            t3 += qf[e] * load(k3[e]);                                                              \
        }                                                                                           \
        for (int l = 0; l < 16; l++) t0 += p0[l], t1 += p1[l], t2 += p2[l], t3 += p3[l];            \
        s[j] = t0, s[j + 1] = t1, s[j + 2] = t2, s[j + 3] = t3;                                     \
    }
#define TN_AS_FLOAT(v) (v)


/* Contiguous float32 keys, a head dimension of whole 16-float chunks: each key is one vector
 * dot product, four keys at a time, each chunk of q loaded once for the four (keeping all of q
 * in registers left none for the sums on AVX2). */
#define TN_SCORES_V16(name, type, load)                                                                      \
    static void name(const float *qf, const type *k, int64_t ks, int64_t E, int64_t n, float *s) {           \
        int64_t chunks = E / 16, j = 0;                                                                      \
        for (; j + 4 <= n; j += 4) {                                                                         \
            const type *k0 = k + j * ks, *k1 = k0 + ks, *k2 = k1 + ks, *k3 = k2 + ks;                        \
            tn_v16 q = v16_load(qf);                                                                         \
            tn_v16 a0 = v16_mul(q, load(k0)), a1 = v16_mul(q, load(k1)), a2 = v16_mul(q, load(k2)),          \
                   a3 = v16_mul(q, load(k3));                                                                \
            for (int64_t c = 1; c < chunks; c++) {                                                           \
                q = v16_load(qf + 16 * c);                                                                   \
                a0 = v16_mul_add(a0, q, load(k0 + 16 * c));                                                  \
                a1 = v16_mul_add(a1, q, load(k1 + 16 * c));                                                  \
                a2 = v16_mul_add(a2, q, load(k2 + 16 * c));                                                  \
                a3 = v16_mul_add(a3, q, load(k3 + 16 * c));                                                  \
            }                                                                                                \
            v16_sum4(a0, a1, a2, a3, s + j);                                                                 \
        }                                                                                                    \
        for (; j < n; j++) {                                                                                 \
            tn_v16 a0 = v16_mul(v16_load(qf), load(k + j * ks));                                             \
            for (int64_t c = 1; c < chunks; c++) a0 = v16_mul_add(a0, v16_load(qf + 16 * c), load(k + j * ks + 16 * c)); \
            s[j] = v16_sum(a0);                                                                              \
        }                                                                                                    \
    }
TN_SCORES_V16(scores_f32, float, v16_load)
/* bfloat16 keys the same way, widened as they are loaded: the generic loop folded each key's
 * 16 lanes one scalar add after another, and a bf16 decode step ran at a third of the
 * float32 one's speed */
TN_SCORES_V16(scores_bf16, uint16_t, v16_load_bf16)

/* The scaled scores of query row (b, h, i) against keys j0 .. j0+n, plus the bias (an
 * additive or boolean mask) when there is one: the dot products by the vector paths whatever
 * the mask (a decode step against a static cache has one; it had sent every key through the
 * per-element path, 1.5-2.8x the CPU's time), then the bias added key by key. */
static void scores(const tn_attention *a, const float *qf, int64_t b, int64_t h, int64_t hk, int64_t i, int64_t j0,
                   int64_t n, float *s) {
    int64_t E = a->q.sizes[3], ks = a->k.strides[2], j = 0;
    if (a->k.strides[3] == 1 && a->k.dtype == TN_DTYPE_F32 && E % 16 == 0) {
        scores_f32(qf, (const float *)a->k.data + row_off(&a->k, b, hk, j0), ks, E, n, s);
        j = n;
    } else if (a->k.strides[3] == 1 && a->k.dtype == TN_DTYPE_BF16 && E % 16 == 0) {
        scores_bf16(qf, (const uint16_t *)a->k.data + row_off(&a->k, b, hk, j0), ks, E, n, s);
        j = n;
    } else if (a->k.strides[3] == 1 && a->k.dtype == TN_DTYPE_F32) {
        TN_DOT4(float, TN_AS_FLOAT)
    } else if (a->k.strides[3] == 1 && a->k.dtype == TN_DTYPE_BF16) {
        TN_DOT4(uint16_t, tn_bf16_to_f32_inline)
    }
    for (; j < n; j++) s[j] = dot_row(qf, &a->k, row_off(&a->k, b, hk, j0 + j), E);
    if (a->has_bias) {
        int64_t off = row_off(&a->bias, b, h, i), step = a->bias.strides[3];
        for (j = 0; j < n; j++) s[j] += load_f(&a->bias, off + (j0 + j) * step);
    }
}

/* acc += sum_j s[j] v[j0 + j] for keys of head (b, hk). Contiguous float32 or bfloat16 values
 * go four keys at a time, so the accumulator row is loaded and stored once per four keys. */
#define TN_AXPY4(type, load)                                                                       \
    for (; j + 4 <= n; j += 4) {                                                                   \
        const type *v0 = (const type *)a->v.data + row_off(&a->v, b, hk, j0 + j), *v1 = v0 + vs,   \
                   *v2 = v1 + vs, *v3 = v2 + vs;                                                    \
        float w0 = s[j], w1 = s[j + 1], w2 = s[j + 2], w3 = s[j + 3];                              \
        for (int64_t e = 0; e < Ev; e++)                                                           \
            acc[e] += (w0 * load(v0[e]) + w1 * load(v1[e])) + (w2 * load(v2[e]) + w3 * load(v3[e])); \
    }

/* acc += sum_k s[k] v[k] over n values of whole 16-float chunks: a chunk of the accumulator
 * stays in registers over the block's keys, in four sums so that the adds' latency overlaps
 * (bfloat16 values widened as they are loaded). */
#define TN_VALUES_V16(name, type, load)                                                                 \
    static void name(const float *s, const type *v, int64_t vs, int64_t Ev, int64_t n, float *acc) {   \
        for (int64_t c = 0; c < Ev; c += 16) {                                                          \
            tn_v16 s0 = v16_load(acc + c), s1 = v16_zero(), s2 = s1, s3 = s1;                           \
            int64_t k = 0;                                                                              \
            for (; k + 4 <= n; k += 4) {                                                                \
                const type *vk = v + k * vs + c;                                                        \
                s0 = v16_scale_add(s0, s[k], load(vk));                                                 \
                s1 = v16_scale_add(s1, s[k + 1], load(vk + vs));                                        \
                s2 = v16_scale_add(s2, s[k + 2], load(vk + 2 * vs));                                    \
                s3 = v16_scale_add(s3, s[k + 3], load(vk + 3 * vs));                                    \
            }                                                                                           \
            for (; k < n; k++) s0 = v16_scale_add(s0, s[k], load(v + k * vs + c));                      \
            v16_store(acc + c, v16_add(v16_add(s0, s1), v16_add(s2, s3)));                              \
        }                                                                                               \
    }
TN_VALUES_V16(values_f32, float, v16_load)
TN_VALUES_V16(values_bf16, uint16_t, v16_load_bf16)

static void values(const tn_attention *a, float *acc, const float *s, int64_t b, int64_t hk, int64_t j0, int64_t n) {
    int64_t Ev = a->v.sizes[3], vs = a->v.strides[2], j = 0;
    if (a->v.strides[3] == 1 && a->v.dtype == TN_DTYPE_F32 && Ev % 16 == 0) {
        values_f32(s, (const float *)a->v.data + row_off(&a->v, b, hk, j0), vs, Ev, n, acc);
        return;
    }
    if (a->v.strides[3] == 1 && a->v.dtype == TN_DTYPE_BF16 && Ev % 16 == 0) {
        values_bf16(s, (const uint16_t *)a->v.data + row_off(&a->v, b, hk, j0), vs, Ev, n, acc);
        return;
    }
    if (a->v.strides[3] == 1 && a->v.dtype == TN_DTYPE_F32) {
        TN_AXPY4(float, TN_AS_FLOAT)
    } else if (a->v.strides[3] == 1 && a->v.dtype == TN_DTYPE_BF16) {
        TN_AXPY4(uint16_t, tn_bf16_to_f32_inline)
    }
    for (; j < n; j++) axpy_row(acc, s[j], &a->v, row_off(&a->v, b, hk, j0 + j), Ev);
}

/* Query heads per unit of forward_rows. A group's heads share their keys and values, so a
 * unit takes as many of them as keeps the threads even (the busiest with at most 15% more
 * units than the mean): each block of keys and values is then read once for all of them,
 * while it is in L1. float32 decode steps of 8 query heads on 2 kv heads against 4096 keys
 * went from 223 to 131 us; SmolLM2's 9 on 3 would leave one of two threads idle a third of
 * the time, so its units stay one head each. */
static int64_t heads_per_unit(const tn_attention *a, int32_t nth) {
    int64_t group = a->q.sizes[1] / a->k.sizes[1], rows = a->q.sizes[0] * a->k.sizes[1] * a->q.sizes[2];
    for (int64_t parts = 1; parts < group; parts++) {
        int64_t units = rows * parts, most = (units + nth - 1) / nth;
        if (group % parts == 0 && most * nth * 100 <= units * 115) return group / parts;
    }
    return 1;
}

/* The running maximum of a row of scores after r[0 .. n): NaN never wins. */
static float row_max(const float *r, int64_t n, float m) {
    float bm = max_lanes(r, n);
    return bm > m ? bm : m;
}

/* One row of scores r[0 .. n) into probabilities given the row's new maximum m_new (row_max),
 * folded into its running maximum *m and normaliser *l (its sum by the table's blocked sum: a
 * single float's running sum does not vectorize); returns the factor the row's accumulators
 * shrink by. A row that has seen only -inf keeps *m = -inf and gets zero probabilities. */
static float row_online_softmax(const tn_kernel_table *k, float *r, int64_t n, float m_new, float *m, float *l) {
    float mu = m_new == -INFINITY ? 0.0f : m_new; /* exp(-inf - 0) = 0: nothing seen yet */
    float alpha = tn_expf(*m - mu);
    for (int64_t j = 0; j < n; j++) r[j] = tn_expf(r[j] - mu);
    *l = *l * alpha + (float)k->sum_f32(n, r);
    *m = m_new;
    return alpha;
}

/* Few query rows (decoding): each row against the keys directly, dot products and axpys over
 * the head dimension; packing tiles for one row would cost more than it saves. A unit is a
 * query row of `heads` heads of one group (heads_per_unit): for each block of keys, every
 * head's scores, online softmax and values in turn; each head's arithmetic is the same as on
 * its own. */
static void forward_rows(const tn_kernel_table *k, const tn_attention *a, float *scratch, int32_t ith,
                         int32_t nth) {
    int64_t B = a->q.sizes[0], Hq = a->q.sizes[1], L = a->q.sizes[2], E = a->q.sizes[3];
    int64_t Hkv = a->k.sizes[1], S = a->k.sizes[2], Ev = a->v.sizes[3], group = Hq / Hkv;
    int64_t heads = heads_per_unit(a, nth), per_group = group / heads;
    float *qf = scratch, *acc = qf + group * E, *ml = acc + group * Ev, *s = ml + 2 * group, *drop = s + KB_ROWS;
    float scale = (float)a->scale;
    uint64_t keep_from = tn_philox_keep_from(1.0 - a->dropout_p);
    int64_t first, last;
    tn_slice(B * Hkv * per_group * L, ith, nth, &first, &last);
    for (int64_t u = first; u < last; u++) {
        int64_t i = u % L, part = (u / L) % per_group, hk = (u / (L * per_group)) % Hkv, b = u / (L * per_group * Hkv);
        int64_t h0 = hk * group + part * heads;
        for (int64_t g = 0; g < heads; g++) {
            load_row(qf + g * E, &a->q, row_off(&a->q, b, h0 + g, i), E);
            for (int64_t e = 0; e < E; e++) qf[g * E + e] *= scale;
            memset(acc + g * Ev, 0, sizeof(float) * (size_t)Ev);
            ml[2 * g] = -INFINITY, ml[2 * g + 1] = 0;
        }
        int64_t keys = a->causal ? (i + 1 < S ? i + 1 : S) : S;
        for (int64_t j0 = 0; j0 < keys; j0 += KB_ROWS) {
            int64_t n = keys - j0 < KB_ROWS ? keys - j0 : KB_ROWS;
            for (int64_t g = 0; g < heads; g++) {
                int64_t h = h0 + g;
                float *m = ml + 2 * g, *l = m + 1, *ag = acc + g * Ev;
                scores(a, qf + g * E, b, h, hk, i, j0, n, s);
                float m_new = row_max(s, n, *m);
                if (m_new == -INFINITY) continue; /* every score so far is -inf: nothing to add */
                float alpha = row_online_softmax(k, s, n, m_new, m, l);
                if (a->dropout_p > 0) { /* after the normaliser: it sums every probability */
                    dropout_factors(a, keep_from, b, h, i, j0, n, drop);
                    for (int64_t j = 0; j < n; j++) s[j] *= drop[j];
                }
                if (alpha != 1.0f)
                    for (int64_t e = 0; e < Ev; e++) ag[e] *= alpha;
                values(a, ag, s, b, hk, j0, n);
            }
        }
        /* a row that sees no key (no keys, or every score -inf) gives zeros, as PyTorch's
         * math path does with its safe softmax */
        for (int64_t g = 0; g < heads; g++) {
            int64_t h = h0 + g;
            float m = ml[2 * g], l = ml[2 * g + 1];
            float inv = l == 0.0f ? 0.0f : 1.0f / l; /* NaN scores give NaN */
            store_row(&a->out, row_off(&a->out, b, h, i), acc + g * Ev, inv, Ev);
            ((float *)a->lse.data)[b * a->lse.strides[0] + h * a->lse.strides[1] + i * a->lse.strides[2]] =
                l == 0.0f ? -INFINITY : m + logf(l);
        }
    }
}

/* The tiled forward works on the transposed scores of QB queries by KB keys: st[j * QB + i],
 * computed with the keys as the micro-kernel's A operand and the queries as its B operand, so
 * that the online softmax runs along contiguous rows of queries (one vector lane per query)
 * and the probabilities are already P^T's rows for packing into O += P v. */
typedef struct tile_scratch {
    float *qb;             /* QB*E: the tile's scaled queries, B panels of nr */
    float *st, *pp;        /* KB_ROWS*QB scores / probabilities; P in A panels of mr */
    float *acc;            /* QB*Ev output accumulators */
    float *m, *l, *mu, *alpha, *bm, *sum; /* QB each */
    float *drop;           /* KB_ROWS dropout factors */
    float *rows;           /* up to NR rows of q, k or v in float32, for packing a panel */
    float *ka, *vb;        /* the head's keys (A panels of mr) and values (per key block, B panels of nr) */
} tile_scratch;

/* Floats of the head's keys or values per head dimension: the float32 tiles pad the keys to
 * whole KB blocks, the bf16 ones (two to a float) to whole KB16 blocks. */
static int64_t head_keys(int64_t S) {
    int64_t f32 = padded_keys(S), bf16 = (round_up(S, KB16) + 1) / 2;
    return f32 > bf16 ? f32 : bf16;
}

static tile_scratch carve(const tn_attention *a, float *f) {
    int64_t E = a->q.sizes[3], Ev = a->v.sizes[3], Sp = head_keys(a->k.sizes[2]);
    tile_scratch t;
    t.qb = f, f += QB * E;
    t.st = f, f += KB_ROWS * QB;
    t.pp = f, f += KB_ROWS * QB;
    t.acc = f, f += QB * Ev;
    t.m = f, f += QB;
    t.l = f, f += QB;
    t.mu = f, f += QB;
    t.alpha = f, f += QB;
    t.bm = f, f += QB;
    t.sum = f, f += QB;
    t.drop = f, f += KB_ROWS;
    t.rows = f, f += TN_GEMM_MAX_NR * (E > Ev ? E : Ev);
    t.ka = f, f += Sp * E;
    t.vb = f;
    return t;
}

/* Forward: tile_scratch (the head's keys and values included); backward: its own. */
static int64_t scratch_floats(const tn_attention *a) {
    int64_t e = a->q.sizes[3], ev = a->v.sizes[3], sp = head_keys(a->k.sizes[2]);
    int64_t group = a->q.sizes[1] / a->k.sizes[1];
    int64_t forward = a->q.sizes[2] < ROWS_BELOW ? group * (e + ev + 2) + 2 * KB_ROWS /* forward_rows */
                                                 : QB * e + 2 * KB_ROWS * QB + QB * ev + 6 * QB + KB_ROWS + TN_GEMM_MAX_NR * (e > ev ? e : ev) + sp * (e + ev);
    int64_t backward = TN_CONCAT(tn_attention_backward_scratch_, TN_ROWS_ISA)(a);
    return forward > backward ? forward : backward;
}

/* Keys of head (b, hk) into A panels, ka[(j / mr) * E * mr + e * mr + j % mr]; values into
 * B panels per key block, vb[(j / KB) * KB * Ev + (e / nr) * KB * nr + (j % KB) * nr + e % nr]
 * (plain rows vb[j * Ev + e] when Ev is no multiple of nr); zeros past S. */
static void pack_head(const tn_attention *a, const tile_scratch *t, int64_t b, int64_t hk, int64_t mr, int64_t nr,
                      int pv_gemm) {
    int64_t E = a->q.sizes[3], Ev = a->v.sizes[3], S = a->k.sizes[2], Sp = padded_keys(S);
    for (int64_t j0 = 0; j0 < Sp; j0 += mr)
        rows_to_panel(t->ka + j0 * E, t->rows, &a->k, b, hk, j0, panel_rows(S, j0, mr), mr, E, 1.0f);
    for (int64_t j = 0; j < Sp; j++) {
        float *v = pv_gemm ? t->rows : t->vb + j * Ev;
        if (j < S)
            load_row(v, &a->v, row_off(&a->v, b, hk, j), Ev);
        else
            memset(v, 0, sizeof(float) * (size_t)Ev);
        if (!pv_gemm) continue;
        float *vd = t->vb + (j / KB) * KB * Ev + (j % KB) * nr;
        for (int64_t e0 = 0; e0 < Ev; e0 += nr) memcpy(vd + e0 * KB, v + e0, sizeof(float) * (size_t)nr);
    }
}

/* The tile's queries, scaled, into B panels: qb[(i / nr) * E * nr + e * nr + i % nr]. */
static void pack_queries(const tn_attention *a, const tile_scratch *t, int64_t b, int64_t h, int64_t i0, int64_t nq,
                         int64_t cols, int64_t nr) {
    int64_t E = a->q.sizes[3];
    for (int64_t p0 = 0; p0 < cols; p0 += nr)
        rows_to_panel(t->qb + p0 * E, t->rows, &a->q, b, h, i0 + p0, panel_rows(nq, p0, nr), nr, E, (float)a->scale);
}

/* One key block's scores st (n keys by cols queries) into probabilities, folding them into
 * each query's running maximum m and normaliser l; alpha gets the factor by which the
 * accumulators must shrink. Masked scores become -inf; a query that has seen only -inf so
 * far keeps m = -inf and gets zero probabilities. */
static void online_softmax(const tn_attention *a, const tile_scratch *t, int64_t b, int64_t h, int64_t i0, int64_t nq,
                           int64_t j0, int64_t n, int64_t cols) {
    for (int64_t j = 0; j < n; j++) {
        float *r = t->st + j * QB;
        if (a->causal) /* key j0 + j is hidden from queries i0 + i < j0 + j */
            for (int64_t i = 0, hide = j0 + j - i0 < cols ? j0 + j - i0 : cols; i < hide; i++) r[i] = -INFINITY;
        if (a->has_bias)
            for (int64_t i = 0; i < nq; i++)
                r[i] += load_f(&a->bias, row_off(&a->bias, b, h, i0 + i) + (j0 + j) * a->bias.strides[3]);
    }
    for (int64_t i = 0; i < cols; i++) t->bm[i] = -INFINITY, t->sum[i] = 0.0f;
    for (int64_t j = 0; j < n; j++) {
        const float *r = t->st + j * QB;
        for (int64_t i = 0; i < cols; i++) t->bm[i] = r[i] > t->bm[i] ? r[i] : t->bm[i];
    }
    for (int64_t i = 0; i < cols; i++) {
        float m_new = t->bm[i] > t->m[i] ? t->bm[i] : t->m[i];
        t->mu[i] = m_new == -INFINITY ? 0.0f : m_new; /* exp(-inf - 0) = 0: nothing seen yet */
        t->alpha[i] = tn_expf(t->m[i] - t->mu[i]);
        t->m[i] = m_new;
    }
    for (int64_t j = 0; j < n; j++) {
        float *r = t->st + j * QB;
        for (int64_t i = 0; i < cols; i++) {
            r[i] = tn_expf(r[i] - t->mu[i]);
            t->sum[i] += r[i];
        }
    }
    for (int64_t i = 0; i < cols; i++) t->l[i] = t->l[i] * t->alpha[i] + t->sum[i];
}

/* One key block's scores (st, already scaled) into probabilities (online_softmax), dropped out
 * where dropout asks, and the tile's accumulators shrunk by each query's alpha. */
static void block_probabilities(const tn_attention *a, const tile_scratch *t, uint64_t keep_from, int64_t b, int64_t h,
                                int64_t i0, int64_t nq, int64_t j0, int64_t n, int64_t cols) {
    int64_t Ev = a->v.sizes[3];
    online_softmax(a, t, b, h, i0, nq, j0, n, cols);
    if (a->dropout_p > 0) /* after the normalisers: they sum every probability */
        for (int64_t i = 0; i < nq; i++) {
            int64_t seen = a->causal && i0 + i + 1 - j0 < n ? i0 + i + 1 - j0 : n; /* the rest are 0 */
            if (seen <= 0) continue;
            dropout_factors(a, keep_from, b, h, i0 + i, j0, seen, t->drop);
            for (int64_t j = 0; j < seen; j++) t->st[j * QB + i] *= t->drop[j];
        }
    for (int64_t i = 0; i < nq; i++)
        if (t->alpha[i] != 1.0f)
            for (int64_t e = 0; e < Ev; e++) t->acc[i * Ev + e] *= t->alpha[i];
}

/* The tile's outputs (accumulators over normalisers) and log-sum-exps. A query that sees no key
 * (no keys, or every score -inf) gives zeros, as PyTorch's math path does with its safe
 * softmax; NaN scores give NaN. */
static void store_tile(const tn_attention *a, const tile_scratch *t, int64_t b, int64_t h, int64_t i0, int64_t nq) {
    int64_t Ev = a->v.sizes[3];
    for (int64_t i = 0; i < nq; i++) {
        float inv = t->l[i] == 0.0f ? 0.0f : 1.0f / t->l[i];
        store_row(&a->out, row_off(&a->out, b, h, i0 + i), t->acc + i * Ev, inv, Ev);
        ((float *)a->lse.data)[b * a->lse.strides[0] + h * a->lse.strides[1] + (i0 + i) * a->lse.strides[2]] =
            t->l[i] == 0.0f ? -INFINITY : t->m[i] + logf(t->l[i]);
    }
}

/* ---- bfloat16 operands on the bf16 micro-kernel (AMX or AVX512-BF16) ----
 * The products in bfloat16, as the CPU's flash attention computes them: scores = Q K^T with
 * float32 sums (the tile's queries as A rows, the head's keys packed as pairs along the head
 * dimension), scaled after the product; probabilities rounded to bfloat16 for O += P V (V
 * packed as pairs along the keys). Here the scores are query-major, s[i * KB16 + j], so the
 * online softmax runs along each query's row and P is already the A rows of the second
 * product (the float32 tiles' key-major scores would need a transposing copy, which took a
 * quarter of the time). The head's keys and values are packed once per (batch, kv head). */
static int bf16_tiles_ok(const tn_kernel_table *k, const tn_attention *a) {
    int64_t E = a->q.sizes[3], Ev = a->v.sizes[3];
    return k->gemm_bf16_ukernel && a->q.dtype == TN_DTYPE_BF16 && a->k.dtype == TN_DTYPE_BF16 &&
           a->v.dtype == TN_DTYPE_BF16 && a->q.strides[3] == 1 && a->k.strides[3] == 1 && a->v.strides[3] == 1 &&
           E % 2 == 0 && Ev % k->gemm_bf16_nr == 0 && KB16 % k->gemm_bf16_nr == 0 && QB % k->gemm_bf16_mr == 0 &&
           k->gemm_bf16_nr <= TN_GEMM_MAX_NR;
}

/* One query's scores r[0 .. n) against keys j0 .., scaled and masked, into probabilities
 * (row_online_softmax). */
static float row_probabilities(const tn_kernel_table *k, const tn_attention *a, float *r, float scale, int64_t b,
                               int64_t h, int64_t i, int64_t j0, int64_t n, float *m, float *l) {
    for (int64_t j = 0; j < n; j++) r[j] *= scale;
    if (a->causal) /* key j0 + j is hidden from query i < j0 + j */
        for (int64_t j = i + 1 - j0 > 0 ? i + 1 - j0 : 0; j < n; j++) r[j] = -INFINITY;
    if (a->has_bias) {
        int64_t off = row_off(&a->bias, b, h, i), step = a->bias.strides[3];
        for (int64_t j = 0; j < n; j++) r[j] += load_f(&a->bias, off + (j0 + j) * step);
    }
    return row_online_softmax(k, r, n, row_max(r, n, *m), m, l);
}

static void forward_bf16(const tn_kernel_table *k, const tn_attention *a, float *scratch, int32_t ith, int32_t nth) {
    int64_t B = a->q.sizes[0], Hq = a->q.sizes[1], L = a->q.sizes[2], E = a->q.sizes[3];
    int64_t Hkv = a->k.sizes[1], S = a->k.sizes[2], Ev = a->v.sizes[3], group = Hq / Hkv;
    const int64_t mr = k->gemm_bf16_mr, nr = k->gemm_bf16_nr, tiles = (L + QB - 1) / QB, kp = E / 2;
    const int64_t tq = round_up((L + tiles - 1) / tiles, mr), S16 = round_up(S, KB16), panels = Ev / nr;
    const float scale = (float)a->scale;
    tile_scratch t = carve(a, scratch);
    uint16_t *kb = (uint16_t *)t.ka, *vp = (uint16_t *)t.vb, *qa = (uint16_t *)t.qb, *pp = (uint16_t *)t.pp;
    const uint16_t *zeros = (const uint16_t *)t.rows; /* a zero row of Ev values */
    memset(t.rows, 0, sizeof(uint16_t) * (size_t)Ev);
    uint64_t keep_from = tn_philox_keep_from(1.0 - a->dropout_p);
    int64_t first, last, packed = -1;
    tn_slice(B * Hq * tiles, ith, nth, &first, &last);
    if (first < last && k->gemm_bf16_prepare) k->gemm_bf16_prepare();
    for (int64_t unit = first; unit < last; unit++) {
        int64_t tile = unit % tiles, h = (unit / tiles) % Hq, b = unit / (tiles * Hq), hk = h / group;
        int64_t i0 = tile * tq, nq = L - i0 < tq ? L - i0 : tq, rows = round_up(nq, mr);
        if (packed != b * Hkv + hk) {
            const uint16_t *kh = (const uint16_t *)a->k.data + row_off(&a->k, b, hk, 0);
            const uint16_t *vh = (const uint16_t *)a->v.data + row_off(&a->v, b, hk, 0);
            /* keys as B: per panel of nr keys, pairs along the head dimension, zero past S */
            for (int64_t j0 = 0; j0 < S16; j0 += nr) {
                uint16_t *d = kb + j0 * E;
                memset(d, 0, sizeof(uint16_t) * (size_t)(nr * E));
                int64_t count = panel_rows(S, j0, nr);
                if (count > 0) k->gemm_bf16_pack_b_cols(kp, count, kh + j0 * a->k.strides[2], a->k.strides[2], d, (int32_t)nr);
            }
            /* values as B: per key block and panel of nr values, KB16 / 2 pairs of rows */
            for (int64_t j0 = 0; j0 < S16; j0 += KB16)
                for (int64_t ep = 0; ep < panels; ep++)
                    for (int64_t q = 0; q < KB16 / 2; q++) {
                        int64_t j = j0 + 2 * q;
                        const uint16_t *r0 = j < S ? vh + j * a->v.strides[2] + ep * nr : zeros;
                        const uint16_t *r1 = j + 1 < S ? vh + (j + 1) * a->v.strides[2] + ep * nr : zeros;
                        k->gemm_bf16_pack_b_rows(nr, r0, r1, vp + ((j0 / KB16) * panels + ep) * KB16 * nr + q * nr * 2);
                    }
            packed = b * Hkv + hk;
        }
        /* the tile's queries as A rows, zero past the last */
        for (int64_t i = 0; i < rows; i++)
            if (i < nq)
                memcpy(qa + i * E, (const uint16_t *)a->q.data + row_off(&a->q, b, h, i0 + i), sizeof(uint16_t) * (size_t)E);
            else
                memset(qa + i * E, 0, sizeof(uint16_t) * (size_t)E);
        for (int64_t i = 0; i < nq; i++) t.m[i] = -INFINITY, t.l[i] = 0.0f;
        memset(t.acc, 0, sizeof(float) * (size_t)(rows * Ev));
        int64_t keys = a->causal ? (i0 + nq < S ? i0 + nq : S) : S;
        for (int64_t j0 = 0; j0 < keys; j0 += KB16) {
            int64_t n = keys - j0 < KB16 ? keys - j0 : KB16;
            for (int64_t ip = 0; ip * mr < rows; ip++)
                for (int64_t jp = 0; jp * nr < n; jp++)
                    k->gemm_bf16_ukernel(kp, qa + ip * mr * E, E, kb + (j0 + jp * nr) * E, t.st + ip * mr * KB16 + jp * nr,
                                         KB16, 0);
            for (int64_t i = 0; i < rows; i++) {
                float *r = t.st + i * KB16;
                uint16_t *p = pp + i * KB16;
                int64_t j = 0;
                if (i < nq) {
                    float alpha = row_probabilities(k, a, r, scale, b, h, i0 + i, j0, n, &t.m[i], &t.l[i]);
                    if (a->dropout_p > 0) { /* after the normaliser: it sums every probability */
                        dropout_factors(a, keep_from, b, h, i0 + i, j0, n, t.drop);
                        for (int64_t jj = 0; jj < n; jj++) r[jj] *= t.drop[jj];
                    }
                    if (alpha != 1.0f)
                        for (int64_t e = 0; e < Ev; e++) t.acc[i * Ev + e] *= alpha;
                    for (; j < n; j++) p[j] = tn_f32_to_bf16_inline(r[j]);
                }
                for (; j < KB16; j++) p[j] = 0; /* past the block's keys, and the padding queries */
            }
            const uint16_t *vblock = vp + (j0 / KB16) * panels * KB16 * nr;
            for (int64_t ip = 0; ip * mr < rows; ip++)
                for (int64_t ep = 0; ep < panels; ep++)
                    k->gemm_bf16_ukernel(KB16 / 2, pp + ip * mr * KB16, KB16, vblock + ep * KB16 * nr,
                                         t.acc + ip * mr * Ev + ep * nr, Ev, 1);
        }
        store_tile(a, &t, b, h, i0, nq);
    }
}

static void forward(const tn_kernel_table *k, const tn_attention *a, float *scratch, int32_t ith,
                    int32_t nth) {
    int64_t B = a->q.sizes[0], Hq = a->q.sizes[1], L = a->q.sizes[2], E = a->q.sizes[3];
    int64_t Hkv = a->k.sizes[1], S = a->k.sizes[2], Ev = a->v.sizes[3], group = Hq / Hkv;
    const int64_t mr = k->gemm_mr, nr = k->gemm_nr, tiles = (L + QB - 1) / QB;
    const int64_t tq = round_up((L + tiles - 1) / tiles, nr); /* even tiles, whole B panels */
    const int pv_gemm = Ev % nr == 0; /* O += P v on the micro-kernel (else a plain loop) */
    if (L < ROWS_BELOW) {
        forward_rows(k, a, scratch, ith, nth);
        return;
    }
    if (bf16_tiles_ok(k, a)) {
        forward_bf16(k, a, scratch, ith, nth);
        return;
    }
    tile_scratch t = carve(a, scratch);
    uint64_t keep_from = tn_philox_keep_from(1.0 - a->dropout_p);
    int64_t first, last, packed = -1; /* the (b, kv head) whose keys and values t holds */
    tn_slice(B * Hq * tiles, ith, nth, &first, &last);
    for (int64_t unit = first; unit < last; unit++) {
        int64_t tile = unit % tiles, h = (unit / tiles) % Hq, b = unit / (tiles * Hq), hk = h / group;
        int64_t i0 = tile * tq, nq = L - i0 < tq ? L - i0 : tq; /* > 0: (tiles - 1) * tq < L */
        int64_t rows = round_up(nq, mr), cols = round_up(nq, nr); /* both <= QB */
        if (packed != b * Hkv + hk) {
            pack_head(a, &t, b, hk, mr, nr, pv_gemm);
            packed = b * Hkv + hk;
        }
        pack_queries(a, &t, b, h, i0, nq, cols, nr);
        for (int64_t i = 0; i < cols; i++) t.m[i] = -INFINITY, t.l[i] = 0.0f;
        memset(t.acc, 0, sizeof(float) * (size_t)(rows * Ev));
        int64_t keys = a->causal ? (i0 + nq < S ? i0 + nq : S) : S; /* the tile's last query sees most */
        for (int64_t j0 = 0; j0 < keys; j0 += KB) {
            int64_t n = keys - j0 < KB ? keys - j0 : KB;
            /* st = K_block (scale Q)^T; rows past n (zero keys) are never read */
            for (int64_t jp = 0; jp * mr < n; jp++)
                for (int64_t ip = 0; ip * nr < cols; ip++)
                    k->gemm_ukernel(E, t.ka + (j0 / mr + jp) * E * mr, t.qb + ip * E * nr, t.st + jp * mr * QB + ip * nr,
                                    QB, 0);
            block_probabilities(a, &t, keep_from, b, h, i0, nq, j0, n, cols);
            if (pv_gemm) {
                /* pp[ip * n * mr + j * mr + r] = P[ip * mr + r, j] = st[j * QB + ip * mr + r], zero
                 * past the scored columns */
                for (int64_t ip = 0; ip * mr < rows; ip++) {
                    int64_t have = cols - ip * mr < mr ? cols - ip * mr : mr;
                    for (int64_t j = 0; j < n; j++) {
                        float *d = t.pp + ip * n * mr + j * mr;
                        memcpy(d, t.st + j * QB + ip * mr, sizeof(float) * (size_t)have);
                        for (int64_t r = have; r < mr; r++) d[r] = 0.0f;
                    }
                }
                const float *vblock = t.vb + j0 * Ev;
                for (int64_t ip = 0; ip * mr < rows; ip++)
                    for (int64_t ep = 0; ep * nr < Ev; ep++)
                        k->gemm_ukernel(n, t.pp + ip * n * mr, vblock + ep * KB * nr, t.acc + ip * mr * Ev + ep * nr, Ev,
                                        1);
            } else {
                for (int64_t j = 0; j < n; j++) {
                    const float *vj = t.vb + (j0 + j) * Ev;
                    for (int64_t i = 0; i < nq; i++) {
                        float p = t.st[j * QB + i];
                        for (int64_t e = 0; e < Ev; e++) t.acc[i * Ev + e] += p * vj[e];
                    }
                }
            }
        }
        store_tile(a, &t, b, h, i0, nq);
    }
}

void TN_CONCAT(tn_attention_install_, TN_ROWS_ISA)(tn_kernel_table *t) {
    t->attention_scratch_floats = scratch_floats;
    t->attention_forward = forward;
    t->attention_backward = TN_CONCAT(tn_attention_backward_, TN_ROWS_ISA);
}
