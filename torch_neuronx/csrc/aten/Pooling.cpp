// 2-D max pooling with indices (CNN backbones, CANINE's downsampling) and average pooling
// (PoolFormer's token mixer, DenseNet's transitions, Diffusers' downsampling without a
// convolution), with their backward: the CPU's argument checks (ATen's pooling shape helpers),
// then the C kernels (tn/pool.h) over contiguous planes.
#include <ATen/native/Pool.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/avg_pool2d.h>
#include <ATen/ops/avg_pool2d_backward.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/max_pool2d_with_indices.h>
#include <ATen/ops/max_pool2d_with_indices_backward.h>

#include "aten/FloatKernels.h"
#include "aten/Iter.h"
#include "aten/OpTracking.h"
#include "aten/TensorView.h"
#include "runtime/Functions.h"

namespace torch_neuronx::ops {
namespace {

using at::Tensor;

int64_t second(c10::IntArrayRef v) { return v.size() == 1 ? v[0] : v[1]; }

// The checked geometry of a max_pool2d or avg_pool2d (`op`) call on `self` (3-d or 4-d).
tn_pool2d pool_shape(const Tensor& self, c10::IntArrayRef kernel, c10::IntArrayRef stride,
                     c10::IntArrayRef padding, c10::IntArrayRef dilation, bool ceil_mode,
                     const char* op = "max_pool2d") {
  TORCH_CHECK(kernel.size() == 1 || kernel.size() == 2, op,
              ": kernel_size must either be a single int, or a tuple of two ints");
  TORCH_CHECK(stride.empty() || stride.size() == 1 || stride.size() == 2, op,
              ": stride must either be omitted, a single int, or a tuple of two ints");
  TORCH_CHECK(padding.size() == 1 || padding.size() == 2, op,
              ": padding must either be a single int, or a tuple of two ints");
  TORCH_CHECK(dilation.size() == 1 || dilation.size() == 2, op,
              ": dilation must be either a single int, or a tuple of two ints");
  TORCH_CHECK(self.dim() == 3 || self.dim() == 4, "non-empty 3D or 4D (batch mode) tensor expected for input");
  tn_pool2d s{};
  s.kernel_h = kernel[0], s.kernel_w = second(kernel);
  s.stride_h = stride.empty() ? s.kernel_h : stride[0];
  s.stride_w = stride.empty() ? s.kernel_w : second(stride);
  s.pad_h = padding[0], s.pad_w = second(padding);
  s.dilation_h = dilation[0], s.dilation_w = second(dilation);
  s.in_h = self.size(-2), s.in_w = self.size(-1);
  int64_t channels = self.size(-3);
  s.out_h = at::native::pooling_output_shape<int64_t>(s.in_h, s.kernel_h, s.pad_h, s.stride_h, s.dilation_h, ceil_mode);
  s.out_w = at::native::pooling_output_shape<int64_t>(s.in_w, s.kernel_w, s.pad_w, s.stride_w, s.dilation_w, ceil_mode);
  at::native::pool2d_shape_check(self, s.kernel_h, s.kernel_w, s.stride_h, s.stride_w, s.pad_h, s.pad_w,
                                 s.dilation_h, s.dilation_w, channels, s.in_h, s.in_w, s.out_h, s.out_w,
                                 at::MemoryFormat::Contiguous);
  s.planes = channels * (self.dim() == 4 ? self.size(0) : 1);
  return s;
}

std::vector<int64_t> out_sizes(const Tensor& self, const tn_pool2d& s) {
  std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().end() - 2);
  sizes.push_back(s.out_h);
  sizes.push_back(s.out_w);
  return sizes;
}

// `dst` itself when contiguous, else a contiguous tensor to compute into and copy back.
Tensor contiguous_target(const Tensor& dst) {
  return dst.is_contiguous() ? dst : at::empty(dst.sizes(), dst.options());
}

std::tuple<Tensor&, Tensor&> max_pool2d_with_indices_out(const Tensor& self, c10::IntArrayRef kernel,
                                                         c10::IntArrayRef stride, c10::IntArrayRef padding,
                                                         c10::IntArrayRef dilation, bool ceil_mode, Tensor& out,
                                                         Tensor& indices) {
  if (!float_kernel_dtype(self.scalar_type()) || out.scalar_type() != self.scalar_type() ||
      indices.scalar_type() != at::kLong)
    return via_fallback<at::_ops::max_pool2d_with_indices_out>(self, kernel, stride, padding, dilation, ceil_mode,
                                                               out, indices);
  tn_pool2d s = pool_shape(self, kernel, stride, padding, dilation, ceil_mode);
  track_native("aten::max_pool2d_with_indices.out");
  at::native::resize_output(out, out_sizes(self, s));
  at::native::resize_output(indices, out_sizes(self, s));
  if (out.numel() == 0) return {out, indices};
  Tensor in = self.contiguous(), o = contiguous_target(out), ind = contiguous_target(indices);
  check(tn_max_pool2d_async(current_stream(self.device().index()), &s, to_tn_dtype(self.scalar_type()),
                            o.data_ptr(), ind.data_ptr<int64_t>(), in.const_data_ptr()));
  if (!o.is_same(out)) out.copy_(o);
  if (!ind.is_same(indices)) indices.copy_(ind);
  return {out, indices};
}

Tensor& max_pool2d_with_indices_backward_out(const Tensor& grad_output, const Tensor& self, c10::IntArrayRef kernel,
                                             c10::IntArrayRef stride, c10::IntArrayRef padding,
                                             c10::IntArrayRef dilation, bool ceil_mode, const Tensor& indices,
                                             Tensor& grad_input) {
  if (!float_kernel_dtype(self.scalar_type()) || grad_output.scalar_type() != self.scalar_type() ||
      grad_input.scalar_type() != self.scalar_type() || indices.scalar_type() != at::kLong)
    return via_fallback<at::_ops::max_pool2d_with_indices_backward_grad_input>(
        grad_output, self, kernel, stride, padding, dilation, ceil_mode, indices, grad_input);
  tn_pool2d s = pool_shape(self, kernel, stride, padding, dilation, ceil_mode);
  TORCH_CHECK(grad_output.sizes() == c10::IntArrayRef(out_sizes(self, s)) && indices.sizes() == grad_output.sizes(),
              "max_pool2d_with_indices_backward: grad_output ", grad_output.sizes(), " and indices ",
              indices.sizes(), " must have the pooled size ", c10::IntArrayRef(out_sizes(self, s)));
  track_native("aten::max_pool2d_with_indices_backward.grad_input");
  at::native::resize_output(grad_input, self.sizes());
  if (grad_input.numel() == 0) return grad_input;
  Tensor go = grad_output.contiguous(), ind = indices.contiguous(), gi = contiguous_target(grad_input);
  check(tn_max_pool2d_backward_async(current_stream(self.device().index()), &s, to_tn_dtype(self.scalar_type()),
                                     gi.data_ptr(), go.const_data_ptr(), ind.const_data_ptr<int64_t>()));
  if (!gi.is_same(grad_input)) grad_input.copy_(gi);
  return grad_input;
}

// avg_pool2d's checks on top of the shared ones: a nonzero divisor.
tn_pool2d avg_shape(const Tensor& self, c10::IntArrayRef kernel, c10::IntArrayRef stride, c10::IntArrayRef padding,
                    bool ceil_mode, std::optional<int64_t> divisor) {
  TORCH_CHECK(!divisor.has_value() || divisor.value() != 0, "divisor must be not zero");
  return pool_shape(self, kernel, stride, padding, {1}, ceil_mode, "avg_pool2d");
}

Tensor& avg_pool2d_out(const Tensor& self, c10::IntArrayRef kernel, c10::IntArrayRef stride,
                       c10::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                       std::optional<int64_t> divisor, Tensor& out) {
  if ((!float_kernel_dtype(self.scalar_type()) && self.scalar_type() != at::kLong) ||
      out.scalar_type() != self.scalar_type())
    return via_fallback<at::_ops::avg_pool2d_out>(self, kernel, stride, padding, ceil_mode, count_include_pad,
                                                  divisor, out);
  tn_pool2d s = avg_shape(self, kernel, stride, padding, ceil_mode, divisor);
  track_native("aten::avg_pool2d.out");
  at::native::resize_output(out, out_sizes(self, s));
  if (out.numel() == 0) return out;
  Tensor in = self.contiguous(), o = contiguous_target(out);
  check(tn_avg_pool2d_async(current_stream(self.device().index()), &s, count_include_pad, divisor.value_or(0),
                            to_tn_dtype(self.scalar_type()), o.data_ptr(), in.const_data_ptr()));
  if (!o.is_same(out)) out.copy_(o);
  return out;
}

Tensor& avg_pool2d_backward_out(const Tensor& grad_output, const Tensor& self, c10::IntArrayRef kernel,
                                c10::IntArrayRef stride, c10::IntArrayRef padding, bool ceil_mode,
                                bool count_include_pad, std::optional<int64_t> divisor, Tensor& grad_input) {
  if (!float_kernel_dtype(self.scalar_type()) || grad_output.scalar_type() != self.scalar_type() ||
      grad_input.scalar_type() != self.scalar_type())
    return via_fallback<at::_ops::avg_pool2d_backward_grad_input>(grad_output, self, kernel, stride, padding,
                                                                  ceil_mode, count_include_pad, divisor, grad_input);
  tn_pool2d s = avg_shape(self, kernel, stride, padding, ceil_mode, divisor);
  TORCH_CHECK(grad_output.sizes() == c10::IntArrayRef(out_sizes(self, s)), "avg_pool2d_backward: grad_output ",
              grad_output.sizes(), " must have the pooled size ", c10::IntArrayRef(out_sizes(self, s)));
  track_native("aten::avg_pool2d_backward.grad_input");
  at::native::resize_output(grad_input, self.sizes());
  if (grad_input.numel() == 0) return grad_input;
  Tensor go = grad_output.contiguous(), gi = contiguous_target(grad_input);
  check(tn_avg_pool2d_backward_async(current_stream(self.device().index()), &s, count_include_pad,
                                     divisor.value_or(0), to_tn_dtype(self.scalar_type()), gi.data_ptr(),
                                     go.const_data_ptr()));
  if (!gi.is_same(grad_input)) grad_input.copy_(gi);
  return grad_input;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("avg_pool2d.out", avg_pool2d_out);
  m.impl("avg_pool2d_backward.grad_input", avg_pool2d_backward_out);
  m.impl("max_pool2d_with_indices.out", max_pool2d_with_indices_out);
  m.impl("max_pool2d_with_indices_backward.grad_input", max_pool2d_with_indices_backward_out);
}

} // namespace torch_neuronx::ops
