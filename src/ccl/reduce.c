/* The reductions of the collectives, on the kernel layer's elementwise code (tn_kernel_binary:
 * vector rows for float32 and the 16-bit types, exact integer and bool paths), and the names
 * that error messages use.
 *
 * Bool reduces as PyTorch's NCCL backend does it: SUM, MAX and BOR are a logical or, PROD, MIN
 * and BAND a logical and, BXOR a logical xor. 16-bit floats are rounded after each pairwise
 * step, as a ring of the hardware rounds after each hop. */
#include "../runtime/internal.h"
#include "ccl_internal.h"
#include "tn/elementwise.h"
#include "tn/kernels.h"

static tn_binary_op binary_op(tn_comm_op op, tn_dtype dtype) {
    int is_bool = dtype == TN_DTYPE_BOOL;
    switch (op) {
    case TN_COMM_OP_PROD:
        return is_bool ? TN_BINARY_LOGICAL_AND : TN_BINARY_MUL;
    case TN_COMM_OP_MIN:
        return is_bool ? TN_BINARY_LOGICAL_AND : TN_BINARY_MINIMUM;
    case TN_COMM_OP_MAX:
        return is_bool ? TN_BINARY_LOGICAL_OR : TN_BINARY_MAXIMUM;
    case TN_COMM_OP_BAND:
        return is_bool ? TN_BINARY_LOGICAL_AND : TN_BINARY_BITWISE_AND;
    case TN_COMM_OP_BOR:
        return is_bool ? TN_BINARY_LOGICAL_OR : TN_BINARY_BITWISE_OR;
    case TN_COMM_OP_BXOR:
        return is_bool ? TN_BINARY_LOGICAL_XOR : TN_BINARY_BITWISE_XOR;
    default: /* SUM, AVG, PREMUL_SUM */
        return is_bool ? TN_BINARY_LOGICAL_OR : TN_BINARY_ADD;
    }
}

static tn_tensor flat(void *data, tn_dtype dtype, uint64_t n, int64_t stride) {
    tn_tensor t = {.data = data, .dtype = dtype, .ndim = 1};
    t.sizes[0] = (int64_t)n;
    t.strides[0] = stride;
    return t;
}

void tn_ccl_reduce(tn_comm_op op, tn_dtype dtype, void *out, const void *a, const void *b,
                   uint64_t n) {
    if (!n) return;
    tn_tensor to = flat(out, dtype, n, 1), ta = flat((void *)a, dtype, n, 1), tb = flat((void *)b, dtype, n, 1);
    tn_scalar one = {.kind = TN_SCALAR_KIND_INT, .i = 1};
    tn_kernel_binary(binary_op(op, dtype), &to, &ta, &tb, &one, dtype, 0, 1);
}

void tn_ccl_reduce_finish(tn_comm_op op, tn_dtype dtype, void *buf, uint64_t n, int32_t size,
                          double factor) {
    if (!n || (op != TN_COMM_OP_AVG && op != TN_COMM_OP_PREMUL_SUM)) return;
    /* the divisor or factor as one element of the buffer's dtype, broadcast */
    _Alignas(16) unsigned char value[16] = {0};
    tn_tensor v = flat(value, dtype, 1, 1);
    int is_float = tn_dtype_is_float(dtype);
    tn_scalar s = op == TN_COMM_OP_AVG
                      ? (is_float ? (tn_scalar){.kind = TN_SCALAR_KIND_FLOAT, .f = size}
                                  : (tn_scalar){.kind = TN_SCALAR_KIND_INT, .i = size})
                      : (tn_scalar){.kind = TN_SCALAR_KIND_FLOAT, .f = factor};
    tn_kernel_fill(&v, &s, 0, 1);
    tn_tensor t = flat(buf, dtype, n, 1), tv = flat(value, dtype, n, 0);
    tn_scalar one = {.kind = TN_SCALAR_KIND_INT, .i = 1};
    tn_binary_op bop = op == TN_COMM_OP_PREMUL_SUM ? TN_BINARY_MUL
                       : is_float                    ? TN_BINARY_DIV
                                                     : TN_BINARY_DIV_TRUNC;
    tn_kernel_binary(bop, &t, &t, &tv, &one, dtype, 0, 1);
}

const char *tn_coll_kind_name(tn_coll_kind kind) {
    static const char *names[TN_COLL_KIND_COUNT_] = {
        "all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter", "all_to_all",
        "gather",     "scatter",   "barrier", "send",     "recv"};
    return (unsigned)kind < TN_COLL_KIND_COUNT_ ? names[kind] : "collective";
}

const char *tn_comm_op_name(tn_comm_op op) {
    static const char *names[TN_COMM_OP_COUNT_] = {"sum", "product", "min", "max", "avg",
                                                     "premul_sum", "band", "bor", "bxor"};
    return (unsigned)op < TN_COMM_OP_COUNT_ ? names[op] : "reduction";
}
