/* Reductions (see tn/reduce.h). The dimensions where `out` has stride 0 (and size > 1) are
 * reduced; the others index outputs. Each thread takes a range of outputs; for each, the
 * reduced dimensions are walked with the smallest input stride innermost. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "elem.h"
#include "half.h"
#include "reduce_impl.h"
#include "strided.h"
#include "table.h"
#include "tn/reduce.h"

typedef tn_reduce_part acc;

static acc acc_init(tn_reduce_op op) {
    acc a = {op == TN_REDUCE_PROD ? 1.0 : 0.0, op == TN_REDUCE_PROD || op == TN_REDUCE_ALL, 0, 0};
    return a;
}

static void combine(tn_reduce_op op, acc *a, tn_value v, int fl, int64_t pos) {
    switch (op) {
    case TN_REDUCE_SUM:
        if (fl) a->f += v.re; else a->i = (int64_t)((uint64_t)a->i + (uint64_t)v.i);
        break;
    case TN_REDUCE_PROD:
        if (fl) a->f *= v.re; else a->i = (int64_t)((uint64_t)a->i * (uint64_t)v.i);
        break;
    case TN_REDUCE_NORM2: a->f += fl ? v.re * v.re : (double)v.i * (double)v.i; break;
    case TN_REDUCE_ALL: a->i = a->i && (fl ? v.re != 0 : v.i != 0); break;
    case TN_REDUCE_ANY: a->i = a->i || (fl ? v.re != 0 : v.i != 0); break;
    default: { /* max, min and the arg versions: keep the first extreme; NaN wins */
        int want_max = op == TN_REDUCE_MAX || op == TN_REDUCE_ARGMAX;
        int better;
        if (!a->started) better = 1;
        else if (fl) {
            if (a->f != a->f) better = 0;
            else if (v.re != v.re) better = 1;
            else better = want_max ? v.re > a->f : v.re < a->f;
        } else better = want_max ? v.i > a->i : v.i < a->i;
        if (better) {
            a->f = v.re;
            a->i = v.i;
            a->pos = pos;
            a->started = 1;
        }
    }
    }
}

/* Sum (or with `squares`, the sum of squares) of bfloat16 or float16 elements [i0, i1) of a
 * row, widened to float32 in chunks that stay in L1 and added as float32 rows are. */
static double sum_half(tn_dtype t, const char *p, int64_t stride, int64_t i0, int64_t i1, int squares) {
    enum { CHUNK = 1024 };
    const tn_kernel_table *k = tn_kernels();
    float buf[CHUNK];
    double sum = 0;
    for (int64_t i = i0; i < i1; i += CHUNK) {
        int64_t m = i1 - i < CHUNK ? i1 - i : CHUNK;
        k->widen_half(t, m, buf, 1, (const uint16_t *)(const void *)p + i * stride, stride);
        sum += squares ? k->sq_dev_f32(m, buf, 0.0f) : k->sum_f32(m, buf);
    }
    return sum;
}

/* Sum of int64 or bool elements [i0, i1) of a row, wrapping as combine() does. A contiguous
 * row has its own loop (int64: the ISA's row, sum_i64), so that it vectorizes (one strided
 * loop for both took 1.3x the CPU's time on 1M int64). */
static uint64_t sum_int(tn_dtype t, const char *p, int64_t stride, int64_t i0, int64_t i1) {
    uint64_t sum = 0;
    if (t == TN_DTYPE_BOOL) {
        const uint8_t *b = (const uint8_t *)p;
        if (stride == 1) {
            for (int64_t i = i0; i < i1; i += (int64_t)1 << 24) { /* 32-bit counts of 2^24 elements */
                int64_t end = i1 - i < ((int64_t)1 << 24) ? i1 : i + ((int64_t)1 << 24);
                uint32_t part = 0;
                for (int64_t j = i; j < end; j++) part += b[j] != 0;
                sum += part;
            }
            return sum;
        }
        for (int64_t i = i0; i < i1; i++) sum += b[i * stride] != 0;
        return sum;
    }
    const uint64_t *q = (const uint64_t *)(const void *)p;
    if (stride == 1) return tn_kernels()->sum_i64(i1 - i0, (const int64_t *)(const void *)p + i0);
    for (int64_t i = i0; i < i1; i++) sum += q[i * stride];
    return sum;
}

static int is_extreme(tn_reduce_op op) {
    return op == TN_REDUCE_MAX || op == TN_REDUCE_MIN || op == TN_REDUCE_ARGMAX || op == TN_REDUCE_ARGMIN;
}

