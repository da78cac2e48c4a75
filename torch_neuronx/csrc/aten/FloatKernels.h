// Shared by the wrappers of the C kernels that compute in the floating dtypes (pooling,
// upsampling, col2im): which dtypes those are, and the out= forms' copy of a fresh result.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>

namespace torch_neuronx::ops {

// float32, float64, bfloat16 and float16: the other dtypes go to the CPU fallback.
inline bool float_kernel_dtype(c10::ScalarType t) {
  return t == at::kFloat || t == at::kDouble || t == at::kBFloat16 || t == at::kHalf;
}

// `result` into `out` (resized), for the out= forms.
inline at::Tensor& into(const at::Tensor& result, at::Tensor& out) {
  at::native::resize_output(out, result.sizes());
  return out.copy_(result);
}

} // namespace torch_neuronx::ops
