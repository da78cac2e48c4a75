// Convolutions (1-D, 2-D and 3-D; grouped and depthwise, strided, dilated, padded) as im2col
// on native ops: ungrouped floating 2-D ones through the native im2col op, the others
// through pad, unfold (a view) and a copy; then one batched GEMM per group, bias inside.
// Registered at the autograd level, so the backward is that of the ops it is made of (col2im
// or unfold's backward, and the GEMM's) and needs no kernel of its own.
//
// Transposed convolutions, in one of three forms:
//   - every kernel size equals its stride, with no padding or dilation (the 2x2 stride-2
//     upsampling of DPT's and SAM's necks, a tubelet's inverse): outputs do not overlap, and
//     it is one GEMM per group whose result is rearranged;
//   - other floating 1-D and 2-D ones: a GEMM gives every input position's contribution to
//     each tap, and col2im (native, aten/Fold.cpp) adds them into the output;
//   - 3-D and integer ones: the forward convolution of a zero-stuffed input (stride - 1 zeros
//     between input elements, dilation * (k - 1) - padding on each side, output_padding more
//     at the end, a negative pad cropping), the weight's channel axes swapped per group and
//     its taps flipped, stride 1. It multiplies the zeros (stride^dims times the work).
#include <ATen/ops/add.h>
#include <ATen/ops/baddbmm.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/col2im.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/flip.h>
#include <ATen/ops/im2col.h>
#include <ATen/ops/matmul.h>
#include <torch/library.h>

#include "aten/OpTracking.h"

