// The _foreach_* ops: torch.optim's default path on the device (foreach=True: AdamW, Adam,
// SGD) and clip_grad_norm_ call them once per step with every parameter. PyTorch's composite
// form would launch once per tensor (a few microseconds each, times every op of the step and
// every parameter); here each call is one launch over the whole list (tn/foreach.h), which runs
// the single-tensor kernels item by item, so the values are those of the per-tensor ops.
//
// The launch takes lists of dense tensors of one floating dtype on one neuron device, with
// equal sizes and strides at each index, and real scalars. Anything else (integers, mixed
// dtypes or devices, other layouts, list lengths that differ) goes PyTorch's per-tensor route,
// which also raises its errors.
#include <ATen/ops/_foreach_abs_native.h>
#include <ATen/ops/_foreach_abs_ops.h>
#include <ATen/ops/_foreach_add_native.h>
#include <ATen/ops/_foreach_add_ops.h>
#include <ATen/ops/_foreach_addcdiv_native.h>
#include <ATen/ops/_foreach_addcdiv_ops.h>
#include <ATen/ops/_foreach_addcmul_native.h>
#include <ATen/ops/_foreach_addcmul_ops.h>
#include <ATen/ops/_foreach_clamp_max_native.h>
#include <ATen/ops/_foreach_clamp_max_ops.h>
#include <ATen/ops/_foreach_clamp_min_native.h>
#include <ATen/ops/_foreach_clamp_min_ops.h>
#include <ATen/ops/_foreach_maximum_native.h>
#include <ATen/ops/_foreach_maximum_ops.h>
#include <ATen/ops/_foreach_minimum_native.h>
#include <ATen/ops/_foreach_minimum_ops.h>
#include <ATen/ops/_foreach_div_native.h>
#include <ATen/ops/_foreach_div_ops.h>
#include <ATen/ops/_foreach_exp_native.h>
#include <ATen/ops/_foreach_exp_ops.h>
#include <ATen/ops/_foreach_lerp_native.h>
#include <ATen/ops/_foreach_lerp_ops.h>
#include <ATen/ops/_foreach_mul_native.h>
#include <ATen/ops/_foreach_mul_ops.h>
#include <ATen/ops/_foreach_neg_native.h>
#include <ATen/ops/_foreach_neg_ops.h>
#include <ATen/ops/_foreach_norm_native.h>
#include <ATen/ops/_foreach_norm_ops.h>
#include <ATen/ops/_foreach_reciprocal_native.h>
#include <ATen/ops/_foreach_reciprocal_ops.h>
#include <ATen/ops/_foreach_sigmoid_native.h>
#include <ATen/ops/_foreach_sigmoid_ops.h>
#include <ATen/ops/_foreach_sqrt_native.h>
#include <ATen/ops/_foreach_sqrt_ops.h>
#include <ATen/ops/_foreach_sub_native.h>
#include <ATen/ops/_foreach_sub_ops.h>
#include <ATen/ops/_foreach_tanh_native.h>
#include <ATen/ops/_foreach_tanh_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <torch/library.h>

#include <cmath>

#include "aten/Iter.h"
#include "aten/OpTracking.h"
#include "aten/TensorView.h"
#include "runtime/Functions.h"

