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
#include <ATen/ops/_foreach_expm1_native.h>
#include <ATen/ops/_foreach_expm1_ops.h>
#include <ATen/ops/_foreach_log_native.h>
#include <ATen/ops/_foreach_log_ops.h>
#include <ATen/ops/_foreach_log1p_native.h>
#include <ATen/ops/_foreach_log1p_ops.h>
#include <ATen/ops/_foreach_log2_native.h>
#include <ATen/ops/_foreach_log2_ops.h>
#include <ATen/ops/_foreach_log10_native.h>
#include <ATen/ops/_foreach_log10_ops.h>
#include <ATen/ops/_foreach_rsqrt_native.h>
#include <ATen/ops/_foreach_rsqrt_ops.h>
#include <ATen/ops/_foreach_sin_native.h>
#include <ATen/ops/_foreach_sin_ops.h>
#include <ATen/ops/_foreach_cos_native.h>
#include <ATen/ops/_foreach_cos_ops.h>
#include <ATen/ops/_foreach_erf_native.h>
#include <ATen/ops/_foreach_erf_ops.h>
#include <ATen/ops/_foreach_floor_native.h>
#include <ATen/ops/_foreach_floor_ops.h>
#include <ATen/ops/_foreach_ceil_native.h>
#include <ATen/ops/_foreach_ceil_ops.h>
#include <ATen/ops/_foreach_round_native.h>
#include <ATen/ops/_foreach_round_ops.h>
#include <ATen/ops/_foreach_trunc_native.h>
#include <ATen/ops/_foreach_trunc_ops.h>
#include <ATen/ops/_foreach_sign_native.h>
#include <ATen/ops/_foreach_sign_ops.h>
#include <ATen/ops/_foreach_pow_native.h>
#include <ATen/ops/_foreach_pow_ops.h>
#include <ATen/ops/_foreach_zero_native.h>
#include <ATen/ops/_foreach_zero_ops.h>
#include <ATen/ops/_foreach_copy_native.h>
#include <ATen/ops/_foreach_copy_ops.h>
#include <ATen/ops/_amp_foreach_non_finite_check_and_unscale_ops.h>
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

