/* The backward of fused attention (see tn/attention.h and attention.c), built once per ISA.
 *
 * Query tiles of at least ROWS_BELOW rows take the tiled backward below, on the ISA's GEMM
 * micro-kernel; fewer rows (the backward of a decode-sized call) take a per-row loop of dot
 * products, which gives each thread whole (batch, kv head) groups. The tiled backward does
 * too, unless the launch gave it slots: then threads split the query heads evenly, and a
 * group whose heads two threads share leaves each thread's key and value gradients in a slot
 * (tn_kernel_attention_backward_finish adds them up). With 3 kv heads on 2 threads (SmolLM2 at
 * batch 1), whole groups gave one thread twice the other's work. */
#ifndef TN_ROWS_ISA
#error "compile with -DTN_ROWS_ISA=ref|avx2|avx512"
#endif
#include "attention_impl.h"

/* Few query rows: each row against its keys, dot products and axpys over the head dimension. */
static void backward_rows(const tn_attention *a, float *scratch, int32_t ith, int32_t nth) {
    int64_t B = a->q.sizes[0], Hq = a->q.sizes[1], L = a->q.sizes[2], E = a->q.sizes[3];
    int64_t Hkv = a->k.sizes[1], S = a->k.sizes[2], Ev = a->v.sizes[3], group = Hq / Hkv;
    float *qf = scratch, *dof = qf + E, *dqf = dof + Ev, *drop = dqf + E;
    float scale = (float)a->scale;
    uint64_t keep_from = tn_philox_keep_from(1.0 - a->dropout_p);
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
                if (a->dropout_p > 0) dropout_factors(a, keep_from, b, h, i, 0, keys, drop);
                for (int64_t j = 0; j < keys; j++) {
                    float p = tn_expf(score(a, qf, b, h, hk, i, j, E) - lse);
                    if (!(p > 0)) continue; /* masked out (or a row with no visible key) */
                    float dp = dot_row(dof, &a->v, row_off(&a->v, b, hk, j), Ev);
                    /* with dropout, out = (P * drop) v: dv takes the dropped probability, and
                     * the softmax's gradient dP the dropped dp (d = dO . out already is) */
                    float pd = p;
                    if (a->dropout_p > 0) pd *= drop[j], dp *= drop[j];
                    float ds = p * (dp - d) * scale;
                    axpy_row(dqf, ds, &a->k, row_off(&a->k, b, hk, j), E);
                    /* dk_j += ds * q_i (unscaled q: qf / scale), dv_j += p * dO_i */
                    float *dkj = dk + j * E, *dvj = dv + j * Ev;
                    for (int64_t e = 0; e < E; e++) dkj[e] += ds * qf[e] / scale;
                    for (int64_t e = 0; e < Ev; e++) dvj[e] += pd * dof[e];
                }
                float *dq = a->dq + ((b * Hq + h) * L + i) * E;
                memcpy(dq, dqf, sizeof(float) * (size_t)E);
            }
        }
    }
}


/* The tiled backward's scratch, per thread: the head's keys and values packed three ways and
 * its key and value gradients, then one query tile's operands and one key block's matrices. */
typedef struct bwd_scratch {
    float *ka, *va;   /* keys (over E) and values (over Ev) as A panels of mr keys */
    float *kb;        /* keys as B panels of nr columns of E, k = key: kb[ep * Sp * nr + j * nr + c] */
    float *dka, *dva; /* dK (Sp x Ep) and dV (Sp x Evp) accumulators, row-major */
    float *qb;        /* scale q as B panels over E (nr queries each), as the forward's */
    float *qe, *dob;  /* scale q and dO as B panels of nr columns, k = query */
    float *dot;       /* dO as B panels over Ev (nr queries each) */
    float *dqa;       /* dQ accumulators of the tile (QB x Ep) */
    float *pt, *st, *dpt, *ft; /* KB x QB: P^T; scores, then P^T with dropout, then dS^T; dP^T; dropout factors */
    float *pa, *pq;   /* A panels: of a KB x QB matrix (k = query), of dS (k = key) */
    float *dd, *ls;   /* per query: dO . O, log-sum-exp */
    float *rows;      /* up to NR rows of q, k, v or dO in float32, or a key block's dropout factors */
} bwd_scratch;

