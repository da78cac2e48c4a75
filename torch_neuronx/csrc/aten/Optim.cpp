// torch.optim's fused=True path: _fused_adam_, _fused_adamw_ and _fused_sgd_ (float or tensor
// lr) as one launch over the whole parameter list; and GradScaler's scale update.
#include <ATen/ops/_amp_update_scale.h>
#include <ATen/ops/_fused_adam.h>
#include <ATen/ops/_fused_adamw.h>
#include <ATen/ops/_fused_sgd.h>

#include "aten/Iter.h"
#include "aten/OpTracking.h"
#include "aten/TensorView.h"
#include "runtime/Functions.h"

namespace torch_neuronx::ops {
namespace {

using at::Tensor;
using at::TensorList;

const float* scalar_f32(const std::optional<Tensor>& t, const Tensor& like, const char* what) {
  if (!t.has_value() || !t->defined()) return nullptr;
  TORCH_CHECK(t->device() == like.device() && t->scalar_type() == at::kFloat && t->numel() == 1, what,
              " must be a float32 tensor with one element on ", like.device());
  return t->const_data_ptr<float>();
}

// The groups for the C kernel, or nothing if a tensor is not in the form it takes (dense
// tensors of one float dtype per parameter, float32 steps, all on one neuron device).
std::optional<std::vector<tn_adam_group>> adam_groups(TensorList params, TensorList grads, TensorList exp_avgs,
                                                      TensorList exp_avg_sqs, TensorList max_exp_avg_sqs,
                                                      TensorList steps, bool amsgrad) {
  size_t n = params.size();
  TORCH_CHECK(grads.size() == n && exp_avgs.size() == n && exp_avg_sqs.size() == n && steps.size() == n &&
                  (!amsgrad || max_exp_avg_sqs.size() == n),
              "_fused_adam: the tensor lists must have the same length");
  std::vector<tn_adam_group> groups;
  for (size_t i = 0; i < n; i++) {
    const Tensor* parts[5] = {&params[i], &grads[i], &exp_avgs[i], &exp_avg_sqs[i],
                              amsgrad ? &max_exp_avg_sqs[i] : &exp_avg_sqs[i]};
    for (const Tensor* t : parts) {
      TORCH_CHECK(t->device() == params[0].device(), "_fused_adam: all tensors must be on ", params[0].device(),
                  ", got one on ", t->device());
      if (!t->is_contiguous() || t->scalar_type() != params[i].scalar_type() || t->sizes() != params[i].sizes())
        return std::nullopt;
    }
    if (!at::isFloatingType(params[i].scalar_type()) || !elementwise_dtypes_ok({params[i].scalar_type()}) ||
        steps[i].device() != params[0].device() || steps[i].scalar_type() != at::kFloat)
      return std::nullopt;
    groups.push_back({params[i].data_ptr(), grads[i].data_ptr(), exp_avgs[i].data_ptr(), exp_avg_sqs[i].data_ptr(),
                      amsgrad ? max_exp_avg_sqs[i].data_ptr() : nullptr, steps[i].const_data_ptr<float>(),
                      params[i].numel(), to_tn_dtype(params[i].scalar_type())});
  }
  return groups;
}

template <bool adamw>
void fused_adam(TensorList params, TensorList grads, TensorList exp_avgs, TensorList exp_avg_sqs,
                TensorList max_exp_avg_sqs, TensorList steps, double lr, double beta1, double beta2,
                double weight_decay, double eps, bool amsgrad, bool maximize,
                const std::optional<Tensor>& grad_scale, const std::optional<Tensor>& found_inf) {
  using Op = std::conditional_t<adamw, at::_ops::_fused_adamw_, at::_ops::_fused_adam_>;
  if (params.empty()) return;
  auto groups = adam_groups(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, amsgrad);
  if (!groups)
    return via_fallback<Op>(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr, beta1, beta2,
                            weight_decay, eps, amsgrad, maximize, grad_scale, found_inf);
  track_native(op_name<Op>());
  tn_adam_config config{lr, beta1, beta2, weight_decay, eps, amsgrad, maximize, adamw,
                        scalar_f32(grad_scale, params[0], "grad_scale"), scalar_f32(found_inf, params[0], "found_inf")};
  check(tn_fused_adam_async(current_stream(params[0].device().index()), op_name<Op>(), &config,
                            static_cast<int32_t>(groups->size()), groups->data()));
}

// The tensor-lr overloads read the learning rate once (a sync if it lives on the device).
template <bool adamw>
void fused_adam_tensor_lr(TensorList params, TensorList grads, TensorList exp_avgs, TensorList exp_avg_sqs,
                          TensorList max_exp_avg_sqs, TensorList steps, const Tensor& lr, double beta1,
                          double beta2, double weight_decay, double eps, bool amsgrad, bool maximize,
                          const std::optional<Tensor>& grad_scale, const std::optional<Tensor>& found_inf) {
  TORCH_CHECK(lr.numel() == 1, "_fused_adam: lr must be a tensor with one element");
  fused_adam<adamw>(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr.item<double>(), beta1, beta2,
                    weight_decay, eps, amsgrad, maximize, grad_scale, found_inf);
}

// SGD(fused=True): the groups for the C kernel, or nothing if a tensor is not in the form it
// takes (dense, contiguous, of one float dtype per parameter, all on one neuron device).
std::optional<std::vector<tn_sgd_group>> sgd_groups(TensorList params, TensorList grads, TensorList bufs,
                                                    bool momentum) {
  size_t n = params.size();
  TORCH_CHECK(grads.size() == n && (!momentum || bufs.size() == n),
              "_fused_sgd: the tensor lists must have the same length");
  std::vector<tn_sgd_group> groups;
  for (size_t i = 0; i < n; i++) {
    const Tensor* parts[3] = {&params[i], &grads[i], momentum ? &bufs[i] : &grads[i]};
    for (const Tensor* t : parts) {
      TORCH_CHECK(t->device() == params[0].device(), "_fused_sgd: all tensors must be on ", params[0].device(),
                  ", got one on ", t->device());
      if (!t->is_contiguous() || t->scalar_type() != params[i].scalar_type() || t->sizes() != params[i].sizes())
        return std::nullopt;
    }
    if (!at::isFloatingType(params[i].scalar_type()) || !elementwise_dtypes_ok({params[i].scalar_type()}))
      return std::nullopt;
    groups.push_back({params[i].data_ptr(), grads[i].data_ptr(), momentum ? bufs[i].data_ptr() : nullptr,
                      params[i].numel(), to_tn_dtype(params[i].scalar_type())});
  }
  return groups;
}

void fused_sgd(TensorList params, TensorList grads, TensorList bufs, double weight_decay, double momentum, double lr,
               double dampening, bool nesterov, bool maximize, bool is_first_step,
               const std::optional<Tensor>& grad_scale, const std::optional<Tensor>& found_inf) {
  using Op = at::_ops::_fused_sgd_;
  if (params.empty()) return;
  auto groups = sgd_groups(params, grads, bufs, momentum != 0);
  if (!groups)
    return via_fallback<Op>(params, grads, bufs, weight_decay, momentum, lr, dampening, nesterov, maximize,
                            is_first_step, grad_scale, found_inf);
  track_native(op_name<Op>());
  tn_sgd_config config{lr, weight_decay, momentum, dampening, nesterov, maximize, is_first_step,
                       scalar_f32(grad_scale, params[0], "grad_scale"), scalar_f32(found_inf, params[0], "found_inf")};
  check(tn_fused_sgd_async(current_stream(params[0].device().index()), op_name<Op>(), &config,
                           static_cast<int32_t>(groups->size()), groups->data()));
}

void fused_sgd_tensor_lr(TensorList params, TensorList grads, TensorList bufs, double weight_decay, double momentum,
                         const Tensor& lr, double dampening, bool nesterov, bool maximize, bool is_first_step,
                         const std::optional<Tensor>& grad_scale, const std::optional<Tensor>& found_inf) {
  TORCH_CHECK(lr.numel() == 1, "_fused_sgd: lr must be a tensor with one element");
  fused_sgd(params, grads, bufs, weight_decay, momentum, lr.item<double>(), dampening, nesterov, maximize,
            is_first_step, grad_scale, found_inf);
}

// GradScaler.update: one small task on the stream, so the host never waits for found_inf. The
// scalars are checked as PyTorch's kernels check them; on other devices they go to the CPU's.
Tensor& amp_update_scale_(Tensor& scale, Tensor& growth_tracker, const Tensor& found_inf, double growth_factor,
                          double backoff_factor, int64_t growth_interval) {
  using Op = at::_ops::_amp_update_scale_;
  TORCH_CHECK(growth_tracker.numel() == 1, "growth_tracker must be a 1-element tensor.");
  TORCH_CHECK(scale.numel() == 1, "current_scale must be a 1-element tensor.");
  TORCH_CHECK(found_inf.numel() == 1, "found_inf must be a 1-element tensor.");
  TORCH_CHECK(growth_tracker.scalar_type() == at::kInt, "growth_tracker must be an int tensor.");
  TORCH_CHECK(scale.scalar_type() == at::kFloat, "current_scale must be a float tensor.");
  TORCH_CHECK(found_inf.scalar_type() == at::kFloat, "found_inf must be a float tensor.");
  if (growth_tracker.device() != scale.device() || found_inf.device() != scale.device())
    return via_fallback<Op>(scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval);
  track_native(op_name<Op>());
  tn_amp_scale update{scale.data_ptr<float>(), growth_tracker.data_ptr<int32_t>(), found_inf.const_data_ptr<float>(),
                      growth_factor, backoff_factor, growth_interval};
  check(tn_amp_update_scale_async(current_stream(scale.device().index()), &update));
  return scale;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_amp_update_scale_", amp_update_scale_);
  m.impl("_fused_adam_", fused_adam<false>);
  m.impl("_fused_adamw_", fused_adam<true>);
  m.impl("_fused_adam_.tensor_lr", fused_adam_tensor_lr<false>);
  m.impl("_fused_adamw_.tensor_lr", fused_adam_tensor_lr<true>);
  m.impl("_fused_sgd_", fused_sgd);
  m.impl("_fused_sgd_.tensor_lr", fused_sgd_tensor_lr);
}

} // namespace torch_neuronx::ops
