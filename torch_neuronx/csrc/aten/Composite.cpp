// addcmul, addcdiv and lerp on the ternary C kernel; ops expressed through other native ops
// (each step a C kernel launch, no element loops here): clamp, vector norms, nll_loss and
// its backward.
#include <ATen/Dispatch.h>
#include <ATen/ScalarOps.h>
#include <ATen/core/Reduction.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/add.h>
#include <ATen/ops/addcdiv.h>
#include <ATen/ops/addcmul.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/amin.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/clamp_max.h>
#include <ATen/ops/clamp_min.h>
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
#include <ATen/ops/nll_loss2d_backward.h>
#include <ATen/ops/nll_loss2d_forward.h>
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

// A 0-dim CPU operand (a Python number turned tensor) joins the device, as PyTorch's GPU
// backends accept it.
Tensor on_device(const Tensor& t, const Tensor& like) {
  return t.device() != like.device() && t.dim() == 0 && t.device().is_cpu() ? t.to(like.device()) : t;
}

at::TensorIterator ternary_iter(Tensor& out, const Tensor& a, const Tensor& b, const Tensor* c) {
  at::TensorIteratorConfig config;
  config.promote_inputs_to_common_dtype(true).cast_common_dtype_to_outputs(true).enforce_safe_casting_to_output(true);
  config.add_output(out).add_const_input(a).add_owned_const_input(on_device(b, a));
  if (c) config.add_owned_const_input(on_device(*c, a));
  return config.build();
}

Tensor& addcmul_out(const Tensor& self, const Tensor& t1, const Tensor& t2, const c10::Scalar& value, Tensor& out) {
  auto iter = ternary_iter(out, self, t1, &t2);
  bool integral = at::isIntegralType(iter.common_dtype(), true);
  if (!elementwise_dtypes_ok(iter) || value.isComplex() || (integral && value.isFloatingPoint()))
    return via_fallback<at::_ops::addcmul_out>(self, t1, t2, value, out);
  launch_ternary("aten::addcmul.out", TN_TERNARY_ADDCMUL, iter, value.toDouble());
  return out;
}

Tensor& addcdiv_out(const Tensor& self, const Tensor& t1, const Tensor& t2, const c10::Scalar& value, Tensor& out) {
  TORCH_CHECK(!(at::isIntegralType(t1.scalar_type(), true) && at::isIntegralType(t2.scalar_type(), true)),
              "Integer division with addcdiv is no longer supported, and in a future release addcdiv will perform "
              "a true division of tensor1 and tensor2. The historic addcdiv behavior can be implemented as "
              "(input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as "
              "(input + value * tensor1 / tensor2) for float inputs. The future addcdiv behavior is just the latter "
              "implementation: (input + value * tensor1 / tensor2), for all dtypes.");
  auto iter = ternary_iter(out, self, t1, &t2);
  if (!elementwise_dtypes_ok(iter) || value.isComplex() || !at::isFloatingType(iter.common_dtype()))
    return via_fallback<at::_ops::addcdiv_out>(self, t1, t2, value, out);
  launch_ternary("aten::addcdiv.out", TN_TERNARY_ADDCDIV, iter, value.toDouble());
  return out;
}

void check_lerp_dtypes(const Tensor& self, const Tensor& end, const Tensor* weight) {
  TORCH_CHECK(self.scalar_type() == end.scalar_type(), "expected dtype ", self.scalar_type(),
              " for `end`, but got dtype ", end.scalar_type());
  if (weight)
    TORCH_CHECK(self.scalar_type() == weight->scalar_type(), "expected dtype ", self.scalar_type(),
                " for `weight`, but got dtype ", weight->scalar_type());
}

Tensor& lerp_scalar_out(const Tensor& self, const Tensor& end, const c10::Scalar& weight, Tensor& out) {
  check_lerp_dtypes(self, end, nullptr);
  if (!floating({self.scalar_type(), out.scalar_type()}) || weight.isComplex())
    return via_fallback<at::_ops::lerp_Scalar_out>(self, end, weight, out);
  auto iter = ternary_iter(out, self, end, nullptr);
  launch_ternary("aten::lerp.Scalar_out", TN_TERNARY_LERP, iter, weight.toDouble());
  return out;
}

