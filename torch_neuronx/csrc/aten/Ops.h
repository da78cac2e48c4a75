// The aten ops neuron implements natively, registered in Registration.cpp. Each is a thin
// wrapper: metadata work through ATen helpers, element work through the C runtime.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace torch_neuronx::ops {

// Tensor.cpp: allocation and views
at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory,
                               std::optional<c10::MemoryFormat> memory_format);
at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device, std::optional<bool> pin_memory);
at::Tensor as_strided(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride,
                      std::optional<int64_t> storage_offset);
at::Tensor view(const at::Tensor& self, c10::IntArrayRef size);
at::Tensor reshape_alias(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride);
const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format);
at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source);
at::Tensor& set_source_storage_offset(at::Tensor& self, c10::Storage source, int64_t offset,
                                      c10::IntArrayRef size, c10::IntArrayRef stride);
at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source);
at::Tensor& set_empty(at::Tensor& self);
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from);
void record_stream(at::Tensor& self, c10::Stream stream);

// Copy.cpp: copies, fills, scalars
at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking);
at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst);
c10::Scalar local_scalar_dense(const at::Tensor& self);
at::Tensor& fill_scalar(at::Tensor& self, const c10::Scalar& value);
at::Tensor& fill_tensor(at::Tensor& self, const at::Tensor& value);
at::Tensor& zero_(at::Tensor& self);

// Random.cpp: draws from the device generator
at::Tensor& normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen);
at::Tensor& uniform_(at::Tensor& self, double from, double to, std::optional<at::Generator> gen);
at::Tensor& random_from_(at::Tensor& self, int64_t from, std::optional<int64_t> to, std::optional<at::Generator> gen);
at::Tensor multinomial(const at::Tensor& self, int64_t n_sample, bool replacement, std::optional<at::Generator> gen);

// Reduce.cpp: the 2-norm of a floating tensor over `dim` (all dimensions when empty), as out_dtype
// (float32 or float64; the input's own, or float32 for a 16-bit input)
at::Tensor vector_norm2(const at::Tensor& x, at::OptionalIntArrayRef dim, bool keepdim, c10::ScalarType out_dtype);

// Complex.cpp: complex products through real views (false: not a case it handles)
bool complex_mul_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out);

// Fallback.cpp: every other op, on the CPU
void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

} // namespace torch_neuronx::ops
