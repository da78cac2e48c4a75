#include "aten/TensorView.h"

#include <c10/util/Exception.h>

namespace torch_neuronx {

tn_dtype to_tn_dtype(c10::ScalarType type) {
  switch (type) {
    case c10::kBool: return TN_DTYPE_BOOL;
    case c10::kByte: return TN_DTYPE_U8;
    case c10::kChar: return TN_DTYPE_I8;
    case c10::kShort: return TN_DTYPE_I16;
    case c10::kInt: return TN_DTYPE_I32;
    case c10::kLong: return TN_DTYPE_I64;
    case c10::kHalf: return TN_DTYPE_F16;
    case c10::kBFloat16: return TN_DTYPE_BF16;
    case c10::kFloat: return TN_DTYPE_F32;
    case c10::kDouble: return TN_DTYPE_F64;
    case c10::kComplexFloat: return TN_DTYPE_C64;
    case c10::kComplexDouble: return TN_DTYPE_C128;
    case c10::kFloat8_e4m3fn: return TN_DTYPE_F8E4M3FN;
    case c10::kFloat8_e5m2: return TN_DTYPE_F8E5M2;
    default:
      TORCH_CHECK_TYPE(false, "dtype ", type, " is not supported on the neuron device");
  }
}

tn_tensor to_tn_view(const at::Tensor& t) {
  TORCH_CHECK(t.dim() <= TN_MAX_DIMS, "neuron supports tensors of at most ", TN_MAX_DIMS,
              " dimensions, got ", t.dim());
  tn_tensor v{};
  v.data = t.numel() > 0 ? const_cast<void*>(t.const_data_ptr()) : nullptr;
  v.dtype = to_tn_dtype(t.scalar_type());
  v.ndim = static_cast<int32_t>(t.dim());
  for (int64_t d = 0; d < t.dim(); d++) {
    v.sizes[d] = t.size(d);
    v.strides[d] = t.stride(d);
  }
  return v;
}

tn_scalar to_tn_scalar(const c10::Scalar& s) {
  tn_scalar v{};
  if (s.isBoolean()) {
    v.kind = TN_SCALAR_KIND_BOOL;
    v.i = s.toBool();
  } else if (s.isIntegral(false)) {
    v.kind = TN_SCALAR_KIND_INT;
    v.i = s.toLong();
  } else if (s.isComplex()) {
    v.kind = TN_SCALAR_KIND_COMPLEX;
    auto c = s.toComplexDouble();
    v.f = c.real();
    v.imag = c.imag();
  } else {
    v.kind = TN_SCALAR_KIND_FLOAT;
    v.f = s.toDouble();
  }
  return v;
}

} // namespace torch_neuronx