/* combine() of max, min and the arg versions over float32 elements [i0, i1) of a row, without
 * loading each through tn_value: the first extreme is kept, and a NaN wins. */
static void extreme_f32(int want_max, const float *q, int64_t stride, int64_t i0, int64_t i1, int64_t base, acc *a) {
    for (int64_t i = i0; i < i1; i++) {
        float x = q[i * stride];
        if (a->started && (a->f != a->f || !(x != x || (want_max ? x > a->f : x < a->f)))) continue;
        a->f = x;
        a->i = 0;
        a->pos = base + i;
        a->started = 1;
    }
}

/* extreme_f32 over a contiguous row, in chunks: the ISA's vector extreme of each chunk first,
 * and, for a position, the chunk walked only when it beats the extreme so far (or holds a
 * NaN). Chunks with positions stay in L1 for that walk; without them (amax, amin) they are 64
 * times longer, since each call's set-up and final fold of lanes cost a 1024-element chunk a
 * third of its time. Once a NaN is the extreme nothing beats it. */
static int64_t extreme_chunk(int need_pos) { return need_pos ? 1024 : 65536; }

static void extreme_f32_row(int want_max, int need_pos, const float *q, int64_t i0, int64_t i1, int64_t base,
                            acc *a) {
    const int64_t chunk = extreme_chunk(need_pos);
    const tn_kernel_table *k = tn_kernels();
    for (int64_t c = i0; c < i1; c += chunk) {
        if (a->started && a->f != a->f) return;
        int64_t e = i1 - c < chunk ? i1 : c + chunk;
        double m = k->extreme_f32(e - c, q + c, want_max);
        if (a->started && m == m && !(want_max ? m > a->f : m < a->f)) continue;
        if (need_pos) { /* the first element equal to the chunk's extreme (or NaN) */
            int64_t i = c;
            if (m == m)
                while (q[i] != (float)m) i++;
            else
                while (q[i] == q[i]) i++;
            a->f = q[i];
            a->i = 0;
            a->pos = base + i;
            a->started = 1;
        } else { /* amax and amin: the value is all they keep */
            a->f = m;
            a->i = 0;
            a->started = 1;
        }
    }
}

/* any (or all) of n bytes folded into the accumulator `so_far`, a chunk at a time (each chunk's
 * loop vectorizes) until the answer is known. */
static int64_t bool_fold(int any, const uint8_t *p, int64_t n, int64_t so_far) {
    enum { CHUNK = 4096 };
    for (int64_t c = 0; c < n && so_far == !any; c += CHUNK) {
        int64_t e = n - c < CHUNK ? n : c + CHUNK;
        uint8_t seen = 0; /* a nonzero byte (any), or a zero byte (all) */
        for (int64_t j = c; j < e; j++) seen |= any ? p[j] != 0 : p[j] == 0;
        if (seen) so_far = any;
    }
    return so_far;
}

/* The extreme of int64 elements [i0, i1) of a row (and, with need_pos, the first position
 * that holds it) folded into the accumulator. */
static void extreme_i64(int want_max, int need_pos, const int64_t *q, int64_t stride, int64_t i0, int64_t i1,
                        int64_t base, acc *a) {
    if (stride == 1) { /* like extreme_f32_row: the ISA's row extreme of each chunk first */
        const int64_t chunk = extreme_chunk(need_pos);
        for (int64_t c = i0; c < i1; c += chunk) {
            int64_t e = i1 - c < chunk ? i1 : c + chunk;
            int64_t m = tn_kernels()->extreme_i64(e - c, q + c, want_max);
            if (a->started && !(want_max ? m > a->i : m < a->i)) continue;
            int64_t i = c;
            if (need_pos)
                while (q[i] != m) i++;
            a->f = (double)m;
            a->i = m;
            a->pos = base + i;
            a->started = 1;
        }
        return;
    }
    for (int64_t i = i0; i < i1; i++) {
        int64_t x = q[i * stride];
        if (a->started && !(want_max ? x > a->i : x < a->i)) continue;
        a->f = (double)x;
        a->i = x;
        a->pos = base + i;
        a->started = 1;
    }
}

