// Collectives in compiled graphs: the one thing graph capture (compiler/GraphCapture.cpp) needs
// from the process groups, kept apart from ProcessGroupNeuron.h and its c10d headers.
#pragma once

#include "tn/tn.h"

namespace torch_neuronx {

// Before a graph records (`recording`) or replays on `stream`: the stream waits for the
// collectives that groups on its device launched on their own streams (before a replay, only
// groups whose collectives a graph recorded), so that the graph's collectives run after them,
// in the order the program called them. Nothing when no group is connected.
void order_graph_after_collectives(tn_stream_t stream, bool recording);

}  // namespace torch_neuronx
