// softmax / log_softmax and their backward ops along any dimension: the dimension is moved
// last by permuting the views (no copy) and the C kernel works row by row.
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_log_softmax.h>
#include <ATen/ops/_log_softmax_backward_data.h>
#include <ATen/ops/_softmax.h>
#include <ATen/ops/_softmax_backward_data.h>

#include "aten/Iter.h"
#include "aten/OpTracking.h"
#include "aten/TensorView.h"
#include "runtime/Functions.h"

namespace torch_neuronx::ops {
namespace {

using at::Tensor;

bool float_type(c10::ScalarType t) {
  return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf || t == at::kDouble;
}

tn_tensor last_dim_view(const Tensor& t, int64_t dim) {
  return to_tn_view(t.dim() == 0 ? t : t.movedim(dim, -1));
}

void launch(const char* name, tn_softmax_kind kind, const Tensor& out, const Tensor& in,
            const Tensor* y, int64_t dim) {
  track_native(name);
  if (out.numel() == 0) return;
  tn_tensor o = last_dim_view(out, dim), i = last_dim_view(in, dim), yv;
  if (y) yv = last_dim_view(*y, dim);
  check(tn_softmax_async(current_stream(out.device().index()), name, kind, &o, &i, y ? &yv : nullptr));
}

template <class Op, tn_softmax_kind kind>
Tensor& forward_out(const Tensor& self, int64_t dim, bool half_to_float, Tensor& out) {
  if (!float_type(self.scalar_type())) return via_fallback<Op>(self, dim, half_to_float, out);
  if (half_to_float)
    TORCH_CHECK(self.scalar_type() == at::kHalf || self.scalar_type() == at::kBFloat16,
                "conversion is supported for Half type only");
  int64_t d = at::maybe_wrap_dim(dim, self.dim());
  at::native::resize_output(out, self.sizes());
  launch(op_name<Op>(), kind, out, self, nullptr, d);
  return out;
}

template <class Op, tn_softmax_kind kind>
Tensor& backward_out(const Tensor& grad, const Tensor& output, int64_t dim, c10::ScalarType input_dtype,
                     Tensor& grad_input) {
  if (!float_type(grad.scalar_type()) || !float_type(output.scalar_type()))
    return via_fallback<Op>(grad, output, dim, input_dtype, grad_input);
  int64_t d = at::maybe_wrap_dim(dim, grad.dim());
  at::native::resize_output(grad_input, grad.sizes());
  launch(op_name<Op>(), kind, grad_input, grad, &output, d);
  return grad_input;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_softmax.out", forward_out<at::_ops::_softmax_out, TN_SOFTMAX>);
  m.impl("_log_softmax.out", forward_out<at::_ops::_log_softmax_out, TN_LOG_SOFTMAX>);
  m.impl("_softmax_backward_data.out",
         backward_out<at::_ops::_softmax_backward_data_out, TN_SOFTMAX_BACKWARD>);
  m.impl("_log_softmax_backward_data.out",
         backward_out<at::_ops::_log_softmax_backward_data_out, TN_LOG_SOFTMAX_BACKWARD>);
}

} // namespace torch_neuronx::ops
