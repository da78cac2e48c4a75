// Reductions: sum, mean, prod, amax/amin, max/min (with indices), argmax/argmin, all/any,
// var/std (with their means).
// make_reduction builds the TensorIterator PyTorch's own kernels use (output shape, dtype,
// keepdim); the C kernel reduces along the dimensions where the output has stride 0.
#include <ATen/native/ReduceOpsUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/all.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/amin.h>
#include <ATen/ops/aminmax.h>
#include <ATen/ops/any.h>
#include <ATen/ops/argmax.h>
#include <ATen/ops/argmin.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/histc.h>
#include <ATen/ops/max.h>
#include <ATen/ops/masked_fill.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/min.h>
#include <ATen/ops/prod.h>
#include <ATen/ops/std.h>
#include <ATen/ops/std_mean.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/var.h>
#include <ATen/ops/var_mean.h>

#include "aten/Iter.h"
#include "aten/OpTracking.h"
#include "aten/TensorView.h"
#include "runtime/Functions.h"

namespace torch_neuronx::ops {
namespace {

using at::Tensor;

bool reducible(c10::ScalarType t) {
  return elementwise_dtypes_ok({t});
}

void launch(const char* name, tn_reduce_op op, const at::TensorIterator& iter, int outputs,
            double scale = 1.0, bool track = true) {
  if (track) track_native(name);
  tn_tensor out = iter_view(iter, 0);
  tn_tensor idx = outputs == 2 ? iter_view(iter, 1) : out;
  tn_tensor in = iter_view(iter, outputs);
  check(tn_reduce_async(current_stream(iter.device(0).index()), name, op, &out,
                        outputs == 2 ? &idx : nullptr, &in, scale));
}

Tensor& sum_out(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                std::optional<c10::ScalarType> dtype, Tensor& out) {
  auto out_dtype = at::native::get_dtype_from_result(out, dtype);
  if (!reducible(self.scalar_type()) || !reducible(out_dtype))
    return via_fallback<at::_ops::sum_IntList_out>(self, dim, keepdim, dtype, out);
  // a boolean input is counted as it is (mask.sum(), count_nonzero), not first copied as int64
  auto in_dtype = self.scalar_type() == at::kBool && out_dtype == at::kLong ? at::kBool : out_dtype;
  auto iter = at::native::make_reduction("sum", out, self, dim, keepdim, in_dtype, out_dtype);
  launch("aten::sum.IntList_out", TN_REDUCE_SUM, iter, 1);
  return out;
}

Tensor& mean_out(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                 std::optional<c10::ScalarType> dtype, Tensor& out) {
  auto out_dtype = at::native::get_dtype_from_result(out, dtype);
  TORCH_CHECK(at::isFloatingType(out_dtype) || at::isComplexType(out_dtype),
              "mean(): could not infer output dtype. Input dtype must be either a floating point "
              "or complex dtype. Got: ", out_dtype);
  if (!reducible(self.scalar_type()) || !reducible(out_dtype))
    return via_fallback<at::_ops::mean_out>(self, dim, keepdim, dtype, out);
  auto iter = at::native::make_reduction("mean", out, self, dim, keepdim, out_dtype);
  double count = static_cast<double>(self.numel()) / static_cast<double>(std::max<int64_t>(out.numel(), 1));
  launch("aten::mean.out", TN_REDUCE_SUM, iter, 1, 1.0 / count);
  return out;
}

// Functional sum and mean, registered directly: the composite forms would build the result in
// a meta function and dispatch again to the out= forms. sum promotes integers to int64; mean
// keeps an integer input's dtype, which mean_out refuses with PyTorch's message.
using ReduceOut = Tensor& (*)(const Tensor&, at::OptionalIntArrayRef, bool, std::optional<c10::ScalarType>,
                              Tensor&);

template <ReduceOut Out, bool promote_integers>
Tensor reduce_dims(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                   std::optional<c10::ScalarType> dtype) {
  auto out_dtype = at::native::get_dtype_from_self(self, dtype, promote_integers);
  Tensor out = at::native::create_reduction_result(self, dim, keepdim, out_dtype);
  return Out(self, dim, keepdim, dtype, out);
}

template <ReduceOut Out, bool promote_integers>
Tensor reduce_all(const Tensor& self, std::optional<c10::ScalarType> dtype) {
  return reduce_dims<Out, promote_integers>(self, std::nullopt, false, dtype);
}

Tensor& prod_out(const Tensor& self, int64_t dim, bool keepdim, std::optional<c10::ScalarType> dtype,
                 Tensor& out) {
  auto out_dtype = at::native::get_dtype_from_result(out, dtype);
  if (!reducible(self.scalar_type()) || !reducible(out_dtype))
    return via_fallback<at::_ops::prod_int_out>(self, dim, keepdim, dtype, out);
  auto iter = at::native::make_reduction("prod", out, self, dim, keepdim, out_dtype);
  launch("aten::prod.int_out", TN_REDUCE_PROD, iter, 1);
  return out;
}

template <class Op, tn_reduce_op code>
Tensor& extreme_out(const Tensor& self, at::IntArrayRef dim, bool keepdim, Tensor& out) {
  TORCH_CHECK(self.scalar_type() == out.scalar_type(), Op::name, "(): Expected the dtype for input and out to match, but got ",
              self.scalar_type(), " for input's dtype and ", out.scalar_type(), " for out's dtype.");
  if (!reducible(self.scalar_type())) return via_fallback<Op>(self, dim, keepdim, out);
  if (self.numel() == 0) at::native::zero_numel_check_dims(self, dim, code == TN_REDUCE_MAX ? "amax()" : "amin()");
  auto iter = at::native::make_reduction(code == TN_REDUCE_MAX ? "amax" : "amin", out, self, dim, keepdim,
                                         self.scalar_type());
  launch(op_name<Op>(), code, iter, 1);
  return out;
}

template <class Op, tn_reduce_op code>
std::tuple<Tensor&, Tensor&> extreme_dim_out(const Tensor& self, int64_t dim, bool keepdim,
                                             Tensor& values, Tensor& indices) {
  if (!reducible(self.scalar_type())) return via_fallback<Op>(self, dim, keepdim, values, indices);
  const char* what = code == TN_REDUCE_MAX ? "max()" : "min()";
  at::native::zero_numel_check_dims(self, dim, what);
  auto iter = at::native::make_reduction(what, values, indices, self, dim, keepdim, self.scalar_type(),
                                         at::kLong);
  launch(op_name<Op>(), code, iter, 2);
  return {values, indices};
}

template <class Op, tn_reduce_op code>
Tensor& arg_out(const Tensor& self, std::optional<int64_t> dim, bool keepdim, Tensor& out) {
  if (!reducible(self.scalar_type()) || self.scalar_type() == at::kBool)
    return via_fallback<Op>(self, dim, keepdim, out);
  const char* what = code == TN_REDUCE_ARGMAX ? "argmax()" : "argmin()";
  Tensor input = self;
  int64_t d = 0;
  if (dim.has_value()) {
    d = at::maybe_wrap_dim(*dim, self.dim());
    at::native::zero_numel_check_dims(self, d, what);
  } else {
    // No dim: the position in the flattened tensor; keepdim keeps every dimension as 1.
    TORCH_CHECK(self.numel() != 0, what, ": Expected reduction dim to be specified for input.numel() == 0.");
    input = self.reshape({-1});
  }
  auto iter = at::native::make_reduction(what, out, input, at::IntArrayRef(d),
                                         dim.has_value() && keepdim, self.scalar_type(), at::kLong);
  launch(op_name<Op>(), code, iter, 1);
  if (!dim.has_value() && keepdim) out.resize_(std::vector<int64_t>(self.dim(), 1));
  return out;
}

template <class Op, tn_reduce_op code>
Tensor& logical_out(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, Tensor& out) {
  if (!reducible(self.scalar_type()) || !reducible(out.scalar_type()))
    return via_fallback<Op>(self, dim, keepdim, out);
  auto iter = at::native::make_reduction(code == TN_REDUCE_ALL ? "all" : "any", out, self, dim, keepdim,
                                         self.scalar_type(), out.scalar_type());
  launch(op_name<Op>(), code, iter, 1);
  return out;
}

template <class Op, tn_reduce_op code>
Tensor& logical_dim_out(const Tensor& self, int64_t dim, bool keepdim, Tensor& out) {
  if (!reducible(self.scalar_type()) || !reducible(out.scalar_type()))
    return via_fallback<Op>(self, dim, keepdim, out);
  auto iter = at::native::make_reduction(code == TN_REDUCE_ALL ? "all" : "any", out, self,
                                         at::IntArrayRef(dim), keepdim, self.scalar_type(),
                                         out.scalar_type());
  launch(op_name<Op>(), code, iter, 1);
  return out;
}

template <class Op, tn_reduce_op code>
Tensor& logical_all_out(const Tensor& self, Tensor& out) {
  if (!reducible(self.scalar_type()) || !reducible(out.scalar_type())) return via_fallback<Op>(self, out);
  auto iter = at::native::make_reduction(code == TN_REDUCE_ALL ? "all" : "any", out, self, at::IntArrayRef{},
                                         false, self.scalar_type(), out.scalar_type());
  launch(op_name<Op>(), code, iter, 1);
  return out;
}

// max() / min() over everything
template <class Op, tn_reduce_op code>
Tensor full_extreme(const Tensor& self) {
  TORCH_CHECK(self.numel() > 0, code == TN_REDUCE_MAX ? "max" : "min",
              "(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
              "reduction dim with the 'dim' argument.");
  if (!reducible(self.scalar_type())) return via_fallback<Op>(self);
  Tensor out = at::empty({}, self.options());
  auto iter = at::native::make_reduction(code == TN_REDUCE_MAX ? "max" : "min", out, self,
                                         at::IntArrayRef{}, false, self.scalar_type());
  launch(op_name<Op>(), code, iter, 1);
  return out;
}

// max(input, out=...) and min: the full reduction into a 0-dim out.
template <class FullOp, tn_reduce_op code>
Tensor& full_extreme_out(const Tensor& self, Tensor& out) {
  TORCH_CHECK(self.device() == out.device(), "Expected out tensor to be on ", self.device(), ", got ", out.device());
  TORCH_CHECK(at::canCast(self.scalar_type(), out.scalar_type()), "result type ", self.scalar_type(),
              " can't be cast to the desired output type ", out.scalar_type());
  Tensor r = full_extreme<FullOp, code>(self);
  at::native::resize_output(out, {});
  return out.copy_(r);
}

// nansum: NaNs count as zero (integers have none).
Tensor& nansum_out(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, std::optional<c10::ScalarType> dtype,
                   Tensor& out) {
  TORCH_CHECK(!at::isComplexType(self.scalar_type()), "nansum does not support complex inputs");
  Tensor x = at::isFloatingType(self.scalar_type()) ? at::masked_fill(self, self.isnan(), 0) : self;
  return sum_out(x, dim, keepdim, dtype, out);
}

// var / std over `dim` (all dimensions when absent); `mean` undefined unless wanted.
void launch_var(const char* name, const Tensor& self, at::OptionalIntArrayRef dim,
                const std::optional<c10::Scalar>& correction, bool keepdim, bool take_sqrt,
                Tensor& var, Tensor* mean) {
  const char* what = take_sqrt ? "std" : "var";
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), what,
              "(): input dtype should be floating point, but got ", self.scalar_type());
  double c = correction.has_value() ? correction->toDouble() : 1.0;
  auto iter = mean ? at::native::make_reduction(what, var, *mean, self, dim, keepdim, self.scalar_type(),
                                                self.scalar_type())
                   : at::native::make_reduction(what, var, self, dim, keepdim, self.scalar_type());
  track_native(name);
  int64_t outputs = std::max<int64_t>(var.numel(), 1);
  if (static_cast<double>(self.numel() / outputs) - c <= 0)
    TORCH_WARN(what, "(): degrees of freedom is <= 0. Correction should be strictly less than the "
               "reduction factor (input numel divided by output numel).");
  if (iter.numel() == 0) {  // an empty reduction: NaN, as PyTorch gives
    var.fill_(std::numeric_limits<double>::quiet_NaN());
    if (mean) mean->fill_(std::numeric_limits<double>::quiet_NaN());
    return;
  }
  tn_tensor v = iter_view(iter, 0), in = iter_view(iter, mean ? 2 : 1);
  tn_tensor m = mean ? iter_view(iter, 1) : v;
  check(tn_var_async(current_stream(iter.device(0).index()), name, &v, mean ? &m : nullptr, &in, c,
                     take_sqrt));
}