Tensor& lerp_tensor_out(const Tensor& self, const Tensor& end, const Tensor& weight, Tensor& out) {
  check_lerp_dtypes(self, end, &weight);
  if (!floating({self.scalar_type(), out.scalar_type()}))
    return via_fallback<at::_ops::lerp_Tensor_out>(self, end, weight, out);
  auto iter = ternary_iter(out, self, end, &weight);
  launch_ternary("aten::lerp.Tensor_out", TN_TERNARY_LERP, iter, 0.0);
  return out;
}

// clamp's promotion: a float bound makes an integer input float.
static c10::ScalarType clamp_type(const Tensor& self, const std::optional<c10::Scalar>& min,
                                  const std::optional<c10::Scalar>& max) {
  auto type = self.scalar_type();
  if (min) type = at::promote_types(type, at::result_type(self, *min));
  if (max) type = at::promote_types(type, at::result_type(self, *max));
  return type;
}

Tensor& clamp_out(const Tensor& self, const std::optional<c10::Scalar>& min, const std::optional<c10::Scalar>& max,
                  Tensor& out) {
  TORCH_CHECK(min || max, "torch.clamp: At least one of 'min' or 'max' must not be None");
  auto type = clamp_type(self, min, max);
  if (!elementwise_dtypes_ok({type, out.scalar_type()}) || at::isComplexType(type))
    return via_fallback<at::_ops::clamp_out>(self, min, max, out);  // the CPU's error for complex
  TORCH_CHECK(at::canCast(type, out.scalar_type()), "result type ", type, " can't be cast to the desired output type ",
              out.scalar_type());
  // a bound the type cannot hold raises, as the CPU kernel's conversion does ("value cannot be
  // converted to type c10::Half without overflow")
  AT_DISPATCH_ALL_TYPES_AND3(at::kHalf, at::kBFloat16, at::kBool, type, "clamp", [&] {
    if (min) (void)min->to<scalar_t>();
    if (max) (void)max->to<scalar_t>();
  });
  auto bound = [&](const c10::Scalar& v) { return at::native::wrapped_scalar_tensor(v).to(type); };
  Tensor x = self.to(type);  // self itself when the type is self's
  Tensor dst = out.scalar_type() == type ? out : at::empty({0}, x.options());
  if (min && max && type != at::kBool) {  // one pass: the upper bound travels as the op's scalar
    // a wrapped number does not promote x (of the type already): it joins as a host scalar
    Tensor lo = at::native::wrapped_scalar_tensor(*min);
    auto iter = at::TensorIterator::borrowing_binary_op(dst, x, lo);
    c10::Scalar hi = at::isFloatingType(type) ? c10::Scalar(max->toDouble()) : c10::Scalar(max->toLong());
    launch_binary("aten::clamp.out", TN_BINARY_CLAMP, iter, hi);
  } else {
    track_native("aten::clamp.out");
    if (min) at::maximum_out(dst, x, bound(*min));
    if (max) at::minimum_out(dst, min ? dst : x, bound(*max));
  }
  if (!dst.is_same(out)) {
    at::native::resize_output(out, dst.sizes());
    out.copy_(dst);
  }
  return out;
}

// The functional and in-place forms, registered directly (see BinaryOps.cpp's with_alpha): the
// composite forms build the result through a second dispatch, as costly as a small launch.
Tensor clamp(const Tensor& self, const std::optional<c10::Scalar>& min, const std::optional<c10::Scalar>& max) {
  TORCH_CHECK(min || max, "torch.clamp: At least one of 'min' or 'max' must not be None");
  Tensor out = at::empty({0}, self.options().dtype(clamp_type(self, min, max)));
  return clamp_out(self, min, max, out);
}

