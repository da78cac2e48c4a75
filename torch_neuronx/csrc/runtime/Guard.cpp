// DeviceGuardImplInterface for neuron: devices, streams and events of the C runtime as c10
// sees them. A c10::Stream's id is the runtime's stream index on its device (0 = default).
#include <c10/core/Allocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include "runtime/Functions.h"

namespace torch_neuronx {
namespace {

struct NeuronGuardImpl final : c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType static_type = kNeuron;

  NeuronGuardImpl() = default;
  explicit NeuronGuardImpl(c10::DeviceType t) {
    TORCH_CHECK(t == static_type, "NeuronGuardImpl given device type ", t);
  }

  c10::DeviceType type() const override {
    return static_type;
  }

  c10::Device exchangeDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == static_type, "expected a neuron device, got ", d);
    return c10::Device(static_type, exchange_device(d.index()));
  }

  c10::Device getDevice() const override {
    return c10::Device(static_type, current_device());
  }

  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == static_type, "expected a neuron device, got ", d);
    set_device(d.index());
  }

  void uncheckedSetDevice(c10::Device d) const noexcept override {
    tn_device_set_current(d.index());
  }

  c10::Stream getStream(c10::Device d) const override {
    return from_tn(current_stream(d.index()));
  }

  c10::Stream getDefaultStream(c10::Device d) const override {
    tn_stream_t s = nullptr;
    check(tn_stream_get(resolve(d.index()), 0, &s));
    return from_tn(s);
  }

  c10::Stream getNewStream(c10::Device d, int priority) const override {
    tn_stream_t s = nullptr;
    check(tn_stream_from_pool(resolve(d.index()), priority, &s));
    return from_tn(s);
  }

  c10::Stream getStreamFromGlobalPool(c10::Device d, bool isHighPriority) const override {
    return getNewStream(d, isHighPriority ? -1 : 0);
  }

  c10::Stream exchangeStream(c10::Stream s) const override {
    tn_stream_t previous = current_stream(s.device_index());
    check(tn_stream_set_current(to_tn(s)));
    return from_tn(previous);
  }

  c10::DeviceIndex deviceCount() const noexcept override {
    return device_count();
  }

  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    tn_event_destroy(static_cast<tn_event_t>(event));
  }

  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(),
                "Event device index ", device_index, " does not match recording stream's device index ",
                stream.device_index(), ".");
    if (!*event) {
      tn_event_t e = nullptr;
      uint32_t flags = flag == c10::EventFlag::BACKEND_DEFAULT ? TN_EVENT_FLAGS_TIMING : TN_EVENT_FLAGS_DEFAULT;
      check(tn_event_create(flags, &e));
      *event = e;
    }
    check(tn_event_record(static_cast<tn_event_t>(*event), to_tn(stream)));
  }

  void block(void* event, const c10::Stream& stream) const override {
    if (event) check(tn_stream_wait_event(to_tn(stream), static_cast<tn_event_t>(event)));
  }

  bool queryEvent(void* event) const override {
    return !event || tn_event_query(static_cast<tn_event_t>(event)) == TN_STATUS_OK;
  }

  bool queryStream(const c10::Stream& stream) const override {
    return tn_stream_query(to_tn(stream)) == TN_STATUS_OK;
  }

  void synchronizeStream(const c10::Stream& stream) const override {
    check(tn_stream_synchronize(to_tn(stream)));
  }

  void synchronizeEvent(void* event) const override {
    if (event) check(tn_event_synchronize(static_cast<tn_event_t>(event)));
  }

  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    check(tn_device_synchronize(resolve(device_index)));
  }

  void recordDataPtrOnStream(const c10::DataPtr& data_ptr, const c10::Stream& stream) const override {
    if (data_ptr.get()) check(tn_memory_record_stream(data_ptr.get(), to_tn(stream)));
  }

  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    TORCH_CHECK(start && end, "Both events must be recorded before calculating elapsed time.");
    float ms = 0;
    check(tn_event_elapsed_ms(static_cast<tn_event_t>(start), static_cast<tn_event_t>(end), &ms));
    return ms;
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, NeuronGuardImpl);

} // namespace
} // namespace torch_neuronx
