/* The graph compiler's IR and its generated kernels.
 *
 * A tn_graph is one fused region of a compiled graph: pointwise nodes over one output shape,
 * reading strided inputs (stride 0 along broadcast dimensions) and writing strided outputs.
 * Row sums (TN_GRAPH_ROW_SUM) reduce a value along the last dimension; the sum is one value per
 * row, seen at every position of the row, so a normalisation (x * rsqrt(mean(x^2) + eps)) is
 * one region. An output may have stride 0 along the last dimension (a per-row value).
 * Shapes and strides are static, as on the device, so they are baked into the generated code.
 * Nodes are in topological order; node i reads earlier nodes only. Every value is computed in
 * float32 (float16/bfloat16 inputs widen on load, outputs round on store), as a fused kernel
 * on the hardware keeps its intermediates in wide registers.
 *
 * tn_graph_codegen writes the region as C; tn_graph_compile builds it with the system C
 * compiler for this CPU (or finds it built: the cache key is a hash of the source, the
 * compiler's identity and the flags) and loads it; tn_fused_launch runs it on a stream, split
 * across the kernel threads. */
#ifndef TN_GRAPH_H
#define TN_GRAPH_H

#include <stdint.h>

#include "tn/dtype.h"
#include "tn/status.h"
#include "tn/stream.h"
#include "tn/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tn_graph_op {
    TN_GRAPH_INPUT,    /* the value of input `arg[0]` */
    TN_GRAPH_CONST,    /* `value` */
    /* unary: arg[0] */
    TN_GRAPH_NEG, TN_GRAPH_ABS, TN_GRAPH_EXP, TN_GRAPH_LOG, TN_GRAPH_SQRT, TN_GRAPH_RSQRT,
    TN_GRAPH_RECIPROCAL, TN_GRAPH_SIGMOID, TN_GRAPH_SILU, TN_GRAPH_TANH, TN_GRAPH_RELU,
    TN_GRAPH_GELU, TN_GRAPH_GELU_TANH, TN_GRAPH_SIN, TN_GRAPH_COS,
    TN_GRAPH_ROUND,    /* round to `dtype` (bfloat16 / float16) and back: an explicit cast */
    /* binary: arg[0], arg[1] */
    TN_GRAPH_ADD, TN_GRAPH_SUB, TN_GRAPH_MUL, TN_GRAPH_DIV, TN_GRAPH_MAX, TN_GRAPH_MIN,
    TN_GRAPH_POW,
    /* ternary: arg[0] != 0 ? arg[1] : arg[2] */
    TN_GRAPH_WHERE,
    /* `value` times the sum of arg[0] along the row (the last dimension): 1 / n for a mean */
    TN_GRAPH_ROW_SUM,
    TN_GRAPH_OP_COUNT_
} tn_graph_op;

typedef struct tn_graph_node {
    tn_graph_op op;
    int32_t arg[3];
    double value;   /* TN_GRAPH_CONST; the scale of TN_GRAPH_ROW_SUM */
    tn_dtype dtype; /* TN_GRAPH_ROUND */
} tn_graph_node;

typedef struct tn_graph_operand {
    tn_dtype dtype;                 /* float32, bfloat16 or float16; bool for a where mask */
    int64_t strides[TN_MAX_DIMS];   /* elements, over the region's shape */
    int32_t node;                   /* outputs: the node stored */
} tn_graph_operand;

typedef struct tn_graph {
    int32_t ndim;
    int64_t sizes[TN_MAX_DIMS];
    int32_t ninputs, nnodes, noutputs;
    const tn_graph_operand *inputs;
    const tn_graph_node *nodes;
    const tn_graph_operand *outputs;
} tn_graph;

typedef struct tn_fused_kernel tn_fused_kernel;

/* The region as C source (malloc'd, the caller frees): one function
 * `void tn_fused(int32_t ith, int32_t nth, void *const *ptr)` taking the input pointers, then
 * the output pointers. Fails naming the offending node on an invalid graph. */
tn_status tn_graph_codegen(const tn_graph *g, char **source);

/* Builds (or finds in cache_dir) and loads the region's kernel. *cache_hit tells which. The
 * compiler is $CC (default cc); a failed build reports the compiler's first error lines.
 * debug_dir: NULL, or a folder that receives a copy of the generated source. Threads may
 * build at the same time (each build has temporary files of its own). */
tn_status tn_graph_compile(const tn_graph *g, const char *cache_dir, const char *debug_dir,
                           tn_fused_kernel **kernel, int *cache_hit);
/* The kernel's cache key (16 hex digits) and the number of pointers a launch takes. */
const char *tn_fused_kernel_key(const tn_fused_kernel *k);
int32_t tn_fused_kernel_operands(const tn_fused_kernel *k);
/* Runs the kernel on `stream`: ptr holds its inputs' then its outputs' data pointers. */
tn_status tn_fused_launch(tn_stream_t stream, const tn_fused_kernel *k, void *const *ptr);
/* Unloads a kernel (no launch of it may be pending). */
void tn_fused_kernel_release(tn_fused_kernel *k);

#ifdef __cplusplus
}
#endif
#endif