Tensor& clamp_(Tensor& self, const std::optional<c10::Scalar>& min, const std::optional<c10::Scalar>& max) {
  return clamp_out(self, min, max, self);
}

// clamp with tensor bounds, clamp_min / clamp_max: maximum and minimum (which propagate NaN)
// under clamp's type promotion.
Tensor& clamp_tensor_out(const Tensor& self, const std::optional<Tensor>& min, const std::optional<Tensor>& max,
                         Tensor& out) {
  bool has_min = min && min->defined(), has_max = max && max->defined();
  TORCH_CHECK(has_min || has_max, "torch.clamp: At least one of 'min' or 'max' must not be None");
  auto type = self.scalar_type();
  if (has_min) type = at::promote_types(type, min->scalar_type());
  if (has_max) type = at::promote_types(type, max->scalar_type());
  if (!elementwise_dtypes_ok({type, out.scalar_type()}))
    return via_fallback<at::_ops::clamp_Tensor_out>(self, min, max, out);
  TORCH_CHECK(at::canCast(type, out.scalar_type()), "result type ", type, " can't be cast to the desired output type ",
              out.scalar_type());
  track_native("aten::clamp.Tensor_out");
  Tensor r = has_min ? at::maximum(self.to(type), on_device(*min, self).to(type)) : self.to(type);
  if (has_max) r = at::minimum(r, on_device(*max, self).to(type));
  at::native::resize_output(out, r.sizes());
  return out.copy_(r);
}

// The older norm(p, dim) forms are vector norms of order p (2 when None), as PyTorch computes
// them; the functional forms reach these through PyTorch's structured kernels.
Tensor& legacy_norm_out(const Tensor& self, const std::optional<c10::Scalar>& p, at::IntArrayRef dim, bool keepdim,
                        std::optional<c10::ScalarType> dtype, Tensor& out) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()) || at::isComplexType(self.scalar_type()),
              "norm(): input dtype should be either floating point or complex. Got ", self.scalar_type(),
              " instead.");
  return at::linalg_vector_norm_out(out, self, p.value_or(2.0), dim, keepdim, dtype);
}

Tensor& norm_out(const Tensor& self, const std::optional<c10::Scalar>& p, at::IntArrayRef dim, bool keepdim,
                 Tensor& out) {
  return legacy_norm_out(self, p, dim, keepdim, std::nullopt, out);
}

Tensor& norm_dtype_out(const Tensor& self, const std::optional<c10::Scalar>& p, at::IntArrayRef dim, bool keepdim,
                       c10::ScalarType dtype, Tensor& out) {
  return legacy_norm_out(self, p, dim, keepdim, dtype, out);
}

Tensor& clamp_min_out(const Tensor& self, const c10::Scalar& min, Tensor& out) {
  return clamp_out(self, min, std::nullopt, out);
}

Tensor& clamp_max_out(const Tensor& self, const c10::Scalar& max, Tensor& out) {
  return clamp_out(self, std::nullopt, max, out);
}

Tensor& clamp_min_tensor_out(const Tensor& self, const Tensor& min, Tensor& out) {
  return clamp_tensor_out(self, min, std::nullopt, out);
}

Tensor& clamp_max_tensor_out(const Tensor& self, const Tensor& max, Tensor& out) {
  return clamp_tensor_out(self, std::nullopt, max, out);
}