/* Folds reduced elements [j0, j1) (numbered row by row) of the output at input offset off_in. */
static void accumulate(tn_reduce_op op, const split *s, const tn_tensor *in, int64_t off_in,
                       int64_t j0, int64_t j1, acc *a) {
    int fl = tn_dtype_is_float(in->dtype);
    int32_t ies = tn_dtype_size(in->dtype);
    int64_t row = s->nred ? s->red_sizes[s->nred - 1] : 1;
    int64_t row_stride = s->nred ? s->red_in[s->nred - 1] : 0;
    int need_pos = s->has_idx || op == TN_REDUCE_ARGMAX || op == TN_REDUCE_ARGMIN;
    if (row == 0 || j0 >= j1) return;
    for (int64_t r = j0 / row; r * row < j1; r++) {
        int64_t i0 = r * row < j0 ? j0 - r * row : 0;
        int64_t i1 = (r + 1) * row > j1 ? j1 - r * row : row;
        const char *p = (const char *)in->data + row_base(s, off_in, r) * ies;
        if (in->dtype == TN_DTYPE_F32 && row_stride == 1 && op == TN_REDUCE_SUM) {
            a->f += tn_kernels()->sum_f32(i1 - i0, (const float *)p + i0);
            continue;
        }
        if (in->dtype == TN_DTYPE_F32 && row_stride == 1 && op == TN_REDUCE_NORM2) {
            a->f += tn_kernels()->sq_dev_f32(i1 - i0, (const float *)p + i0, 0.0f);
            continue;
        }
        if (in->dtype == TN_DTYPE_F32 && row_stride == 1 && op == TN_REDUCE_PROD) {
            a->f *= tn_kernels()->prod_f32(i1 - i0, (const float *)p + i0);
            continue;
        }
        if (in->dtype == TN_DTYPE_BOOL && row_stride == 1 && (op == TN_REDUCE_ALL || op == TN_REDUCE_ANY)) {
            a->i = bool_fold(op == TN_REDUCE_ANY, (const uint8_t *)p + i0, i1 - i0, a->i);
            continue;
        }
        if ((op == TN_REDUCE_SUM || op == TN_REDUCE_NORM2) && is_half(in->dtype)) {
            a->f += sum_half(in->dtype, p, row_stride, i0, i1, op == TN_REDUCE_NORM2);
            continue;
        }
        if (op == TN_REDUCE_SUM && !fl && (in->dtype == TN_DTYPE_I64 || in->dtype == TN_DTYPE_BOOL)) {
            a->i = (int64_t)((uint64_t)a->i + sum_int(in->dtype, p, row_stride, i0, i1));
            continue;
        }
        if (in->dtype == TN_DTYPE_I64 && is_extreme(op)) {
            extreme_i64(op == TN_REDUCE_MAX || op == TN_REDUCE_ARGMAX, need_pos, (const int64_t *)(const void *)p,
                        row_stride, i0, i1, r * row, a);
            continue;
        }
        if (in->dtype == TN_DTYPE_F32 && is_extreme(op) && row_stride == 1) {
            extreme_f32_row(op == TN_REDUCE_MAX || op == TN_REDUCE_ARGMAX, need_pos, (const float *)p, i0, i1, r * row, a);
            continue;
        }
        if (is_half(in->dtype) && is_extreme(op) && row_stride == 1) { /* widened a chunk at a time */
            float buf[1024];
            for (int64_t c = i0, m; c < i1; c += m) {
                m = i1 - c < 1024 ? i1 - c : 1024;
                tn_kernels()->widen_half(in->dtype, m, buf, 1, (const uint16_t *)(const void *)p + c, 1);
                extreme_f32_row(op == TN_REDUCE_MAX || op == TN_REDUCE_ARGMAX, need_pos, buf, 0, m, r * row + c, a);
            }
            continue;
        }
        if (in->dtype == TN_DTYPE_F32 && is_extreme(op)) {
            extreme_f32(op == TN_REDUCE_MAX || op == TN_REDUCE_ARGMAX, (const float *)p, row_stride, i0, i1, r * row, a);
            continue;
        }
        for (int64_t i = i0; i < i1; i++)
            combine(op, a, tn_load(p + i * row_stride * ies, in->dtype), fl, r * row + i);
    }
}

