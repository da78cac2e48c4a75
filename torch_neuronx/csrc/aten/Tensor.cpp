// Allocation and view ops: metadata only, no device work except when a storage grows.
#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <c10/core/DeviceGuard.h>

#include "aten/OpTracking.h"
#include "aten/Ops.h"
#include "runtime/Functions.h"
#include "runtime/Storage.h"

namespace torch_neuronx::ops {
namespace {

c10::Device target_device(std::optional<c10::Device> device) {
  c10::Device d = c10::device_or_default(device);
  TORCH_CHECK(d.type() == kNeuron, "expected a neuron device, got ", d);
  return d;
}

void check_plain(std::optional<c10::Layout> layout, std::optional<bool> pin_memory) {
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided,
              "neuron supports only strided tensors, got layout ", c10::layout_or_default(layout));
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory),
              "pin_memory applies to CPU tensors only; the tensor is on neuron");
}

// Grows (never shrinks) the storage so that `nbytes` fit.
void ensure_storage(const at::Tensor& self, size_t nbytes) {
  c10::StorageImpl* storage = self.unsafeGetTensorImpl()->unsafe_storage().unsafeGetStorageImpl();
  if (nbytes > storage->nbytes()) resize_storage_bytes(*storage, nbytes);
}

} // namespace

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory,
                               std::optional<c10::MemoryFormat> memory_format) {
  track_native("aten::empty.memory_format");
  check_plain(layout, pin_memory);
  c10::DeviceGuard guard(target_device(device));
  return at::detail::empty_generic(size, c10::GetAllocator(kNeuron),
                                   c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  track_native("aten::empty_strided");
  check_plain(layout, pin_memory);
  c10::DeviceGuard guard(target_device(device));
  return at::detail::empty_strided_generic(size, stride, c10::GetAllocator(kNeuron),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                           c10::dtype_or_default(dtype));
}

at::Tensor as_strided(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride,
                      std::optional<int64_t> storage_offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
}

at::Tensor view(const at::Tensor& self, c10::IntArrayRef size) {
  return at::native::view(self, size);
}

at::Tensor reshape_alias(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride) {
  return at::native::_reshape_alias(self, size, stride);
}

const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format) {
  track_native("aten::resize_");
  auto* impl = self.unsafeGetTensorImpl();
  if (self.sizes() != size) {
    impl->set_sizes_contiguous(size);
    size_t nbytes = at::detail::computeStorageNbytesContiguous(size, self.dtype().itemsize(),
                                                                self.storage_offset());
    ensure_storage(self, nbytes);
  }
  if (memory_format.has_value()) {
    TORCH_CHECK(*memory_format != c10::MemoryFormat::Preserve,
                "Unsupported memory format ", *memory_format);
    impl->empty_tensor_restride(*memory_format);
  }
  return self;
}

at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) {
  int64_t items = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return set_source_storage_offset(self, std::move(source), 0, {items}, {});
}

at::Tensor& set_source_storage_offset(at::Tensor& self, c10::Storage source, int64_t offset,
                                      c10::IntArrayRef size, c10::IntArrayRef stride) {
  track_native("aten::set_");
  // Grow first on the device, so the CPU helper below never reallocates with a host memcpy.
  size_t itemsize = self.dtype().itemsize();
  size_t need = stride.empty()
                    ? at::detail::computeStorageNbytesContiguous(size, itemsize, offset)
                    : at::detail::computeStorageNbytes(size, stride, itemsize, offset);
  if (need > source.nbytes()) resize_storage_bytes(*source.unsafeGetStorageImpl(), need);
  return at::native::set_storage_cpu_(self, source, offset, size, stride);
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  return at::native::set_tensor_(self, source);
}

at::Tensor& set_empty(at::Tensor& self) {
  track_native("aten::set_");
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, c10::GetAllocator(kNeuron), true);
  return set_source_storage_offset(self, storage, 0, {0}, {});
}

// nn.Module.to() swaps a parameter's data in place (keeping the Parameter object, and with it
// every weight tie and optimizer reference) only when this answers true. The CPU and CUDA
// answer true for any two dense tensors; upstream's list of dense backends leaves out
// PrivateUse1, which would make `model.to("neuron")` replace each parameter per module and
// silently untie shared weights. Dense CPU or neuron tensors are compatible here; anything
// else (sparse, nested, subclasses) gets upstream's answer.
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  auto dense_here = [](c10::DispatchKeySet ks) {
    constexpr c10::DispatchKeySet backends({c10::BackendComponent::CPUBit,
                                            c10::BackendComponent::PrivateUse1Bit});
    return ks.has(c10::DispatchKey::Dense) && ks.has_any(backends) &&
           !ks.has_any(c10::python_ks);
  };
  if (dense_here(self.key_set()) && dense_here(from.key_set())) return true;
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set());
}

void record_stream(at::Tensor& self, c10::Stream stream) {
  track_native("aten::record_stream");
  TORCH_CHECK(stream.device_type() == kNeuron, "record_stream expects a neuron stream, got ",
              stream.device());
  void* base = self.storage().mutable_data_ptr().get();
  if (base) check(tn_memory_record_stream(base, to_tn(stream)));
}

} // namespace torch_neuronx::ops
