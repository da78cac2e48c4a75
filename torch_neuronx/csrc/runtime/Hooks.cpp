// PrivateUse1HooksInterface for neuron: what PyTorch asks of an accelerator (availability,
// device count, generators, pinned memory, storage resizing).
#include <ATen/core/CachingHostAllocator.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>

#include "runtime/Functions.h"
#include "runtime/Generator.h"
#include "runtime/Storage.h"

namespace torch_neuronx {
namespace {

struct NeuronHooks final : at::PrivateUse1HooksInterface {
  void init() const override {
    check(tn_runtime_init(nullptr));
  }
  bool isBuilt() const override {
    return true;
  }
  bool isAvailable() const override {
    return device_count() > 0;
  }
  bool hasPrimaryContext(c10::DeviceIndex) const override {
    return true;
  }
  c10::DeviceIndex deviceCount() const override {
    return device_count();
  }
  void setCurrentDevice(c10::DeviceIndex device) const override {
    set_device(device);
  }
  c10::DeviceIndex getCurrentDevice() const override {
    return current_device();
  }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    return exchange_device(device);
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return exchange_device(device);
  }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device) const override {
    return default_generator(device);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device) const override {
    return new_generator(device);
  }
  at::Allocator* getPinnedMemoryAllocator() const override {
    return at::getHostAllocator(at::kPrivateUse1);
  }
  bool isPinnedPtr(const void* data) const override {
    return tn_host_is_pinned(data) != 0;
  }
  at::Device getDeviceFromPtr(void* data) const override {
    int32_t device = tn_memory_device_of(data);
    TORCH_CHECK(device >= 0, "the pointer is not the start of a neuron allocation");
    return at::Device(kNeuron, static_cast<c10::DeviceIndex>(device));
  }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    resize_storage_bytes(*storage.unsafeGetStorageImpl(), newsize);
  }
};

const bool registered = [] {
  at::RegisterPrivateUse1HooksInterface(new NeuronHooks());
  return true;
}();

} // namespace
} // namespace torch_neuronx
