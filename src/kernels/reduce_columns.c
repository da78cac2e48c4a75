/* Reductions over outer dimensions (x.sum(0), a bias's gradient, a norm over dim 0; see
 * tn/reduce.h and docs/kernels.md): the kept dimension with input stride 1 runs along rows of
 * outputs, so blocks of outputs fold whole input rows into rows of accumulators. */
#include <math.h>
#include <string.h>

#include "elem.h"
#include "nontemporal.h"
#include "reduce_impl.h"
#include "strided.h"
#include "table.h"

/* COLUMNS: the outputs of a block of float32 input larger than the cache, where a block
 * spans whole rows of 2048 floats (COLUMNS) so that the reads run along the rows; from the
 * cache, and for 16-bit input (widened through tmp), blocks of 512 (CACHED_COLUMNS) keep the
 * block's 16 rows in L1. Sums over 64000 x 1000 float32 took 25-30% less time in blocks of
 * 2048, and 250 x 4000 from the cache 10-20% more. */
enum { COLUMNS = 2048, CACHED_COLUMNS = 512, FLOAT_ROWS = 16 };

/* b rows of n elements, `stride` elements apart from x on, folded into `into`: float32 rows in
 * place; bfloat16 and float16 rows (n <= CACHED_COLUMNS) widened in registers for sums, and
 * for max and min widened first, four at a time, into tmp (4 x CACHED_COLUMNS). */
static void fold_block(const tn_kernel_table *k, tn_fold_op f, tn_dtype t, int64_t n, int64_t b, const char *x,
                       int64_t stride, float *tmp, float *into) {
    if (t == TN_DTYPE_F32) {
        k->fold_rows_f32(f, n, b, (const float *)(const void *)x, stride, into);
        return;
    }
    const uint16_t *h = (const uint16_t *)(const void *)x;
    if (k->fold_rows_half(t, f, n, b, h, stride, into)) return;
    for (int64_t r = 0, m; r < b; r += m) {
        m = b - r < 4 ? b - r : 4;
        for (int64_t j = 0; j < m; j++) k->widen_half(t, n, tmp + j * CACHED_COLUMNS, 1, h + (r + j) * stride, 1);
        k->fold_rows_f32(f, n, m, tmp, CACHED_COLUMNS, into);
    }
}

/* d[c] += f[c], then f[c] = 0, for c < n. */
static void flush(int64_t n, double *d, float *f) {
    for (int64_t c = 0; c < n; c++) d[c] += f[c];
    memset(f, 0, sizeof(float) * (size_t)n);
}

/* Outputs from their values v[c], c < n (at most COLUMNS), out_step elements apart from
 * off_out: sums scaled, sums of squares square-rooted (norms), extremes as they are. */
static void store_run(const tn_kernel_table *k, tn_fold_op f, double scale, const tn_tensor *out, int64_t off_out,
                      int64_t out_step, int64_t n, double *v) {
    for (int64_t c = 0; c < n; c++) v[c] = f == TN_FOLD_SUM ? v[c] * scale : f == TN_FOLD_SUM_SQUARES ? sqrt(v[c]) : v[c];
    float narrow[COLUMNS];
    switch (out->dtype) {
    case TN_DTYPE_F64:
        for (int64_t c = 0; c < n; c++) ((double *)out->data)[off_out + c * out_step] = v[c];
        break;
    case TN_DTYPE_F32:
        for (int64_t c = 0; c < n; c++) ((float *)out->data)[off_out + c * out_step] = (float)v[c];
        break;
    case TN_DTYPE_BF16:
    case TN_DTYPE_F16: /* through float32, as tn_store rounds */
        for (int64_t c = 0; c < n; c++) narrow[c] = (float)v[c];
        k->narrow_half(out->dtype, n, (uint16_t *)out->data + off_out, out_step, narrow, 1);
        break;
    default:
        for (int64_t c = 0; c < n; c++)
            tn_store((char *)out->data + (off_out + c * out_step) * tn_dtype_size(out->dtype), out->dtype,
                     (tn_value){v[c], 0, 0, 0});
    }
}

/* Whether tn_reduce_columns applies: sums, norms, max and min without positions over outer
 * dimensions of float32, bfloat16 or float16 whose innermost kept dimension has input stride 1. */
static int columns_apply(tn_reduce_op op, const split *s, const tn_tensor *out, const tn_tensor *idx,
                         const tn_tensor *in) {
    return (op == TN_REDUCE_SUM || op == TN_REDUCE_NORM2 || op == TN_REDUCE_MAX || op == TN_REDUCE_MIN) && !idx &&
           (in->dtype == TN_DTYPE_F32 || is_half(in->dtype)) && tn_dtype_is_float(out->dtype) && s->nkept > 0 &&
           s->nred > 0 && s->kept_in[s->nkept - 1] == 1 && s->nreduce > 0;
}

/* A reduction over outer dimensions (x.sum(0), a bias's gradient, a norm over dim 0): the kept
 * dimension with input stride 1 runs along rows of outputs, so a block of up to COLUMNS outputs
 * folds whole input rows (fold_rows_f32) instead of walking each output's strided elements.
 * Sums fold blocks of up to 16 rows in float, add 16 such blocks in float, then in double (a
 * cascade: each float sum has at most 16 terms). Outputs [first, last) over the reduced
 * positions [rlo, rhi) (numbered outer dimensions first, the innermost reduced dimension last);
 * with `partial` (sums only), each output's sum (of squares) goes to partial[o] instead of the
 * output. Returns 0 (nothing done) where it does not apply. */