static void store_result(tn_reduce_op op, const tn_tensor *out, const tn_tensor *idx,
                         const split *s, int64_t off_out, int64_t off_idx, const acc *a, double scale) {
    int fl = tn_dtype_is_float(s->in_dtype);
    tn_value v = {0, 0, 0, 0};
    if (op == TN_REDUCE_ARGMAX || op == TN_REDUCE_ARGMIN) {
        v.i = a->pos;
        v.is_int = 1;
    } else if (op == TN_REDUCE_ALL || op == TN_REDUCE_ANY || !fl) {
        v.i = a->i;
        v.is_int = 1;
        if (op == TN_REDUCE_SUM && scale != 1.0) { /* mean of integers is refused upstream */
            v.re = (double)a->i * scale;
            v.is_int = 0;
        }
    } else {
        v.re = op == TN_REDUCE_SUM ? a->f * scale : op == TN_REDUCE_NORM2 ? sqrt(a->f) : a->f;
    }
    if (v.is_int) v.re = (double)v.i;
    tn_store((char *)out->data + off_out * tn_dtype_size(out->dtype), out->dtype, v);
    if (idx) {
        tn_value pv = {(double)a->pos, 0, a->pos, 1};
        tn_store((char *)idx->data + off_idx * 8, TN_DTYPE_I64, pv);
    }
}

/* Outputs [first, last) of any (or all) over contiguous boolean rows of `row` bytes. */
static void bool_rows(int any, uint8_t *out, int64_t out_stride, const uint8_t *in, int64_t in_stride, int64_t row,
                      int64_t first, int64_t last) {
    for (int64_t o = first; o < last; o++) {
        const uint8_t *p = in + o * in_stride;
        uint8_t seen = 0; /* a nonzero byte (any), or a zero byte (all) */
        for (int64_t j = 0; j < row; j++) seen |= any ? p[j] != 0 : p[j] == 0;
        out[o * out_stride] = any ? seen : !seen;
    }
}

void tn_kernel_reduce(tn_reduce_op op, const tn_tensor *out, const tn_tensor *idx,
                      const tn_tensor *in, double scale, int32_t ith, int32_t nth) {
    split s;
    split_dims(&s, out, idx, in);
    int64_t first, last;
    tn_slice(s.nout, ith, nth, &first, &last);
    if ((op == TN_REDUCE_SUM || op == TN_REDUCE_NORM2 || op == TN_REDUCE_PROD || op == TN_REDUCE_MAX ||
         op == TN_REDUCE_MIN) &&
        in->dtype == TN_DTYPE_F32 && out->dtype == TN_DTYPE_F32 && !idx && s.nred == 1 && s.red_in[0] == 1 &&
        s.nreduce > 0) {
        /* float32 rows, contiguous (x.sum(-1), mean, norms, amax): no per-element dispatch */
        const tn_kernel_table *k = tn_kernels();
        float *o_data = out->data;
        const float *i_data = in->data;
        for (int64_t o = first; o < last; o++) {
            int64_t off_out = o * s.kept_out[0], off_idx, off_in = o * s.kept_in[0];
            if (s.nkept != 1) /* (rows of a matrix need no division per row) */
                output_offsets(&s, o, &off_out, &off_idx, &off_in);
            const float *x = i_data + off_in;
            int64_t n = s.nreduce;
            o_data[off_out] = op == TN_REDUCE_SUM     ? (float)(k->sum_f32(n, x) * scale)
                              : op == TN_REDUCE_NORM2 ? (float)sqrt(k->sq_dev_f32(n, x, 0.0f))
                              : op == TN_REDUCE_PROD  ? (float)k->prod_f32(n, x)
                                                      : k->extreme_f32(n, x, op == TN_REDUCE_MAX);
        }
        return;
    }
    if (tn_reduce_columns(op, &s, out, idx, in, scale, first, last, 0, s.nreduce, NULL)) return;
    if ((op == TN_REDUCE_ANY || op == TN_REDUCE_ALL) && in->dtype == TN_DTYPE_BOOL && out->dtype == TN_DTYPE_BOOL &&
        !idx && s.nkept <= 1 && (s.nred == 0 || (s.nred == 1 && s.red_in[0] == 1))) {
        /* any/all of boolean rows (masks, isin): bytes, no per-element dispatch */
        bool_rows(op == TN_REDUCE_ANY, out->data, s.nkept ? s.kept_out[0] : 0, in->data, s.nkept ? s.kept_in[0] : 0,
                  s.nreduce, first, last);
        return;
    }
    for (int64_t o = first; o < last; o++) {
        int64_t off_out, off_idx, off_in;
        output_offsets(&s, o, &off_out, &off_idx, &off_in);
        acc a = acc_init(op);
        accumulate(op, &s, in, off_in, 0, s.nreduce, &a);
        store_result(op, out, idx, &s, off_out, off_idx, &a, scale);
    }
}

