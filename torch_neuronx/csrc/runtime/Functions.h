// Bridges between the C runtime and c10: status -> exception, devices, streams.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include "tn/tn.h"

namespace torch_neuronx {

constexpr c10::DeviceType kNeuron = c10::DeviceType::PrivateUse1;

// Throws the PyTorch exception for a failed status (torch.OutOfMemoryError for
// TN_STATUS_OUT_OF_MEMORY, NotImplementedError for TN_STATUS_UNSUPPORTED, RuntimeError
// otherwise) with the runtime's detail message.
[[noreturn]] void throw_status(tn_status status);

inline void check(tn_status status) {
  if (status != TN_STATUS_OK) throw_status(status);
}

c10::DeviceIndex device_count() noexcept;
c10::DeviceIndex current_device();
void set_device(c10::DeviceIndex device);
c10::DeviceIndex exchange_device(c10::DeviceIndex device);
// `device` if it is an index, else the current device.
c10::DeviceIndex resolve(c10::DeviceIndex device);

tn_stream_t to_tn(const c10::Stream& stream);
c10::Stream from_tn(tn_stream_t stream);
// The calling thread's current stream on a device (-1: the current device).
tn_stream_t current_stream(c10::DeviceIndex device = -1);

} // namespace torch_neuronx