namespace torch_neuronx::ops {
namespace {

using at::Tensor;
using at::TensorList;
using c10::Scalar;
using ScalarList = at::ArrayRef<Scalar>;
using Tensors = std::vector<Tensor>;

bool list_dtype(c10::ScalarType t) {
  return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf || t == at::kDouble;
}

// The lists one launch takes: see the top of the file.
bool fast_route(std::initializer_list<TensorList> lists) {
  TensorList self = *lists.begin();
  if (self.empty() || !self[0].defined() || !self[0].device().is_privateuseone() ||
      !list_dtype(self[0].scalar_type()))
    return false;
  for (TensorList l : lists)
    if (l.size() != self.size()) return false;
  for (size_t k = 0; k < self.size(); k++) {
    const Tensor& ref = self[k];
    if (!ref.defined() || ref.layout() != at::kStrided || !ref.is_non_overlapping_and_dense()) return false;
    for (TensorList l : lists) {
      const Tensor& t = l[k];
      if (!t.defined() || t.device() != self[0].device() || t.scalar_type() != self[0].scalar_type() ||
          t.layout() != at::kStrided || t.sizes() != ref.sizes() || t.strides() != ref.strides())
        return false;
    }
  }
  return true;
}

bool real(ScalarList scalars, size_t count) {
  if (scalars.size() != count) return false;
  for (const Scalar& s : scalars)
    if (s.isComplex()) return false;
  return true;
}

// Results laid out as the inputs, so that the lists still agree element by element.
Tensors like(TensorList self) {
  Tensors out;
  out.reserve(self.size());
  for (const Tensor& t : self) out.push_back(at::empty_strided(t.sizes(), t.strides(), t.options()));
  return out;
}

// The operands of one launch. `scalars` holds one value per item, or one for all.
struct Operands {
  TensorList b, c;
  ScalarList scalars;
  const Tensor* other = nullptr;  // a 0-dim device tensor every item's b is
  Scalar alpha = 1;
};

void launch(const char* name, tn_foreach_kind kind, int32_t code, TensorList out, TensorList self,
            const Operands& with) {
  track_native(name);
  tn_foreach op{};
  op.kind = kind;
  op.op = code;
  op.dtype = op.compute = op.out_dtype = to_tn_dtype(self[0].scalar_type());
  op.alpha = to_tn_scalar(with.alpha);
  if (with.other) {
    op.other = with.other->const_data_ptr();
    op.other_dtype = to_tn_dtype(with.other->scalar_type());
  }
  std::vector<tn_foreach_item> items(self.size());
  for (size_t k = 0; k < self.size(); k++) {
    tn_foreach_item& it = items[k];
    it.out = out[k].data_ptr();
    it.a = self[k].const_data_ptr();
    it.b = with.b.empty() ? nullptr : with.b[k].const_data_ptr();
    it.c = with.c.empty() ? nullptr : with.c[k].const_data_ptr();
    if (!with.scalars.empty()) it.scalar = to_tn_scalar(with.scalars[with.scalars.size() == 1 ? 0 : k]);
    it.numel = self[k].numel();
  }
  check(tn_foreach_async(current_stream(self[0].device().index()), name, &op, static_cast<int32_t>(items.size()),
                         items.data()));
}

// One overload in its functional and in-place forms: `fast` says whether the launch takes the
// arguments, `operands` builds them; PyTorch's per-tensor kernels take the rest.
template <class Op, class InPlaceOp, tn_foreach_kind kind, int32_t code>
struct Forms {
  static Tensors functional(bool fast, const Operands& with, TensorList self) {
    if (!fast) return {};
    Tensors out = like(self);
    launch(op_name<Op>(), kind, code, out, self, with);
    return out;
  }
  static bool in_place(bool fast, const Operands& with, TensorList self) {
    if (fast) launch(op_name<InPlaceOp>(), kind, code, self, self, with);
    return fast;
  }
};

// The scalar a 0-dim `other` stands for, when it is on the CPU (as the per-tensor ops read it).
bool bind_other(const Tensor& other, TensorList self, Operands& with, Scalar& value) {
  if (other.dim() != 0 || other.is_complex() || !elementwise_dtypes_ok({other.scalar_type()})) return false;
  if (other.device().is_cpu()) {
    value = other.item();
    with.scalars = ScalarList(value);
    return true;
  }
  if (other.device() != self[0].device()) return false;
  with.other = &other;
  return true;
}

#define TN_FOREACH_NAMES(name, overload) at::_ops::_foreach_##name##_##overload, at::_ops::_foreach_##name##__##overload

// add and sub: a list with alpha, a scalar, a list of scalars, a 0-dim tensor with alpha (add).
template <class Op, class InPlaceOp, tn_binary_op code, auto slow, auto slow_>
struct ListAlpha {
  using F = Forms<Op, InPlaceOp, TN_FOREACH_BINARY, code>;
  static bool fast(TensorList self, TensorList other, const Scalar& alpha) {
    return fast_route({self, other}) && !alpha.isComplex();
  }
  static Tensors functional(TensorList self, TensorList other, const Scalar& alpha) {
    if (!fast(self, other, alpha)) return slow(self, other, alpha);
    return F::functional(true, {other, {}, {}, nullptr, alpha}, self);
  }
  static void in_place(TensorList self, TensorList other, const Scalar& alpha) {
    if (!F::in_place(fast(self, other, alpha), {other, {}, {}, nullptr, alpha}, self)) slow_(self, other, alpha);
  }
};

template <class Op, class InPlaceOp, tn_binary_op code, auto slow, auto slow_>
struct List {
  using F = Forms<Op, InPlaceOp, TN_FOREACH_BINARY, code>;
  static Tensors functional(TensorList self, TensorList other) {
    if (!fast_route({self, other})) return slow(self, other);
    return F::functional(true, {other}, self);
  }
  static void in_place(TensorList self, TensorList other) {
    if (!F::in_place(fast_route({self, other}), {other}, self)) slow_(self, other);
  }
};

template <class Op, class InPlaceOp, tn_binary_op code, auto slow, auto slow_>
struct OneScalar {
  using F = Forms<Op, InPlaceOp, TN_FOREACH_BINARY, code>;
  static Tensors functional(TensorList self, const Scalar& s) {
    if (!fast_route({self}) || s.isComplex()) return slow(self, s);
    return F::functional(true, {{}, {}, ScalarList(s)}, self);
  }
  static void in_place(TensorList self, const Scalar& s) {
    if (!F::in_place(fast_route({self}) && !s.isComplex(), {{}, {}, ScalarList(s)}, self)) slow_(self, s);
  }
};

template <class Op, class InPlaceOp, tn_binary_op code, auto slow, auto slow_>
struct Scalars {
  using F = Forms<Op, InPlaceOp, TN_FOREACH_BINARY, code>;
  static Tensors functional(TensorList self, ScalarList s) {
    if (!fast_route({self}) || !real(s, self.size())) return slow(self, s);
    return F::functional(true, {{}, {}, s}, self);
  }
  static void in_place(TensorList self, ScalarList s) {
    if (!F::in_place(fast_route({self}) && real(s, self.size()), {{}, {}, s}, self)) slow_(self, s);
  }
};

// A 0-dim tensor for every item (clip_grad_norm_'s clip coefficient), with alpha for add.
template <class Op, class InPlaceOp, tn_binary_op code, auto slow, auto slow_>
struct OneTensorAlpha {
  using F = Forms<Op, InPlaceOp, TN_FOREACH_BINARY, code>;
  static Tensors functional(TensorList self, const Tensor& other, const Scalar& alpha) {
    Operands with;
    Scalar value;
    with.alpha = alpha;
    if (!fast_route({self}) || alpha.isComplex() || !bind_other(other, self, with, value))
      return slow(self, other, alpha);
    return F::functional(true, with, self);
  }
  static void in_place(TensorList self, const Tensor& other, const Scalar& alpha) {
    Operands with;
    Scalar value;
    with.alpha = alpha;
    bool fast = fast_route({self}) && !alpha.isComplex() && bind_other(other, self, with, value);
    if (!F::in_place(fast, with, self)) slow_(self, other, alpha);
  }
};

template <class Op, class InPlaceOp, tn_binary_op code, auto slow, auto slow_>
struct OneTensor {
  using F = Forms<Op, InPlaceOp, TN_FOREACH_BINARY, code>;
  static Tensors functional(TensorList self, const Tensor& other) {
    Operands with;
    Scalar value;
    if (!fast_route({self}) || !bind_other(other, self, with, value)) return slow(self, other);
    return F::functional(true, with, self);
  }
  static void in_place(TensorList self, const Tensor& other) {
    Operands with;
    Scalar value;
    bool fast = fast_route({self}) && bind_other(other, self, with, value);
    if (!F::in_place(fast, with, self)) slow_(self, other);
  }
};

template <class Op, class InPlaceOp, tn_unary_op code, auto slow, auto slow_>
struct Unary {
  using F = Forms<Op, InPlaceOp, TN_FOREACH_UNARY, code>;
  static Tensors functional(TensorList self) {
    if (!fast_route({self})) return slow(self);
    return F::functional(true, {}, self);
  }
  static void in_place(TensorList self) {
    if (!F::in_place(fast_route({self}), {}, self)) slow_(self);
  }
};

// addcmul and addcdiv: self + value * (t1 op t2), one value or one per item (a list of
// scalars, or a 1-D CPU tensor of them).
template <class Op, class InPlaceOp, tn_ternary_op code, auto slow, auto slow_>
struct Value {
  using F = Forms<Op, InPlaceOp, TN_FOREACH_TERNARY, code>;
  static Tensors functional(TensorList self, TensorList t1, TensorList t2, const Scalar& v) {
    if (!fast_route({self, t1, t2}) || v.isComplex()) return slow(self, t1, t2, v);
    return F::functional(true, {t1, t2, ScalarList(v)}, self);
  }
  static void in_place(TensorList self, TensorList t1, TensorList t2, const Scalar& v) {
    if (!F::in_place(fast_route({self, t1, t2}) && !v.isComplex(), {t1, t2, ScalarList(v)}, self))
      slow_(self, t1, t2, v);
  }
};

template <class Op, class InPlaceOp, tn_ternary_op code, auto slow, auto slow_>
struct Values {
  using F = Forms<Op, InPlaceOp, TN_FOREACH_TERNARY, code>;
  static Tensors functional(TensorList self, TensorList t1, TensorList t2, ScalarList v) {
    if (!fast_route({self, t1, t2}) || !real(v, self.size())) return slow(self, t1, t2, v);
    return F::functional(true, {t1, t2, v}, self);
  }
  static void in_place(TensorList self, TensorList t1, TensorList t2, ScalarList v) {
    if (!F::in_place(fast_route({self, t1, t2}) && real(v, self.size()), {t1, t2, v}, self)) slow_(self, t1, t2, v);
  }
};

// The values of a 1-D CPU tensor of scalars, or nothing (the per-tensor route then checks it).
std::optional<std::vector<Scalar>> cpu_values(const Tensor& scalars, size_t count) {
  if (!scalars.device().is_cpu() || scalars.dim() != 1 || static_cast<size_t>(scalars.numel()) != count ||
      scalars.is_complex())
    return std::nullopt;
  Tensor d = scalars.to(at::kDouble).contiguous();
  std::vector<Scalar> v;
  for (size_t k = 0; k < count; k++) v.emplace_back(d.const_data_ptr<double>()[k]);
  return v;
}

template <class Op, class InPlaceOp, tn_ternary_op code, auto slow, auto slow_>
struct ValuesTensor {
  using F = Forms<Op, InPlaceOp, TN_FOREACH_TERNARY, code>;
  static Tensors functional(TensorList self, TensorList t1, TensorList t2, const Tensor& s) {
    auto v = fast_route({self, t1, t2}) ? cpu_values(s, self.size()) : std::nullopt;
    if (!v) return slow(self, t1, t2, s);
    return F::functional(true, {t1, t2, *v}, self);
  }
  static void in_place(TensorList self, TensorList t1, TensorList t2, const Tensor& s) {
    auto v = fast_route({self, t1, t2}) ? cpu_values(s, self.size()) : std::nullopt;
    if (!F::in_place(v.has_value(), v ? Operands{t1, t2, *v} : Operands{}, self)) slow_(self, t1, t2, s);
  }
};

// lerp: weights as a list of tensors, or one scalar weight.
struct Lerp {
  using ListF = Forms<at::_ops::_foreach_lerp_List, at::_ops::_foreach_lerp__List, TN_FOREACH_TERNARY, TN_TERNARY_LERP>;
  using ScalarF =
      Forms<at::_ops::_foreach_lerp_Scalar, at::_ops::_foreach_lerp__Scalar, TN_FOREACH_TERNARY, TN_TERNARY_LERP>;
  static Tensors list(TensorList self, TensorList end, TensorList w) {
    if (!fast_route({self, end, w})) return at::native::foreach_tensor_ternary_lerp_slow(self, end, w);
    return ListF::functional(true, {end, w}, self);
  }
  static void list_(TensorList self, TensorList end, TensorList w) {
    if (!ListF::in_place(fast_route({self, end, w}), {end, w}, self))
      at::native::foreach_tensor_ternary_lerp_slow_(self, end, w);
  }
  static Tensors scalar(TensorList self, TensorList end, const Scalar& w) {
    if (!fast_route({self, end}) || w.isComplex()) return at::native::foreach_tensor_lerp_list_kernel_slow(self, end, w);
    return ScalarF::functional(true, {end, {}, ScalarList(w)}, self);
  }
  static void scalar_(TensorList self, TensorList end, const Scalar& w) {
    if (!ScalarF::in_place(fast_route({self, end}) && !w.isComplex(), {end, {}, ScalarList(w)}, self))
      at::native::foreach_tensor_lerp_list_kernel_slow_(self, end, w);
  }
};

// Vector norms of 1, 2 or infinite order, as 0-dim views into one result.
Tensors norm(TensorList self, const Scalar& ord, std::optional<c10::ScalarType> dtype) {
  double p = ord.isComplex() ? NAN : ord.toDouble();
  int32_t order = p == 1.0 ? 1 : p == 2.0 ? 2 : std::isinf(p) && p > 0 ? 0 : -1;
  bool fast = !dtype && order >= 0 && fast_route({self});
  for (size_t k = 0; fast && order == 0 && k < self.size(); k++)
    fast = self[k].numel() > 0;  // the per-tensor route raises for the infinity norm of nothing
  if (!fast) return at::native::foreach_tensor_norm_slow(self, ord, dtype);
  Tensor result = at::empty({static_cast<int64_t>(self.size())}, self[0].options());
  std::vector<Tensor> outs = result.unbind(0);
  launch(op_name<at::_ops::_foreach_norm_Scalar>(), TN_FOREACH_NORM, order, outs, self, {});
  return outs;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
#define TN_FORMS(name, overload, Kind, code, slow)                                                     \
  {                                                                                                    \
    using K = Kind<TN_FOREACH_NAMES(name, overload), code, &at::native::slow, &at::native::slow##_>; \
    m.impl("_foreach_" #name "." #overload, K::functional);                                            \
    m.impl("_foreach_" #name "_." #overload, K::in_place);                                             \
  }
  TN_FORMS(add, List, ListAlpha, TN_BINARY_ADD, foreach_tensor_add_list_kernel_slow)
  TN_FORMS(add, Scalar, OneScalar, TN_BINARY_ADD, foreach_tensor_add_scalar_kernel_slow)
  TN_FORMS(add, ScalarList, Scalars, TN_BINARY_ADD, foreach_tensor_add_scalarlist_kernel_slow)
  TN_FORMS(add, Tensor, OneTensorAlpha, TN_BINARY_ADD, foreach_tensor_add_tensor_kernel_slow)
  TN_FORMS(sub, List, ListAlpha, TN_BINARY_SUB, foreach_tensor_sub_list_kernel_slow)
  TN_FORMS(sub, Scalar, OneScalar, TN_BINARY_SUB, foreach_tensor_sub_scalar_kernel_slow)
  TN_FORMS(sub, ScalarList, Scalars, TN_BINARY_SUB, foreach_tensor_sub_scalarlist_kernel_slow)
  TN_FORMS(mul, List, List, TN_BINARY_MUL, foreach_tensor_mul_list_kernel_slow)
  TN_FORMS(mul, Scalar, OneScalar, TN_BINARY_MUL, foreach_tensor_mul_scalar_kernel_slow)
  TN_FORMS(mul, ScalarList, Scalars, TN_BINARY_MUL, foreach_tensor_mul_scalarlist_kernel_slow)
  TN_FORMS(mul, Tensor, OneTensor, TN_BINARY_MUL, foreach_tensor_mul_tensor_kernel_slow)
  TN_FORMS(div, List, List, TN_BINARY_DIV, foreach_tensor_div_list_kernel_slow)
  TN_FORMS(div, Scalar, OneScalar, TN_BINARY_DIV, foreach_tensor_div_scalar_kernel_slow)
  TN_FORMS(div, ScalarList, Scalars, TN_BINARY_DIV, foreach_tensor_div_scalarlist_kernel_slow)
  TN_FORMS(div, Tensor, OneTensor, TN_BINARY_DIV, foreach_tensor_div_tensor_kernel_slow)
  // maximum and minimum propagate NaN, as clamp_min and clamp_max (PyTorch's kernels for
  // both) do; the per-tensor clamp ops run on the same kernels
  TN_FORMS(maximum, List, List, TN_BINARY_MAXIMUM, foreach_tensor_clamp_min_list_kernel_slow)
  TN_FORMS(maximum, Scalar, OneScalar, TN_BINARY_MAXIMUM, foreach_tensor_clamp_min_scalar_kernel_slow)
  TN_FORMS(maximum, ScalarList, Scalars, TN_BINARY_MAXIMUM, foreach_tensor_clamp_min_scalarlist_kernel_slow)
  TN_FORMS(minimum, List, List, TN_BINARY_MINIMUM, foreach_tensor_clamp_max_list_kernel_slow)
  TN_FORMS(minimum, Scalar, OneScalar, TN_BINARY_MINIMUM, foreach_tensor_clamp_max_scalar_kernel_slow)
  TN_FORMS(minimum, ScalarList, Scalars, TN_BINARY_MINIMUM, foreach_tensor_clamp_max_scalarlist_kernel_slow)
  TN_FORMS(clamp_min, List, List, TN_BINARY_MAXIMUM, foreach_tensor_clamp_min_list_kernel_slow)
  TN_FORMS(clamp_min, Scalar, OneScalar, TN_BINARY_MAXIMUM, foreach_tensor_clamp_min_scalar_kernel_slow)
  TN_FORMS(clamp_min, ScalarList, Scalars, TN_BINARY_MAXIMUM, foreach_tensor_clamp_min_scalarlist_kernel_slow)
  TN_FORMS(clamp_max, List, List, TN_BINARY_MINIMUM, foreach_tensor_clamp_max_list_kernel_slow)
  TN_FORMS(clamp_max, Scalar, OneScalar, TN_BINARY_MINIMUM, foreach_tensor_clamp_max_scalar_kernel_slow)
  TN_FORMS(clamp_max, ScalarList, Scalars, TN_BINARY_MINIMUM, foreach_tensor_clamp_max_scalarlist_kernel_slow)
  TN_FORMS(addcmul, Scalar, Value, TN_TERNARY_ADDCMUL, foreach_tensor_addcmul_scalar_slow)
  TN_FORMS(addcmul, ScalarList, Values, TN_TERNARY_ADDCMUL, foreach_tensor_addcmul_scalarlist_slow)
  TN_FORMS(addcmul, Tensor, ValuesTensor, TN_TERNARY_ADDCMUL, foreach_tensor_addcmul_tensor_slow)
  TN_FORMS(addcdiv, Scalar, Value, TN_TERNARY_ADDCDIV, foreach_tensor_addcdiv_scalar_slow)
  TN_FORMS(addcdiv, ScalarList, Values, TN_TERNARY_ADDCDIV, foreach_tensor_addcdiv_scalarlist_slow)
  TN_FORMS(addcdiv, Tensor, ValuesTensor, TN_TERNARY_ADDCDIV, foreach_tensor_addcdiv_tensor_slow)
#undef TN_FORMS
#define TN_UNARY(name, code)                                                                               \
  {                                                                                                        \
    using K = Unary<at::_ops::_foreach_##name, at::_ops::_foreach_##name##_, code,                          \
                    &at::native::foreach_tensor_##name##_slow, &at::native::foreach_tensor_##name##_slow_>; \
    m.impl("_foreach_" #name, K::functional);                                                              \
    m.impl("_foreach_" #name "_", K::in_place);                                                            \
  }
  TN_UNARY(sqrt, TN_UNARY_SQRT)
  TN_UNARY(exp, TN_UNARY_EXP)
  TN_UNARY(neg, TN_UNARY_NEG)
  TN_UNARY(abs, TN_UNARY_ABS)
  TN_UNARY(reciprocal, TN_UNARY_RECIPROCAL)
  TN_UNARY(sigmoid, TN_UNARY_SIGMOID)
  TN_UNARY(tanh, TN_UNARY_TANH)
#undef TN_UNARY
  m.impl("_foreach_lerp.List", Lerp::list);
  m.impl("_foreach_lerp_.List", Lerp::list_);
  m.impl("_foreach_lerp.Scalar", Lerp::scalar);
  m.impl("_foreach_lerp_.Scalar", Lerp::scalar_);
  m.impl("_foreach_norm.Scalar", norm);
}

} // namespace torch_neuronx::ops