void tn_kernel_reduce_part(tn_reduce_op op, const tn_tensor *out, const tn_tensor *idx,
                           const tn_tensor *in, int64_t o, int32_t ith, int32_t nth,
                           tn_reduce_part *part) {
    split s;
    split_dims(&s, out, idx, in);
    int64_t off_out, off_idx, off_in, j0, j1;
    output_offsets(&s, o, &off_out, &off_idx, &off_in);
    tn_slice(s.nreduce, ith, nth, &j0, &j1);
    *part = acc_init(op);
    accumulate(op, &s, in, off_in, j0, j1, part);
}

void tn_kernel_reduce_finish(tn_reduce_op op, const tn_tensor *out, const tn_tensor *idx,
                             const tn_tensor *in, double scale, int64_t o,
                             const tn_reduce_part *parts, int32_t nparts) {
    split s;
    split_dims(&s, out, idx, in);
    int fl = tn_dtype_is_float(in->dtype);
    acc a = acc_init(op);
    for (int32_t k = 0; k < nparts; k++) {
        const acc *b = &parts[k];
        tn_value v = {b->f, 0, b->i, !fl};
        if (op == TN_REDUCE_NORM2) /* the parts are sums of squares */
            a.f += b->f;
        else if (op == TN_REDUCE_SUM || op == TN_REDUCE_PROD || op == TN_REDUCE_ALL || op == TN_REDUCE_ANY)
            combine(op, &a, v, fl && op != TN_REDUCE_ALL && op != TN_REDUCE_ANY, 0);
        else if (b->started) /* parts come in order, so the first extreme stays first */
            combine(op, &a, v, fl, b->pos);
    }
    int64_t off_out, off_idx, off_in;
    output_offsets(&s, o, &off_out, &off_idx, &off_in);
    store_result(op, out, idx, &s, off_out, off_idx, &a, scale);
}

/* Chan's combination of two sets' moments: the count, the mean and the sum of squared
 * deviations from it. */
static void moments_add(tn_var_part *a, double n, double mean, double m2) {
    if (n == 0) return;
    double total = a->n + n, delta = mean - a->mean;
    a->m2 += m2 + delta * delta * a->n * n / total;
    a->mean += delta * n / total;
    a->n = total;
}

/* The moments of reduced elements [j0, j1) (numbered row by row) of the output at input
 * offset off_in. Contiguous float32 rows go in blocks that stay in L1, each read twice there
 * (its mean, then its deviations: one pass over memory), 16-bit ones widened into such a block;
 * other rows in two passes over the range, in double. */
static tn_var_part moments_range(const split *s, const tn_tensor *in, int64_t off_in, int64_t j0, int64_t j1) {
    enum { BLOCK = 2048 };
    tn_var_part m = {0, 0, 0};
    const tn_kernel_table *k = tn_kernels();
    int32_t ies = tn_dtype_size(in->dtype);
    int64_t row = s->nred ? s->red_sizes[s->nred - 1] : 1, row_stride = s->nred ? s->red_in[s->nred - 1] : 0;
    if (row == 0 || j0 >= j1) return m;
    if ((in->dtype == TN_DTYPE_F32 || is_half(in->dtype)) && row_stride == 1) {
        float buf[BLOCK]; /* a 16-bit block widened */
        for (int64_t r = j0 / row; r * row < j1; r++) {
            int64_t i0 = r * row < j0 ? j0 - r * row : 0, i1 = (r + 1) * row > j1 ? j1 - r * row : row;
            const char *p = (const char *)in->data + row_base(s, off_in, r) * ies;
            for (int64_t i = i0, b; i < i1; i += b) {
                b = i1 - i < BLOCK ? i1 - i : BLOCK;
                const float *x = buf;
                if (in->dtype == TN_DTYPE_F32)
                    x = (const float *)(const void *)p + i;
                else
                    k->widen_half(in->dtype, b, buf, 1, (const uint16_t *)(const void *)p + i, 1);
                double mu = k->sum_f32(b, x) / (double)b;
                float c = (float)mu; /* deviations from c, corrected to deviations from mu */
                double m2 = k->sq_dev_f32(b, x, c) - (double)b * (mu - c) * (mu - c);
                moments_add(&m, (double)b, mu, m2 > 0 ? m2 : 0);
            }
        }
        return m;
    }
    double sum = 0, m2 = 0;
    for (int pass = 0; pass < 2; pass++) {
        double mu = sum / (double)(j1 - j0);
        for (int64_t r = j0 / row; r * row < j1; r++) {
            int64_t i0 = r * row < j0 ? j0 - r * row : 0, i1 = (r + 1) * row > j1 ? j1 - r * row : row;
            const char *p = (const char *)in->data + row_base(s, off_in, r) * ies;
            for (int64_t i = i0; i < i1; i++) {
                double x = tn_load(p + i * row_stride * ies, in->dtype).re;
                if (pass == 0)
                    sum += x;
                else
                    m2 += (x - mu) * (x - mu);
            }
        }
    }
    moments_add(&m, (double)(j1 - j0), sum / (double)(j1 - j0), m2);
    return m;
}

