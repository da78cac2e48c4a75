/* Elementwise ops and norms over lists of tensors, one launch per list: PyTorch's _foreach_*
 * ops, which torch.optim's default (foreach) path and clip_grad_norm_ call once per step for
 * every parameter at once.
 *
 * Item k applies the op to the k-th tensor of each list. Every tensor is a dense span of
 * `numel` elements of the op's dtype (the lists agree element by element, as tensors of equal
 * sizes and strides do). Unary, binary and ternary items run the single-tensor kernels of
 * tn/elementwise.h on those spans, so a list gives the values a launch per tensor would; the
 * kernel threads take a share of every item, so a list of small tensors is one task, not one
 * per tensor. */
#ifndef TN_FOREACH_H
#define TN_FOREACH_H

#include <stdint.h>

#include "tn/dtype.h"
#include "tn/elementwise.h"
#include "tn/status.h"
#include "tn/stream.h"
#include "tn/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tn_foreach_kind {
    TN_FOREACH_UNARY,   /* out = op(a) */
    TN_FOREACH_BINARY,  /* out = op(a, b, alpha); b a tensor, the item's scalar, or `other` */
    TN_FOREACH_TERNARY, /* out = op(a, b, c, scalar); lerp with c NULL takes scalar as weight */
    TN_FOREACH_NORM,    /* *out = the vector norm of a, a value of out_dtype */
    TN_FOREACH_FILL,    /* out = scalar; a is not read */
    TN_FOREACH_COPY,    /* out (of out_dtype) = a (of dtype), converted */
    TN_FOREACH_UNSCALE  /* out = a * *other (a float32 device value: GradScaler's inverse scale),
                         * and *found_inf = 1.0f if an element of a is not finite */
} tn_foreach_kind;

typedef struct tn_foreach {
    tn_foreach_kind kind;
    int32_t op;        /* a tn_unary_op, tn_binary_op or tn_ternary_op; NORM: the order, 1, 2,
                        * or 0 for infinity (the largest magnitude) */
    tn_dtype dtype;    /* of every tensor of the lists (NORM: of a) */
    tn_dtype compute;  /* as for the single-tensor launch */
    tn_scalar alpha;   /* BINARY */
    const void *other; /* BINARY: one device value every item's b is (a 0-dim tensor), or NULL;
                        * UNSCALE: the inverse scale */
    tn_dtype other_dtype;
    tn_dtype out_dtype; /* NORM, COPY */
    float *found_inf;   /* UNSCALE */
} tn_foreach;

typedef struct tn_foreach_item {
    void *out;
    const void *a, *b, *c; /* b: NULL for a scalar operand; c: TERNARY only */
    tn_scalar scalar;      /* BINARY: b when b and `other` are NULL; TERNARY: value or weight;
                            * FILL: the value */
    int64_t numel;
} tn_foreach_item;

tn_status tn_foreach_async(tn_stream_t stream, const char *name, const tn_foreach *op, int32_t count,
                           const tn_foreach_item *items);

/* One thread's partial norms: for each item, over the thread's slice of its elements, the sum
 * of |x|^order (order 1 or 2) or the largest |x| (order 0), NaN if the slice holds one. */
void tn_kernel_norm_partials(int32_t order, tn_dtype dtype, int32_t count, const tn_foreach_item *items,
                             double *partials, int32_t ith, int32_t nth);
/* The norm from n threads' partials of one item (consecutive doubles). */
double tn_kernel_norm_fold(int32_t order, const double *partials, int32_t n);

/* One thread's slice of every item of an UNSCALE launch: out = a * inv_scale, computed in float
 * (double for float64) and rounded to dtype, as PyTorch's kernels compute it. Returns non-zero
 * if the slice holds an element that is not finite. */
int tn_kernel_unscale(tn_dtype dtype, int32_t count, const tn_foreach_item *items, float inv_scale,
                      int32_t ith, int32_t nth);

#ifdef __cplusplus
}
#endif
#endif
