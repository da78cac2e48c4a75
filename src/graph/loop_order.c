/* The loop nest of a pointwise region, in memory order.
 *
 * A region's shape comes from the graph's logical order (N, C, H, W for an image), while its
 * tensors may lie in another one: the output of a convolution is channels-last (N, H, W, C in
 * memory). Looping over W innermost then jumps a whole pixel of channels per element, so
 * nothing vectorizes and every load touches a new cache line (a VAE decoder's residual adds ran
 * 20 times slower than the eager kernel). Pointwise nodes do not care in which order the
 * elements come, so the dimensions are reordered by the operands' strides (the first output's
 * first: it is written, then the inputs' to break ties), size-1 dimensions are dropped and
 * neighbours that all operands step through contiguously are merged: a dense region is one
 * loop over every element. Regions with row sums keep their order: the sum runs along the last
 * dimension. */
#include <stdlib.h>

#include "graph_internal.h"

/* Operand op of the region: its inputs, then its outputs (the order of a launch's pointers). */
static const tn_graph_operand *operand(const tn_graph *g, int32_t op) {
    return op < g->ninputs ? &g->inputs[op] : &g->outputs[op - g->ninputs];
}

/* Whether dimension a goes outside dimension b: the first operand (outputs first) that steps
 * through them differently decides, the larger stride outside. */
static int outer(const tn_graph *g, int32_t a, int32_t b) {
    int32_t count = g->ninputs + g->noutputs;
    for (int32_t k = 0; k < count; k++) {
        const tn_graph_operand *o = operand(g, (k + g->ninputs) % count);
        int64_t sa = llabs(o->strides[a]), sb = llabs(o->strides[b]);
        if (sa != sb) return sa > sb;
    }
    return 0;
}

static int row_sums(const tn_graph *g) {
    for (int32_t i = 0; i < g->nnodes; i++)
        if (g->nodes[i].op == TN_GRAPH_ROW_SUM) return 1;
    return 0;
}

tn_status tn_graph_loop_order(const tn_graph *g, tn_graph *ordered, tn_graph_operand **operands) {
    *ordered = *g;
    *operands = NULL;
    int64_t numel = 1;
    for (int32_t d = 0; d < g->ndim; d++) numel *= g->sizes[d];
    if (numel == 0 || row_sums(g)) return TN_STATUS_OK;
    int32_t count = g->ninputs + g->noutputs;
    tn_graph_operand *ops = malloc(sizeof *ops * (size_t)count);
    if (!ops) return tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory for a fused region");
    int32_t dims[TN_MAX_DIMS], nd = 0;
    for (int32_t d = 0; d < g->ndim; d++)
        if (g->sizes[d] != 1) dims[nd++] = d;
    if (nd == 0) dims[nd++] = g->ndim - 1; /* one element */
    /* insertion sort, stable: dimensions the operands do not tell apart keep their order */
    for (int32_t i = 1; i < nd; i++)
        for (int32_t j = i; j > 0 && outer(g, dims[j], dims[j - 1]); j--) {
            int32_t t = dims[j];
            dims[j] = dims[j - 1];
            dims[j - 1] = t;
        }
    /* merge each dimension into the one outside it when every operand is contiguous across both */
    int64_t sizes[TN_MAX_DIMS];
    int32_t n = 0;
    for (int32_t op = 0; op < count; op++) ops[op] = *operand(g, op);
    for (int32_t i = 0; i < nd; i++) {
        int32_t d = dims[i];
        int merge = n > 0;
        for (int32_t op = 0; op < count && merge; op++)
            merge = ops[op].strides[n - 1] == operand(g, op)->strides[d] * g->sizes[d];
        for (int32_t op = 0; op < count; op++) ops[op].strides[merge ? n - 1 : n] = operand(g, op)->strides[d];
        if (merge)
            sizes[n - 1] *= g->sizes[d];
        else
            sizes[n++] = g->sizes[d];
    }
    ordered->ndim = n;
    for (int32_t d = 0; d < n; d++) ordered->sizes[d] = sizes[d];
    ordered->inputs = ops;
    ordered->outputs = ops + g->ninputs;
    *operands = ops;
    return TN_STATUS_OK;
}