// The lists one launch takes: see the top of the file. Fills and copies take every real dtype
// (`any_dtype`).
bool fast_route(std::initializer_list<TensorList> lists, bool any_dtype = false) {
  TensorList self = *lists.begin();
  if (self.empty() || !self[0].defined() || !self[0].device().is_privateuseone() ||
      !(any_dtype ? !at::isComplexType(self[0].scalar_type()) && elementwise_dtypes_ok({self[0].scalar_type()})
                  : list_dtype(self[0].scalar_type())))
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

// The operands of one launch. `scalars` holds one value per item, or one for all; `owned`
// keeps values the arguments did not hold (a CPU tensor's), which `scalars` then views.
struct Operands {
  TensorList b, c;
  ScalarList scalars;
  std::vector<Scalar> owned;
  const Tensor* other = nullptr;  // a 0-dim device tensor every item's b is
  Scalar alpha = 1;
  int32_t code = -1;  // the op, when the binder chooses it
};

// Launches `op` with an item per index of `out`, reading `a` (and the operands `with` holds).
void submit(const char* name, const tn_foreach& op, TensorList out, TensorList a, const Operands& with = {}) {
  track_native(name);
  ScalarList scalars = with.owned.empty() ? with.scalars : ScalarList(with.owned);
  std::vector<tn_foreach_item> items(out.size());
  for (size_t k = 0; k < out.size(); k++) {
    tn_foreach_item& it = items[k];
    it.out = out[k].data_ptr();
    it.a = a[k].const_data_ptr();
    it.b = with.b.empty() ? nullptr : with.b[k].const_data_ptr();
    it.c = with.c.empty() ? nullptr : with.c[k].const_data_ptr();
    if (!scalars.empty()) it.scalar = to_tn_scalar(scalars[scalars.size() == 1 ? 0 : k]);
    it.numel = a[k].numel();
  }
  check(tn_foreach_async(current_stream(out[0].device().index()), name, &op, static_cast<int32_t>(items.size()),
                         items.data()));
}

// The elementwise launches: everything in self's dtype.
void launch(const char* name, tn_foreach_kind kind, int32_t code, TensorList out, TensorList self,
            const Operands& with) {
  tn_foreach op{};
  op.kind = kind;
  op.op = with.code >= 0 ? with.code : code;
  op.dtype = op.compute = op.out_dtype = to_tn_dtype(self[0].scalar_type());
  op.alpha = to_tn_scalar(with.alpha);
  if (with.other) {
    op.other = with.other->const_data_ptr();
    op.other_dtype = to_tn_dtype(with.other->scalar_type());
  }
  submit(name, op, out, self, with);
}

using Bound = std::optional<Operands>;

// One overload in its functional and in-place forms. `Bind::operands` takes the op's arguments
// and gives the launch's operands, or nothing when the launch does not take them; PyTorch's
// per-tensor kernels (slow, slow_) run those.
template <class Op, class InPlaceOp, tn_foreach_kind kind, int32_t code, class Bind, class Sig, auto slow,
          auto slow_>
struct Overload;

template <class Op, class InPlaceOp, tn_foreach_kind kind, int32_t code, class Bind, class... Args, auto slow,
          auto slow_>
struct Overload<Op, InPlaceOp, kind, code, Bind, void(TensorList, Args...), slow, slow_> {
  static Tensors functional(TensorList self, Args... args) {
    Bound with = Bind::operands(self, args...);
    if (!with) return slow(self, args...);
    Tensors out = like(self);
    launch(op_name<Op>(), kind, code, out, self, *with);
    return out;
  }
  static void in_place(TensorList self, Args... args) {
    Bound with = Bind::operands(self, args...);
    if (!with) return slow_(self, args...);
    launch(op_name<InPlaceOp>(), kind, code, self, self, *with);
  }
};

// The binders, one per shape of arguments.
struct Plain {  // the unary ops
  using Sig = void(TensorList);
  static Bound operands(TensorList self) { return fast_route({self}) ? Bound(Operands{}) : std::nullopt; }
};

struct ListAlpha {  // add and sub over a list, with alpha
  using Sig = void(TensorList, TensorList, const Scalar&);
  static Bound operands(TensorList self, TensorList other, const Scalar& alpha) {
    if (!fast_route({self, other}) || alpha.isComplex()) return std::nullopt;
    Operands with;
    with.b = other;
    with.alpha = alpha;
    return with;
  }
};

struct List {  // over a list (lerp: the ends, then the weights)
  using Sig = void(TensorList, TensorList);
  static Bound operands(TensorList self, TensorList other) {
    if (!fast_route({self, other})) return std::nullopt;
    return Operands{other};
  }
};

struct OneScalar {  // a scalar for every item
  using Sig = void(TensorList, const Scalar&);
  static Bound operands(TensorList self, const Scalar& s) {
    if (!fast_route({self}) || s.isComplex()) return std::nullopt;
    return Operands{{}, {}, ScalarList(s)};
  }
};

struct Scalars {  // a scalar per item
  using Sig = void(TensorList, ScalarList);
  static Bound operands(TensorList self, ScalarList s) {
    if (!fast_route({self}) || !real(s, self.size())) return std::nullopt;
    return Operands{{}, {}, s};
  }
};

// A 0-dim tensor for every item (clip_grad_norm_'s clip coefficient), with alpha for add: the
// kernel reads a device value itself; a CPU value is read here, as the per-tensor ops read it.
Bound bind_other(TensorList self, const Tensor& other, const Scalar& alpha) {
  if (!fast_route({self}) || alpha.isComplex() || other.dim() != 0 || other.is_complex() ||
      !elementwise_dtypes_ok({other.scalar_type()}))
    return std::nullopt;
  Operands with;
  with.alpha = alpha;
  if (other.device().is_cpu())
    with.owned.push_back(other.item());
  else if (other.device() == self[0].device())
    with.other = &other;
  else
    return std::nullopt;
  return with;
}

struct OneTensorAlpha {
  using Sig = void(TensorList, const Tensor&, const Scalar&);
  static Bound operands(TensorList self, const Tensor& other, const Scalar& alpha) {
    return bind_other(self, other, alpha);
  }
};

struct OneTensor {
  using Sig = void(TensorList, const Tensor&);
  static Bound operands(TensorList self, const Tensor& other) { return bind_other(self, other, 1); }
};

// addcmul and addcdiv: self + value * (t1 op t2), one value or one per item (a list of
// scalars, or a 1-D CPU tensor of them).
struct Value {
  using Sig = void(TensorList, TensorList, TensorList, const Scalar&);
  static Bound operands(TensorList self, TensorList t1, TensorList t2, const Scalar& v) {
    if (!fast_route({self, t1, t2}) || v.isComplex()) return std::nullopt;
    return Operands{t1, t2, ScalarList(v)};
  }
};

struct Values {
  using Sig = void(TensorList, TensorList, TensorList, ScalarList);
  static Bound operands(TensorList self, TensorList t1, TensorList t2, ScalarList v) {
    if (!fast_route({self, t1, t2}) || !real(v, self.size())) return std::nullopt;
    return Operands{t1, t2, v};
  }
};

struct ValuesTensor {
  using Sig = void(TensorList, TensorList, TensorList, const Tensor&);
  static Bound operands(TensorList self, TensorList t1, TensorList t2, const Tensor& s) {
    if (!fast_route({self, t1, t2}) || !s.device().is_cpu() || s.dim() != 1 ||
        static_cast<size_t>(s.numel()) != self.size() || s.is_complex())
      return std::nullopt;  // the per-tensor route checks it
    Operands with{t1, t2};
    Tensor d = s.to(at::kDouble).contiguous();
    for (size_t k = 0; k < self.size(); k++) with.owned.emplace_back(d.const_data_ptr<double>()[k]);
    return with;
  }
};

struct LerpWeight {  // lerp with one scalar weight
  using Sig = void(TensorList, TensorList, const Scalar&);
  static Bound operands(TensorList self, TensorList end, const Scalar& w) {
    if (!fast_route({self, end}) || w.isComplex()) return std::nullopt;
    return Operands{end, {}, ScalarList(w)};
  }
};

struct LerpWeights {  // lerp with a list of weights
  using Sig = void(TensorList, TensorList, TensorList);
  static Bound operands(TensorList self, TensorList end, TensorList w) {
    if (!fast_route({self, end, w})) return std::nullopt;
    return Operands{end, w};
  }
};

struct LerpWeightList {  // lerp with a scalar weight per item
  using Sig = void(TensorList, TensorList, ScalarList);
  static Bound operands(TensorList self, TensorList end, ScalarList w) {
    if (!fast_route({self, end}) || !real(w, self.size())) return std::nullopt;
    return Operands{end, {}, w};
  }
};

// pow with a scalar exponent: x^2 is x * x, as the single-tensor pow computes it.
Bound pow_operands(TensorList self, ScalarList exponents) {
  if (!fast_route({self}) || !real(exponents, exponents.size())) return std::nullopt;
  size_t squares = 0;
  for (const Scalar& e : exponents) squares += e.toDouble() == 2.0;
  if (squares == 0) return Operands{{}, {}, exponents};
  if (squares != exponents.size()) return std::nullopt;  // a mix: per tensor
  Operands with{self};
  with.code = TN_BINARY_MUL;
  return with;
}

struct PowScalar {
  using Sig = void(TensorList, const Scalar&);
  static Bound operands(TensorList self, const Scalar& e) { return pow_operands(self, ScalarList(e)); }
};

struct PowScalars {
  using Sig = void(TensorList, ScalarList);
  static Bound operands(TensorList self, ScalarList e) {
    return e.size() == self.size() ? pow_operands(self, e) : std::nullopt;
  }
};

void foreach_zero_(TensorList self) {
  if (!fast_route({self}, true)) return at::native::foreach_tensor_zero_slow_(self);
  Operands with;
  with.owned.emplace_back(0);
  launch(op_name<at::_ops::_foreach_zero_>(), TN_FOREACH_FILL, 0, self, self, with);
}

// copy_ between lists of one dtype each (they may differ: a conversion), laid out alike; a
// source that partly overlaps its destination goes per tensor, which checks it.
void foreach_copy_(TensorList self, TensorList src, bool non_blocking) {
  bool fast = fast_route({self}, true) && fast_route({src}, true) && src.size() == self.size() &&
              src[0].device() == self[0].device();
  for (size_t k = 0; fast && k < self.size(); k++)
    fast = src[k].sizes() == self[k].sizes() && src[k].strides() == self[k].strides() &&
           (!src[k].storage().is_alias_of(self[k].storage()) || src[k].data_ptr() == self[k].data_ptr());
  if (!fast) return at::native::foreach_tensor_copy_list_kernel_slow_(self, src, non_blocking);
  tn_foreach op{};
  op.kind = TN_FOREACH_COPY;
  op.dtype = op.compute = to_tn_dtype(src[0].scalar_type());
  op.out_dtype = to_tn_dtype(self[0].scalar_type());
  submit(op_name<at::_ops::_foreach_copy_>(), op, self, src);
}

// GradScaler.unscale_: every gradient times the inverse scale, and found_inf set to 1 if one
// holds an inf or NaN. The scalars are checked as PyTorch's kernels check them; gradient lists
// the launch does not take go to the CPU kernel.
void amp_unscale_(TensorList self, Tensor& found_inf, const Tensor& inv_scale) {
  using Op = at::_ops::_amp_foreach_non_finite_check_and_unscale_;
  TORCH_CHECK(inv_scale.numel() == 1, "inv_scale must be a 1-element tensor.");
  TORCH_CHECK(found_inf.numel() == 1, "found_inf must be a 1-element tensor.");
  TORCH_CHECK(inv_scale.scalar_type() == at::kFloat, "inv_scale must be a float tensor.");
  TORCH_CHECK(found_inf.scalar_type() == at::kFloat, "found_inf must be a float tensor.");
  if (self.empty()) return;
  if (!fast_route({self}) || found_inf.device() != self[0].device() || inv_scale.device() != self[0].device())
    return via_fallback<Op>(self, found_inf, inv_scale);
  tn_foreach op{};
  op.kind = TN_FOREACH_UNSCALE;
  op.dtype = op.compute = to_tn_dtype(self[0].scalar_type());
  op.other = inv_scale.const_data_ptr();
  op.other_dtype = TN_DTYPE_F32;
  op.found_inf = found_inf.data_ptr<float>();
  submit(op_name<Op>(), op, self, self);
}

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
#define TN_FORMS(name, overload, Bind, kind, code, slow)                                                     \
  {                                                                                                          \
    using K = Overload<at::_ops::_foreach_##name##_##overload, at::_ops::_foreach_##name##__##overload, kind, \
                       code, Bind, Bind::Sig, &at::native::slow, &at::native::slow##_>;                      \
    m.impl("_foreach_" #name "." #overload, K::functional);                                                  \
    m.impl("_foreach_" #name "_." #overload, K::in_place);                                                   \
  }
#define TN_BINARY(name, overload, Bind, code, slow) TN_FORMS(name, overload, Bind, TN_FOREACH_BINARY, code, slow)
  TN_BINARY(add, List, ListAlpha, TN_BINARY_ADD, foreach_tensor_add_list_kernel_slow)
  TN_BINARY(add, Scalar, OneScalar, TN_BINARY_ADD, foreach_tensor_add_scalar_kernel_slow)
  TN_BINARY(add, ScalarList, Scalars, TN_BINARY_ADD, foreach_tensor_add_scalarlist_kernel_slow)
  TN_BINARY(add, Tensor, OneTensorAlpha, TN_BINARY_ADD, foreach_tensor_add_tensor_kernel_slow)
  TN_BINARY(sub, List, ListAlpha, TN_BINARY_SUB, foreach_tensor_sub_list_kernel_slow)
  TN_BINARY(sub, Scalar, OneScalar, TN_BINARY_SUB, foreach_tensor_sub_scalar_kernel_slow)
  TN_BINARY(sub, ScalarList, Scalars, TN_BINARY_SUB, foreach_tensor_sub_scalarlist_kernel_slow)
  TN_BINARY(mul, List, List, TN_BINARY_MUL, foreach_tensor_mul_list_kernel_slow)
  TN_BINARY(mul, Scalar, OneScalar, TN_BINARY_MUL, foreach_tensor_mul_scalar_kernel_slow)
  TN_BINARY(mul, ScalarList, Scalars, TN_BINARY_MUL, foreach_tensor_mul_scalarlist_kernel_slow)
  TN_BINARY(mul, Tensor, OneTensor, TN_BINARY_MUL, foreach_tensor_mul_tensor_kernel_slow)
  TN_BINARY(div, List, List, TN_BINARY_DIV, foreach_tensor_div_list_kernel_slow)
  TN_BINARY(div, Scalar, OneScalar, TN_BINARY_DIV, foreach_tensor_div_scalar_kernel_slow)
  TN_BINARY(div, ScalarList, Scalars, TN_BINARY_DIV, foreach_tensor_div_scalarlist_kernel_slow)
  TN_BINARY(div, Tensor, OneTensor, TN_BINARY_DIV, foreach_tensor_div_tensor_kernel_slow)
  // maximum and minimum propagate NaN, as clamp_min and clamp_max (PyTorch's kernels for
  // both) do; the per-tensor clamp ops run on the same kernels
  TN_BINARY(maximum, List, List, TN_BINARY_MAXIMUM, foreach_tensor_clamp_min_list_kernel_slow)
  TN_BINARY(maximum, Scalar, OneScalar, TN_BINARY_MAXIMUM, foreach_tensor_clamp_min_scalar_kernel_slow)
  TN_BINARY(maximum, ScalarList, Scalars, TN_BINARY_MAXIMUM, foreach_tensor_clamp_min_scalarlist_kernel_slow)
  TN_BINARY(minimum, List, List, TN_BINARY_MINIMUM, foreach_tensor_clamp_max_list_kernel_slow)
  TN_BINARY(minimum, Scalar, OneScalar, TN_BINARY_MINIMUM, foreach_tensor_clamp_max_scalar_kernel_slow)
  TN_BINARY(minimum, ScalarList, Scalars, TN_BINARY_MINIMUM, foreach_tensor_clamp_max_scalarlist_kernel_slow)
  TN_BINARY(clamp_min, List, List, TN_BINARY_MAXIMUM, foreach_tensor_clamp_min_list_kernel_slow)
  TN_BINARY(clamp_min, Scalar, OneScalar, TN_BINARY_MAXIMUM, foreach_tensor_clamp_min_scalar_kernel_slow)
  TN_BINARY(clamp_min, ScalarList, Scalars, TN_BINARY_MAXIMUM, foreach_tensor_clamp_min_scalarlist_kernel_slow)
  TN_BINARY(clamp_max, List, List, TN_BINARY_MINIMUM, foreach_tensor_clamp_max_list_kernel_slow)
  TN_BINARY(clamp_max, Scalar, OneScalar, TN_BINARY_MINIMUM, foreach_tensor_clamp_max_scalar_kernel_slow)
  TN_BINARY(clamp_max, ScalarList, Scalars, TN_BINARY_MINIMUM, foreach_tensor_clamp_max_scalarlist_kernel_slow)
  TN_BINARY(pow, List, List, TN_BINARY_POW, foreach_tensor_pow_list_kernel_slow)
  TN_BINARY(pow, Scalar, PowScalar, TN_BINARY_POW, foreach_tensor_pow_scalar_kernel_slow)
  TN_BINARY(pow, ScalarList, PowScalars, TN_BINARY_POW, foreach_tensor_pow_scalarlist_kernel_slow)
#undef TN_BINARY
#define TN_TERNARY(name, overload, Bind, code, slow) TN_FORMS(name, overload, Bind, TN_FOREACH_TERNARY, code, slow)
  TN_TERNARY(addcmul, Scalar, Value, TN_TERNARY_ADDCMUL, foreach_tensor_addcmul_scalar_slow)
  TN_TERNARY(addcmul, ScalarList, Values, TN_TERNARY_ADDCMUL, foreach_tensor_addcmul_scalarlist_slow)
  TN_TERNARY(addcmul, Tensor, ValuesTensor, TN_TERNARY_ADDCMUL, foreach_tensor_addcmul_tensor_slow)
  TN_TERNARY(addcdiv, Scalar, Value, TN_TERNARY_ADDCDIV, foreach_tensor_addcdiv_scalar_slow)
  TN_TERNARY(addcdiv, ScalarList, Values, TN_TERNARY_ADDCDIV, foreach_tensor_addcdiv_scalarlist_slow)
  TN_TERNARY(addcdiv, Tensor, ValuesTensor, TN_TERNARY_ADDCDIV, foreach_tensor_addcdiv_tensor_slow)
  TN_TERNARY(lerp, List, LerpWeights, TN_TERNARY_LERP, foreach_tensor_ternary_lerp_slow)
  TN_TERNARY(lerp, Scalar, LerpWeight, TN_TERNARY_LERP, foreach_tensor_lerp_list_kernel_slow)
  TN_TERNARY(lerp, ScalarList, LerpWeightList, TN_TERNARY_LERP, foreach_tensor_lerp_scalarlist_kernel_slow)
#undef TN_TERNARY
#undef TN_FORMS
#define TN_UNARY(name, code)                                                                                \
  {                                                                                                         \
    using K = Overload<at::_ops::_foreach_##name, at::_ops::_foreach_##name##_, TN_FOREACH_UNARY, code, Plain, \
                       Plain::Sig, &at::native::foreach_tensor_##name##_slow,                              \
                       &at::native::foreach_tensor_##name##_slow_>;                                        \
    m.impl("_foreach_" #name, K::functional);                                                               \
    m.impl("_foreach_" #name "_", K::in_place);                                                             \
  }
  TN_UNARY(sqrt, TN_UNARY_SQRT)
  TN_UNARY(exp, TN_UNARY_EXP)
  TN_UNARY(neg, TN_UNARY_NEG)
  TN_UNARY(abs, TN_UNARY_ABS)
  TN_UNARY(reciprocal, TN_UNARY_RECIPROCAL)
  TN_UNARY(sigmoid, TN_UNARY_SIGMOID)
  TN_UNARY(tanh, TN_UNARY_TANH)
  TN_UNARY(expm1, TN_UNARY_EXPM1)
  TN_UNARY(log, TN_UNARY_LOG)
  TN_UNARY(log1p, TN_UNARY_LOG1P)
  TN_UNARY(log2, TN_UNARY_LOG2)
  TN_UNARY(log10, TN_UNARY_LOG10)
  TN_UNARY(rsqrt, TN_UNARY_RSQRT)
  TN_UNARY(sin, TN_UNARY_SIN)
  TN_UNARY(cos, TN_UNARY_COS)
  TN_UNARY(erf, TN_UNARY_ERF)
  TN_UNARY(floor, TN_UNARY_FLOOR)
  TN_UNARY(ceil, TN_UNARY_CEIL)
  TN_UNARY(round, TN_UNARY_ROUND)
  TN_UNARY(trunc, TN_UNARY_TRUNC)
  TN_UNARY(sign, TN_UNARY_SIGN)
#undef TN_UNARY
  m.impl("_foreach_norm.Scalar", norm);
  m.impl("_foreach_zero_", foreach_zero_);
  m.impl("_foreach_copy_", foreach_copy_);
  m.impl("_amp_foreach_non_finite_check_and_unscale_", amp_unscale_);
}

} // namespace torch_neuronx::ops
