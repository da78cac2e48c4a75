// at::Tensor -> tn_tensor (a non-owning strided view) and c10::Scalar -> tn_scalar.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>

#include "tn/tn.h"

namespace torch_neuronx {

// Throws TypeError for dtypes the device does not support.
tn_dtype to_tn_dtype(c10::ScalarType type);
tn_tensor to_tn_view(const at::Tensor& t);
tn_scalar to_tn_scalar(const c10::Scalar& s);

} // namespace torch_neuronx
