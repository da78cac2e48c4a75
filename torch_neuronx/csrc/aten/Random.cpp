// normal_, uniform_, random_, multinomial, bernoulli_ and dropout (and so randn, rand,
// nn.init, sampling) drawn on the device from the neuron generator: the host reserves a
// Philox offset, the stream does the draw.
#include <ATen/MemoryOverlap.h>
#include <ATen/Utils.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/random.h>

#include "aten/OpTracking.h"
#include "aten/Ops.h"
#include "aten/TensorView.h"
#include "runtime/Functions.h"
#include "runtime/Generator.h"

namespace torch_neuronx::ops {
namespace {

std::pair<uint64_t, uint64_t> reserve(const at::Tensor& self, std::optional<at::Generator> gen) {
  return reserve_launch(self.device(), std::move(gen));
}

void check_floating(const at::Tensor& self, const char* op) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), op, " not implemented for '",
              self.scalar_type(), "'");
  at::assert_no_internal_overlap(self);
}

} // namespace

at::Tensor& normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  track_native("aten::normal_");
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  check_floating(self, "normal_kernel_cpu");
  if (self.numel() == 0) return self;
  auto [seed, offset] = reserve(self, gen);
  tn_tensor d = to_tn_view(self);
  check(tn_random_normal_async(current_stream(self.device().index()), &d, seed, offset, mean, std));
  return self;
}

at::Tensor& uniform_(at::Tensor& self, double from, double to, std::optional<at::Generator> gen) {
  track_native("aten::uniform_");
  check_floating(self, "check_uniform_bounds");
  TORCH_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=", from,
              " > to=", to);
  if (self.numel() == 0) return self;
  auto [seed, offset] = reserve(self, gen);
  tn_tensor d = to_tn_view(self);
  check(tn_random_uniform_async(current_stream(self.device().index()), &d, seed, offset, from, to));
  return self;
}

// random_(from, to): integers in [from, to); PyTorch's own range checks apply first.
at::Tensor& random_from_(at::Tensor& self, int64_t from, std::optional<int64_t> to, std::optional<at::Generator> gen) {
  if (!to.has_value() || !at::isIntegralType(self.scalar_type(), true) || self.scalar_type() == at::kBool)
    return at::native::call_fallback_fn<&cpu_fallback, at::_ops::random__from>::call(self, from, to, gen);
  TORCH_CHECK(from < *to, "random_ expects 'from' to be less than 'to', but got from=", from, " >= to=", *to);
  track_native("aten::random_.from");
  if (self.numel() == 0) return self;
  at::assert_no_internal_overlap(self);
  auto [seed, offset] = reserve(self, gen);
  tn_tensor d = to_tn_view(self);
  check(tn_random_int_async(current_stream(self.device().index()), &d, seed, offset, from,
                            static_cast<uint64_t>(*to) - static_cast<uint64_t>(from)));
  return self;
}

at::Tensor multinomial(const at::Tensor& self, int64_t n_sample, bool replacement,
                       std::optional<at::Generator> gen) {
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "prob_dist must be 1 or 2 dim");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "multinomial only supports floating-point dtypes for input, got: ",
              self.scalar_type());
  TORCH_CHECK(n_sample > 0, "cannot sample n_sample <= 0 samples");
  int64_t n = self.size(-1);
  TORCH_CHECK(replacement || n_sample <= n, "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  track_native("aten::multinomial");
  std::vector<int64_t> shape = self.sizes().vec();
  shape.back() = n_sample;
  at::Tensor out = at::empty(shape, self.options().dtype(at::kLong));
  if (out.numel() == 0) return out;
  auto [seed, offset] = reserve(self, gen);
  tn_tensor o = to_tn_view(out), p = to_tn_view(self);
  check(tn_random_multinomial_async(current_stream(self.device().index()), &o, &p, replacement, seed, offset));
  return out;
}

namespace {

at::Tensor& bernoulli_impl(at::Tensor& self, const at::Tensor* probs, double p, std::optional<at::Generator> gen) {
  at::assert_no_internal_overlap(self);
  if (self.numel() == 0) return self;
  auto [seed, offset] = reserve(self, gen);
  tn_tensor d = to_tn_view(self), pv = probs ? to_tn_view(*probs) : d;
  check(tn_random_bernoulli_async(current_stream(self.device().index()), &d, probs ? &pv : nullptr, p, seed, offset));
  return self;
}

at::Tensor& bernoulli_scalar_(at::Tensor& self, double p, std::optional<at::Generator> gen) {
  TORCH_CHECK(0 <= p && p <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", p);
  track_native("aten::bernoulli_.float");
  return bernoulli_impl(self, nullptr, p, gen);
}

at::Tensor& bernoulli_tensor_(at::Tensor& self, const at::Tensor& p, std::optional<at::Generator> gen) {
  TORCH_CHECK(at::isFloatingType(p.scalar_type()), "expected probabilities tensor to have floating type, got ",
              p.scalar_type());
  TORCH_CHECK(p.device() == self.device() || (p.dim() == 0 && p.device().is_cpu()),
              "Expected all tensors to be on the same device, but found at least two devices, ", self.device(),
              " and ", p.device(), "! (in bernoulli_)");
  track_native("aten::bernoulli_.Tensor");
  at::Tensor probs = p.to(self.device()).expand(self.sizes());
  return bernoulli_impl(self, &probs, 0.0, gen);
}

std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p, std::optional<bool> train) {
  TORCH_CHECK(0 <= p && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  track_native("aten::native_dropout");
  if (input.numel() == 0) return {input, at::empty_like(input, input.options().dtype(at::kBool))};
  if (train.has_value() && !*train) return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
  TORCH_CHECK(at::isFloatingType(input.scalar_type()), "dropout expects a floating-point input, got ",
              input.scalar_type());
  at::Tensor out = at::empty_like(input), mask = at::empty_like(input, input.options().dtype(at::kBool));
  auto [seed, offset] = reserve(input, std::nullopt);
  tn_tensor o = to_tn_view(out), m = to_tn_view(mask), x = to_tn_view(input);
  check(tn_dropout_async(current_stream(input.device().index()), &o, &m, &x, p, seed, offset));
  return {out, mask};
}

at::Tensor native_dropout_backward(const at::Tensor& grad, const at::Tensor& mask, double scale) {
  track_native("aten::native_dropout_backward");
  return at::mul(at::mul(grad, mask), scale);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("bernoulli_.float", bernoulli_scalar_);
  m.impl("bernoulli_.Tensor", bernoulli_tensor_);
  m.impl("native_dropout", native_dropout);
  m.impl("native_dropout_backward", native_dropout_backward);
}

} // namespace torch_neuronx::ops
