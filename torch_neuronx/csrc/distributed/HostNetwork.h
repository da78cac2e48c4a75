// The network between hosts that a group spanning hosts lends the collectives layer
// (tn_comm_net, include/tn/ccl.h): two Gloo groups over TCP, made through the group's store. One
// joins the ranks of this rank's local index on every host (the cross-host half of the
// hierarchical collectives), one joins every rank (all-to-all, gather, scatter, barrier, send and
// recv). Buffers are the device memory of the host driver, which Gloo reads as CPU memory.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <functional>

#include "tn/tn.h"

namespace torch_neuronx {

// Makes a Gloo group (store, rank, size, timeout): torch's ProcessGroupGloo, which the Python
// bindings create (Bindings.cpp sets it: the Gloo headers are not in the torch wheel).
using GlooFactory = std::function<c10::intrusive_ptr<c10d::Backend>(
    const c10::intrusive_ptr<c10d::Store>&, int, int, std::chrono::milliseconds)>;
void set_gloo_factory(GlooFactory factory);

// The network of rank `rank` of a group of `hosts` hosts with `local_size` ranks each, numbered
// host by host. The result owns the Gloo groups; tn_comm_destroy releases it (net.destroy).
tn_comm_net make_host_network(const c10::intrusive_ptr<c10d::Store>& store, int rank, int hosts,
                              int local_size, std::chrono::milliseconds timeout);

}  // namespace torch_neuronx