template <class Op, bool take_sqrt>
Tensor& var_out(const Tensor& self, at::OptionalIntArrayRef dim, const std::optional<c10::Scalar>& correction,
                bool keepdim, Tensor& out) {
  if (!reducible(self.scalar_type())) return via_fallback<Op>(self, dim, correction, keepdim, out);
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), take_sqrt ? "std" : "var",
              "(): expected out dtype ", self.scalar_type(), " but got ", out.scalar_type());
  launch_var(op_name<Op>(), self, dim, correction, keepdim, take_sqrt, out, nullptr);
  return out;
}

template <class Op, bool take_sqrt>
Tensor var(const Tensor& self, at::OptionalIntArrayRef dim, const std::optional<c10::Scalar>& correction,
           bool keepdim) {
  if (!reducible(self.scalar_type())) return via_fallback<Op>(self, dim, correction, keepdim);
  Tensor out = at::empty({0}, self.options());
  launch_var(op_name<Op>(), self, dim, correction, keepdim, take_sqrt, out, nullptr);
  return out;
}

template <class Op, bool take_sqrt>
std::tuple<Tensor, Tensor> var_mean(const Tensor& self, at::OptionalIntArrayRef dim,
                                    const std::optional<c10::Scalar>& correction, bool keepdim) {
  if (!reducible(self.scalar_type())) return via_fallback<Op>(self, dim, correction, keepdim);
  Tensor out = at::empty({0}, self.options()), mean = at::empty({0}, self.options());
  launch_var(op_name<Op>(), self, dim, correction, keepdim, take_sqrt, out, &mean);
  return {out, mean};
}

