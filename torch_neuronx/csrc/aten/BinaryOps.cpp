// Binary elementwise ops: arithmetic, comparisons, logical/bitwise ops and the activation
// backward ops autograd calls. Each builds the TensorIterator PyTorch's CPU kernel builds
// and hands it to the C kernels; complex and exotic dtypes go to the CPU fallback.
#include <ATen/ScalarOps.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/ops/add.h>
#include <ATen/ops/bitwise_and.h>
#include <ATen/ops/bitwise_or.h>
#include <ATen/ops/bitwise_xor.h>
#include <ATen/ops/div.h>
#include <ATen/ops/xlogy.h>
#include <ATen/ops/atan2.h>
#include <ATen/ops/copysign.h>
#include <ATen/ops/hypot.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/floor_divide.h>
#include <ATen/ops/fmod.h>
#include <ATen/ops/remainder.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/gelu_backward.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/le.h>
#include <ATen/ops/logical_and.h>
#include <ATen/ops/logical_or.h>
#include <ATen/ops/logical_xor.h>
#include <ATen/ops/lt.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/minimum.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/sigmoid_backward.h>
#include <ATen/ops/silu_backward.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/tanh_backward.h>
#include <ATen/ops/threshold_backward.h>

#include "aten/Iter.h"
#include "aten/Ops.h"

