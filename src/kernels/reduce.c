/* Reductions (see tn/reduce.h). The dimensions where `out` has stride 0 (and size > 1) are
 * reduced; the others index outputs. Each thread takes a range of outputs; for each, the
 * reduced dimensions are walked with the smallest input stride innermost. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "elem.h"
#include "half.h"
#include "strided.h"
#include "table.h"
#include "tn/reduce.h"

typedef struct split {
    int32_t nkept, nred;
    int64_t kept_sizes[TN_MAX_DIMS], kept_out[TN_MAX_DIMS], kept_idx[TN_MAX_DIMS], kept_in[TN_MAX_DIMS];
    int64_t red_sizes[TN_MAX_DIMS], red_in[TN_MAX_DIMS];
    int64_t nout, nreduce;
    tn_dtype in_dtype;
} split;

static void split_dims(split *s, const tn_tensor *out, const tn_tensor *idx, const tn_tensor *in) {
    memset(s, 0, sizeof *s);
    s->nout = s->nreduce = 1;
    s->in_dtype = in->dtype;
    for (int32_t d = 0; d < in->ndim; d++) {
        if (in->sizes[d] == 1) continue;
        if (out->strides[d] == 0) {
            s->red_sizes[s->nred] = in->sizes[d];
            s->red_in[s->nred++] = in->strides[d];
            s->nreduce *= in->sizes[d];
        } else {
            s->kept_sizes[s->nkept] = in->sizes[d];
            s->kept_out[s->nkept] = out->strides[d];
            s->kept_idx[s->nkept] = idx ? idx->strides[d] : 0;
            s->kept_in[s->nkept++] = in->strides[d];
            s->nout *= in->sizes[d];
        }
    }
    /* innermost reduced dimension: the smallest input stride */
    for (int32_t a = 0; a + 1 < s->nred; a++)
        for (int32_t b = a + 1; b < s->nred; b++)
            if (llabs(s->red_in[b]) > llabs(s->red_in[a])) {
                int64_t t = s->red_sizes[a]; s->red_sizes[a] = s->red_sizes[b]; s->red_sizes[b] = t;
                t = s->red_in[a]; s->red_in[a] = s->red_in[b]; s->red_in[b] = t;
            }
}

/* Offsets of output number o in out, idx and in. */
static void output_offsets(const split *s, int64_t o, int64_t *out, int64_t *idx, int64_t *in) {
    *out = *idx = *in = 0;
    for (int32_t d = s->nkept - 1; d >= 0; d--) {
        int64_t k = o % s->kept_sizes[d];
        o /= s->kept_sizes[d];
        *out += k * s->kept_out[d];
        *idx += k * s->kept_idx[d];
        *in += k * s->kept_in[d];
    }
}

/* Input offset of reduced row r (the innermost reduced dimension runs along the row). */
static int64_t row_base(const split *s, int64_t base, int64_t r) {
    for (int32_t d = s->nred - 2; d >= 0; d--) {
        base += (r % s->red_sizes[d]) * s->red_in[d];
        r /= s->red_sizes[d];
    }
    return base;
}

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

/* Sum of bfloat16 or float16 elements [i0, i1) of a row, widened to float32 in chunks and
 * added as float32 rows are. */
static double sum_half(tn_dtype t, const char *p, int64_t stride, int64_t i0, int64_t i1) {
    const tn_kernel_table *k = tn_kernels();
    float buf[256];
    double sum = 0;
    for (int64_t i = i0; i < i1; i += 256) {
        int64_t m = i1 - i < 256 ? i1 - i : 256;
        k->widen_half(t, m, buf, 1, (const uint16_t *)(const void *)p + i * stride, stride);
        sum += k->sum_f32(m, buf);
    }
    return sum;
}

/* Sum of int64 or bool elements [i0, i1) of a row, wrapping as combine() does. A contiguous
 * row has its own loop, with four partial sums, so that it vectorizes (one strided loop for
 * both took 1.3x the CPU's time on 1M int64). */
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
    if (stride == 1) {
        uint64_t s[4] = {0, 0, 0, 0};
        int64_t i = i0;
        for (; i + 4 <= i1; i += 4)
            for (int l = 0; l < 4; l++) s[l] += q[i + l];
        for (; i < i1; i++) sum += q[i];
        return sum + (s[0] + s[1]) + (s[2] + s[3]);
    }
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