// histc for float and integer tensors (MoE routers count tokens per expert with int32
// histc). With min == max the range is the data's own, as on accelerators.
Tensor& histc_out(const Tensor& self, int64_t bins, const c10::Scalar& min, const c10::Scalar& max, Tensor& out) {
  TORCH_CHECK(bins > 0, "torch.histc(): bins must be > 0, but got ", bins, " for bins");
  if (!reducible(self.scalar_type()) || self.scalar_type() == at::kBool)
    return via_fallback<at::_ops::histc_out>(self, bins, min, max, out);
  double lo = min.toDouble(), hi = max.toDouble();
  TORCH_CHECK(std::isfinite(lo) && std::isfinite(hi), "torch.histc(): range of [", lo, ", ", hi, "] is not finite");
  TORCH_CHECK(lo <= hi, "torch.histc(): max must be larger than min");
  if (lo == hi && self.numel() > 0) {
    lo = at::amin(self).item<double>();
    hi = at::amax(self).item<double>();
  }
  if (lo == hi) {
    lo -= 1;
    hi += 1;
  }
  at::native::resize_output(out, {bins});
  track_native("aten::histc.out");
  tn_tensor o = to_tn_view(out), in = to_tn_view(self);
  check(tn_histc_async(current_stream(out.device().index()), "aten::histc.out", &o, &in, lo, hi));
  return out;
}

