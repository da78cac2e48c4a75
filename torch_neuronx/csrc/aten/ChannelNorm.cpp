// Batch normalisation (CNN backbones, DETR, wav2vec2's feature projection in some configs) and
// group normalisation (wav2vec2's and HuBERT's feature encoder, Diffusers' UNets), forward and
// backward: the CPU's argument checks and dtype rules, then the C kernels (tn/channel_norm.h)
// over contiguous (N, C, spatial) data. Outputs keep the input's memory format, as on the CPU.
#include <ATen/ops/empty.h>
#include <ATen/ops/native_batch_norm.h>
#include <ATen/ops/native_batch_norm_backward.h>
#include <ATen/ops/native_group_norm.h>
#include <ATen/ops/native_group_norm_backward.h>

#include "aten/Iter.h"
#include "aten/OpTracking.h"
#include "aten/TensorView.h"
#include "runtime/Functions.h"

namespace torch_neuronx::ops {
namespace {

using at::Tensor;
using OptTensor = std::optional<Tensor>;

bool defined(const OptTensor& t) { return t && t->defined(); }

bool data_dtype_ok(c10::ScalarType t) {
  return t == at::kFloat || t == at::kDouble || t == at::kBFloat16 || t == at::kHalf;
}

// The dtype of the parameters and statistics: that of the first defined one, else the data's.
// nullopt when they disagree, or are neither the data's dtype nor float32 beside 16-bit data:
// those calls go to the CPU.
std::optional<c10::ScalarType> param_dtype(const Tensor& x, std::initializer_list<const OptTensor*> params) {
  std::optional<c10::ScalarType> t;
  for (const OptTensor* p : params) {
    if (!defined(*p)) continue;
    if (t && *t != (*p)->scalar_type()) return std::nullopt;
    t = (*p)->scalar_type();
    if (!(*p)->is_contiguous() || (*p)->device() != x.device()) return std::nullopt;
  }
  c10::ScalarType d = x.scalar_type();
  if (!t) return d;
  bool half = d == at::kBFloat16 || d == at::kHalf;
  return *t == d || (half && *t == at::kFloat) ? t : std::nullopt;
}

void check_channels(const OptTensor& t, int64_t c, const char* name) {
  if (defined(t))
    TORCH_CHECK(t->numel() == c, name, " should contain ", c, " elements not ", t->numel());
}

void* ptr(const OptTensor& t) { return defined(t) ? t->data_ptr() : nullptr; }
const void* cptr(const OptTensor& t) { return defined(t) ? t->const_data_ptr() : nullptr; }

// The shape of `x` as (n, c, s).
tn_channel_norm base(const Tensor& x, c10::ScalarType params) {
  tn_channel_norm cn{};
  cn.n = x.size(0);
  cn.c = x.size(1);
  cn.s = x.size(1) ? x.numel() / (cn.n * cn.c) : 0;
  cn.dtype = to_tn_dtype(x.scalar_type());
  cn.param_dtype = to_tn_dtype(params);
  return cn;
}

// A forward's call: x (contiguous; `shape` its (n, c, s) view) normalised into out.
tn_channel_norm forward_call(const Tensor& shape, const Tensor& x, Tensor& out, c10::ScalarType params,
                             const OptTensor& weight, const OptTensor& bias, double eps) {
  tn_channel_norm cn = base(shape, params);
  cn.eps = eps;
  cn.x = x.const_data_ptr();
  cn.y = out.data_ptr();
  cn.weight = cptr(weight);
  cn.bias = cptr(bias);
  return cn;
}

// A backward's call: dx, dw and db (each undefined when not wanted) from g and x (contiguous).
tn_channel_norm backward_call(const Tensor& shape, const Tensor& x, const Tensor& g, Tensor& dx, Tensor& dw,
                              Tensor& db, c10::ScalarType params, const OptTensor& weight) {
  tn_channel_norm cn = base(shape, params);
  cn.x = x.const_data_ptr();
  cn.grad = g.const_data_ptr();
  cn.y = dx.defined() ? dx.data_ptr() : nullptr;
  cn.weight = cptr(weight);
  cn.grad_weight = dw.defined() ? dw.data_ptr() : nullptr;
  cn.grad_bias = db.defined() ? db.data_ptr() : nullptr;
  return cn;
}

// out computed contiguous, returned in `like`'s memory format.
Tensor in_format_of(const Tensor& out, const Tensor& like) {
  return out.contiguous(like.suggest_memory_format());
}

std::tuple<Tensor, Tensor, Tensor> batch_norm(const Tensor& input, const OptTensor& weight, const OptTensor& bias,
                                              const OptTensor& running_mean, const OptTensor& running_var,
                                              bool training, double momentum, double eps) {
  auto pt = param_dtype(input, {&weight, &bias, &running_mean, &running_var});
  if (!data_dtype_ok(input.scalar_type()) || !pt || input.dim() < 2)
    return via_fallback<at::_ops::native_batch_norm>(input, weight, bias, running_mean, running_var, training,
                                                     momentum, eps);
  TORCH_CHECK(input.numel() > 0, "input tensor must have at least one element, but got input_sizes = ", input.sizes());
  int64_t c = input.size(1);
  check_channels(weight, c, "weight");
  check_channels(bias, c, "bias");
  check_channels(running_mean, c, "running_mean");
  check_channels(running_var, c, "running_var");
  TORCH_CHECK(training || (defined(running_mean) && defined(running_var)),
              "batch_norm: running_mean and running_var must be defined in evaluation mode");
  track_native("aten::native_batch_norm");
  Tensor x = input.contiguous();
  Tensor out = at::empty(x.sizes(), x.options());
  auto stat_options = x.options().dtype(*pt);
  Tensor mean = at::empty({training ? c : 0}, stat_options), rstd = at::empty({training ? c : 0}, stat_options);
  tn_channel_norm cn = forward_call(x, x, out, *pt, weight, bias, eps);
  cn.training = training;
  cn.momentum = momentum;
  cn.running_mean = ptr(running_mean);
  cn.running_var = ptr(running_var);
  cn.mean = training ? mean.data_ptr() : nullptr;
  cn.rstd = training ? rstd.data_ptr() : nullptr;
  check(tn_channel_norm_async(current_stream(x.device().index()), "aten::native_batch_norm", &cn));
  return {in_format_of(out, input), mean, rstd};
}

std::tuple<Tensor, Tensor, Tensor> batch_norm_backward(const Tensor& grad_out, const Tensor& input,
                                                       const OptTensor& weight, const OptTensor& running_mean,
                                                       const OptTensor& running_var, const OptTensor& save_mean,
                                                       const OptTensor& save_invstd, bool train, double eps,
                                                       std::array<bool, 3> mask) {
  auto pt = train ? param_dtype(input, {&weight, &save_mean, &save_invstd})
                  : param_dtype(input, {&weight, &running_mean, &running_var});
  bool stats = train ? defined(save_mean) && defined(save_invstd) : defined(running_mean) && defined(running_var);
  if (!data_dtype_ok(input.scalar_type()) || !pt || !stats || input.dim() < 2 || input.numel() == 0 ||
      grad_out.scalar_type() != input.scalar_type() || !grad_out.sizes().equals(input.sizes()))
    return via_fallback<at::_ops::native_batch_norm_backward>(grad_out, input, weight, running_mean, running_var,
                                                              save_mean, save_invstd, train, eps, mask);
  int64_t c = input.size(1);
  check_channels(weight, c, "weight");
  check_channels(train ? save_mean : running_mean, c, train ? "save_mean" : "running_mean");
  check_channels(train ? save_invstd : running_var, c, train ? "save_invstd" : "running_var");
  track_native("aten::native_batch_norm_backward");
  Tensor x = input.contiguous(), g = grad_out.contiguous();
  auto param_options = x.options().dtype(*pt);
  Tensor dx = mask[0] ? at::empty(x.sizes(), x.options()) : Tensor();
  Tensor dw = mask[1] ? at::empty({c}, param_options) : Tensor();
  Tensor db = mask[2] ? at::empty({c}, param_options) : Tensor();
  tn_channel_norm cn = backward_call(x, x, g, dx, dw, db, *pt, weight);
  cn.training = train;
  cn.eps = eps;
  cn.running_mean = ptr(running_mean);
  cn.running_var = ptr(running_var);
  cn.mean = train ? ptr(save_mean) : nullptr;
  cn.rstd = train ? ptr(save_invstd) : nullptr;
  check(tn_channel_norm_backward_async(current_stream(x.device().index()), "aten::native_batch_norm_backward", &cn));
  return {mask[0] ? in_format_of(dx, input) : dx, dw, db};
}

void check_group_shape(const Tensor& x, int64_t n, int64_t c, int64_t hxw, int64_t group) {
  TORCH_CHECK(group > 0, "Expected num groups to be greater than 0, got ", group);
  TORCH_CHECK(c % group == 0, "Expected number of channels in input to be divisible by ", "num_groups, but got input of shape ",
              x.sizes(), " and num_groups=", group);
  TORCH_CHECK(x.numel() == n * c * hxw, "Expected the input of group_norm to hold N * C * HxW = ", n * c * hxw,
              " elements, but got input of shape ", x.sizes());
}

std::tuple<Tensor, Tensor, Tensor> group_norm(const Tensor& input, const OptTensor& gamma, const OptTensor& beta,
                                              int64_t n, int64_t c, int64_t hxw, int64_t group, double eps) {
  auto pt = param_dtype(input, {&gamma, &beta});
  // (an empty plane with samples gives the CPU's mean 0 and rstd NaN: left to it)
  if (!data_dtype_ok(input.scalar_type()) || !pt || (input.numel() == 0 && n > 0))
    return via_fallback<at::_ops::native_group_norm>(input, gamma, beta, n, c, hxw, group, eps);
  check_group_shape(input, n, c, hxw, group);
  check_channels(gamma, c, "weight");
  check_channels(beta, c, "bias");
  track_native("aten::native_group_norm");
  Tensor x = input.contiguous();
  Tensor out = at::empty(x.sizes(), x.options());
  auto stat_options = x.options().dtype(*pt);
  Tensor mean = at::empty({n, group}, stat_options), rstd = at::empty({n, group}, stat_options);
  if (n == 0) return {in_format_of(out, input), mean, rstd};
  tn_channel_norm cn = forward_call(x.view({n, c, hxw}), x, out, *pt, gamma, beta, eps);
  cn.groups = group;
  cn.mean = mean.data_ptr();
  cn.rstd = rstd.data_ptr();
  check(tn_channel_norm_async(current_stream(x.device().index()), "aten::native_group_norm", &cn));
  return {in_format_of(out, input), mean, rstd};
}

std::tuple<Tensor, Tensor, Tensor> group_norm_backward(const Tensor& grad_out, const Tensor& input,
                                                       const Tensor& mean, const Tensor& rstd, const OptTensor& gamma,
                                                       int64_t n, int64_t c, int64_t hxw, int64_t group,
                                                       std::array<bool, 3> mask) {
  OptTensor m = mean, r = rstd;
  auto pt = param_dtype(input, {&gamma, &m, &r});
  if (!data_dtype_ok(input.scalar_type()) || !pt || (input.numel() == 0 && n > 0) ||
      grad_out.scalar_type() != input.scalar_type() || !grad_out.sizes().equals(input.sizes()))
    return via_fallback<at::_ops::native_group_norm_backward>(grad_out, input, mean, rstd, gamma, n, c, hxw, group,
                                                              mask);
  check_group_shape(input, n, c, hxw, group);
  check_channels(gamma, c, "weight");
  TORCH_CHECK(mean.numel() == n * group && rstd.numel() == n * group, "group_norm_backward: mean and rstd should hold N * num_groups = ",
              n * group, " elements, got ", mean.numel(), " and ", rstd.numel());
  track_native("aten::native_group_norm_backward");
  Tensor x = input.contiguous(), g = grad_out.contiguous();
  auto param_options = x.options().dtype(*pt);
  Tensor dx = mask[0] ? at::empty(x.sizes(), x.options()) : Tensor();
  Tensor dw = mask[1] ? at::empty({c}, param_options) : Tensor();
  Tensor db = mask[2] ? at::empty({c}, param_options) : Tensor();
  if (n == 0) { /* no samples: the parameters' gradients are zero */
    if (mask[1]) dw.zero_();
    if (mask[2]) db.zero_();
    return {dx, dw, db};
  }
  tn_channel_norm cn = backward_call(x.view({n, c, hxw}), x, g, dx, dw, db, *pt, gamma);
  cn.groups = group;
  cn.mean = const_cast<void*>(mean.const_data_ptr());
  cn.rstd = const_cast<void*>(rstd.const_data_ptr());
  check(tn_channel_norm_backward_async(current_stream(x.device().index()), "aten::native_group_norm_backward", &cn));
  return {mask[0] ? in_format_of(dx, input) : dx, dw, db};
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_batch_norm", batch_norm);
  m.impl("native_batch_norm_backward", batch_norm_backward);
  m.impl("native_group_norm", group_norm);
  m.impl("native_group_norm_backward", group_norm_backward);
}

} // namespace torch_neuronx::ops
