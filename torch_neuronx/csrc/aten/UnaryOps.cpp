// Unary elementwise ops. Float ops (exp, tanh, ...) promote integer inputs to the default
// float dtype, as on the CPU; complex and exotic dtypes go to the CPU fallback.
#include <ATen/ops/abs.h>
#include <ATen/ops/acos.h>
#include <ATen/ops/acosh.h>
#include <ATen/ops/asin.h>
#include <ATen/ops/asinh.h>
#include <ATen/ops/atan.h>
#include <ATen/ops/atanh.h>
#include <ATen/ops/bitwise_not.h>
#include <ATen/ops/ceil.h>
#include <ATen/ops/cos.h>
#include <ATen/ops/cosh.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/erf.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/exp2.h>
#include <ATen/ops/expm1.h>
#include <ATen/ops/floor.h>
#include <ATen/ops/frac.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/log.h>
#include <ATen/ops/log10.h>
#include <ATen/ops/log1p.h>
#include <ATen/ops/log2.h>
#include <ATen/ops/logical_not.h>
#include <ATen/ops/neg.h>
#include <ATen/ops/reciprocal.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/round.h>
#include <ATen/ops/rsqrt.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/sign.h>
#include <ATen/ops/silu.h>
#include <ATen/ops/sin.h>
#include <ATen/ops/sinh.h>
#include <ATen/ops/sqrt.h>
#include <ATen/ops/tan.h>
#include <ATen/ops/tanh.h>
#include <ATen/ops/trunc.h>

#include <ATen/ops/div.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/sgn.h>
#include <ATen/ops/softplus.h>
#include <ATen/ops/softplus_backward.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros_like.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/clamp_max.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/log_sigmoid_forward.h>
#include <ATen/ops/log_sigmoid_backward.h>
#include <ATen/ScalarOps.h>
#include <ATen/native/Resize.h>
#include "aten/Iter.h"
#include "aten/OpTracking.h"