/* Floats of bwd_scratch for column panels of nr (at most TN_GEMM_MAX_NR). */
static int64_t tiled_floats(const tn_attention *a, int64_t nr) {
    int64_t E = a->q.sizes[3], Ev = a->v.sizes[3], Sp = padded_keys(a->k.sizes[2]);
    int64_t Ep = round_up(E, nr), Evp = round_up(Ev, nr);
    int64_t row_floats = TN_GEMM_MAX_NR * (E > Ev ? E : Ev);
    return Sp * (E + Ev + Ep + Ep + Evp) + QB * (E + Ep + Evp + Ev + Ep) + 6 * KB * QB + 2 * QB +
           (row_floats > KB ? row_floats : KB);
}

static bwd_scratch carve_bwd(const tn_attention *a, float *f, int64_t nr) {
    int64_t E = a->q.sizes[3], Ev = a->v.sizes[3], Sp = padded_keys(a->k.sizes[2]);
    int64_t Ep = round_up(E, nr), Evp = round_up(Ev, nr);
    bwd_scratch t;
    t.ka = f, f += Sp * E;
    t.va = f, f += Sp * Ev;
    t.kb = f, f += Sp * Ep;
    t.dka = f, f += Sp * Ep;
    t.dva = f, f += Sp * Evp;
    t.qb = f, f += QB * E;
    t.qe = f, f += QB * Ep;
    t.dob = f, f += QB * Evp;
    t.dot = f, f += QB * Ev;
    t.dqa = f, f += QB * Ep;
    t.pt = f, f += KB * QB;
    t.st = f, f += KB * QB;
    t.dpt = f, f += KB * QB;
    t.ft = f, f += KB * QB;
    t.pa = f, f += KB * QB;
    t.pq = f, f += KB * QB;
    t.dd = f, f += QB;
    t.ls = f, f += QB;
    t.rows = f;
    return t;
}

/* Rows i < count of view x (b, h, first + i) as B panels of nr columns, k = row:
 * dst[ep * kstride + i * nr + c] = scale x[i][ep * nr + c], zeros past n columns and for
 * count <= i < krows. */
static void rows_to_column_panels(float *dst, float *row, const tn_tensor *x, int64_t b, int64_t h, int64_t first,
                                  int64_t count, int64_t krows, int64_t kstride, int64_t n, int64_t nr, float scale) {
    int64_t np = round_up(n, nr);
    for (int64_t i = 0; i < krows; i++) {
        if (i < count)
            load_row(row, x, row_off(x, b, h, first + i), n);
        for (int64_t e = 0; e < np; e++)
            dst[(e / nr) * kstride + i * nr + e % nr] = i < count && e < n ? scale * row[e] : 0.0f;
    }
}

/* A panels of mr rows from an m x k matrix stored j-major with row stride QB (m a multiple of
 * mr): dst[jp * k * mr + i * mr + r] = x[(jp * mr + r) * QB + i]. */
static void a_panels(float *dst, const float *x, int64_t m, int64_t k, int64_t mr) {
    for (int64_t jp = 0; jp * mr < m; jp++)
        for (int64_t i = 0; i < k; i++)
            for (int64_t r = 0; r < mr; r++) dst[jp * k * mr + i * mr + r] = x[(jp * mr + r) * QB + i];
}

/* The part of group g = u / group (u a flat b * Hq + h) a thread takes from query head u up
 * to `last`: heads [h0, h1) of the group, and where their dK and dV go: the gradients when the
 * part is the whole group, else the thread's slot `which` (0 for its first part, 1 for its
 * last), tagged with the group. */
