// Losses composed from native ops (no element loops here): mse_loss and its backward.
#include <ATen/core/Reduction.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/mse_loss.h>
#include <ATen/ops/mse_loss_backward.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>

#include "aten/Iter.h"
#include "aten/OpTracking.h"

namespace torch_neuronx::ops {
namespace {

using at::Tensor;

Tensor& mse_loss_out(const Tensor& self, const Tensor& target, int64_t reduction, Tensor& out) {
  if (!elementwise_dtypes_ok({self.scalar_type(), target.scalar_type()}))
    return via_fallback<at::_ops::mse_loss_out>(self, target, reduction, out);
  track_native("aten::mse_loss.out");
  Tensor diff = at::sub(self, target);
  Tensor squared = at::mul(diff, diff);
  if (reduction == at::Reduction::None) {
    at::native::resize_output(out, squared.sizes());
    return out.copy_(squared);
  }
  at::native::resize_output(out, {});
  if (reduction == at::Reduction::Mean) return at::mean_out(out, squared, at::IntArrayRef{});
  return at::sum_out(out, squared, at::IntArrayRef{});
}

Tensor& mse_loss_backward_out(const Tensor& grad, const Tensor& self, const Tensor& target,
                              int64_t reduction, Tensor& grad_input) {
  if (!elementwise_dtypes_ok({grad.scalar_type(), self.scalar_type(), target.scalar_type()}))
    return via_fallback<at::_ops::mse_loss_backward_grad_input>(grad, self, target, reduction,
                                                                grad_input);
  track_native("aten::mse_loss_backward.grad_input");
  double norm = reduction == at::Reduction::Mean ? 2.0 / static_cast<double>(self.numel()) : 2.0;
  Tensor scaled = at::mul(at::sub(self, target), norm);
  at::native::resize_output(grad_input, self.sizes());
  return at::mul_out(grad_input, scaled, grad);
}

Tensor mse_loss_backward(const Tensor& grad, const Tensor& self, const Tensor& target, int64_t reduction) {
  Tensor grad_input = at::empty_like(self, at::MemoryFormat::Contiguous);
  return mse_loss_backward_out(grad, self, target, reduction, grad_input);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mse_loss.out", mse_loss_out);
  m.impl("mse_loss_backward.grad_input", mse_loss_backward_out);
  m.impl("mse_loss_backward", mse_loss_backward);
}

} // namespace torch_neuronx::ops
