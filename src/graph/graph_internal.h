/* Shared by the graph compiler's files. */
#ifndef TN_GRAPH_INTERNAL_H
#define TN_GRAPH_INTERNAL_H

#include "../runtime/internal.h"
#include "tn/graph.h"

/* Checks a region before code is generated for it; the error names the offending part. */
tn_status tn_graph_validate(const tn_graph *g);

/* The region with its loops in memory order (loop_order.c): *ordered shares g's nodes and
 * points at *operands (malloc'd, the caller frees; NULL when g is kept as it is). */
tn_status tn_graph_loop_order(const tn_graph *g, tn_graph *ordered, tn_graph_operand **operands);

#endif
