// Ops expressed through other native ops (each step a C kernel launch, no element loops
// here): addcmul, addcdiv, lerp, clamp, vector norms, nll_loss and its backward. Good enough
// until a fused kernel pays for itself.
#include <ATen/ScalarOps.h>
#include <ATen/core/Reduction.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/add.h>
#include <ATen/ops/addcdiv.h>
#include <ATen/ops/addcmul.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/div.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/lerp.h>
#include <ATen/ops/linalg_vector_norm.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/minimum.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/nll_loss_backward.h>
#include <ATen/ops/nll_loss_forward.h>
#include <ATen/ops/sqrt.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/where.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/zeros_like.h>

#include "aten/Iter.h"
#include "aten/OpTracking.h"

namespace torch_neuronx::ops {
namespace {

using at::Tensor;

bool floating(std::initializer_list<c10::ScalarType> types) {
  for (auto t : types)
    if (!(t == at::kFloat || t == at::kBFloat16 || t == at::kHalf || t == at::kDouble)) return false;
  return true;
}

Tensor& addcmul_out(const Tensor& self, const Tensor& t1, const Tensor& t2, const c10::Scalar& value, Tensor& out) {
  if (!floating({self.scalar_type(), t1.scalar_type(), t2.scalar_type(), out.scalar_type()}))
    return via_fallback<at::_ops::addcmul_out>(self, t1, t2, value, out);
  track_native("aten::addcmul.out");
  return at::add_out(out, self, at::mul(t1, t2), value);
}

Tensor& addcdiv_out(const Tensor& self, const Tensor& t1, const Tensor& t2, const c10::Scalar& value, Tensor& out) {
  if (!floating({self.scalar_type(), t1.scalar_type(), t2.scalar_type(), out.scalar_type()}))
    return via_fallback<at::_ops::addcdiv_out>(self, t1, t2, value, out);
  track_native("aten::addcdiv.out");
  return at::add_out(out, self, at::div(t1, t2), value);
}

// PyTorch's two-sided formula keeps lerp exact at both ends.
Tensor& lerp_scalar_out(const Tensor& self, const Tensor& end, const c10::Scalar& weight, Tensor& out) {
  if (!floating({self.scalar_type(), end.scalar_type(), out.scalar_type()}) || weight.isComplex())
    return via_fallback<at::_ops::lerp_Scalar_out>(self, end, weight, out);
  track_native("aten::lerp.Scalar_out");
  double w = weight.toDouble();
  Tensor diff = at::sub(end, self);
  if (std::abs(w) < 0.5) return at::add_out(out, self, diff, w);
  return at::sub_out(out, end, diff, 1.0 - w);
}

Tensor& clamp_out(const Tensor& self, const std::optional<c10::Scalar>& min, const std::optional<c10::Scalar>& max,
                  Tensor& out) {
  TORCH_CHECK(min || max, "torch.clamp: At least one of 'min' or 'max' must not be None");
  bool float_bound = (min && min->isFloatingPoint()) || (max && max->isFloatingPoint());
  if (!elementwise_dtypes_ok({self.scalar_type()}) || self.scalar_type() == at::kBool ||
      out.scalar_type() != self.scalar_type() || (float_bound && at::isIntegralType(self.scalar_type(), true)))
    return via_fallback<at::_ops::clamp_out>(self, min, max, out);  // promotion cases
  track_native("aten::clamp.out");
  const Tensor* src = &self;
  if (min) {
    at::maximum_out(out, self, at::native::wrapped_scalar_tensor(*min).to(self.scalar_type()));
    src = &out;
  }
  if (max) at::minimum_out(out, *src, at::native::wrapped_scalar_tensor(*max).to(self.scalar_type()));
  return out;
}

Tensor& vector_norm_out(const Tensor& self, const c10::Scalar& ord, at::OptionalIntArrayRef dim, bool keepdim,
                        std::optional<c10::ScalarType> dtype, Tensor& out) {
  double p = ord.toDouble();
  if (!floating({self.scalar_type(), out.scalar_type()}) || !(p == 2.0 || std::isinf(p) && p > 0))
    return via_fallback<at::_ops::linalg_vector_norm_out>(self, ord, dim, keepdim, dtype, out);
  track_native("aten::linalg_vector_norm.out");
  Tensor x = dtype ? self.to(*dtype) : self;
  if (std::isinf(p)) return at::amax_out(out, x.abs(), dim.value_or(at::IntArrayRef{}), keepdim);
  at::sum_out(out, at::mul(x, x), dim, keepdim, out.scalar_type());
  return out.sqrt_();
}

// Per-sample weights: class weight at the target, zero where target == ignore_index.
Tensor sample_weights(const Tensor& self, const Tensor& target, const std::optional<Tensor>& weight,
                      int64_t ignore_index, Tensor& safe_target) {
  Tensor keep = at::ne(target, ignore_index);
  safe_target = at::where(keep, target, at::zeros_like(target));
  Tensor w = weight && weight->defined() ? at::index_select(*weight, 0, safe_target)
                                         : at::ones_like(target, self.options());
  return at::where(keep, w, at::zeros_like(w));
}

std::tuple<Tensor&, Tensor&> nll_loss_forward_out(const Tensor& self, const Tensor& target,
                                                  const std::optional<Tensor>& weight, int64_t reduction,
                                                  int64_t ignore_index, Tensor& output, Tensor& total_weight) {
  if (self.dim() != 2 || !floating({self.scalar_type()}))
    return via_fallback<at::_ops::nll_loss_forward_output>(self, target, weight, reduction, ignore_index, output,
                                                           total_weight);
  TORCH_CHECK(target.dim() == 1 && target.size(0) == self.size(0), "Expected input batch_size (", self.size(0),
              ") to match target batch_size (", target.numel(), ").");
  track_native("aten::nll_loss_forward.output");
  int64_t n = self.size(0), c = self.size(1);
  Tensor safe;
  Tensor w = sample_weights(self, target, weight, ignore_index, safe);
  // log-probability at each sample's target, through the flattened input
  Tensor flat_index = at::add(at::mul(at::arange(n, target.options()), c), safe);
  Tensor picked = at::index_select(self.contiguous().reshape({-1}), 0, flat_index);
  Tensor losses = at::mul(at::mul(picked, w), -1);
  at::native::resize_output(total_weight, {});
  at::sum_out(total_weight, w, at::IntArrayRef{});
  if (reduction == at::Reduction::None) {
    at::native::resize_output(output, {n});
    output.copy_(losses);
  } else {
    at::native::resize_output(output, {});
    at::sum_out(output, losses, at::IntArrayRef{});
    if (reduction == at::Reduction::Mean) output.div_(total_weight);
  }
  return {output, total_weight};
}

Tensor& nll_loss_backward_out(const Tensor& grad, const Tensor& self, const Tensor& target,
                              const std::optional<Tensor>& weight, int64_t reduction, int64_t ignore_index,
                              const Tensor& total_weight, Tensor& grad_input) {
  if (self.dim() != 2 || !floating({self.scalar_type()}))
    return via_fallback<at::_ops::nll_loss_backward_grad_input>(grad, self, target, weight, reduction, ignore_index,
                                                                total_weight, grad_input);
  track_native("aten::nll_loss_backward.grad_input");
  int64_t c = self.size(1);
  Tensor safe;
  Tensor w = sample_weights(self, target, weight, ignore_index, safe);
  Tensor scale = at::mul(w, -1);
  if (reduction == at::Reduction::Mean) scale = at::div(scale, total_weight);
  scale = at::mul(scale, reduction == at::Reduction::None ? grad : grad.reshape({}));
  Tensor one_hot = at::eq(at::arange(c, target.options()).unsqueeze(0), safe.unsqueeze(1));
  at::native::resize_output(grad_input, self.sizes());
  return at::mul_out(grad_input, one_hot, scale.unsqueeze(1));
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("addcmul.out", addcmul_out);
  m.impl("addcdiv.out", addcdiv_out);
  m.impl("lerp.Scalar_out", lerp_scalar_out);
  m.impl("clamp.out", clamp_out);
  m.impl("linalg_vector_norm.out", vector_norm_out);
  m.impl("nll_loss_forward.output", nll_loss_forward_out);
  m.impl("nll_loss_backward.grad_input", nll_loss_backward_out);
}

} // namespace torch_neuronx::ops