int tn_reduce_columns(tn_reduce_op op, const split *s, const tn_tensor *out, const tn_tensor *idx, const tn_tensor *in,
                      double scale, int64_t first, int64_t last, int64_t rlo, int64_t rhi, double *partial) {
    tn_fold_op f = op == TN_REDUCE_SUM ? TN_FOLD_SUM : op == TN_REDUCE_NORM2 ? TN_FOLD_SUM_SQUARES
                 : op == TN_REDUCE_MAX ? TN_FOLD_MAX : TN_FOLD_MIN;
    if (!columns_apply(op, s, out, idx, in)) return 0;
    const tn_kernel_table *k = tn_kernels();
    const int sums = f == TN_FOLD_SUM || f == TN_FOLD_SUM_SQUARES;
    const int64_t width = s->kept_sizes[s->nkept - 1], out_step = s->kept_out[s->nkept - 1];
    const int64_t inner = s->red_sizes[s->nred - 1], inner_stride = s->red_in[s->nred - 1];
    const int32_t ies = tn_dtype_size(in->dtype);
    float facc[COLUMNS], facc2[COLUMNS], tmp[4 * CACHED_COLUMNS];
    double dacc[COLUMNS];
    const int64_t block = in->dtype == TN_DTYPE_F32 && s->nout * s->nreduce * ies >= tn_nontemporal_min_bytes()
                              ? COLUMNS : CACHED_COLUMNS;
    for (int64_t o = first, n; o < last; o += n) {
        int64_t col = o % width, off_out, off_idx, off_in, blocks = 0;
        n = last - o < width - col ? last - o : width - col;
        if (n > block) n = block;
        output_offsets(s, o, &off_out, &off_idx, &off_in);
        const char *base = (const char *)in->data + off_in * ies;
        int started = 0;
        if (sums) {
            memset(dacc, 0, sizeof(double) * (size_t)n);
            memset(facc2, 0, sizeof(float) * (size_t)n);
        }
        /* the outer reduced dimensions one position at a time, the innermost in blocks */
        for (int64_t outer = rlo / inner; outer * inner < rhi; outer++) {
            int64_t offset = row_base(s, 0, outer);
            int64_t r0 = outer * inner < rlo ? rlo - outer * inner : 0;
            int64_t r1 = (outer + 1) * inner > rhi ? rhi - outer * inner : inner;
            for (int64_t r = r0, b; r < r1; r += b) {
                const char *x = base + (offset + r * inner_stride) * ies;
                b = r1 - r < FLOAT_ROWS ? r1 - r : FLOAT_ROWS;
                if (sums) { /* a cascade: sums of 16 rows, 16 of those in facc2, then double */
                    fold_block(k, f, in->dtype, n, b, x, inner_stride, tmp, facc2);
                    if (++blocks % FLOAT_ROWS == 0) flush(n, dacc, facc2);
                } else if (!started) { /* max and min start from the first row */
                    if (in->dtype == TN_DTYPE_F32)
                        memcpy(facc, x, sizeof(float) * (size_t)n);
                    else
                        k->widen_half(in->dtype, n, facc, 1, (const uint16_t *)(const void *)x, 1);
                    fold_block(k, f, in->dtype, n, b - 1, x + inner_stride * ies, inner_stride, tmp, facc);
                    started = 1;
                } else {
                    fold_block(k, f, in->dtype, n, b, x, inner_stride, tmp, facc);
                }
            }
        }
        if (sums) flush(n, dacc, facc2);
        if (partial) {
            memcpy(partial + o, dacc, sizeof(double) * (size_t)n);
            continue;
        }
        if (!sums)
            for (int64_t c = 0; c < n; c++) dacc[c] = facc[c];
        store_run(k, f, scale, out, off_out, out_step, n, dacc);
    }
    return 1;
}

int tn_kernel_reduce_columns_part(tn_reduce_op op, const tn_tensor *out, const tn_tensor *in, int32_t ith,
                                  int32_t nth, double *partial) {
    split s;
    split_dims(&s, out, NULL, in);
    if ((op != TN_REDUCE_SUM && op != TN_REDUCE_NORM2) || !columns_apply(op, &s, out, NULL, in)) return 0;
    if (!partial) return 1; /* the question only */
    int64_t rlo, rhi;
    tn_slice(s.nreduce, ith, nth, &rlo, &rhi);
    if (rlo == rhi) { /* no rows for this thread: zeros */
        memset(partial, 0, sizeof(double) * (size_t)s.nout);
        return 1;
    }
    return tn_reduce_columns(op, &s, out, NULL, in, 1.0, 0, s.nout, rlo, rhi, partial);
}

void tn_kernel_reduce_columns_finish(tn_reduce_op op, const tn_tensor *out, const tn_tensor *in, double scale,
                                     const double *partials, int32_t nparts) {
    split s;
    split_dims(&s, out, NULL, in);
    const int64_t width = s.kept_sizes[s.nkept - 1], out_step = s.kept_out[s.nkept - 1];
    double v[COLUMNS];
    /* runs of up to COLUMNS outputs along the innermost kept dimension */
    for (int64_t o = 0, n; o < s.nout; o += n) {
        int64_t col = o % width, off_out, off_idx, off_in;
        n = s.nout - o < width - col ? s.nout - o : width - col;
        if (n > COLUMNS) n = COLUMNS;
        memcpy(v, partials + o, sizeof(double) * (size_t)n);
        for (int32_t t = 1; t < nparts; t++)
            for (int64_t c = 0; c < n; c++) v[c] += partials[(int64_t)t * s.nout + o + c];
        output_offsets(&s, o, &off_out, &off_idx, &off_in);
        store_run(tn_kernels(), op == TN_REDUCE_NORM2 ? TN_FOLD_SUM_SQUARES : TN_FOLD_SUM, scale, out, off_out, out_step,
                  n, v);
    }
}