namespace torch_neuronx::ops {
namespace {

using at::Tensor;
using at::TensorIterator;

// An undefined `out` (the functional forms below) takes the result TensorIterator allocated.
template <class Op>
Tensor& unary(tn_unary_op code, const TensorIterator& iter, const Tensor& self, Tensor& out) {
  if (!out.defined()) out = iter.output();
  // Bool inputs: the CPU kernels reject most ops; the fallback gives the same answer or error.
  bool bool_ok = code == TN_UNARY_LOGICAL_NOT || code == TN_UNARY_BITWISE_NOT || code == TN_UNARY_SIGN;
  if (!elementwise_dtypes_ok(iter) || (iter.common_dtype() == at::kBool && !bool_ok))
    return via_fallback<Op>(self, out);
  launch_unary(op_name<Op>(), code, iter);
  return out;
}

// Same dtype in and out (neg, abs, floor, ...).
template <class Op, tn_unary_op code>
Tensor& same_type_out(const Tensor& self, Tensor& out) {
  auto iter = TensorIterator::unary_op(out, self);
  return unary<Op>(code, iter, self, out);
}

// Integer inputs computed in the default float dtype (exp, sqrt, tanh, ...).
template <class Op, tn_unary_op code>
Tensor& float_out(const Tensor& self, Tensor& out) {
  auto iter = TensorIterator::unary_float_op(out, self);
  return unary<Op>(code, iter, self, out);
}

// Rounding ops: integers pass through unchanged.
template <class Op, tn_unary_op code>
Tensor& rounding_out(const Tensor& self, Tensor& out) {
  auto iter = TensorIterator::unary_op(out, self);
  return unary<Op>(code, iter, self, out);
}

// round(x, decimals): one launch, with 10^decimals (or -10^-decimals) as the kernel's scalar and
// the arithmetic in float, as PyTorch's kernel; integers (which it refuses) and double (whose
// arithmetic is double) go to the CPU fallback.
Tensor& round_decimals_out(const Tensor& self, int64_t decimals, Tensor& out) {
  using Op = at::_ops::round_decimals_out;
  auto type = self.scalar_type();
  if (!at::isFloatingType(type) || type == at::kDouble) return via_fallback<Op>(self, decimals, out);
  if (decimals == 0) return rounding_out<at::_ops::round_out, TN_UNARY_ROUND>(self, out);
  float ten = static_cast<float>(std::pow(10.0, static_cast<double>(decimals < 0 ? -decimals : decimals)));
  auto iter = TensorIterator::borrowing_binary_op(out, self, self);
  return binary<Op>(TN_BINARY_ROUND_DECIMALS, iter, out, decimals < 0 ? -ten : ten, self, decimals, out);
}

Tensor& logical_not_out(const Tensor& self, Tensor& out) {
  auto iter = at::TensorIteratorConfig()
                  .check_all_same_dtype(false)
                  .add_output(out)
                  .add_const_input(self)
                  .build();
  return unary<at::_ops::logical_not_out>(TN_UNARY_LOGICAL_NOT, iter, self, out);
}

Tensor& bitwise_not_out(const Tensor& self, Tensor& out) {
  auto iter = TensorIterator::unary_op(out, self);
  if (!at::isIntegralType(iter.common_dtype(), true))
    return via_fallback<at::_ops::bitwise_not_out>(self, out);  // PyTorch's error for floats
  return unary<at::_ops::bitwise_not_out>(TN_UNARY_BITWISE_NOT, iter, self, out);
}

Tensor& gelu_out(const Tensor& self, c10::string_view approximate, Tensor& out) {
  TORCH_CHECK(approximate == "none" || approximate == "tanh", "approximate argument must be either none or tanh.");
  auto iter = TensorIterator::unary_op(out, self);
  if (!out.defined()) out = iter.output();
  if (!elementwise_dtypes_ok(iter) || !at::isFloatingType(iter.common_dtype()))
    return via_fallback<at::_ops::gelu_out>(self, approximate, out);
  launch_unary(op_name<at::_ops::gelu_out>(),
               approximate == "tanh" ? TN_UNARY_GELU_TANH : TN_UNARY_GELU, iter);
  return out;
}

Tensor& silu_out(const Tensor& self, Tensor& out) {
  auto iter = TensorIterator::unary_op(out, self);
  if (!out.defined()) out = iter.output();
  if (!at::isFloatingType(iter.common_dtype())) return via_fallback<at::_ops::silu_out>(self, out);
  return unary<at::_ops::silu_out>(TN_UNARY_SILU, iter, self, out);
}

Tensor relu(const Tensor& self) {
  TORCH_CHECK(self.scalar_type() != at::kBool, "Boolean inputs not supported for relu");
  Tensor out = at::empty_like(self);
  auto iter = TensorIterator::unary_op(out, self);
  if (!elementwise_dtypes_ok(iter)) return via_fallback<at::_ops::relu>(self);
  launch_unary("aten::relu", TN_UNARY_RELU, iter);
  return out;
}

Tensor& relu_(Tensor& self) {
  TORCH_CHECK(self.scalar_type() != at::kBool, "Boolean inputs not supported for relu");
  auto iter = TensorIterator::unary_op(self, self);
  if (!elementwise_dtypes_ok(iter)) return via_fallback<at::_ops::relu_>(self);
  launch_unary("aten::relu_", TN_UNARY_RELU, iter);
  return self;
}

// sgn is sign for real tensors.
Tensor& sgn_out(const Tensor& self, Tensor& out) {
  if (self.is_complex()) return via_fallback<at::_ops::sgn_out>(self, out);
  return same_type_out<at::_ops::sign_out, TN_UNARY_SIGN>(self, out);
}

Tensor isnan(const Tensor& self) {
  track_native("aten::isnan");
  if (!at::isFloatingType(self.scalar_type())) return at::zeros_like(self, self.options().dtype(at::kBool));
  return at::ne(self, self);
}

// frac(x) = x - trunc(x): floats only (the CPU refuses integers).
Tensor& frac_out(const Tensor& self, Tensor& out) {
  if (!at::isFloatingType(self.scalar_type())) return via_fallback<at::_ops::frac_out>(self, out);
  return same_type_out<at::_ops::frac_out, TN_UNARY_FRAC>(self, out);
}

// softplus(x) = log1p(exp(beta x)) / beta, and x itself where beta x > threshold: one launch,
// beta as the second operand and the threshold as the kernel's alpha.
Tensor& softplus_out(const Tensor& self, const c10::Scalar& beta, const c10::Scalar& threshold, Tensor& out) {
  using Op = at::_ops::softplus_out;
  if (!at::isFloatingType(self.scalar_type())) return via_fallback<Op>(self, beta, threshold, out);
  Tensor wrapped = at::native::wrapped_scalar_tensor(beta);
  auto iter = TensorIterator::borrowing_binary_op(out, self, wrapped);
  return binary<Op>(TN_BINARY_SOFTPLUS, iter, out, threshold, self, beta, threshold, out);
}

// Its backward, beta x > threshold ? grad : grad sigmoid(beta x): one launch over (grad, beta x),
// the threshold as alpha; beta x is a launch of its own unless beta is 1 (the default).
Tensor& softplus_backward_out(const Tensor& grad, const Tensor& self, const c10::Scalar& beta,
                              const c10::Scalar& threshold, Tensor& grad_input) {
  using Op = at::_ops::softplus_backward_grad_input;
  if (!at::isFloatingType(self.scalar_type())) return via_fallback<Op>(grad, self, beta, threshold, grad_input);
  Tensor scaled = beta.equal(1) ? self : at::mul(self, beta);
  auto iter = TensorIterator::borrowing_binary_op(grad_input, grad, scaled);
  return binary<Op>(TN_BINARY_SOFTPLUS_BACKWARD, iter, grad_input, threshold, grad, self, beta, threshold, grad_input);
}

// log_sigmoid(x) = min(x, 0) - log1p(exp(-|x|)) in one launch; the buffer output (the CPU's
// saved exp(-|x|)) is left empty: this backward computes from x.
std::tuple<Tensor&, Tensor&> log_sigmoid_forward_out(const Tensor& self, Tensor& output, Tensor& buffer) {
  using Op = at::_ops::log_sigmoid_forward_output;
  if (!at::isFloatingType(self.scalar_type())) return via_fallback<Op>(self, output, buffer);
  auto iter = TensorIterator::unary_op(output, self);
  if (!elementwise_dtypes_ok(iter)) return via_fallback<Op>(self, output, buffer);
  launch_unary(op_name<Op>(), TN_UNARY_LOG_SIGMOID, iter);
  at::native::resize_output(buffer, {0});
  return {output, buffer};
}

std::tuple<Tensor, Tensor> log_sigmoid_forward(const Tensor& self) {
  Tensor output = at::empty({0}, self.options()), buffer = at::empty({0}, self.options());
  log_sigmoid_forward_out(self, output, buffer);
  return {output, buffer};
}

// d/dx log_sigmoid(x) = sigmoid(-x), in one launch
Tensor& log_sigmoid_backward_out(const Tensor& grad, const Tensor& self, const Tensor& buffer, Tensor& grad_input) {
  using Op = at::_ops::log_sigmoid_backward_grad_input;
  if (!at::isFloatingType(self.scalar_type())) return via_fallback<Op>(grad, self, buffer, grad_input);
  auto iter = TensorIterator::borrowing_binary_op(grad_input, grad, self);
  return binary<Op>(TN_BINARY_LOG_SIGMOID_BACKWARD, iter, grad_input, 1, grad, self, buffer, grad_input);
}

Tensor log_sigmoid_backward(const Tensor& grad, const Tensor& self, const Tensor& buffer) {
  Tensor grad_input = at::empty({0}, self.options());
  return log_sigmoid_backward_out(grad, self, buffer, grad_input);
}

// Functional and in-place forms registered directly, as for the binary ops (BinaryOps.cpp):
// the composite forms would build a second TensorIterator and dispatch again. The out= forms
// take an undefined result and return the one TensorIterator allocated. Complex inputs keep
// the composite route.
template <class Op, class InPlaceOp, Tensor& (*Out)(const Tensor&, Tensor&)>
struct Forms {
  static Tensor functional(const Tensor& self) {
    if (self.is_complex()) return via_fallback<Op>(self);
    Tensor out;
    return Out(self, out);
  }
  static Tensor& in_place(Tensor& self) {
    if (self.is_complex()) return via_fallback<InPlaceOp>(self);
    return Out(self, self);
  }
};

template <class Op, class InPlaceOp, Tensor& (*Out)(const Tensor&, Tensor&)>
void register_forms(torch::Library& m, const char* name) {
  m.impl(name, Forms<Op, InPlaceOp, Out>::functional);
  m.impl((std::string(name) + "_").c_str(), Forms<Op, InPlaceOp, Out>::in_place);
}

Tensor gelu(const Tensor& self, c10::string_view approximate) {
  if (self.is_complex()) return via_fallback<at::_ops::gelu>(self, approximate);
  Tensor out;
  return gelu_out(self, approximate, out);
}

Tensor& gelu_(Tensor& self, c10::string_view approximate) {
  if (self.is_complex()) return via_fallback<at::_ops::gelu_>(self, approximate);
  return gelu_out(self, approximate, self);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
#define TN_FORMS(name, out) register_forms<at::_ops::name, at::_ops::name##_, out>(m, #name)
  TN_FORMS(neg, (same_type_out<at::_ops::neg_out, TN_UNARY_NEG>));
  TN_FORMS(abs, (same_type_out<at::_ops::abs_out, TN_UNARY_ABS>));
  TN_FORMS(exp, (float_out<at::_ops::exp_out, TN_UNARY_EXP>));
  TN_FORMS(log, (float_out<at::_ops::log_out, TN_UNARY_LOG>));
  TN_FORMS(sqrt, (float_out<at::_ops::sqrt_out, TN_UNARY_SQRT>));
  TN_FORMS(rsqrt, (float_out<at::_ops::rsqrt_out, TN_UNARY_RSQRT>));
  TN_FORMS(reciprocal, (float_out<at::_ops::reciprocal_out, TN_UNARY_RECIPROCAL>));
  TN_FORMS(sin, (float_out<at::_ops::sin_out, TN_UNARY_SIN>));
  TN_FORMS(cos, (float_out<at::_ops::cos_out, TN_UNARY_COS>));
  TN_FORMS(tanh, (float_out<at::_ops::tanh_out, TN_UNARY_TANH>));
  TN_FORMS(sigmoid, (float_out<at::_ops::sigmoid_out, TN_UNARY_SIGMOID>));
  TN_FORMS(silu, silu_out);
#undef TN_FORMS
  m.impl("gelu", gelu);
  m.impl("gelu_", gelu_);
  m.impl("neg.out", same_type_out<at::_ops::neg_out, TN_UNARY_NEG>);
  m.impl("abs.out", same_type_out<at::_ops::abs_out, TN_UNARY_ABS>);
  m.impl("sign.out", same_type_out<at::_ops::sign_out, TN_UNARY_SIGN>);
  m.impl("floor.out", rounding_out<at::_ops::floor_out, TN_UNARY_FLOOR>);
  m.impl("ceil.out", rounding_out<at::_ops::ceil_out, TN_UNARY_CEIL>);
  m.impl("trunc.out", rounding_out<at::_ops::trunc_out, TN_UNARY_TRUNC>);
  m.impl("round.out", rounding_out<at::_ops::round_out, TN_UNARY_ROUND>);
  m.impl("round.decimals_out", round_decimals_out);
  m.impl("exp.out", float_out<at::_ops::exp_out, TN_UNARY_EXP>);
  m.impl("expm1.out", float_out<at::_ops::expm1_out, TN_UNARY_EXPM1>);
  m.impl("log.out", float_out<at::_ops::log_out, TN_UNARY_LOG>);
  m.impl("log1p.out", float_out<at::_ops::log1p_out, TN_UNARY_LOG1P>);
  m.impl("log2.out", float_out<at::_ops::log2_out, TN_UNARY_LOG2>);
  m.impl("log10.out", float_out<at::_ops::log10_out, TN_UNARY_LOG10>);
  m.impl("exp2.out", float_out<at::_ops::exp2_out, TN_UNARY_EXP2>);
  m.impl("sqrt.out", float_out<at::_ops::sqrt_out, TN_UNARY_SQRT>);
  m.impl("rsqrt.out", float_out<at::_ops::rsqrt_out, TN_UNARY_RSQRT>);
  m.impl("reciprocal.out", float_out<at::_ops::reciprocal_out, TN_UNARY_RECIPROCAL>);
  m.impl("sin.out", float_out<at::_ops::sin_out, TN_UNARY_SIN>);
  m.impl("cos.out", float_out<at::_ops::cos_out, TN_UNARY_COS>);
  m.impl("tanh.out", float_out<at::_ops::tanh_out, TN_UNARY_TANH>);
  m.impl("sigmoid.out", float_out<at::_ops::sigmoid_out, TN_UNARY_SIGMOID>);
  m.impl("erf.out", float_out<at::_ops::erf_out, TN_UNARY_ERF>);
  m.impl("erfinv.out", float_out<at::_ops::erfinv_out, TN_UNARY_ERFINV>);
  m.impl("atan.out", float_out<at::_ops::atan_out, TN_UNARY_ATAN>);
  m.impl("asin.out", float_out<at::_ops::asin_out, TN_UNARY_ASIN>);
  m.impl("acos.out", float_out<at::_ops::acos_out, TN_UNARY_ACOS>);
  m.impl("tan.out", float_out<at::_ops::tan_out, TN_UNARY_TAN>);
  m.impl("sinh.out", float_out<at::_ops::sinh_out, TN_UNARY_SINH>);
  m.impl("cosh.out", float_out<at::_ops::cosh_out, TN_UNARY_COSH>);
  m.impl("asinh.out", float_out<at::_ops::asinh_out, TN_UNARY_ASINH>);
  m.impl("acosh.out", float_out<at::_ops::acosh_out, TN_UNARY_ACOSH>);
  m.impl("atanh.out", float_out<at::_ops::atanh_out, TN_UNARY_ATANH>);
  m.impl("frac.out", frac_out);
  m.impl("silu.out", silu_out);
  m.impl("gelu.out", gelu_out);
  m.impl("logical_not.out", logical_not_out);
  m.impl("bitwise_not.out", bitwise_not_out);
  m.impl("relu", relu);
  m.impl("sgn.out", sgn_out);
  m.impl("isnan", isnan);
  m.impl("log_sigmoid_forward.output", log_sigmoid_forward_out);
  m.impl("log_sigmoid_forward", log_sigmoid_forward);
  m.impl("log_sigmoid_backward.grad_input", log_sigmoid_backward_out);
  m.impl("log_sigmoid_backward", log_sigmoid_backward);
  m.impl("softplus.out", softplus_out);
  m.impl("softplus_backward.grad_input", softplus_backward_out);
  m.impl("relu_", relu_);
}

} // namespace torch_neuronx::ops
