// scaled_dot_product_attention on the fused C kernel: PrivateUse1's SDPA choice picks the
// "overrideable" backend, whose forward and backward ops land here. Cases the kernel does not
// take (a bias that needs its own gradient, other dtypes or ranks) choose the math path, which
// runs natively as matmul + softmax + matmul. Dropout runs inside the kernel: the forward
// reserves one launch of the device generator, returns its (seed, offset) as CPU scalars, and
// the backward draws the same mask from them.
#include <ATen/Context.h>
#include <ATen/SDPBackend.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_fused_sdp_choice.h>
#include <ATen/ops/_scaled_dot_product_fused_attention_overrideable.h>
#include <ATen/ops/_scaled_dot_product_fused_attention_overrideable_backward.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/where.h>

#include <torch/library.h>

#include <cmath>

#include "aten/OpTracking.h"
#include "aten/TensorView.h"
#include "runtime/Functions.h"
#include "runtime/Generator.h"

namespace torch_neuronx::ops {
namespace {

using at::Tensor;

bool kernel_dtype(c10::ScalarType t) {
  return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf;
}

int64_t fused_sdp_choice(const Tensor& q, const Tensor& k, const Tensor& v, const std::optional<Tensor>& mask,
                         double dropout_p, bool is_causal, std::optional<double> scale, bool enable_gqa) {
  // torch.nn.attention.sdpa_kernel(...) switches the fused ("overrideable") backend off
  bool ok = at::globalContext().userEnabledOverrideableSDP() && q.dim() == 4 && k.dim() == 4 && v.dim() == 4 && kernel_dtype(q.scalar_type()) &&
            k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type() &&
            q.size(0) == k.size(0) && k.size(0) == v.size(0) && k.size(1) == v.size(1) && k.size(2) == v.size(2) &&
            q.size(3) == k.size(3) && k.size(1) > 0 && q.size(1) % k.size(1) == 0 &&
            (q.size(1) == k.size(1) || enable_gqa) && !(mask && mask->defined() && mask->requires_grad());
  if (ok && mask && mask->defined()) {
    ok = mask->dim() <= 4 && (mask->scalar_type() == at::kBool || at::isFloatingType(mask->scalar_type()));
    for (int64_t d = 1; ok && d <= mask->dim(); d++) {
      int64_t want = d == 1 ? k.size(2) : d == 2 ? q.size(2) : d == 3 ? q.size(1) : q.size(0);
      ok = mask->size(-d) == want || mask->size(-d) == 1;
    }
  }
  return static_cast<int64_t>(ok ? at::SDPBackend::overrideable : at::SDPBackend::math);
}

double scale_of(const Tensor& q, std::optional<double> scale) {
  return scale ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(3)));
}

// The mask as an additive (B, Hq, L, S) view: booleans become 0 / -inf.
Tensor bias_view(const std::optional<Tensor>& mask, const Tensor& q, const Tensor& k) {
  if (!mask || !mask->defined()) return Tensor();
  Tensor b = *mask;
  if (b.scalar_type() == at::kBool)
    b = at::where(b, at::scalar_tensor(0.0, q.options()), at::scalar_tensor(-INFINITY, q.options()));
  return b.expand({q.size(0), q.size(1), q.size(2), k.size(2)});
}

tn_attention describe(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                      const Tensor& bias, bool is_causal, double scale, double dropout_p, uint64_t seed,
                      uint64_t offset) {
  tn_attention a{};
  a.q = to_tn_view(q);
  a.k = to_tn_view(k);
  a.v = to_tn_view(v);
  a.out = to_tn_view(out);
  a.lse = to_tn_view(lse);
  a.has_bias = bias.defined();
  if (a.has_bias) a.bias = to_tn_view(bias);
  a.causal = is_causal;
  a.scale = scale;
  a.dropout_p = dropout_p;
  a.seed = seed;
  a.offset = offset;
  return a;
}

