/* The kernel table: the row functions that have ISA variants. Internal to src/kernels. */
#ifndef TN_KERNELS_TABLE_H
#define TN_KERNELS_TABLE_H

#include <stdint.h>

#include "tn/elementwise.h"
#include "tn/isa.h"

typedef struct tn_kernel_table {
    /* o[i*os] = op(a[i*as], b[i*bs]) for i < n, all float32 (strides in elements, may be 0);
     * returns 0 if the op has no float32 row (the caller then takes the generic path) */
    int (*binary_f32)(tn_binary_op op, int64_t n, float *o, int64_t os, const float *a,
                       int64_t as, const float *b, int64_t bs, float alpha);
    /* o[i*os] = op(x[i*xs]) for i < n, all float32; returns 0 as above */
    int (*unary_f32)(tn_unary_op op, int64_t n, float *o, int64_t os, const float *x,
                      int64_t xs);
} tn_kernel_table;

/* The table of the active ISA. */
const tn_kernel_table *tn_kernels(void);
/* The table of a given ISA (reference entries where it has no variant), or NULL if the CPU
 * cannot run it. For tests that compare variants. */
const tn_kernel_table *tn_kernels_for(tn_isa isa);

/* Each ISA's file fills the entries it implements. */
void tn_kernels_install_ref(tn_kernel_table *t);
void tn_kernels_install_avx2(tn_kernel_table *t);
void tn_kernels_install_avx512(tn_kernel_table *t);

#endif
