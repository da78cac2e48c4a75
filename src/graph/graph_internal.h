/* Shared by the graph compiler's files. */
#ifndef TN_GRAPH_INTERNAL_H
#define TN_GRAPH_INTERNAL_H

#include "../runtime/internal.h"
#include "tn/graph.h"

/* Checks a region before code is generated for it; the error names the offending part. */
tn_status tn_graph_validate(const tn_graph *g);

#endif
