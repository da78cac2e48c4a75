// Layer normalisation and RMS normalisation (aten::_fused_rms_norm, which F.rms_norm calls):
// the forward and the input gradient in C; the weight and bias gradients as sums of native ops.
#include <ATen/ops/_fused_rms_norm.h>
#include <ATen/ops/_fused_rms_norm_backward.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/native_layer_norm.h>
#include <ATen/ops/native_layer_norm_backward.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>

#include "aten/Iter.h"
#include "aten/OpTracking.h"
#include "aten/TensorView.h"
#include "runtime/Functions.h"

namespace torch_neuronx::ops {
namespace {

using at::Tensor;

bool norm_dtype(c10::ScalarType t) {
  return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf || t == at::kDouble;
}

int64_t check_shape(const Tensor& input, c10::IntArrayRef normalized_shape) {
  int64_t nd = static_cast<int64_t>(normalized_shape.size());
  TORCH_CHECK(nd >= 1, "Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one element, but got normalized_shape = ",
              normalized_shape);
  int64_t axis = input.dim() - nd;
  bool ok = axis >= 0 && input.sizes().slice(axis).equals(normalized_shape);
  TORCH_CHECK(ok, "Given normalized_shape=", normalized_shape, ", expected input with shape [*",
              c10::IntArrayRef(normalized_shape), "], but got input of size", input.sizes());
  return axis;
}

bool native(const Tensor& input, const std::optional<Tensor>& w, const std::optional<Tensor>& b) {
  auto t = input.scalar_type();
  return norm_dtype(t) && (!w || !w->defined() || w->scalar_type() == t) &&
         (!b || !b->defined() || b->scalar_type() == t);
}

const void* data_or_null(const std::optional<Tensor>& t) {
  return t && t->defined() && t->numel() ? t->const_data_ptr() : nullptr;
}

// mean's and rstd's shape: the input's batch dimensions, then ones.
std::vector<int64_t> stat_shape(const Tensor& input, int64_t axis) {
  std::vector<int64_t> shape = input.sizes().slice(0, axis).vec();
  shape.resize(input.dim(), 1);
  return shape;
}

// t summed over the batch dimensions (those before `axis`): a weight or bias gradient.
Tensor sum_over_batch(const Tensor& t, int64_t axis) {
  // (an empty dimension list would sum everything: with no batch dimensions there is nothing to sum)
  if (axis == 0) return t;
  std::vector<int64_t> batch_dims(axis);
  for (int64_t i = 0; i < axis; i++) batch_dims[i] = i;
  return at::sum(t, batch_dims);
}

std::tuple<Tensor, Tensor, Tensor> layer_norm(const Tensor& input, c10::IntArrayRef shape,
                                              const std::optional<Tensor>& weight,
                                              const std::optional<Tensor>& bias, double eps) {
  int64_t axis = check_shape(input, shape);
  if (!native(input, weight, bias))
    return via_fallback<at::_ops::native_layer_norm>(input, shape, weight, bias, eps);
  track_native("aten::native_layer_norm");
  Tensor x = input.contiguous();
  std::optional<Tensor> w = weight && weight->defined() ? std::optional<Tensor>(weight->contiguous()) : std::nullopt;
  std::optional<Tensor> b = bias && bias->defined() ? std::optional<Tensor>(bias->contiguous()) : std::nullopt;
  Tensor out = at::empty_like(x, at::MemoryFormat::Contiguous);
  Tensor mean = at::empty(stat_shape(input, axis), x.options());
  Tensor rstd = at::empty(stat_shape(input, axis), x.options());
  int64_t n = c10::multiply_integers(shape);
  tn_layer_norm ln{};
  ln.rows = n ? x.numel() / n : 0;
  ln.n = n;
  ln.dtype = to_tn_dtype(x.scalar_type());
  ln.eps = eps;
  ln.x = x.numel() ? const_cast<void*>(x.const_data_ptr()) : nullptr;
  ln.y = out.numel() ? out.data_ptr() : nullptr;
  ln.weight = data_or_null(w);
  ln.bias = data_or_null(b);
  ln.mean = mean.numel() ? mean.data_ptr() : nullptr;
  ln.rstd = rstd.numel() ? rstd.data_ptr() : nullptr;
  if (x.numel()) check(tn_layer_norm_async(current_stream(x.device().index()), "aten::native_layer_norm", &ln));
  return {out, mean, rstd};
}

std::tuple<Tensor, Tensor, Tensor> layer_norm_backward(const Tensor& grad, const Tensor& input,
                                                       c10::IntArrayRef shape, const Tensor& mean,
                                                       const Tensor& rstd, const std::optional<Tensor>& weight,
                                                       const std::optional<Tensor>& bias,
                                                       std::array<bool, 3> mask) {
  int64_t axis = check_shape(input, shape);
  if (!native(input, weight, bias) || grad.scalar_type() != input.scalar_type())
    return via_fallback<at::_ops::native_layer_norm_backward>(grad, input, shape, mean, rstd, weight, bias, mask);
  track_native("aten::native_layer_norm_backward");
  Tensor x = input.contiguous(), g = grad.contiguous();
  std::optional<Tensor> w = weight && weight->defined() ? std::optional<Tensor>(weight->contiguous()) : std::nullopt;
  Tensor dx, dw, db;
  int64_t n = c10::multiply_integers(shape);
  if (mask[0]) {
    dx = at::empty_like(x, at::MemoryFormat::Contiguous);
    if (x.numel()) {
      Tensor m = mean.contiguous(), r = rstd.contiguous();
      tn_layer_norm ln{};
      ln.rows = x.numel() / n;
      ln.n = n;
      ln.dtype = to_tn_dtype(x.scalar_type());
      ln.x = const_cast<void*>(x.const_data_ptr());
      ln.y = dx.data_ptr();
      ln.grad = g.const_data_ptr();
      ln.weight = data_or_null(w);
      ln.mean = const_cast<void*>(m.const_data_ptr());
      ln.rstd = const_cast<void*>(r.const_data_ptr());
      check(tn_layer_norm_backward_async(current_stream(x.device().index()), "aten::native_layer_norm_backward", &ln));
    }
  }
  if (mask[1] && w) dw = sum_over_batch(at::mul(g, at::mul(at::sub(x, mean), rstd)), axis).reshape(w->sizes());
  if (mask[2] && bias && bias->defined()) db = sum_over_batch(g, axis).reshape(bias->sizes());
  return {dx, dw, db};
}

// F.rms_norm's default eps: the input dtype's machine epsilon.
double default_eps(c10::ScalarType t) {
  switch (t) {
    case at::kDouble: return std::numeric_limits<double>::epsilon();
    case at::kBFloat16: return static_cast<double>(std::numeric_limits<c10::BFloat16>::epsilon());
    case at::kHalf: return static_cast<double>(std::numeric_limits<c10::Half>::epsilon());
    default: return std::numeric_limits<float>::epsilon();
  }
}

tn_layer_norm rms_rows(const Tensor& x, int64_t n, const std::optional<Tensor>& w, const Tensor& rstd) {
  tn_layer_norm ln{};
  ln.rows = n ? x.numel() / n : 0;
  ln.n = n;
  ln.dtype = to_tn_dtype(x.scalar_type());
  ln.x = const_cast<void*>(x.const_data_ptr());
  ln.weight = data_or_null(w);
  ln.rstd = rstd.data_ptr();
  ln.rms = 1;
  return ln;
}

std::tuple<Tensor, Tensor> rms_norm(const Tensor& input, c10::IntArrayRef shape,
                                    const std::optional<Tensor>& weight, std::optional<double> eps) {
  int64_t axis = check_shape(input, shape);
  bool weight_ok = !weight || !weight->defined() || weight->sizes().equals(shape);
  if (!native(input, weight, std::nullopt) || !weight_ok)
    return via_fallback<at::_ops::_fused_rms_norm>(input, shape, weight, eps);
  track_native("aten::_fused_rms_norm");
  Tensor x = input.contiguous();
  std::optional<Tensor> w = weight && weight->defined() ? std::optional<Tensor>(weight->contiguous()) : std::nullopt;
  Tensor out = at::empty_like(x, at::MemoryFormat::Contiguous);
  auto stat_type = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  Tensor rstd = at::empty(stat_shape(input, axis), x.options().dtype(stat_type));
  if (x.numel()) {
    tn_layer_norm ln = rms_rows(x, c10::multiply_integers(shape), w, rstd);
    ln.eps = eps.value_or(default_eps(x.scalar_type()));
    ln.y = out.data_ptr();
    check(tn_layer_norm_async(current_stream(x.device().index()), "aten::_fused_rms_norm", &ln));
  }
  return {out, rstd};
}

std::tuple<Tensor, Tensor> rms_norm_backward(const Tensor& grad, const Tensor& input, c10::IntArrayRef shape,
                                             const Tensor& rstd, const std::optional<Tensor>& weight,
                                             std::array<bool, 2> mask) {
  int64_t axis = check_shape(input, shape);
  track_native("aten::_fused_rms_norm_backward");
  // the rows' dtype: the input's when the gradient, the weight and rstd agree with it
  // (rstd float32, float64 for float64 rows), else everything in float32 or float64
  auto t = input.scalar_type();
  auto stat_type = t == at::kDouble ? at::kDouble : at::kFloat;
  bool same = norm_dtype(t) && grad.scalar_type() == t && rstd.scalar_type() == stat_type &&
              (!weight || !weight->defined() || weight->scalar_type() == t);
  if (!same) {
    bool wide = t == at::kDouble || grad.scalar_type() == at::kDouble ||
                (weight && weight->defined() && weight->scalar_type() == at::kDouble);
    t = wide ? at::kDouble : at::kFloat;
    stat_type = t;
  }
  Tensor x = input.to(t).contiguous(), g = grad.to(t).contiguous(), r = rstd.to(stat_type).contiguous();
  std::optional<Tensor> w = weight && weight->defined() ? std::optional<Tensor>(weight->to(t).contiguous()) : std::nullopt;
  Tensor dx, dw;
  if (mask[0]) {
    dx = at::empty_like(x, at::MemoryFormat::Contiguous);
    if (x.numel()) {
      tn_layer_norm ln = rms_rows(x, c10::multiply_integers(shape), w, r);
      ln.y = dx.data_ptr();
      ln.grad = g.const_data_ptr();
      check(tn_layer_norm_backward_async(current_stream(x.device().index()), "aten::_fused_rms_norm_backward", &ln));
    }
    dx = dx.to(input.scalar_type());
  }
  if (mask[1] && weight && weight->defined())
    dw = sum_over_batch(at::mul(g, at::mul(x, r)), axis).reshape(weight->sizes()).to(weight->scalar_type());
  return {dx, dw};
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_layer_norm", layer_norm);
  m.impl("native_layer_norm_backward", layer_norm_backward);
  m.impl("_fused_rms_norm", rms_norm);
  m.impl("_fused_rms_norm_backward", rms_norm_backward);
}

} // namespace torch_neuronx::ops