typedef struct bwd_part {
    int64_t g, h0, h1, next;
    float *dk, *dv;
} bwd_part;

static bwd_part group_part(const tn_attention *a, int32_t ith, int64_t u, int64_t last, int which) {
    int64_t group = a->q.sizes[1] / a->k.sizes[1], S = a->k.sizes[2], E = a->q.sizes[3], Ev = a->v.sizes[3];
    bwd_part p;
    p.g = u / group;
    int64_t start = p.g * group;
    p.next = start + group < last ? start + group : last;
    p.h0 = u - start;
    p.h1 = p.next - start;
    if (p.h0 == 0 && p.h1 == group) {
        p.dk = a->dk + p.g * S * E;
        p.dv = a->dv + p.g * S * Ev;
    } else {
        int64_t slot = 2 * (int64_t)ith + which;
        p.dk = a->slot_dkv + slot * tn_attention_backward_slot_floats(a);
        p.dv = p.dk + S * E;
        a->slot_group[slot] = p.g;
    }
    return p;
}

/* The tiled backward (FlashAttention-2's order): each thread owns whole (batch, kv head)
 * groups or parts of them (above), so dK and dV accumulate without atomics. Per query tile of a head it walks the key
 * blocks and runs five small GEMMs on the micro-kernel, with P recomputed from the saved
 * log-sum-exp:
 *   S^T = K (scale Q)^T,  P = exp(S - lse)        (masks and causality as the forward)
 *   dV += (P * drop)^T dO,  dP^T = V dO^T,  dS = P * (dP * drop - D),  D = rowsum(dO * O)
 *   dK += dS^T (scale Q),   dQ += dS K  (times scale at the end of the tile)
 * Head dimensions are padded to whole column panels in the accumulators. */