Tensor histc(const Tensor& self, int64_t bins, const c10::Scalar& min, const c10::Scalar& max) {
  Tensor out = at::empty({0}, self.options());
  return histc_out(self, bins, min, max, out);
}

// prod over everything
Tensor prod_all(const Tensor& self, std::optional<c10::ScalarType> dtype) {
  if (!reducible(self.scalar_type())) return via_fallback<at::_ops::prod>(self, dtype);
  auto out_dtype = dtype ? *dtype
                         : (at::isIntegralType(self.scalar_type(), true) ? at::kLong : self.scalar_type());
  Tensor out = at::empty({}, self.options().dtype(out_dtype));
  auto iter = at::native::make_reduction("prod", out, self, at::IntArrayRef{}, false, out_dtype);
  launch("aten::prod", TN_REDUCE_PROD, iter, 1);
  return out;
}

// aminmax as amin and amax (two passes over the input, each at memory speed), with
// aminmax's own checks and messages.
std::tuple<Tensor&, Tensor&> aminmax_out(const Tensor& self, std::optional<int64_t> dim, bool keepdim, Tensor& min,
                                         Tensor& max) {
  if (!reducible(self.scalar_type()) || self.is_complex())
    return via_fallback<at::_ops::aminmax_out>(self, dim, keepdim, min, max);
  TORCH_CHECK(min.scalar_type() == self.scalar_type() && max.scalar_type() == self.scalar_type(),
              "Expected out tensor to have dtype ", self.scalar_type(), ", but got ", min.scalar_type(), " instead");
  std::vector<int64_t> dims;
  if (dim) {
    int64_t d = at::maybe_wrap_dim(*dim, self.dim());
    at::native::zero_numel_check_dims(self, d, "aminmax");
    dims.push_back(d);
  } else {
    TORCH_CHECK(self.numel() > 0,
                "aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity.");
  }
  track_native("aten::aminmax.out");
  // without dim, keepdim keeps every dimension at size 1, as amin over all of them does
  at::amin_out(min, self, dims, keepdim);
  at::amax_out(max, self, dims, keepdim);
  return {min, max};
}

