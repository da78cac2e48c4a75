#include "runtime/Functions.h"

#include <c10/util/Exception.h>

namespace torch_neuronx {

void throw_status(tn_status status) {
  const char* detail = tn_last_error();
  std::string msg = detail && *detail ? detail : tn_status_string(status);
  switch (status) {
    case TN_STATUS_OUT_OF_MEMORY:
      TORCH_CHECK_WITH(OutOfMemoryError, false, msg);
    case TN_STATUS_UNSUPPORTED:
      TORCH_CHECK_NOT_IMPLEMENTED(false, msg);
    case TN_STATUS_COMM_FAILED:  // torch.distributed.DistBackendError
      C10_THROW_ERROR(DistBackendError, msg);
    default:
      TORCH_CHECK(false, msg);
  }
}

c10::DeviceIndex device_count() noexcept {
  return static_cast<c10::DeviceIndex>(tn_device_count());
}

c10::DeviceIndex current_device() {
  check(tn_runtime_init(nullptr));
  return static_cast<c10::DeviceIndex>(tn_device_current());
}

void set_device(c10::DeviceIndex device) {
  check(tn_device_set_current(device));
}

c10::DeviceIndex exchange_device(c10::DeviceIndex device) {
  c10::DeviceIndex previous = current_device();
  if (device != previous) set_device(device);
  return previous;
}

c10::DeviceIndex resolve(c10::DeviceIndex device) {
  return device < 0 ? current_device() : device;
}

tn_stream_t to_tn(const c10::Stream& stream) {
  tn_stream_t s = nullptr;
  check(tn_stream_get(stream.device_index(), static_cast<int32_t>(stream.id()), &s));
  return s;
}

c10::Stream from_tn(tn_stream_t s) {
  return c10::Stream(c10::Stream::UNSAFE,
                     c10::Device(kNeuron, static_cast<c10::DeviceIndex>(tn_stream_device(s))),
                     static_cast<c10::StreamId>(tn_stream_index(s)));
}

tn_stream_t current_stream(c10::DeviceIndex device) {
  c10::DeviceIndex d = resolve(device);
  check(tn_device_check(d));
  tn_stream_t s = tn_stream_current(d);
  if (!s) throw_status(TN_STATUS_INTERNAL);
  return s;
}

} // namespace torch_neuronx
