// Pinned host memory for neuron (tensor.pin_memory(), DataLoader(pin_memory=True)): the C
// runtime's page-locked blocks, which asynchronous copies may use without staging.
#include <ATen/core/CachingHostAllocator.h>

#include "runtime/Functions.h"

namespace torch_neuronx {
namespace {

void release(void* ptr) {
  tn_host_free(ptr);
}

struct NeuronHostAllocator final : at::HostAllocator {
  at::DataPtr allocate(size_t nbytes) override {
    void* ptr = nullptr;
    if (nbytes > 0) check(tn_host_alloc(nbytes, &ptr));
    return {ptr, ptr, &release, c10::Device(c10::kCPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return &release;
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  bool record_event(void* ptr, void* ctx, c10::Stream stream) override {
    void* base = ctx ? ctx : ptr;
    if (!tn_host_is_pinned(base)) return false;
    check(tn_host_record_stream(base, to_tn(stream)));
    return true;
  }

  void empty_cache() override {}  // freed blocks go straight back to the system

  at::HostStats get_stats() override {
    tn_host_stats s;
    tn_host_get_stats(&s);
    at::HostStats out;
    out.active_requests.current = out.allocations.current = s.blocks.current;
    out.active_requests.peak = out.allocations.peak = s.blocks.peak;
    out.active_requests.allocated = out.allocations.allocated = s.blocks.allocated;
    out.active_requests.freed = out.allocations.freed = s.blocks.freed;
    out.active_bytes.current = out.allocated_bytes.current = s.bytes.current;
    out.active_bytes.peak = out.allocated_bytes.peak = s.bytes.peak;
    out.active_bytes.allocated = out.allocated_bytes.allocated = s.bytes.allocated;
    out.active_bytes.freed = out.allocated_bytes.freed = s.bytes.freed;
    out.num_host_alloc = s.num_host_alloc;
    out.num_host_free = s.num_host_free;
    return out;
  }

  void reset_accumulated_stats() override {
    tn_host_reset_stats(0);
  }

  void reset_peak_stats() override {
    tn_host_reset_stats(1);
  }
};

NeuronHostAllocator host_allocator;

} // namespace

REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &host_allocator)

} // namespace torch_neuronx