std::tuple<Tensor, Tensor> aminmax(const Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  Tensor min = at::empty({0}, self.options()), max = at::empty({0}, self.options());
  aminmax_out(self, dim, keepdim, min, max);
  return {min, max};
}

} // namespace

// One pass over the input (16-bit elements widened as they are read), its square root at the
// end (the caller has counted the op).
Tensor vector_norm2(const Tensor& x, at::OptionalIntArrayRef dim, bool keepdim, c10::ScalarType out_dtype) {
  Tensor out = at::native::create_reduction_result(x, dim, keepdim, out_dtype);
  auto iter = at::native::make_reduction("linalg_vector_norm", out, x, dim, keepdim, x.scalar_type(), out_dtype);
  launch("aten::linalg_vector_norm.out", TN_REDUCE_NORM2, iter, 1, 1.0, false);
  return out;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("sum.IntList_out", sum_out);
  m.impl("sum.dim_IntList", reduce_dims<sum_out, true>);
  m.impl("sum", reduce_all<sum_out, true>);
  m.impl("mean.out", mean_out);
  m.impl("mean.dim", reduce_dims<mean_out, false>);
  m.impl("mean", reduce_all<mean_out, false>);
  m.impl("prod.int_out", prod_out);
  m.impl("amax.out", extreme_out<at::_ops::amax_out, TN_REDUCE_MAX>);
  m.impl("amin.out", extreme_out<at::_ops::amin_out, TN_REDUCE_MIN>);
  m.impl("max.dim_max", extreme_dim_out<at::_ops::max_dim_max, TN_REDUCE_MAX>);
  m.impl("min.dim_min", extreme_dim_out<at::_ops::min_dim_min, TN_REDUCE_MIN>);
  m.impl("max", full_extreme<at::_ops::max, TN_REDUCE_MAX>);
  m.impl("min", full_extreme<at::_ops::min, TN_REDUCE_MIN>);
  m.impl("max.unary_out", full_extreme_out<at::_ops::max, TN_REDUCE_MAX>);
  m.impl("min.unary_out", full_extreme_out<at::_ops::min, TN_REDUCE_MIN>);
  m.impl("nansum", reduce_dims<nansum_out, true>);
  m.impl("nansum.out", nansum_out);
  m.impl("argmax.out", arg_out<at::_ops::argmax_out, TN_REDUCE_ARGMAX>);
  m.impl("argmin.out", arg_out<at::_ops::argmin_out, TN_REDUCE_ARGMIN>);
  m.impl("all.dims_out", logical_out<at::_ops::all_dims_out, TN_REDUCE_ALL>);
  m.impl("any.dims_out", logical_out<at::_ops::any_dims_out, TN_REDUCE_ANY>);
  m.impl("all.out", logical_dim_out<at::_ops::all_out, TN_REDUCE_ALL>);
  m.impl("all.all_out", logical_all_out<at::_ops::all_all_out, TN_REDUCE_ALL>);
  m.impl("any.all_out", logical_all_out<at::_ops::any_all_out, TN_REDUCE_ANY>);
  m.impl("any.out", logical_dim_out<at::_ops::any_out, TN_REDUCE_ANY>);
  m.impl("histc.out", histc_out);
  m.impl("aminmax", aminmax);
  m.impl("aminmax.out", aminmax_out);
  m.impl("histc", histc);
  m.impl("prod", prod_all);
  m.impl("var.correction_out", var_out<at::_ops::var_correction_out, false>);
  m.impl("std.correction_out", var_out<at::_ops::std_correction_out, true>);
  m.impl("var.correction", var<at::_ops::var_correction, false>);
  m.impl("std.correction", var<at::_ops::std_correction, true>);
  m.impl("var_mean.correction", var_mean<at::_ops::var_mean_correction, false>);
  m.impl("std_mean.correction", var_mean<at::_ops::std_mean_correction, true>);
}

} // namespace torch_neuronx::ops