static void backward_tiles(const tn_kernel_table *k, const tn_attention *a, float *scratch, int32_t ith, int32_t nth) {
    int64_t B = a->q.sizes[0], Hq = a->q.sizes[1], L = a->q.sizes[2], E = a->q.sizes[3];
    int64_t Hkv = a->k.sizes[1], S = a->k.sizes[2], Ev = a->v.sizes[3], group = Hq / Hkv;
    const int64_t mr = k->gemm_mr, nr = k->gemm_nr, Sp = padded_keys(S);
    const int64_t Ep = round_up(E, nr), Evp = round_up(Ev, nr), tiles = (L + QB - 1) / QB;
    const int64_t tq = round_up((L + tiles - 1) / tiles, nr); /* even tiles of whole B panels */
    const float scale = (float)a->scale;
    const int drop = a->dropout_p > 0;
    const uint64_t keep_from = tn_philox_keep_from(1.0 - a->dropout_p);
    bwd_scratch t = carve_bwd(a, scratch, nr);
    int64_t first, last; /* flat query heads b * Hq + h */
    if (a->slot_dkv && a->slots >= 2 * nth) {
        tn_slice(B * Hq, ith, nth, &first, &last);
    } else {
        tn_slice(B * Hkv, ith, nth, &first, &last);
        first *= group, last *= group;
    }
    for (int64_t u = first; u < last;) {
        bwd_part part = group_part(a, ith, u, last, u != first);
        u = part.next;
        int64_t b = part.g / Hkv, hk = part.g % Hkv;
        for (int64_t j0 = 0; j0 < Sp; j0 += mr) {
            int64_t count = panel_rows(S, j0, mr);
            rows_to_panel(t.ka + j0 * E, t.rows, &a->k, b, hk, j0, count, mr, E, 1.0f);
            rows_to_panel(t.va + j0 * Ev, t.rows, &a->v, b, hk, j0, count, mr, Ev, 1.0f);
        }
        rows_to_column_panels(t.kb, t.rows, &a->k, b, hk, 0, S, Sp, Sp * nr, E, nr, 1.0f);
        memset(t.dka, 0, sizeof(float) * (size_t)(Sp * Ep));
        memset(t.dva, 0, sizeof(float) * (size_t)(Sp * Evp));
        for (int64_t h = hk * group + part.h0; h < hk * group + part.h1; h++)
            for (int64_t tile = 0; tile < tiles; tile++) {
                int64_t i0 = tile * tq, nq = L - i0 < tq ? L - i0 : tq; /* > 0 */
                int64_t cols = round_up(nq, nr), rows = round_up(nq, mr), width = cols > rows ? cols : rows;
                for (int64_t p0 = 0; p0 < cols; p0 += nr) {
                    int64_t count = panel_rows(nq, p0, nr);
                    rows_to_panel(t.qb + p0 * E, t.rows, &a->q, b, h, i0 + p0, count, nr, E, scale);
                    rows_to_panel(t.dot + p0 * Ev, t.rows, &a->grad_out, b, h, i0 + p0, count, nr, Ev, 1.0f);
                }
                rows_to_column_panels(t.qe, t.rows, &a->q, b, h, i0, nq, cols, QB * nr, E, nr, scale);
                rows_to_column_panels(t.dob, t.rows, &a->grad_out, b, h, i0, nq, cols, QB * nr, Ev, nr, 1.0f);
                for (int64_t i = 0; i < width; i++) {
                    t.dd[i] = t.ls[i] = 0.0f;
                    if (i >= nq) continue;
                    load_row(t.rows, &a->grad_out, row_off(&a->grad_out, b, h, i0 + i), Ev);
                    t.dd[i] = dot_row(t.rows, &a->out, row_off(&a->out, b, h, i0 + i), Ev);
                    t.ls[i] = ((const float *)a->lse.data)[b * a->lse.strides[0] + h * a->lse.strides[1] +
                                                            (i0 + i) * a->lse.strides[2]];
                }
                memset(t.dqa, 0, sizeof(float) * (size_t)(rows * Ep));
                int64_t keys = a->causal ? (i0 + nq < S ? i0 + nq : S) : S;
                for (int64_t j0 = 0; j0 < keys; j0 += KB) {
                    int64_t n = keys - j0 < KB ? keys - j0 : KB, kr = round_up(n, mr);
                    for (int64_t jp = 0; jp * mr < kr; jp++)
                        for (int64_t ip = 0; ip * nr < cols; ip++)
                            k->gemm_ukernel(E, t.ka + (j0 + jp * mr) * E, t.qb + ip * E * nr, t.st + jp * mr * QB + ip * nr,
                                            QB, 0);
                    /* P^T, zero where masked, past the block's keys or past the tile's queries */
                    for (int64_t j = 0; j < kr; j++) {
                        float *p = t.pt + j * QB;
                        const float *s = t.st + j * QB;
                        for (int64_t i = 0; i < width; i++) {
                            int visible = j < n && i < nq && !(a->causal && j0 + j > i0 + i);
                            float x = visible ? s[i] : -INFINITY;
                            if (visible && a->has_bias)
                                x += load_f(&a->bias, row_off(&a->bias, b, h, i0 + i) + (j0 + j) * a->bias.strides[3]);
                            float e = tn_expf(x - t.ls[i]);
                            p[i] = e > 0 ? e : 0.0f; /* NaN (a row that sees no key) too */
                        }
                    }
                    const float *pd = t.pt; /* P^T, or (P * drop)^T in st */
                    if (drop) {
                        for (int64_t j = 0; j < kr; j++)
                            for (int64_t i = 0; i < width; i++) t.ft[j * QB + i] = 0.0f;
                        for (int64_t i = 0; i < nq; i++) {
                            int64_t seen = a->causal && i0 + i + 1 - j0 < n ? i0 + i + 1 - j0 : n;
                            if (seen <= 0) continue;
                            dropout_factors(a, keep_from, b, h, i0 + i, j0, seen, t.rows);
                            for (int64_t j = 0; j < seen; j++) t.ft[j * QB + i] = t.rows[j];
                        }
                        for (int64_t j = 0; j < kr; j++)
                            for (int64_t i = 0; i < width; i++) t.st[j * QB + i] = t.pt[j * QB + i] * t.ft[j * QB + i];
                        pd = t.st;
                    }
                    a_panels(t.pa, pd, kr, cols, mr);
                    for (int64_t jp = 0; jp * mr < kr; jp++)
                        for (int64_t ep = 0; ep * nr < Evp; ep++)
                            k->gemm_ukernel(cols, t.pa + jp * cols * mr, t.dob + ep * QB * nr,
                                            t.dva + (j0 + jp * mr) * Evp + ep * nr, Evp, 1);
                    for (int64_t jp = 0; jp * mr < kr; jp++)
                        for (int64_t ip = 0; ip * nr < cols; ip++)
                            k->gemm_ukernel(Ev, t.va + (j0 + jp * mr) * Ev, t.dot + ip * Ev * nr,
                                            t.dpt + jp * mr * QB + ip * nr, QB, 0);
                    for (int64_t j = 0; j < kr; j++)
                        for (int64_t i = 0; i < width; i++) {
                            float p = t.pt[j * QB + i], dp = t.dpt[j * QB + i];
                            if (drop) dp *= t.ft[j * QB + i];
                            t.st[j * QB + i] = p > 0 ? p * (dp - t.dd[i]) : 0.0f;
                        }
                    a_panels(t.pa, t.st, kr, cols, mr);
                    for (int64_t jp = 0; jp * mr < kr; jp++)
                        for (int64_t ep = 0; ep * nr < Ep; ep++)
                            k->gemm_ukernel(cols, t.pa + jp * cols * mr, t.qe + ep * QB * nr,
                                            t.dka + (j0 + jp * mr) * Ep + ep * nr, Ep, 1);
                    /* dS as A panels of mr queries over the block's keys */
                    for (int64_t ip = 0; ip * mr < rows; ip++)
                        for (int64_t j = 0; j < n; j++)
                            memcpy(t.pq + ip * n * mr + j * mr, t.st + j * QB + ip * mr, sizeof(float) * (size_t)mr);
                    for (int64_t ip = 0; ip * mr < rows; ip++)
                        for (int64_t ep = 0; ep * nr < Ep; ep++)
                            k->gemm_ukernel(n, t.pq + ip * n * mr, t.kb + ep * Sp * nr + j0 * nr,
                                            t.dqa + ip * mr * Ep + ep * nr, Ep, 1);
                }
                for (int64_t i = 0; i < nq; i++) {
                    float *dq = a->dq + ((b * Hq + h) * L + i0 + i) * E;
                    for (int64_t e = 0; e < E; e++) dq[e] = scale * t.dqa[i * Ep + e];
                }
            }
        for (int64_t j = 0; j < S; j++) {
            memcpy(part.dk + j * E, t.dka + j * Ep, sizeof(float) * (size_t)E);
            memcpy(part.dv + j * Ev, t.dva + j * Evp, sizeof(float) * (size_t)Ev);
        }
    }
}

int64_t TN_CONCAT(tn_attention_backward_scratch_, TN_ROWS_ISA)(const tn_attention *a) {
    int64_t e = a->q.sizes[3], ev = a->v.sizes[3];
    int64_t rows = 2 * e + ev + (a->dropout_p > 0 ? a->k.sizes[2] : 0);
    return a->q.sizes[2] < ROWS_BELOW ? rows : tiled_floats(a, TN_GEMM_MAX_NR);
}

void TN_CONCAT(tn_attention_backward_, TN_ROWS_ISA)(const tn_kernel_table *k, const tn_attention *a, float *scratch,
                                                    int32_t ith, int32_t nth) {
    if (a->q.sizes[2] < ROWS_BELOW)
        backward_rows(a, scratch, ith, nth);
    else
        backward_tiles(k, a, scratch, ith, nth);
}