// Every order: 2 and +-inf directly, 0 counts non-zeros, others as sum(|x|^p)^(1/p).
Tensor& vector_norm_out(const Tensor& self, const c10::Scalar& ord, at::OptionalIntArrayRef dim, bool keepdim,
                        std::optional<c10::ScalarType> dtype, Tensor& out) {
  double p = ord.toDouble();
  if (!floating({self.scalar_type(), out.scalar_type()}) || ord.isComplex())
    return via_fallback<at::_ops::linalg_vector_norm_out>(self, ord, dim, keepdim, dtype, out);
  TORCH_CHECK(!(std::isinf(p) && self.numel() == 0 && !dim), "linalg.vector_norm cannot compute the ", ord,
              " norm on an empty tensor because the operation does not have an identity");
  track_native("aten::linalg_vector_norm.out");
  // computed in float for the half types (|x|^p overflows them), cast once at the end
  Tensor x = dtype ? self.to(*dtype) : self;
  bool half = x.scalar_type() == at::kHalf || x.scalar_type() == at::kBFloat16;
  if (half && p != 2.0) x = x.to(at::kFloat);  // the 2-norm widens as it reads
  auto dims = dim.value_or(at::IntArrayRef{});
  Tensor r;
  if (p == 2.0)
    r = vector_norm2(x, dim, keepdim, half ? at::kFloat : x.scalar_type());
  else if (std::isinf(p))
    r = p > 0 ? at::amax(x.abs(), dims, keepdim) : at::amin(x.abs(), dims, keepdim);
  else if (p == 0.0)
    r = at::sum(at::ne(x, 0).to(x.scalar_type()), dim, keepdim);
  else if (p == 1.0)
    r = at::sum(x.abs(), dim, keepdim);
  else
    r = at::sum(at::pow(x.abs(), p), dim, keepdim).pow_(1.0 / p);
  at::native::resize_output(out, r.sizes());
  return out.copy_(r);
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
  if (self.dim() == 1 && target.dim() == 0 && floating({self.scalar_type()})) {  // one sample, no batch
    nll_loss_forward_out(self.unsqueeze(0), target.unsqueeze(0), weight, reduction, ignore_index, output, total_weight);
    if (reduction == at::Reduction::None) output.squeeze_(0);
    return {output, total_weight};
  }
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
  if (self.dim() == 1 && target.dim() == 0 && floating({self.scalar_type()})) {
    Tensor g = reduction == at::Reduction::None ? grad.reshape({1}) : grad;
    Tensor r = at::empty({0}, self.options());
    nll_loss_backward_out(g, self.unsqueeze(0), target.unsqueeze(0), weight, reduction, ignore_index, total_weight, r);
    at::native::resize_output(grad_input, self.sizes());
    return grad_input.copy_(r.squeeze(0));
  }
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
  // zeros, then each sample's scale at its target column; an ignored sample's stays 0 even
  // when every sample is ignored (0 / 0 total weight), as on the CPU
  (void)c;
  scale = at::where(w.ne(0), scale, at::zeros_like(scale));
  at::native::resize_output(grad_input, self.sizes());
  grad_input.zero_();
  return grad_input.scatter_(1, safe.unsqueeze(1), scale.to(grad_input.scalar_type()).unsqueeze(1));
}

// nll_loss2d: (N, C, H, W) scores as (N*H*W, C) rows.
std::tuple<Tensor&, Tensor&> nll_loss2d_forward_out(const Tensor& self, const Tensor& target,
                                                    const std::optional<Tensor>& weight, int64_t reduction,
                                                    int64_t ignore_index, Tensor& output, Tensor& total_weight) {
  TORCH_CHECK(self.dim() == 4 && target.dim() == 3, "only batches of spatial targets supported (3D tensors) but got "
              "targets of dimension: ", target.dim());
  TORCH_CHECK(self.size(0) == target.size(0) && self.size(2) == target.size(1) && self.size(3) == target.size(2),
              "size mismatch (got input: ", self.sizes(), " , target: ", target.sizes());
  track_native("aten::nll_loss2d_forward.output");
  Tensor rows = self.permute({0, 2, 3, 1}).reshape({-1, self.size(1)});
  nll_loss_forward_out(rows, target.reshape({-1}), weight, reduction, ignore_index, output, total_weight);
  if (reduction == at::Reduction::None) output.resize_(target.sizes());
  return {output, total_weight};
}