static void store_var(const split *s, const tn_tensor *var, const tn_tensor *mean, int64_t o, const tn_var_part *m,
                      double correction, int take_sqrt) {
    int64_t off_out, off_mean, off_in;
    output_offsets(s, o, &off_out, &off_mean, &off_in);
    double n = (double)s->nreduce, denom = n - correction > 0 ? n - correction : 0;
    double v = m->m2 / denom; /* 0/0 is NaN and x/0 is inf, as PyTorch gives */
    double mu = s->nreduce ? m->mean : NAN;
    tn_value out_v = {take_sqrt ? sqrt(v) : v, 0, 0, 0};
    tn_store((char *)var->data + off_out * tn_dtype_size(var->dtype), var->dtype, out_v);
    if (mean) {
        tn_value mv = {mu, 0, 0, 0};
        tn_store((char *)mean->data + off_mean * tn_dtype_size(mean->dtype), mean->dtype, mv);
    }
}

void tn_kernel_var(const tn_tensor *var, const tn_tensor *mean, const tn_tensor *in,
                   double correction, int take_sqrt, int32_t ith, int32_t nth) {
    split s;
    split_dims(&s, var, mean, in);
    int64_t first, last;
    tn_slice(s.nout, ith, nth, &first, &last);
    for (int64_t o = first; o < last; o++) {
        int64_t off_out, off_mean, off_in;
        output_offsets(&s, o, &off_out, &off_mean, &off_in);
        tn_var_part m = moments_range(&s, in, off_in, 0, s.nreduce);
        store_var(&s, var, mean, o, &m, correction, take_sqrt);
    }
}

void tn_kernel_var_part(const tn_tensor *var, const tn_tensor *mean, const tn_tensor *in, int64_t o, int32_t ith,
                        int32_t nth, tn_var_part *part) {
    split s;
    split_dims(&s, var, mean, in);
    int64_t off_out, off_mean, off_in, j0, j1;
    output_offsets(&s, o, &off_out, &off_mean, &off_in);
    tn_slice(s.nreduce, ith, nth, &j0, &j1);
    *part = moments_range(&s, in, off_in, j0, j1);
}

void tn_kernel_var_finish(const tn_tensor *var, const tn_tensor *mean, const tn_tensor *in, double correction,
                          int take_sqrt, int64_t o, const tn_var_part *parts, int32_t nparts) {
    split s;
    split_dims(&s, var, mean, in);
    tn_var_part m = {0, 0, 0};
    for (int32_t k = 0; k < nparts; k++) moments_add(&m, parts[k].n, parts[k].mean, parts[k].m2);
    store_var(&s, var, mean, o, &m, correction, take_sqrt);
}

void tn_kernel_histc(const tn_tensor *out, const tn_tensor *in, double lo, double hi) {
    int64_t bins = out->sizes[0], numel = tn_tensor_numel(in);
    int32_t oes = tn_dtype_size(out->dtype), ies = tn_dtype_size(in->dtype);
    for (int64_t b = 0; b < bins; b++) {
        tn_value zero = {0, 0, 0, 1};
        tn_store((char *)out->data + b * out->strides[0] * oes, out->dtype, zero);
    }
    for (int64_t i = 0; i < numel; i++) {
        double x = tn_load((const char *)in->data + tn_row_offset(in, i, 0) * ies, in->dtype).re;
        if (!(x >= lo && x <= hi)) continue; /* outside the range, or NaN */
        int64_t b = (int64_t)((x - lo) * (double)bins / (hi - lo));
        if (b >= bins) b = bins - 1; /* the upper edge belongs to the last bin */
        char *po = (char *)out->data + b * out->strides[0] * oes;
        tn_value v = tn_load(po, out->dtype);
        v.i += 1;
        v.re += 1;
        tn_store(po, out->dtype, v);
    }
}