std::tuple<Tensor, Tensor, Tensor, Tensor, c10::SymInt, c10::SymInt, Tensor, Tensor, Tensor> attention_forward(
    const Tensor& q, const Tensor& k, const Tensor& v, const std::optional<Tensor>& attn_bias, double dropout_p,
    bool is_causal, bool return_debug_mask, std::optional<double> scale) {
  TORCH_CHECK(0.0 <= dropout_p && dropout_p <= 1.0, "dropout probability has to be between 0 and 1, but got ",
              dropout_p);
  track_native("aten::_scaled_dot_product_fused_attention_overrideable");
  int64_t B = q.size(0), H = q.size(1), L = q.size(2), S = k.size(2);
  // laid out (B, L, H, E) as PyTorch's meta function says, so that the usual
  // out.transpose(1, 2).view(B, L, H * E) of a compiled graph needs no copy
  Tensor out = at::empty({B, L, H, v.size(3)}, q.options()).transpose(1, 2);
  Tensor lse = at::empty({B, H, L}, q.options().dtype(at::kFloat));
  Tensor bias = bias_view(attn_bias, q, k);
  auto [seed, offset] = dropout_p > 0 ? reserve_launch(q.device()) : std::pair<uint64_t, uint64_t>{0, 0};
  tn_attention a = describe(q, k, v, out, lse, bias, is_causal, scale_of(q, scale), dropout_p, seed, offset);
  tn_stream_t stream = current_stream(q.device().index());
  check(tn_attention_forward_async(stream, "aten::_scaled_dot_product_fused_attention_overrideable", &a));
  // The debug mask is 1 where a probability was kept: the dropout kernel's mask for the same
  // launch (tn/attention.h), which numbers the (B, H, L, S) probabilities alike.
  Tensor debug_mask;
  if (return_debug_mask) {
    debug_mask = at::ones({B, H, L, S}, q.options());
    if (dropout_p > 0) {
      Tensor kept = at::empty({B, H, L, S}, q.options().dtype(at::kBool)), scaled = at::empty_like(debug_mask);
      tn_tensor m = to_tn_view(kept), o = to_tn_view(scaled), x = to_tn_view(debug_mask);
      check(tn_dropout_async(stream, &o, &m, &x, dropout_p, seed, offset));
      debug_mask = kept.to(q.scalar_type());
    }
  }
  auto cpu_long = at::TensorOptions().dtype(at::kLong);
  return {out,  lse, Tensor(), Tensor(), c10::SymInt(L), c10::SymInt(S),
          at::scalar_tensor(static_cast<int64_t>(seed), cpu_long), at::scalar_tensor(static_cast<int64_t>(offset), cpu_long),
          debug_mask};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> attention_backward(
    const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_bias,
    std::array<bool, 4> grad_input_mask, const Tensor& out, const Tensor& lse, const Tensor& cum_seq_q,
    const Tensor& cum_seq_k, int64_t max_q, int64_t max_k, double dropout_p, bool is_causal,
    const Tensor& philox_seed, const Tensor& philox_offset, std::optional<double> scale) {
  TORCH_CHECK(0.0 <= dropout_p && dropout_p <= 1.0, "dropout probability has to be between 0 and 1, but got ",
              dropout_p);
  TORCH_CHECK(dropout_p == 0.0 || (philox_seed.defined() && philox_seed.numel() == 1 && philox_offset.defined() &&
                                   philox_offset.numel() == 1),
              "attention backward with dropout needs the forward's philox_seed and philox_offset");
  TORCH_CHECK(!grad_input_mask[3], "neuron's fused attention computes no gradient for the attention mask");
  track_native("aten::_scaled_dot_product_fused_attention_overrideable_backward");
  auto f32 = q.options().dtype(at::kFloat);
  Tensor dq = at::empty(q.sizes(), f32), dk = at::empty(k.sizes(), f32), dv = at::empty(v.sizes(), f32);
  Tensor bias = bias_view(attn_bias.defined() ? std::optional<Tensor>(attn_bias) : std::nullopt, q, k);
  Tensor g = grad_out.scalar_type() == q.scalar_type() ? grad_out : grad_out.to(q.scalar_type());
  uint64_t seed = 0, offset = 0;
  if (dropout_p > 0) {
    seed = static_cast<uint64_t>(philox_seed.item<int64_t>());
    offset = static_cast<uint64_t>(philox_offset.item<int64_t>());
  }
  tn_attention a = describe(q, k, v, out, lse, bias, is_causal, scale_of(q, scale), dropout_p, seed, offset);
  a.grad_out = to_tn_view(g);
  a.dq = dq.data_ptr<float>();
  a.dk = dk.data_ptr<float>();
  a.dv = dv.data_ptr<float>();
  check(tn_attention_backward_async(current_stream(q.device().index()),
                                    "aten::_scaled_dot_product_fused_attention_overrideable_backward", &a));
  auto back = [&](const Tensor& t) { return t.to(q.scalar_type()); };
  return {grad_input_mask[0] ? back(dq) : Tensor(), grad_input_mask[1] ? back(dk) : Tensor(),
          grad_input_mask[2] ? back(dv) : Tensor(), Tensor()};
}

} // namespace

// scaled_dot_product_attention asks this stub (not the dispatcher) which backend to use.
namespace {
int64_t fused_sdp_choice_stub_fn(const Tensor& q, const Tensor& k, const Tensor& v, const std::optional<Tensor>& mask,
                                 double dropout_p, bool is_causal, std::optional<double> scale, bool enable_gqa) {
  return fused_sdp_choice(q, k, v, mask, dropout_p, is_causal, scale, enable_gqa);
}
} // namespace
} // namespace torch_neuronx::ops

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_neuronx::ops::fused_sdp_choice_stub_fn)
} // namespace at::native

namespace torch_neuronx::ops {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_sdp_choice", fused_sdp_choice);
  m.impl("_scaled_dot_product_fused_attention_overrideable", attention_forward);
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward", attention_backward);
}

} // namespace torch_neuronx::ops