Tensor& nll_loss2d_backward_out(const Tensor& grad, const Tensor& self, const Tensor& target,
                                const std::optional<Tensor>& weight, int64_t reduction, int64_t ignore_index,
                                const Tensor& total_weight, Tensor& grad_input) {
  track_native("aten::nll_loss2d_backward.grad_input");
  Tensor rows = self.permute({0, 2, 3, 1}).reshape({-1, self.size(1)});
  Tensor g = reduction == at::Reduction::None ? grad.reshape({-1}) : grad;
  Tensor r = at::empty({0}, self.options());
  nll_loss_backward_out(g, rows, target.reshape({-1}), weight, reduction, ignore_index, total_weight, r);
  at::native::resize_output(grad_input, self.sizes());
  return grad_input.copy_(r.reshape({self.size(0), self.size(2), self.size(3), self.size(1)}).permute({0, 3, 1, 2}));
}

std::tuple<Tensor, Tensor> nll_loss2d_forward(const Tensor& self, const Tensor& target,
                                              const std::optional<Tensor>& weight, int64_t reduction,
                                              int64_t ignore_index) {
  Tensor output = at::empty({0}, self.options()), total_weight = at::empty({0}, self.options());
  nll_loss2d_forward_out(self, target, weight, reduction, ignore_index, output, total_weight);
  return {output, total_weight};
}

Tensor nll_loss2d_backward(const Tensor& grad, const Tensor& self, const Tensor& target,
                           const std::optional<Tensor>& weight, int64_t reduction, int64_t ignore_index,
                           const Tensor& total_weight) {
  Tensor grad_input = at::empty({0}, self.options());
  return nll_loss2d_backward_out(grad, self, target, weight, reduction, ignore_index, total_weight, grad_input);
}

// roll: along each dim, the last `shift` entries then the rest, one cat per dim; with no dims,
// over the flattened tensor. The result is a new tensor, as on the CPU.
Tensor roll_dims(const Tensor& self, at::IntArrayRef shifts, at::IntArrayRef dims) {
  TORCH_CHECK(!shifts.empty(), "`shifts` required");
  if (dims.empty() && shifts.size() == 1) return roll_dims(self.flatten(), shifts, {0}).view(self.sizes());
  TORCH_CHECK(shifts.size() == dims.size(), "shifts and dimensions must align. shifts: ", shifts.size(),
              ", dims:", dims.size());
  track_native("aten::roll");
  Tensor x = self;
  for (size_t i = 0; i < dims.size(); i++) {
    int64_t d = c10::maybe_wrap_dim(dims[i], self.dim()), n = self.size(d);
    int64_t s = n ? ((shifts[i] % n) + n) % n : 0;
    if (s) x = at::cat({x.narrow(d, n - s, s), x.narrow(d, 0, n - s)}, d);
  }
  return x.is_same(self) ? self.clone(at::MemoryFormat::Contiguous) : x;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("addcmul.out", addcmul_out);
  m.impl("addcdiv.out", addcdiv_out);
  m.impl("lerp.Scalar_out", lerp_scalar_out);
  m.impl("lerp.Tensor_out", lerp_tensor_out);
  m.impl("clamp.out", clamp_out);
  m.impl("clamp", clamp);
  m.impl("clamp_", clamp_);
  m.impl("clamp.Tensor_out", clamp_tensor_out);
  m.impl("clamp_min.out", clamp_min_out);
  m.impl("clamp_max.out", clamp_max_out);
  m.impl("clamp_min.Tensor_out", clamp_min_tensor_out);
  m.impl("clamp_max.Tensor_out", clamp_max_tensor_out);
  m.impl("linalg_vector_norm.out", vector_norm_out);
  m.impl("norm.out", norm_out);
  m.impl("norm.dtype_out", norm_dtype_out);
  m.impl("roll", roll_dims);
  m.impl("nll_loss_forward.output", nll_loss_forward_out);
  m.impl("nll_loss2d_forward.output", nll_loss2d_forward_out);
  m.impl("nll_loss2d_backward.grad_input", nll_loss2d_backward_out);
  m.impl("nll_loss2d_forward", nll_loss2d_forward);
  m.impl("nll_loss2d_backward", nll_loss2d_backward);
  m.impl("nll_loss_backward.grad_input", nll_loss_backward_out);
}

} // namespace torch_neuronx::ops