/* The same over int64 elements. */
static void extreme_i64(int want_max, const int64_t *q, int64_t stride, int64_t i0, int64_t i1, int64_t base, acc *a) {
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
    if (row == 0 || j0 >= j1) return;
    for (int64_t r = j0 / row; r * row < j1; r++) {
        int64_t i0 = r * row < j0 ? j0 - r * row : 0;
        int64_t i1 = (r + 1) * row > j1 ? j1 - r * row : row;
        const char *p = (const char *)in->data + row_base(s, off_in, r) * ies;
        if (op == TN_REDUCE_SUM && in->dtype == TN_DTYPE_F32 && row_stride == 1) {
            a->f += tn_kernels()->sum_f32(i1 - i0, (const float *)p + i0);
            continue;
        }
        if (op == TN_REDUCE_SUM && (in->dtype == TN_DTYPE_BF16 || in->dtype == TN_DTYPE_F16)) {
            a->f += sum_half(in->dtype, p, row_stride, i0, i1);
            continue;
        }
        if (op == TN_REDUCE_SUM && !fl && (in->dtype == TN_DTYPE_I64 || in->dtype == TN_DTYPE_BOOL)) {
            a->i = (int64_t)((uint64_t)a->i + sum_int(in->dtype, p, row_stride, i0, i1));
            continue;
        }
        if (in->dtype == TN_DTYPE_I64 && is_extreme(op)) {
            extreme_i64(op == TN_REDUCE_MAX || op == TN_REDUCE_ARGMAX, (const int64_t *)(const void *)p, row_stride, i0,
                        i1, r * row, a);
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
        v.re = op == TN_REDUCE_SUM ? a->f * scale : a->f;
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
    if (op == TN_REDUCE_SUM && in->dtype == TN_DTYPE_F32 && out->dtype == TN_DTYPE_F32 && !idx &&
        s.nred == 1 && s.red_in[0] == 1) {
        /* float32 sums of contiguous rows (x.sum(-1), mean, norms): no per-element dispatch */
        double (*sum)(int64_t, const float *) = tn_kernels()->sum_f32;
        float *o_data = out->data;
        const float *i_data = in->data;
        if (s.nkept == 1) { /* rows of a matrix: offsets without a division per row */
            for (int64_t o = first; o < last; o++)
                o_data[o * s.kept_out[0]] = (float)(sum(s.nreduce, i_data + o * s.kept_in[0]) * scale);
            return;
        }
        for (int64_t o = first; o < last; o++) {
            int64_t off_out, off_idx, off_in;
            output_offsets(&s, o, &off_out, &off_idx, &off_in);
            o_data[off_out] = (float)(sum(s.nreduce, i_data + off_in) * scale);
        }
        return;
    }
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
        if (op == TN_REDUCE_SUM || op == TN_REDUCE_PROD || op == TN_REDUCE_ALL || op == TN_REDUCE_ANY)
            combine(op, &a, v, fl && op != TN_REDUCE_ALL && op != TN_REDUCE_ANY, 0);
        else if (b->started) /* parts come in order, so the first extreme stays first */
            combine(op, &a, v, fl, b->pos);
    }
    int64_t off_out, off_idx, off_in;
    output_offsets(&s, o, &off_out, &off_idx, &off_in);
    store_result(op, out, idx, &s, off_out, off_idx, &a, scale);
}

void tn_kernel_var(const tn_tensor *var, const tn_tensor *mean, const tn_tensor *in,
                   double correction, int take_sqrt, int32_t ith, int32_t nth) {
    split s;
    split_dims(&s, var, mean, in);
    int32_t ies = tn_dtype_size(in->dtype), oes = tn_dtype_size(var->dtype);
    int64_t row = s.nred ? s.red_sizes[s.nred - 1] : 1, row_stride = s.nred ? s.red_in[s.nred - 1] : 0;
    int64_t rows = row ? s.nreduce / row : 0;
    double n = (double)s.nreduce, denom = n - correction > 0 ? n - correction : 0;
    int64_t first, last;
    tn_slice(s.nout, ith, nth, &first, &last);
    for (int64_t o = first; o < last; o++) {
        int64_t off_out, off_mean, off_in;
        output_offsets(&s, o, &off_out, &off_mean, &off_in);
        /* two passes in double: the mean, then the squared deviations from it */
        double sum = 0, m2 = 0;
        for (int64_t r = 0; r < rows; r++) {
            const char *p = (const char *)in->data + row_base(&s, off_in, r) * ies;
            if (in->dtype == TN_DTYPE_F32 && row_stride == 1) {
                sum += tn_kernels()->sum_f32(row, (const float *)p);
                continue;
            }
            for (int64_t i = 0; i < row; i++) sum += tn_load(p + i * row_stride * ies, in->dtype).re;
        }
        double mu = sum / n;
        for (int64_t r = 0; r < rows; r++) {
            const char *p = (const char *)in->data + row_base(&s, off_in, r) * ies;
            for (int64_t i = 0; i < row; i++) {
                double d = tn_load(p + i * row_stride * ies, in->dtype).re - mu;
                m2 += d * d;
            }
        }
        double v = m2 / denom; /* 0/0 is NaN and x/0 is inf, as PyTorch gives */
        tn_value out_v = {take_sqrt ? sqrt(v) : v, 0, 0, 0};
        tn_store((char *)var->data + off_out * oes, var->dtype, out_v);
        if (mean) {
            tn_value mv = {mu, 0, 0, 0};
            tn_store((char *)mean->data + off_mean * tn_dtype_size(mean->dtype), mean->dtype, mv);
        }
    }
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
