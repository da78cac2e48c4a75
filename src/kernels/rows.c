/* The float32 row kernels for one ISA variant. The Makefile compiles this file once per ISA
 * (rows_ref.o, rows_avx2.o, rows_avx512.o), each with its own flags and TN_ROWS_ISA set to
 * the variant's name, which names the install function. */
#include "rows_f32.h"
#include "table.h"

#ifndef TN_ROWS_ISA
#error "compile with -DTN_ROWS_ISA=ref|avx2|avx512"
#endif
#define TN_CONCAT_(a, b) a##b
#define TN_CONCAT(a, b) TN_CONCAT_(a, b)

static int binary_f32(tn_binary_op op, int64_t n, float *o, int64_t os, const float *a,
                      int64_t as, const float *b, int64_t bs, float alpha) {
    return binary_f32_rows(op, n, o, os, a, as, b, bs, alpha);
}

static int unary_f32(tn_unary_op op, int64_t n, float *o, int64_t os, const float *x,
                     int64_t xs) {
    return unary_f32_rows(op, n, o, os, x, xs);
}

void TN_CONCAT(tn_kernels_install_, TN_ROWS_ISA)(tn_kernel_table *t) {
    t->binary_f32 = binary_f32;
    t->unary_f32 = unary_f32;
}