namespace torch_neuronx::ops {
namespace {

using at::Tensor;

int64_t at_or_last(at::IntArrayRef v, int64_t i) { return v.size() == 1 ? v[0] : v[i]; }

// (G, R, K) @ (G, K, M) -> (G, R, M), with bias rows (G, 1, M) added inside the product, so
// that 16-bit results are rounded once, as the CPU's convolutions round them.
Tensor grouped_product(const Tensor& rows, const Tensor& w, const std::optional<Tensor>& bias_rows) {
  return bias_rows ? at::baddbmm(*bias_rows, rows, w) : at::bmm(rows, w);
}

// An ungrouped floating 2-D convolution: native im2col, then one product, the bias added inside
// it, in the orientation that suits the shape (measured on Zen 4, 2 threads):
// - more output positions L than output channels O (a VAE's decoder, a UNet at full size):
//   out = W columns, (N, O, L), the output's own layout; both operands read in place. The
//   other orientation read columns^T with a stride along k: a 128-channel 3x3 convolution at
//   64x64 took 6.1 against 3.1 ms in bfloat16 (7.7 against 5.9 in float32), plus a copy to
//   transpose its output.
// - otherwise (a UNet's low-resolution levels: L = 16 positions, 256 channels): out^T =
//   columns^T W^T, with W^T a view of the weight itself, so that the GEMM keeps its packed copy
//   between calls (0.31 against 0.77 ms with W as the rows).
// im2col's backward is col2im, which reads the columns' gradient as is.
Tensor columns_conv2d(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias,
                      at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation) {
  int64_t n = x.size(0), o = weight.size(0), kh = weight.size(2), kw = weight.size(3);
  std::vector<int64_t> st = {at_or_last(stride, 0), at_or_last(stride, 1)},
                       pad = {at_or_last(padding, 0), at_or_last(padding, 1)},
                       dil = {at_or_last(dilation, 0), at_or_last(dilation, 1)}, out_hw;
  for (int64_t d = 0; d < 2; d++) {
    int64_t span = (weight.size(2 + d) - 1) * dil[d] + 1, padded = x.size(2 + d) + 2 * pad[d];
    TORCH_CHECK(padded >= span, "Calculated padded input size per channel: (", padded, "). Kernel size: (", span,
                "). Kernel size can't be greater than actual input size");
    out_hw.push_back((padded - span) / st[d] + 1);
  }
  Tensor cols = at::im2col(x, {kh, kw}, dil, pad, st);            // (N, C * kh * kw, L)
  Tensor w = weight.reshape({o, -1});                             // (O, C * kh * kw), a view
  bool has_bias = bias && bias->defined();
  if (out_hw[0] * out_hw[1] >= o) {
    std::optional<Tensor> b;
    if (has_bias) b = bias->reshape({1, o, 1});
    Tensor out = grouped_product(w.expand({n, o, w.size(1)}), cols, b);  // (N, O, L)
    return out.view({n, o, out_hw[0], out_hw[1]});
  }
  std::optional<Tensor> b;
  if (has_bias) b = bias->reshape({1, 1, o});
  Tensor wt = w.t();                                              // (C * kh * kw, O)
  Tensor out = grouped_product(cols.transpose(1, 2), wt.expand({n, wt.size(0), o}), b);  // (N, L, O)
  return out.transpose(1, 2).reshape({n, o, out_hw[0], out_hw[1]});  // (N, O, OH, OW)
}

// A batched convolution (x has the batch dimension; shapes checked by the caller).
Tensor forward_conv(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias, at::IntArrayRef stride,
                    at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  int64_t spatial = weight.dim() - 2;
  int64_t n = x.size(0), c = x.size(1), o = weight.size(0);
  if (spatial == 2 && groups == 1 && at::isFloatingType(x.scalar_type()))
    return columns_conv2d(x, weight, bias, stride, padding, dilation);
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
  // The columns are copied out of the unfolded view in one of two orders, whichever has the
  // longer contiguous rows: (G, N * out, C/G * taps), rows along the last kernel dimension
  // (patch embeddings: kernel 14, one output position per patch row), or (G, taps * C/G,
  // N * out), rows along the last output dimension (a 3x3 convolution at stride 1, whose
  // 3-element rows in the first order took 5x the GEMM's time). The product reads the second
  // transposed, and the weight's columns follow the same order.
  int64_t cg = c / groups, og = o / groups, taps = 1, positions = 1;
  for (int64_t d = 0; d < spatial; d++) taps *= weight.size(2 + d);
  for (int64_t s : out_sizes) positions *= s;
  bool taps_outer = at_or_last(stride, spatial - 1) == 1 && out_sizes.back() > weight.size(-1);
  Tensor w;
  if (taps_outer) {
    std::vector<int64_t> split = {n, groups, cg}, perm = {1}, wsplit = {groups, og, cg}, wperm = {0};
    for (int64_t d = 0; d < spatial; d++) split.push_back(out_sizes[d]);
    for (int64_t d = 0; d < spatial; d++) {
      split.push_back(weight.size(2 + d));
      wsplit.push_back(weight.size(2 + d));
      perm.push_back(3 + spatial + d);
      wperm.push_back(3 + d);
    }
    perm.insert(perm.end(), {2, 0});
    for (int64_t d = 0; d < spatial; d++) perm.push_back(3 + d);
    wperm.insert(wperm.end(), {2, 1});
    cols = cols.reshape(split).permute(perm).reshape({groups, taps * cg, n * positions}).transpose(1, 2);
    w = weight.reshape(wsplit).permute(wperm).reshape({groups, taps * cg, og});  // (G, taps * C/G, O/G)
  } else {
    cols = cols.reshape({n, groups, cg, positions, taps}).permute({1, 0, 3, 2, 4}).reshape({groups, n * positions, cg * taps});
    w = weight.reshape({groups, og, cg * taps}).transpose(1, 2);  // (G, C/G * taps, O/G)
  }
  std::optional<Tensor> b;
  if (bias && bias->defined()) b = bias->reshape({groups, 1, og});
  Tensor out = grouped_product(cols, w, b);  // (G, N * out, O/G)
  out = out.reshape({groups, n, positions, og}).permute({1, 0, 3, 2}).reshape({n, o, positions});
  std::vector<int64_t> shape = {n, o};
  shape.insert(shape.end(), out_sizes.begin(), out_sizes.end());
  return out.reshape(shape);
}

// x with stride - 1 zeros after each element of dimension `dim` but the last.
Tensor stuff_zeros(const Tensor& x, int64_t dim, int64_t stride) {
  int64_t len = x.size(dim);
  std::vector<int64_t> pads(2 * (x.dim() - dim), 0);  // the new axis after dim: (0, stride - 1)
  pads[pads.size() - 1] = stride - 1;
  Tensor y = at::constant_pad_nd(x.unsqueeze(dim + 1), pads, 0);
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape[dim] = len * stride;
  return y.reshape(shape).narrow(dim, 0, (len - 1) * stride + 1);
}

// A batched 1-D or 2-D transposed convolution as a product and an overlap-add: each input
// position's row times the weight gives its contribution to every tap (no zeros multiplied),
// and col2im adds the taps into the output (a 1-D one as a plane of height 1). 16-bit inputs
// are multiplied and added in float32 and rounded once, bias included, as the CPU's kernel
// rounds them. An output padding of a stride or more (allowed below the dilation) gives an
// output col2im's geometry cannot describe: then col2im fills the whole uncropped output and
// the padding is cropped, and the output padding added, afterwards.
Tensor overlap_add_conv(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias,
                        at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                        at::IntArrayRef output_padding, int64_t groups) {
  int64_t spatial = weight.dim() - 2, n = x.size(0), c = x.size(1), og = weight.size(1), o = og * groups;
  int64_t cg = c / groups;
  bool half = x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kHalf;
  Tensor x2 = spatial == 1 ? x.unsqueeze(2) : x;            // (N, C, H, W)
  Tensor w2 = spatial == 1 ? weight.unsqueeze(2) : weight;  // (C, O/G, kh, kw)
  if (half) x2 = x2.to(at::kFloat), w2 = w2.to(at::kFloat);
  auto pick = [&](at::IntArrayRef v, int64_t d, int64_t unit) {  // d of the plane: 0 rows, 1 columns
    return spatial == 1 ? (d == 0 ? unit : at_or_last(v, 0)) : at_or_last(v, d);
  };
  std::vector<int64_t> k = {w2.size(2), w2.size(3)}, st = {pick(stride, 0, 1), pick(stride, 1, 1)},
                       pad = {pick(padding, 0, 0), pick(padding, 1, 0)},
                       dil = {pick(dilation, 0, 1), pick(dilation, 1, 1)}, op, size, full;
  bool direct = true;
  for (int64_t d = 0; d < 2; d++) {
    op.push_back(output_padding.empty() ? 0 : pick(output_padding, d, 0));
    size.push_back((x2.size(2 + d) - 1) * st[d] - 2 * pad[d] + dil[d] * (k[d] - 1) + 1 + op[d]);
    full.push_back((x2.size(2 + d) - 1) * st[d] + dil[d] * (k[d] - 1) + 1);
    direct = direct && op[d] < st[d];
  }
  int64_t positions = x2.size(2) * x2.size(3), taps = k[0] * k[1];
  Tensor rows = x2.reshape({n, groups, cg, positions}).transpose(2, 3);                   // (N, G, L, C/G)
  Tensor prod = at::matmul(rows, w2.reshape({groups, cg, og * taps}));                   // (N, G, L, O/G * taps)
  Tensor cols = prod.transpose(2, 3).reshape({n, o * taps, positions});  // a strided view when G == 1
  Tensor out;
  if (direct) {
    out = at::col2im(cols, size, k, dil, pad, st);  // (N, O, H_out, W_out)
  } else {
    std::vector<int64_t> none = {0, 0};
    out = at::constant_pad_nd(at::col2im(cols, full, k, dil, none, st),
                              {-pad[1], size[1] + pad[1] - full[1], -pad[0], size[0] + pad[0] - full[0]}, 0);
  }
  if (bias && bias->defined()) out = at::add(out, (half ? bias->to(at::kFloat) : *bias).reshape({1, o, 1, 1}));
  if (half) out = out.to(x.scalar_type());
  return spatial == 1 ? out.squeeze(2) : out;
}

// A batched transposed convolution; weight is (C_in, C_out / groups, k...).
Tensor transposed_conv(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias,
                       at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                       at::IntArrayRef output_padding, int64_t groups) {
  int64_t spatial = weight.dim() - 2, n = x.size(0), c = x.size(1), og = weight.size(1), o = og * groups;
  int64_t cg = c / groups;
  bool disjoint = true;  // kernel == stride, no padding, dilation or output padding
  for (int64_t d = 0; d < spatial; d++)
    disjoint = disjoint && weight.size(2 + d) == at_or_last(stride, d) && at_or_last(padding, d) == 0 &&
               at_or_last(dilation, d) == 1 && (output_padding.empty() || at_or_last(output_padding, d) == 0);
  if (disjoint) {
    int64_t taps = 1, positions = 1;
    for (int64_t d = 0; d < spatial; d++) taps *= weight.size(2 + d), positions *= x.size(2 + d);
    Tensor rows = x.reshape({n, groups, cg, positions}).permute({1, 0, 3, 2}).reshape({groups, n * positions, cg});
    std::optional<Tensor> b;  // each channel's bias repeated over its taps
    if (bias && bias->defined()) b = bias->reshape({groups, og, 1}).expand({groups, og, taps}).reshape({groups, 1, og * taps});
    Tensor out = grouped_product(rows, weight.reshape({groups, cg, og * taps}), b);  // (G, N * in, O/G * taps)
    // (G, N, in..., O/G, k...) -> (N, G, O/G, in_0, k_0, in_1, k_1, ...)
    std::vector<int64_t> shape = {groups, n}, perm = {1, 0, 2 + spatial}, final_shape = {n, o};
    for (int64_t d = 0; d < spatial; d++) shape.push_back(x.size(2 + d));
    shape.push_back(og);
    for (int64_t d = 0; d < spatial; d++) shape.push_back(weight.size(2 + d));
    for (int64_t d = 0; d < spatial; d++) {
      perm.push_back(2 + d);
      perm.push_back(3 + spatial + d);
      final_shape.push_back(x.size(2 + d) * weight.size(2 + d));
    }
    return out.reshape(shape).permute(perm).reshape(final_shape);
  }
  if (spatial <= 2 && at::isFloatingType(x.scalar_type()))
    return overlap_add_conv(x, weight, bias, stride, padding, dilation, output_padding, groups);
  Tensor y = x;
  std::vector<int64_t> pads;  // pad lists the last dimension first
  for (int64_t d = spatial - 1; d >= 0; d--) {
    int64_t st = at_or_last(stride, d), edge = at_or_last(dilation, d) * (weight.size(2 + d) - 1) - at_or_last(padding, d);
    if (st > 1) y = stuff_zeros(y, 2 + d, st);
    pads.push_back(edge);
    pads.push_back(edge + (output_padding.empty() ? 0 : at_or_last(output_padding, d)));
  }
  y = at::constant_pad_nd(y, pads, 0);
  // (C_in, C_out/G, k...) -> (G, C_out/G, C_in/G, k...) -> (C_out, C_in/G, k...), taps flipped
  std::vector<int64_t> wshape = {groups, cg, og}, flat = {o, cg}, dims;
  for (int64_t d = 0; d < spatial; d++) {
    wshape.push_back(weight.size(2 + d));
    flat.push_back(weight.size(2 + d));
    dims.push_back(2 + d);
  }
  Tensor w = at::flip(weight.reshape(wshape).transpose(1, 2).reshape(flat), dims);
  std::vector<int64_t> ones(spatial, 1), zeros(spatial, 0);
  return forward_conv(y, w, bias, ones, zeros, dilation, groups);
}

Tensor convolution(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                   c10::SymIntArrayRef stride_s, c10::SymIntArrayRef padding_s, c10::SymIntArrayRef dilation_s,
                   bool transposed, c10::SymIntArrayRef output_padding_s, c10::SymInt groups_s) {
  auto stride = C10_AS_INTARRAYREF_SLOW(stride_s);
  auto padding = C10_AS_INTARRAYREF_SLOW(padding_s);
  auto dilation = C10_AS_INTARRAYREF_SLOW(dilation_s);
  auto output_padding = C10_AS_INTARRAYREF_SLOW(output_padding_s);
  int64_t groups = groups_s.expect_int();
  int64_t spatial = weight.dim() - 2;
  TORCH_CHECK_NOT_IMPLEMENTED(spatial >= 1 && spatial <= 3, "neuron runs 1-D, 2-D and 3-D convolutions, not ",
                              spatial, "-D ones (weight of size ", weight.sizes(), ")");
  bool batched = input.dim() == weight.dim();
  Tensor x = batched ? input : input.unsqueeze(0);
  const char* kind = transposed ? "conv_transpose" : "conv";
  TORCH_CHECK(x.dim() == weight.dim(), "Expected ", weight.dim() - 1, "D (unbatched) or ", weight.dim(),
              "D (batched) input to ", kind, spatial, "d, but got input of size: ", input.sizes());
  int64_t c = x.size(1), o = transposed ? weight.size(1) * groups : weight.size(0);
  int64_t weight_in = transposed ? weight.size(0) : weight.size(1) * groups;
  TORCH_CHECK(groups > 0 && c % groups == 0 && o % groups == 0 && weight_in == c, "Given ",
              transposed ? "transposed=1, " : "", "groups=", groups, ", weight of size ", weight.sizes(),
              ", expected input", x.sizes(), " to have ", weight_in, " channels, but got ", c, " channels instead");
  TORCH_CHECK(x.scalar_type() == weight.scalar_type(), "Input type (", x.scalar_type(), ") and weight type (",
              weight.scalar_type(), ") should be the same");
  TORCH_CHECK(!bias || !bias->defined() || (bias->dim() == 1 && bias->size(0) == o), "Given weight of size ",
              weight.sizes(), ", expected bias to be 1-dimensional with ", o, " elements, but got bias of size ",
              bias->sizes(), " instead");
  for (int64_t d = 0; d < spatial; d++) {
    TORCH_CHECK(at_or_last(stride, d) > 0 && at_or_last(dilation, d) > 0 && at_or_last(padding, d) >= 0,
                kind, spatial, "d: stride and dilation must be positive and padding non-negative");
    if (!transposed) continue;
    int64_t op = output_padding.empty() ? 0 : at_or_last(output_padding, d);
    TORCH_CHECK(op >= 0 && (op < at_or_last(stride, d) || op < at_or_last(dilation, d)),
                "output padding must be smaller than either stride or dilation, but got output_padding=",
                output_padding, ", stride=", stride, ", dilation=", dilation);
    int64_t size = (x.size(2 + d) - 1) * at_or_last(stride, d) - 2 * at_or_last(padding, d) +
                   at_or_last(dilation, d) * (weight.size(2 + d) - 1) + op + 1;
    TORCH_CHECK(size > 0, "Given input size per channel: ", x.sizes().slice(2), ". Calculated output size: ", size,
                " in dimension ", d, ". Output size is too small");
  }
  track_native("aten::convolution");
  Tensor out = transposed ? transposed_conv(x, weight, bias, stride, padding, dilation, output_padding, groups)
                          : forward_conv(x, weight, bias, stride, padding, dilation, groups);
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