namespace torch_neuronx::ops {
namespace {

using at::Tensor;
using at::TensorIterator;

template <class Op, tn_binary_op code>
Tensor& same_type_out(const Tensor& self, const Tensor& other, Tensor& out) {
  auto iter = TensorIterator::borrowing_binary_op(out, self, other);
  return binary<Op>(code, iter, out, 1, self, other, out);
}

template <class Op, tn_binary_op code>
Tensor& bitwise_out(const Tensor& self, const Tensor& other, Tensor& out) {
  auto iter = TensorIterator::borrowing_binary_op(out, self, other);
  if (!at::isIntegralType(iter.common_dtype(), true))
    return via_fallback<Op>(self, other, out);  // raises PyTorch's own error for floats
  return binary<Op>(code, iter, out, 1, self, other, out);
}

// Comparisons and logical ops: bool (or the out= dtype) results from promoted inputs.
template <class Op, tn_binary_op code>
Tensor& compare_out(const Tensor& self, const Tensor& other, Tensor& out) {
  auto iter = TensorIterator::comparison_op(out, self, other);
  return binary<Op>(code, iter, out, 1, self, other, out);
}

template <class Op, tn_binary_op code>
Tensor& compare_scalar_out(const Tensor& self, const c10::Scalar& other, Tensor& out) {
  auto iter = TensorIterator::comparison_op(out, self, at::native::wrapped_scalar_tensor(other));
  return binary<Op>(code, iter, out, 1, self, other, out);
}

// Activation backward ops: grad_input = f(grad, forward input or output).
template <class Op, tn_binary_op code>
Tensor& activation_backward_out(const Tensor& grad, const Tensor& x, Tensor& grad_input) {
  auto iter = TensorIterator::borrowing_binary_op(grad_input, grad, x);
  return binary<Op>(code, iter, grad_input, 1, grad, x, grad_input);
}

Tensor& add_out(const Tensor& self, const Tensor& other, const c10::Scalar& alpha, Tensor& out) {
  auto iter = TensorIterator::borrowing_binary_op(out, self, other);
  at::native::alpha_check(iter.dtype(), alpha);
  return binary<at::_ops::add_out>(TN_BINARY_ADD, iter, out, alpha, self, other, alpha, out);
}

Tensor& sub_out(const Tensor& self, const Tensor& other, const c10::Scalar& alpha, Tensor& out) {
  at::native::sub_check(self, other);
  auto iter = TensorIterator::borrowing_binary_op(out, self, other);
  at::native::alpha_check(iter.dtype(), alpha);
  return binary<at::_ops::sub_out>(TN_BINARY_SUB, iter, out, alpha, self, other, alpha, out);
}

Tensor& div_out(const Tensor& self, const Tensor& other, Tensor& out) {
  auto iter = TensorIterator::binary_float_op(out, self, other);
  return binary<at::_ops::div_out>(TN_BINARY_DIV, iter, out, 1, self, other, out);
}

// Float ops of two tensors (integers promote to the default float dtype, as on the CPU).
template <class Op, tn_binary_op code>
Tensor& float_binary_out(const Tensor& self, const Tensor& other, Tensor& out) {
  auto iter = TensorIterator::binary_float_op(out, self, other);
  return binary<Op>(code, iter, out, 1, self, other, out);
}

// hypot keeps its operands' dtype; integers have no kernel on the CPU either (its error).
Tensor& hypot_out(const Tensor& self, const Tensor& other, Tensor& out) {
  auto iter = TensorIterator::borrowing_binary_op(out, self, other);
  if (!at::isFloatingType(iter.common_dtype())) return via_fallback<at::_ops::hypot_out>(self, other, out);
  return binary<at::_ops::hypot_out>(TN_BINARY_HYPOT, iter, out, 1, self, other, out);
}

Tensor& xlogy_out(const Tensor& self, const Tensor& other, Tensor& out) {
  auto iter = TensorIterator::binary_float_op(out, self, other);
  return binary<at::_ops::xlogy_OutTensor>(TN_BINARY_XLOGY, iter, out, 1, self, other, out);
}

Tensor& div_mode_out(const Tensor& self, const Tensor& other,
                     std::optional<c10::string_view> mode, Tensor& out) {
  using Op = at::_ops::div_out_mode;
  if (!mode.has_value()) {
    auto iter = TensorIterator::binary_float_op(out, self, other);
    return binary<Op>(TN_BINARY_DIV, iter, out, 1, self, other, mode, out);
  }
  TORCH_CHECK(*mode == "trunc" || *mode == "floor",
              "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '",
              *mode, "'");
  auto iter = TensorIterator::binary_op(out, self, other);
  tn_binary_op code = *mode == "trunc" ? TN_BINARY_DIV_TRUNC : TN_BINARY_DIV_FLOOR;
  return binary<Op>(code, iter, out, 1, self, other, mode, out);
}

Tensor& pow_tensor_out(const Tensor& self, const Tensor& exponent, Tensor& out) {
  using Op = at::_ops::pow_Tensor_Tensor_out;
  auto iter = TensorIterator::borrowing_binary_op(out, self, exponent);
  // integers: the kernel gives PyTorch's values for negative powers (1, +-1 or 0, no error:
  // only a Scalar exponent is refused); bool has no pow
  if (iter.common_dtype() == at::kBool) return via_fallback<Op>(self, exponent, out);
  return binary<Op>(TN_BINARY_POW, iter, out, 1, self, exponent, out);
}

Tensor& pow_scalar_out(const Tensor& self, const c10::Scalar& exponent, Tensor& out) {
  using Op = at::_ops::pow_Tensor_Scalar_out;
  if (self.is_complex() || exponent.isComplex()) return via_fallback<Op>(self, exponent, out);
  bool integral = at::isIntegralType(self.scalar_type(), true);
  TORCH_CHECK(!(integral && exponent.isIntegral(true) && exponent.toLong() < 0),
              "Integers to negative integer powers are not allowed.");
  // x^2 as x * x (RMSNorm's variance), as PyTorch's CPU kernel does: faster than pow, same value
  // (integers and bool promote through the iterator as they do on the CPU)
  if (!integral && exponent.toDouble() == 2.0) {
    auto iter = TensorIterator::borrowing_binary_op(out, self, self);
    return binary<Op>(TN_BINARY_MUL, iter, out, 1, self, exponent, out);
  }
  Tensor wrapped = at::native::wrapped_scalar_tensor(exponent);
  auto iter = TensorIterator::borrowing_binary_op(out, self, wrapped);
  return binary<Op>(TN_BINARY_POW, iter, out, 1, self, exponent, out);
}

// floor_divide is division rounded down, in the dividend's promotion.
Tensor& floor_divide_out(const Tensor& self, const Tensor& other, Tensor& out) {
  return div_mode_out(self, other, "floor", out);
}

Tensor floor_divide(const Tensor& self, const Tensor& other) {
  return at::div(self, other, "floor");
}

Tensor& floor_divide_(Tensor& self, const Tensor& other) {
  return div_mode_out(self, other, "floor", self);
}

// remainder (Python's %: the divisor's sign) and fmod (C's: the dividend's), of integers and
// floats; bool has neither (the CPU fallback raises PyTorch's error). An integer zero divisor
// raises as on the CPU.
template <class Op, tn_binary_op code>
Tensor& modulo_out(const Tensor& self, const Tensor& other, Tensor& out) {
  auto iter = TensorIterator::borrowing_binary_op(out, self, other);
  if (iter.common_dtype() == at::kBool) return via_fallback<Op>(self, other, out);
  return binary<Op>(code, iter, out, 1, self, other, out);
}

// A Python number % a tensor.
Tensor remainder_scalar_self(const c10::Scalar& self, const Tensor& other) {
  return at::remainder(at::native::wrapped_scalar_tensor(self), other);
}

// A Python number raised to a tensor: the base travels with the launch as a scalar operand.
Tensor& pow_scalar_base_out(const c10::Scalar& base, const Tensor& exponent, Tensor& out) {
  using Op = at::_ops::pow_Scalar_out;
  if (base.isComplex()) return via_fallback<Op>(base, exponent, out);
  Tensor wrapped = at::native::wrapped_scalar_tensor(base);
  auto iter = TensorIterator::borrowing_binary_op(out, wrapped, exponent);
  if (at::isIntegralType(iter.common_dtype(), true)) return via_fallback<Op>(base, exponent, out);
  return binary<Op>(TN_BINARY_POW, iter, out, 1, base, exponent, out);
}

Tensor& threshold_backward_out(const Tensor& grad, const Tensor& self, const c10::Scalar& threshold,
                               Tensor& grad_input) {
  auto iter = TensorIterator::borrowing_binary_op(grad_input, grad, self);
  return binary<at::_ops::threshold_backward_grad_input>(TN_BINARY_THRESHOLD_BACKWARD, iter,
                                                           grad_input, threshold, grad, self,
                                                           threshold, grad_input);
}

Tensor& gelu_backward_out(const Tensor& grad, const Tensor& self, c10::string_view approximate,
                          Tensor& grad_input) {
  auto iter = TensorIterator::borrowing_binary_op(grad_input, grad, self);
  tn_binary_op code = approximate == "tanh" ? TN_BINARY_GELU_TANH_BACKWARD : TN_BINARY_GELU_BACKWARD;
  return binary<at::_ops::gelu_backward_grad_input>(code, iter, grad_input, 1, grad, self,
                                                      approximate, grad_input);
}

} // namespace

Tensor& mul_out(const Tensor& self, const Tensor& other, Tensor& out) {
  if (!out.defined() && (self.is_complex() || other.is_complex())) {  // functional mul
    auto device = self.device().is_cpu() ? other.device() : self.device();
    out = at::empty({0}, at::TensorOptions().dtype(at::result_type(self, other)).device(device));
  }
  if (out.is_complex() && complex_mul_out(self, other, out)) return out;
  return same_type_out<at::_ops::mul_out, TN_BINARY_MUL>(self, other, out);
}

namespace {

// Functional and in-place forms of add, sub, mul and div, registered directly. PyTorch's
// composite forms would build a second TensorIterator (the op's meta function) and dispatch
// again to the out= form: on small tensors that costs as much as the launch itself. The out=
// forms take an undefined result and return the one TensorIterator allocated. In place, self
// is also an input, so TensorIterator refuses to resize it: a broadcast past its shape raises
// PyTorch's error.

template <Tensor& (*Out)(const Tensor&, const Tensor&, const c10::Scalar&, Tensor&)>
Tensor with_alpha(const Tensor& self, const Tensor& other, const c10::Scalar& alpha) {
  Tensor out;
  return Out(self, other, alpha, out);
}

template <Tensor& (*Out)(const Tensor&, const Tensor&, const c10::Scalar&, Tensor&)>
Tensor& with_alpha_(Tensor& self, const Tensor& other, const c10::Scalar& alpha) {
  return Out(self, other, alpha, self);
}

template <Tensor& (*Out)(const Tensor&, const Tensor&, Tensor&)>
Tensor plain(const Tensor& self, const Tensor& other) {
  Tensor out;
  return Out(self, other, out);
}

template <Tensor& (*Out)(const Tensor&, const Tensor&, Tensor&)>
Tensor& plain_(Tensor& self, const Tensor& other) {
  return Out(self, other, self);
}

// Comparisons with a scalar (with a tensor they use `plain`): with no result given,
// TensorIterator allocates a bool one.
template <Tensor& (*Out)(const Tensor&, const c10::Scalar&, Tensor&)>
Tensor compare_scalar(const Tensor& self, const c10::Scalar& other) {
  Tensor out;
  return Out(self, other, out);
}

// rsub(self, other, alpha) = other - alpha * self.
Tensor rsub(const Tensor& self, const Tensor& other, const c10::Scalar& alpha) {
  return at::sub(other, self, alpha);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("rsub.Tensor", rsub);
  m.impl("add.out", add_out);
  m.impl("add.Tensor", with_alpha<add_out>);
  m.impl("add_.Tensor", with_alpha_<add_out>);
  m.impl("sub.Tensor", with_alpha<sub_out>);
  m.impl("sub_.Tensor", with_alpha_<sub_out>);
  m.impl("mul.Tensor", plain<mul_out>);
  m.impl("mul_.Tensor", plain_<mul_out>);
  m.impl("div.Tensor", plain<div_out>);
  m.impl("div_.Tensor", plain_<div_out>);
  m.impl("sub.out", sub_out);
  m.impl("mul.out", mul_out);
  m.impl("div.out", div_out);
  m.impl("div.out_mode", div_mode_out);
  m.impl("xlogy.OutTensor", xlogy_out);
  m.impl("atan2.out", float_binary_out<at::_ops::atan2_out, TN_BINARY_ATAN2>);
  m.impl("copysign.out", float_binary_out<at::_ops::copysign_out, TN_BINARY_COPYSIGN>);
  m.impl("hypot.out", hypot_out);
  m.impl("maximum.out", same_type_out<at::_ops::maximum_out, TN_BINARY_MAXIMUM>);
  m.impl("minimum.out", same_type_out<at::_ops::minimum_out, TN_BINARY_MINIMUM>);
  m.impl("pow.Tensor_Tensor_out", pow_tensor_out);
  m.impl("pow.Tensor_Scalar_out", pow_scalar_out);
  m.impl("pow.Scalar_out", pow_scalar_base_out);
  m.impl("remainder.Tensor_out", modulo_out<at::_ops::remainder_Tensor_out, TN_BINARY_REMAINDER>);
  m.impl("remainder.Tensor", plain<modulo_out<at::_ops::remainder_Tensor_out, TN_BINARY_REMAINDER>>);
  m.impl("remainder_.Tensor", plain_<modulo_out<at::_ops::remainder_Tensor_out, TN_BINARY_REMAINDER>>);
  m.impl("remainder.Scalar_Tensor", remainder_scalar_self);
  m.impl("fmod.Tensor_out", modulo_out<at::_ops::fmod_Tensor_out, TN_BINARY_FMOD>);
  m.impl("fmod.Tensor", plain<modulo_out<at::_ops::fmod_Tensor_out, TN_BINARY_FMOD>>);
  m.impl("fmod_.Tensor", plain_<modulo_out<at::_ops::fmod_Tensor_out, TN_BINARY_FMOD>>);
  m.impl("floor_divide.out", floor_divide_out);
  m.impl("floor_divide", floor_divide);
  m.impl("floor_divide_.Tensor", floor_divide_);
  m.impl("eq.Tensor_out", compare_out<at::_ops::eq_Tensor_out, TN_BINARY_EQ>);
  m.impl("ne.Tensor_out", compare_out<at::_ops::ne_Tensor_out, TN_BINARY_NE>);
  m.impl("lt.Tensor_out", compare_out<at::_ops::lt_Tensor_out, TN_BINARY_LT>);
  m.impl("le.Tensor_out", compare_out<at::_ops::le_Tensor_out, TN_BINARY_LE>);
  m.impl("gt.Tensor_out", compare_out<at::_ops::gt_Tensor_out, TN_BINARY_GT>);
  m.impl("ge.Tensor_out", compare_out<at::_ops::ge_Tensor_out, TN_BINARY_GE>);
  m.impl("eq.Scalar_out", compare_scalar_out<at::_ops::eq_Scalar_out, TN_BINARY_EQ>);
  m.impl("ne.Scalar_out", compare_scalar_out<at::_ops::ne_Scalar_out, TN_BINARY_NE>);
  m.impl("lt.Scalar_out", compare_scalar_out<at::_ops::lt_Scalar_out, TN_BINARY_LT>);
  m.impl("le.Scalar_out", compare_scalar_out<at::_ops::le_Scalar_out, TN_BINARY_LE>);
  m.impl("gt.Scalar_out", compare_scalar_out<at::_ops::gt_Scalar_out, TN_BINARY_GT>);
  m.impl("ge.Scalar_out", compare_scalar_out<at::_ops::ge_Scalar_out, TN_BINARY_GE>);
  m.impl("eq.Tensor", plain<compare_out<at::_ops::eq_Tensor_out, TN_BINARY_EQ>>);
  m.impl("eq.Scalar", compare_scalar<compare_scalar_out<at::_ops::eq_Scalar_out, TN_BINARY_EQ>>);
  m.impl("ne.Tensor", plain<compare_out<at::_ops::ne_Tensor_out, TN_BINARY_NE>>);
  m.impl("ne.Scalar", compare_scalar<compare_scalar_out<at::_ops::ne_Scalar_out, TN_BINARY_NE>>);
  m.impl("lt.Tensor", plain<compare_out<at::_ops::lt_Tensor_out, TN_BINARY_LT>>);
  m.impl("lt.Scalar", compare_scalar<compare_scalar_out<at::_ops::lt_Scalar_out, TN_BINARY_LT>>);
  m.impl("le.Tensor", plain<compare_out<at::_ops::le_Tensor_out, TN_BINARY_LE>>);
  m.impl("le.Scalar", compare_scalar<compare_scalar_out<at::_ops::le_Scalar_out, TN_BINARY_LE>>);
  m.impl("gt.Tensor", plain<compare_out<at::_ops::gt_Tensor_out, TN_BINARY_GT>>);
  m.impl("gt.Scalar", compare_scalar<compare_scalar_out<at::_ops::gt_Scalar_out, TN_BINARY_GT>>);
  m.impl("ge.Tensor", plain<compare_out<at::_ops::ge_Tensor_out, TN_BINARY_GE>>);
  m.impl("ge.Scalar", compare_scalar<compare_scalar_out<at::_ops::ge_Scalar_out, TN_BINARY_GE>>);
  m.impl("logical_and.out", compare_out<at::_ops::logical_and_out, TN_BINARY_LOGICAL_AND>);
  m.impl("logical_or.out", compare_out<at::_ops::logical_or_out, TN_BINARY_LOGICAL_OR>);
  m.impl("logical_xor.out", compare_out<at::_ops::logical_xor_out, TN_BINARY_LOGICAL_XOR>);
  m.impl("bitwise_and.Tensor_out", bitwise_out<at::_ops::bitwise_and_Tensor_out, TN_BINARY_BITWISE_AND>);
  m.impl("bitwise_or.Tensor_out", bitwise_out<at::_ops::bitwise_or_Tensor_out, TN_BINARY_BITWISE_OR>);
  m.impl("bitwise_xor.Tensor_out", bitwise_out<at::_ops::bitwise_xor_Tensor_out, TN_BINARY_BITWISE_XOR>);
  m.impl("threshold_backward.grad_input", threshold_backward_out);
  m.impl("sigmoid_backward.grad_input",
         activation_backward_out<at::_ops::sigmoid_backward_grad_input, TN_BINARY_SIGMOID_BACKWARD>);
  m.impl("tanh_backward.grad_input",
         activation_backward_out<at::_ops::tanh_backward_grad_input, TN_BINARY_TANH_BACKWARD>);
  m.impl("silu_backward.grad_input",
         activation_backward_out<at::_ops::silu_backward_grad_input, TN_BINARY_SILU_BACKWARD>);
  // silu_backward's functional form also has a CompositeImplicitAutograd kernel (sigmoid,
  // then four more ops), which PyTorch picks for a backend with no kernel of its own: what
  // autograd calls in every SwiGLU's backward ran six launches instead of one
  m.impl("silu_backward",
         plain<activation_backward_out<at::_ops::silu_backward_grad_input, TN_BINARY_SILU_BACKWARD>>);
  m.impl("gelu_backward.grad_input", gelu_backward_out);
}

} // namespace torch_neuronx::ops
