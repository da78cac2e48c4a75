/* Reductions and softmax.
 *
 * Reductions take the views a reduction TensorIterator produces: `out` (and `indices`) have
 * the input's shape with stride 0 along the reduced dimensions. Sums and products of floats
 * accumulate in double (float32 rows in float32 partial sums, then double), integers in int64
 * with wrap-around. max/min propagate NaN; arg-ops and `indices` give the first position of
 * the extreme (a NaN counts as the extreme) along the single reduced dimension. `scale`
 * multiplies a sum at the end (mean passes 1/count).
 *
 * Softmax works along the last dimension of its views (callers move the softmax dimension
 * there by permuting sizes and strides) and computes in float32 or float64. */
#ifndef TN_REDUCE_H
#define TN_REDUCE_H

#include <stdint.h>

#include "tn/status.h"
#include "tn/stream.h"
#include "tn/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tn_reduce_op {
    TN_REDUCE_SUM,
    TN_REDUCE_PROD,
    TN_REDUCE_MAX,
    TN_REDUCE_MIN,
    TN_REDUCE_ARGMAX, /* out holds int64 positions */
    TN_REDUCE_ARGMIN,
    TN_REDUCE_ALL,
    TN_REDUCE_ANY,
    TN_REDUCE_NORM2, /* the square root of the sum of squares (a float input's vector norm) */
    TN_REDUCE_COUNT_
} tn_reduce_op;

/* indices: NULL, or (with MAX / MIN) an int64 view shaped like out for the positions. */
tn_status tn_reduce_async(tn_stream_t stream, const char *name, tn_reduce_op op,
                          const tn_tensor *out, const tn_tensor *indices, const tn_tensor *in,
                          double scale);
void tn_kernel_reduce(tn_reduce_op op, const tn_tensor *out, const tn_tensor *indices,
                      const tn_tensor *in, double scale, int32_t ith, int32_t nth);
/* A reduction with fewer outputs than threads splits each output's reduced elements instead:
 * tn_kernel_reduce_part folds slice ith of nth of output o (outputs numbered row-major over
 * the kept dimensions) into `part`; tn_kernel_reduce_finish combines the parts, in slice
 * order, and stores output o. */
typedef struct tn_reduce_part {
    double f;     /* float accumulator / extreme */
    int64_t i;    /* integer accumulator / extreme */
    int64_t pos;  /* position of the extreme */
    int32_t started;
} tn_reduce_part;
void tn_kernel_reduce_part(tn_reduce_op op, const tn_tensor *out, const tn_tensor *indices,
                           const tn_tensor *in, int64_t o, int32_t ith, int32_t nth,
                           tn_reduce_part *part);
void tn_kernel_reduce_finish(tn_reduce_op op, const tn_tensor *out, const tn_tensor *indices,
                             const tn_tensor *in, double scale, int64_t o,
                             const tn_reduce_part *parts, int32_t nparts);

/* A sum (or 2-norm) over outer dimensions (x.sum(0)) split by reduced rows instead of by
 * outputs, so that each thread reads whole rows: tn_kernel_reduce_columns_part writes slice
 * ith of nth of the reduced positions' sums (of squares) of every output into partial[o]
 * (nout doubles, outputs numbered as for tn_kernel_reduce_part) and returns 0 where it does
 * not apply (then nothing is written; partial NULL asks only that); tn_kernel_reduce_columns_finish adds the nparts
 * partial rows, nout apart, and stores the outputs. */
int tn_kernel_reduce_columns_part(tn_reduce_op op, const tn_tensor *out, const tn_tensor *in, int32_t ith,
                                  int32_t nth, double *partial);
void tn_kernel_reduce_columns_finish(tn_reduce_op op, const tn_tensor *out, const tn_tensor *in,
                                     double scale, const double *partials, int32_t nparts);

/* Variance over the reduced dimensions of `var` (stride 0 there, as for tn_reduce_async):
 * sum((x - mean)^2) / max(0, N - correction), in double from blocks' means and deviations; its square
 * root with take_sqrt. `mean`: NULL, or a float view shaped like var that receives the mean. */
tn_status tn_var_async(tn_stream_t stream, const char *name, const tn_tensor *var,
                       const tn_tensor *mean, const tn_tensor *in, double correction, int take_sqrt);
void tn_kernel_var(const tn_tensor *var, const tn_tensor *mean, const tn_tensor *in,
                   double correction, int take_sqrt, int32_t ith, int32_t nth);
/* Few outputs: slice ith of nth of output o's reduced elements into `part` (their count, mean
 * and sum of squared deviations), and the parts combined and stored, as tn_kernel_reduce_part
 * and tn_kernel_reduce_finish do. */
typedef struct tn_var_part {
    double n, mean, m2;
} tn_var_part;
void tn_kernel_var_part(const tn_tensor *var, const tn_tensor *mean, const tn_tensor *in, int64_t o,
                        int32_t ith, int32_t nth, tn_var_part *part);
void tn_kernel_var_finish(const tn_tensor *var, const tn_tensor *mean, const tn_tensor *in,
                          double correction, int take_sqrt, int64_t o, const tn_var_part *parts,
                          int32_t nparts);
/* histc: out (1-D, `bins` long, any real dtype) counts the elements of `in` in each of the
 * equal-width bins over [lo, hi] (lo < hi); others and NaNs are not counted. One thread. */
tn_status tn_histc_async(tn_stream_t stream, const char *name, const tn_tensor *out,
                         const tn_tensor *in, double lo, double hi);
void tn_kernel_histc(const tn_tensor *out, const tn_tensor *in, double lo, double hi);
typedef enum tn_softmax_kind {
    TN_SOFTMAX,
    TN_LOG_SOFTMAX,
    TN_SOFTMAX_BACKWARD,     /* grad_in = y * (g - sum(g * y)) */
    TN_LOG_SOFTMAX_BACKWARD  /* grad_in = g - exp(y) * sum(g) */
} tn_softmax_kind;

/* Forward: out = f(in). Backward: out = f(grad, y) with y the forward output. All views
 * share sizes; rows run along the last dimension. */
tn_status tn_softmax_async(tn_stream_t stream, const char *name, tn_softmax_kind kind,
                           const tn_tensor *out, const tn_tensor *in, const tn_tensor *y);
/* scratch: 2 * (length of the last dimension) doubles. */
void tn_kernel_softmax(tn_softmax_kind kind, const tn_tensor *out, const tn_tensor *in,
                       const tn_tensor *y, double *scratch, int32_t ith, int32_t nth);

#ifdef __cplusplus
}
#endif
#endif
