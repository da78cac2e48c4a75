// The device allocator PyTorch sees (c10::DeviceAllocator, so torch.accelerator.memory_*
// work): a thin shell over the C caching allocator. Allocations go to the current device
// and its current stream.
#include <c10/core/CachingDeviceAllocator.h>

#include "runtime/Functions.h"

namespace torch_neuronx {
namespace {

void release(void* ptr) {
  tn_memory_free(ptr);
}

void copy_stat(c10::CachingAllocator::StatArray& out, const tn_stat* in) {
  using c10::CachingAllocator::StatType;
  const int pools[] = {TN_POOL_ALL, TN_POOL_SMALL, TN_POOL_LARGE};
  const StatType types[] = {StatType::AGGREGATE, StatType::SMALL_POOL, StatType::LARGE_POOL};
  for (int k = 0; k < 3; k++) {
    auto& s = out[static_cast<size_t>(types[k])];
    s.current = in[pools[k]].current;
    s.peak = in[pools[k]].peak;
    s.allocated = in[pools[k]].allocated;
    s.freed = in[pools[k]].freed;
  }
}

struct NeuronAllocator final : c10::DeviceAllocator {
  c10::DataPtr allocate(size_t nbytes) override {
    c10::DeviceIndex device = current_device();
    void* ptr = nullptr;
    if (nbytes > 0) check(tn_memory_alloc(device, current_stream(device), nbytes, &ptr));
    return {ptr, ptr, &release, c10::Device(kNeuron, device)};
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return &release;
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    // Used by storage clones: order it on the current stream like any device copy.
    check(tn_memcpy_async(current_stream(), dest, src, count));
  }

  bool initialized() override {
    return tn_runtime_init(nullptr) == TN_STATUS_OK;
  }

  void emptyCache(c10::MempoolId_t /*mempool_id*/) override {
    for (c10::DeviceIndex d = 0; d < device_count(); d++) check(tn_memory_empty_cache(d));
  }

  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override {
    if (ptr.get()) check(tn_memory_record_stream(ptr.get(), to_tn(stream)));
  }

  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    tn_memory_stats s;
    check(tn_memory_get_stats(resolve(device), &s));
    c10::CachingDeviceAllocator::DeviceStats out;
    copy_stat(out.allocation, s.allocation);
    copy_stat(out.segment, s.segment);
    copy_stat(out.active, s.active);
    copy_stat(out.allocated_bytes, s.allocated_bytes);
    copy_stat(out.reserved_bytes, s.reserved_bytes);
    copy_stat(out.active_bytes, s.active_bytes);
    copy_stat(out.requested_bytes, s.requested_bytes);
    out.num_alloc_retries = s.num_alloc_retries;
    out.num_ooms = s.num_ooms;
    out.num_device_alloc = s.num_device_alloc;
    out.num_device_free = s.num_device_free;
    return out;
  }

  void resetAccumulatedStats(c10::DeviceIndex device) override {
    check(tn_memory_reset_accumulated_stats(resolve(device)));
  }

  void resetPeakStats(c10::DeviceIndex device) override {
    check(tn_memory_reset_peak_stats(resolve(device)));
  }

  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    tn_memory_stats s;
    check(tn_memory_get_stats(resolve(device), &s));
    size_t reserved = static_cast<size_t>(s.reserved_bytes[TN_POOL_ALL].current);
    size_t total = static_cast<size_t>(s.capacity);
    return {total > reserved ? total - reserved : 0, total};
  }
};

NeuronAllocator allocator;

} // namespace

REGISTER_ALLOCATOR(kNeuron, &allocator)

} // namespace torch_neuronx
