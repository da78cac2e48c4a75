/* What the reductions (reduce.c) and the reductions over outer dimensions (reduce_columns.c)
 * share: the split of a reduction's dimensions into kept ones (indexing outputs) and reduced
 * ones, and the offsets it gives. */
#ifndef TN_KERNELS_REDUCE_IMPL_H
#define TN_KERNELS_REDUCE_IMPL_H

#include <stdlib.h>
#include <string.h>

#include "tn/reduce.h"

typedef struct split {
    int32_t nkept, nred;
    int64_t kept_sizes[TN_MAX_DIMS], kept_out[TN_MAX_DIMS], kept_idx[TN_MAX_DIMS], kept_in[TN_MAX_DIMS];
    int64_t red_sizes[TN_MAX_DIMS], red_in[TN_MAX_DIMS];
    int64_t nout, nreduce;
    tn_dtype in_dtype;
    int has_idx; /* positions are stored */
} split;

static inline void split_dims(split *s, const tn_tensor *out, const tn_tensor *idx, const tn_tensor *in) {
    memset(s, 0, sizeof *s);
    s->nout = s->nreduce = 1;
    s->in_dtype = in->dtype;
    s->has_idx = idx != NULL;
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
static inline void output_offsets(const split *s, int64_t o, int64_t *out, int64_t *idx, int64_t *in) {
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
static inline int64_t row_base(const split *s, int64_t base, int64_t r) {
    for (int32_t d = s->nred - 2; d >= 0; d--) {
        base += (r % s->red_sizes[d]) * s->red_in[d];
        r /= s->red_sizes[d];
    }
    return base;
}

static inline int is_half(tn_dtype t) { return t == TN_DTYPE_BF16 || t == TN_DTYPE_F16; }

/* The reduction over outer dimensions (see reduce_columns.c): outputs [first, last) over the
 * reduced positions [rlo, rhi), into the output or (sums only) partial[o]. Returns 0 (nothing
 * done) where it does not apply. */
int tn_reduce_columns(tn_reduce_op op, const split *s, const tn_tensor *out, const tn_tensor *idx,
                      const tn_tensor *in, double scale, int64_t first, int64_t last, int64_t rlo, int64_t rhi,
                      double *partial);

#endif
