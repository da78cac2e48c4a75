// Convolutions (conv1d / conv2d, grouped and depthwise, strided, dilated, padded) as im2col on
// native ops: pad, unfold (a view), one batched GEMM per group, bias. Registered at the
// autograd level, so the backward is that of the ops it is made of (unfold's backward and the
// GEMM's) and needs no kernel of its own. Transposed and 3-D convolutions are refused with a
// clear error.
#include <ATen/ops/add.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/matmul.h>
#include <torch/library.h>

#include "aten/OpTracking.h"

namespace torch_neuronx::ops {
namespace {

using at::Tensor;

Tensor convolution(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                   c10::SymIntArrayRef stride_s, c10::SymIntArrayRef padding_s, c10::SymIntArrayRef dilation_s,
                   bool transposed, c10::SymIntArrayRef output_padding, c10::SymInt groups_s) {
  auto stride = C10_AS_INTARRAYREF_SLOW(stride_s);
  auto padding = C10_AS_INTARRAYREF_SLOW(padding_s);
  auto dilation = C10_AS_INTARRAYREF_SLOW(dilation_s);
  int64_t groups = groups_s.expect_int();
  int64_t spatial = weight.dim() - 2;
  TORCH_CHECK_NOT_IMPLEMENTED(!transposed && (spatial == 1 || spatial == 2),
                              "neuron runs 1-D and 2-D convolutions; transposed and 3-D ones are not supported yet");
  bool batched = input.dim() == weight.dim();
  Tensor x = batched ? input : input.unsqueeze(0);
  TORCH_CHECK(x.dim() == weight.dim(), "Expected ", weight.dim() - 1, "D (unbatched) or ", weight.dim(),
              "D (batched) input to conv", spatial, "d, but got input of size: ", input.sizes());
  int64_t n = x.size(0), c = x.size(1), o = weight.size(0);
  TORCH_CHECK(groups > 0 && c % groups == 0 && o % groups == 0 && weight.size(1) * groups == c,
              "Given groups=", groups, ", weight of size ", weight.sizes(), ", expected input", x.sizes(), " to have ",
              weight.size(1) * groups, " channels, but got ", c, " channels instead");
  TORCH_CHECK(x.scalar_type() == weight.scalar_type(), "Input type (", x.scalar_type(), ") and weight type (",
              weight.scalar_type(), ") should be the same");
  track_native("aten::convolution");
  auto at_or_last = [](at::IntArrayRef v, int64_t i) { return v.size() == 1 ? v[0] : v[i]; };
  // zero padding (pad lists the last dimension first)
  std::vector<int64_t> pads;
  for (int64_t d = spatial - 1; d >= 0; d--) {
    int64_t p = at_or_last(padding, d);
    pads.push_back(p);
    pads.push_back(p);
  }
  Tensor cols = at::constant_pad_nd(x, pads, 0);
  // unfold every spatial dimension: (N, C, out..., window...), then keep every dilation-th tap
  std::vector<int64_t> out_sizes;
  for (int64_t d = 0; d < spatial; d++) {
    int64_t k = weight.size(2 + d), dil = at_or_last(dilation, d), st = at_or_last(stride, d);
    int64_t span = (k - 1) * dil + 1;
    TORCH_CHECK(cols.size(2 + d) >= span, "Calculated padded input size per channel: (", cols.size(2 + d),
                "). Kernel size: (", span, "). Kernel size can't be greater than actual input size");
    cols = cols.unfold(2 + d, span, st);
    if (dil > 1) cols = cols.slice(-1, 0, c10::nullopt, dil);
    out_sizes.push_back(cols.size(2 + d));
  }
  // (N, C, out..., taps...) -> (N, G, out, C/G * taps)
  int64_t cg = c / groups, og = o / groups, taps = 1, positions = 1;
  for (int64_t d = 0; d < spatial; d++) taps *= weight.size(2 + d);
  for (int64_t s : out_sizes) positions *= s;
  cols = cols.reshape({n, groups, cg, positions, taps}).transpose(2, 3).reshape({n, groups, positions, cg * taps});
  Tensor w = weight.reshape({groups, og, cg * taps}).transpose(1, 2);  // (G, C/G * taps, O/G)
  Tensor out = at::matmul(cols, w);                                   // (N, G, positions, O/G)
  out = out.permute({0, 1, 3, 2}).reshape({n, o, positions});
  if (bias && bias->defined()) out = at::add(out, bias->reshape({1, o, 1}));
  std::vector<int64_t> shape = {n, o};
  shape.insert(shape.end(), out_sizes.begin(), out_sizes.end());
  out = out.reshape(shape);
  return batched ? out : out.squeeze(0);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("convolution", convolution);
}

// Below autograd (torch.inference_mode) the same composition serves the backend's hook.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", convolution);
}

} // namespace torch_neuronx::ops
