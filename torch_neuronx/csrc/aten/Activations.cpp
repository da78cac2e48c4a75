// Activations Transformers' ACT2FN and vision models use besides gelu/silu/relu: leaky_relu,
// hardsigmoid and hardswish (MobileNetV3) as one elementwise launch each, forward and backward;
// elu and mish composed from native kernels with PyTorch's formulas (relu6 is hardtanh(0, 6)).
// Inputs they do not take (integers, except for hardtanh) go to the CPU fallback, which gives
// PyTorch's answer or error.
#include <ATen/native/Resize.h>
#include <ATen/ops/add.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/elu.h>
#include <ATen/ops/elu_backward.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/expm1.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/hardsigmoid.h>
#include <ATen/ops/hardsigmoid_backward.h>
#include <ATen/ops/hardswish.h>
#include <ATen/ops/hardswish_backward.h>
#include <ATen/ops/hardtanh.h>
#include <ATen/ops/hardtanh_backward.h>
#include <ATen/ops/le.h>
#include <ATen/ops/leaky_relu.h>
#include <ATen/ops/leaky_relu_backward.h>
#include <ATen/ops/log1p.h>
#include <ATen/ops/logical_or.h>
#include <ATen/ops/mish.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/tanh.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

#include "aten/Iter.h"
#include "aten/OpTracking.h"

namespace torch_neuronx::ops {
namespace {

using at::Tensor;
using c10::Scalar;

bool floating(const Tensor& t) { return at::isFloatingType(t.scalar_type()); }

// One launch of binary op `code` over (a, b) with the kernel's `alpha` (a unary activation
// with a scalar passes self twice); inputs the kernels do not take go to the CPU fallback with
// the op's own arguments.
template <class Op, class... Args>
Tensor& activation(tn_binary_op code, const Tensor& a, const Tensor& b, const Scalar& alpha, Tensor& out,
                   Args&&... args) {
  if (!floating(b)) return via_fallback<Op>(std::forward<Args>(args)...);
  auto iter = at::TensorIterator::borrowing_binary_op(out, a, b);
  return binary<Op>(code, iter, out, alpha, std::forward<Args>(args)...);
}

// leaky_relu(x) = x > 0 ? x : x * slope
Tensor& leaky_relu_out(const Tensor& self, const Scalar& slope, Tensor& out) {
  return activation<at::_ops::leaky_relu_out>(TN_BINARY_LEAKY_RELU, self, self, slope, out, self, slope, out);
}

Tensor& leaky_relu_backward_out(const Tensor& grad, const Tensor& self, const Scalar& slope, bool self_is_result,
                                Tensor& grad_input) {
  return activation<at::_ops::leaky_relu_backward_grad_input>(TN_BINARY_LEAKY_RELU_BACKWARD, grad, self, slope,
                                                              grad_input, grad, self, slope, self_is_result,
                                                              grad_input);
}

// hardsigmoid(x) = min(max(x + 3, 0), 6) / 6 and hardswish(x) = x hardsigmoid(x), unary ops.
template <class Op, tn_unary_op code>
Tensor& unary_activation(const Tensor& self, Tensor& out) {
  if (!floating(self)) return via_fallback<Op>(self, out);
  auto iter = at::TensorIterator::unary_op(out, self);
  if (!out.defined()) out = iter.output();
  if (!elementwise_dtypes_ok(iter)) return via_fallback<Op>(self, out);
  launch_unary(op_name<Op>(), code, iter);
  return out;
}

constexpr auto hardsigmoid_into = unary_activation<at::_ops::hardsigmoid_out, TN_UNARY_HARDSIGMOID>;
constexpr auto hardswish_into = unary_activation<at::_ops::hardswish_out, TN_UNARY_HARDSWISH>;

Tensor hardswish(const Tensor& self) {
  if (!floating(self)) return via_fallback<at::_ops::hardswish>(self);
  Tensor out;
  return hardswish_into(self, out);
}

Tensor& hardswish_(Tensor& self) {
  if (!floating(self)) return via_fallback<at::_ops::hardswish_>(self);
  return hardswish_into(self, self);
}

Tensor& hardsigmoid_backward_out(const Tensor& grad, const Tensor& self, Tensor& grad_input) {
  return activation<at::_ops::hardsigmoid_backward_grad_input>(TN_BINARY_HARDSIGMOID_BACKWARD, grad, self, 0,
                                                               grad_input, grad, self, grad_input);
}

// hardswish_backward has no out= form: the functional one (its fallback returns a new tensor).
Tensor hardswish_backward(const Tensor& grad, const Tensor& self) {
  if (!floating(self)) return via_fallback<at::_ops::hardswish_backward>(grad, self);
  Tensor grad_input;
  auto iter = at::TensorIterator::borrowing_binary_op(grad_input, grad, self);
  if (!elementwise_dtypes_ok(iter)) return via_fallback<at::_ops::hardswish_backward>(grad, self);
  launch_binary(op_name<at::_ops::hardswish_backward>(), TN_BINARY_HARDSWISH_BACKWARD, iter);
  return iter.output();
}

// elu(x) = x > 0 ? scale x : alpha scale (e^(input_scale x) - 1)
Tensor& elu_out(const Tensor& self, const Scalar& alpha, const Scalar& scale, const Scalar& input_scale, Tensor& out) {
  if (!floating(self)) return via_fallback<at::_ops::elu_out>(self, alpha, scale, input_scale, out);
  track_native("aten::elu.out");
  Tensor negative = at::mul(at::expm1(at::mul(self, input_scale)), alpha.toDouble() * scale.toDouble());
  return at::where_out(out, at::gt(self, 0), at::mul(self, scale), negative);
}

// Given the input x: x > 0 ? g scale : g input_scale alpha scale e^(input_scale x); given the
// result y (is_result): y > 0 ? g scale : g input_scale (y + alpha scale).
Tensor& elu_backward_out(const Tensor& grad, const Scalar& alpha, const Scalar& scale, const Scalar& input_scale,
                         bool is_result, const Tensor& x, Tensor& grad_input) {
  if (!floating(x))
    return via_fallback<at::_ops::elu_backward_grad_input>(grad, alpha, scale, input_scale, is_result, x, grad_input);
  track_native("aten::elu_backward.grad_input");
  double neg = alpha.toDouble() * scale.toDouble(), in = input_scale.toDouble();
  Tensor slope = is_result ? at::mul(at::add(x, neg), in) : at::mul(at::exp(at::mul(x, in)), in * neg);
  return at::where_out(grad_input, at::gt(x, 0), at::mul(grad, scale), at::mul(grad, slope));
}

// hardtanh is clamp (relu6 is hardtanh(0, 6)); for integers the bounds are truncated to
// integers first, so that they do not promote the result, as PyTorch does. Its gradient is
// zero outside (min, max).
Tensor& hardtanh_out(const Tensor& self, const Scalar& min, const Scalar& max, Tensor& out) {
  if (self.scalar_type() == at::kBool || self.is_complex())
    return via_fallback<at::_ops::hardtanh_out>(self, min, max, out);
  track_native("aten::hardtanh.out");
  if (!at::isIntegralType(self.scalar_type(), false)) return at::clamp_out(out, self, min, max);
  TORCH_CHECK(self.scalar_type() != at::kByte || (min.toLong() >= 0 && max.toLong() >= 0),
              "cannot do hardtanh on an unsigned type with negative limits");
  return at::clamp_out(out, self, min.toLong(), max.toLong());
}

Tensor hardtanh(const Tensor& self, const Scalar& min, const Scalar& max) {
  Tensor out = at::empty_like(self);
  return hardtanh_out(self, min, max, out);
}

Tensor& hardtanh_(Tensor& self, const Scalar& min, const Scalar& max) { return hardtanh_out(self, min, max, self); }

Tensor& hardtanh_backward_out(const Tensor& grad, const Tensor& self, const Scalar& min, const Scalar& max,
                              Tensor& grad_input) {
  if (!floating(self)) return via_fallback<at::_ops::hardtanh_backward_grad_input>(grad, self, min, max, grad_input);
  track_native("aten::hardtanh_backward.grad_input");
  Tensor outside = at::logical_or(at::le(self, min), at::ge(self, max));
  return at::where_out(grad_input, outside, at::zeros_like(grad), grad);
}

Tensor hardtanh_backward(const Tensor& grad, const Tensor& self, const Scalar& min, const Scalar& max) {
  Tensor grad_input = at::empty_like(grad);
  return hardtanh_backward_out(grad, self, min, max, grad_input);
}

// mish(x) = x tanh(log(1 + e^x))
Tensor& mish_out(const Tensor& self, Tensor& out) {
  if (!floating(self)) return via_fallback<at::_ops::mish_out>(self, out);
  track_native("aten::mish.out");
  return at::mul_out(out, self, at::tanh(at::log1p(at::exp(self))));
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("leaky_relu.out", leaky_relu_out);
  m.impl("leaky_relu_backward.grad_input", leaky_relu_backward_out);
  m.impl("elu.out", elu_out);
  m.impl("elu_backward.grad_input", elu_backward_out);
  m.impl("hardtanh", hardtanh);
  m.impl("hardtanh.out", hardtanh_out);
  m.impl("hardtanh_", hardtanh_);
  m.impl("hardtanh_backward", hardtanh_backward);
  m.impl("hardtanh_backward.grad_input", hardtanh_backward_out);
  m.impl("mish.out", mish_out);
  m.impl("hardsigmoid.out", hardsigmoid_into);
  m.impl("hardsigmoid_backward.grad_input", hardsigmoid_backward_out);
  m.impl("hardswish", hardswish);
  m.impl("hardswish_", hardswish_);
  m.impl("hardswish.out", hardswish_into);
  m.impl("hardswish_backward", hardswish_backward);
}

} // namespace torch_neuronx::ops
