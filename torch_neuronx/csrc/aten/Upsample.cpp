// 2-D nearest, nearest-exact, bilinear and bicubic upsampling (F.interpolate: Diffusers' UNet
// up blocks, SegFormer and DPT heads, feature pyramids, ViT's and CLIP's position embeddings
// interpolated to another image size) and their input gradients: the CPU's checks and
// dtypes, then the C kernel (tn/upsample.h) over contiguous planes. Outputs keep the input's
// memory format, as on the CPU.
#include <ATen/native/UpSample.h>
#include <ATen/ops/_upsample_nearest_exact2d.h>
#include <ATen/ops/_upsample_nearest_exact2d_backward.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/upsample_bicubic2d.h>
#include <ATen/ops/upsample_bicubic2d_backward.h>
#include <ATen/ops/upsample_bilinear2d.h>
#include <ATen/ops/upsample_bilinear2d_backward.h>
#include <ATen/ops/upsample_nearest2d.h>
#include <ATen/ops/upsample_nearest2d_backward.h>

#include "aten/FloatKernels.h"
#include "aten/Iter.h"
#include "aten/OpTracking.h"
#include "aten/TensorView.h"
#include "runtime/Functions.h"

namespace torch_neuronx::ops {
namespace {

using at::Tensor;
using c10::IntArrayRef;
using Scale = std::optional<double>;

// The dtypes the CPU's kernels take: nearest also uint8 (images), the rest floating types only.
bool native_dtype(tn_upsample_mode mode, c10::ScalarType t) {
  return float_kernel_dtype(t) || (mode != TN_UPSAMPLE_BILINEAR && mode != TN_UPSAMPLE_BICUBIC && t == at::kByte);
}

tn_upsample2d geometry(IntArrayRef full_in, IntArrayRef out_hw, tn_upsample_mode mode, bool align, Scale sh,
                       Scale sw) {
  tn_upsample2d u{};
  u.planes = full_in[0] * full_in[1];
  u.in_h = full_in[2], u.in_w = full_in[3];
  u.out_h = out_hw[0], u.out_w = out_hw[1];
  u.mode = mode;
  u.align_corners = align;
  u.scale_h = sh.value_or(0.0), u.scale_w = sw.value_or(0.0);
  return u;
}

Tensor forward(const Tensor& self, IntArrayRef output_size, tn_upsample_mode mode, bool align, Scale sh, Scale sw,
               const char* name) {
  auto full = at::native::upsample_2d_common_check(self.sizes(), output_size);
  TORCH_CHECK(self.numel() != 0 || c10::multiply_integers(self.sizes().begin() + 1, self.sizes().end()),
              "Non-empty 4D data tensor expected but got a tensor with sizes ", self.sizes());
  track_native(name);
  Tensor x = self.contiguous();
  Tensor out = at::empty(full, x.options());
  if (out.numel()) {
    tn_upsample2d u = geometry(x.sizes(), output_size, mode, align, sh, sw);
    check(tn_upsample2d_async(current_stream(x.device().index()), name, &u, to_tn_dtype(x.scalar_type()),
                              out.data_ptr(), x.const_data_ptr()));
  }
  return out.contiguous(self.suggest_memory_format());
}

Tensor backward(const Tensor& grad_out, IntArrayRef output_size, IntArrayRef input_size, tn_upsample_mode mode,
                bool align, Scale sh, Scale sw, const char* name) {
  auto full = at::native::upsample_2d_common_check(input_size, output_size);
  TORCH_CHECK(grad_out.dim() == 4, "Expected grad_output to be a tensor of dimension 4 but got: dimension ",
              grad_out.dim());
  for (int i = 0; i < 4; i++)
    TORCH_CHECK(grad_out.size(i) == full[i], "Expected grad_output to have the same shape as output;",
                " output.size(", i, ") = ", full[i], " but got grad_output.size(", i, ") = ", grad_out.size(i));
  track_native(name);
  Tensor g = grad_out.contiguous();
  Tensor grad_in = at::empty(input_size, g.options());
  if (grad_in.numel()) {
    tn_upsample2d u = geometry(input_size, output_size, mode, align, sh, sw);
    check(tn_upsample2d_backward_async(current_stream(g.device().index()), name, &u, to_tn_dtype(g.scalar_type()),
                                       grad_in.data_ptr(), g.const_data_ptr()));
  }
  return grad_in.contiguous(grad_out.suggest_memory_format());
}

// ---- nearest ----

Tensor nearest(const Tensor& self, IntArrayRef output_size, Scale sh, Scale sw) {
  if (!native_dtype(TN_UPSAMPLE_NEAREST, self.scalar_type()))
    return via_fallback<at::_ops::upsample_nearest2d>(self, output_size, sh, sw);
  return forward(self, output_size, TN_UPSAMPLE_NEAREST, false, sh, sw, "aten::upsample_nearest2d");
}

Tensor& nearest_out(const Tensor& self, IntArrayRef output_size, Scale sh, Scale sw, Tensor& out) {
  if (!native_dtype(TN_UPSAMPLE_NEAREST, self.scalar_type()) || out.scalar_type() != self.scalar_type())
    return via_fallback<at::_ops::upsample_nearest2d_out>(self, output_size, sh, sw, out);
  return into(nearest(self, output_size, sh, sw), out);
}

Tensor nearest_backward(const Tensor& grad, IntArrayRef output_size, IntArrayRef input_size, Scale sh, Scale sw) {
  if (!float_kernel_dtype(grad.scalar_type()))
    return via_fallback<at::_ops::upsample_nearest2d_backward>(grad, output_size,
                                                               input_size, sh, sw);
  return backward(grad, output_size, input_size, TN_UPSAMPLE_NEAREST, false, sh, sw,
                  "aten::upsample_nearest2d_backward");
}

Tensor& nearest_backward_out(const Tensor& grad, IntArrayRef output_size, IntArrayRef input_size, Scale sh, Scale sw,
                             Tensor& grad_input) {
  if (!float_kernel_dtype(grad.scalar_type()) || grad_input.scalar_type() != grad.scalar_type())
    return via_fallback<at::_ops::upsample_nearest2d_backward_grad_input>(
        grad, output_size, input_size, sh, sw, grad_input);
  return into(nearest_backward(grad, output_size, input_size, sh, sw), grad_input);
}

// ---- nearest-exact ----

Tensor nearest_exact(const Tensor& self, IntArrayRef output_size, Scale sh, Scale sw) {
  if (!native_dtype(TN_UPSAMPLE_NEAREST_EXACT, self.scalar_type()))
    return via_fallback<at::_ops::_upsample_nearest_exact2d>(self, output_size, sh, sw);
  return forward(self, output_size, TN_UPSAMPLE_NEAREST_EXACT, false, sh, sw, "aten::_upsample_nearest_exact2d");
}

Tensor& nearest_exact_out(const Tensor& self, IntArrayRef output_size, Scale sh, Scale sw, Tensor& out) {
  if (!native_dtype(TN_UPSAMPLE_NEAREST_EXACT, self.scalar_type()) || out.scalar_type() != self.scalar_type())
    return via_fallback<at::_ops::_upsample_nearest_exact2d_out>(self, output_size, sh, sw,
                                                                 out);
  return into(nearest_exact(self, output_size, sh, sw), out);
}

Tensor nearest_exact_backward(const Tensor& grad, IntArrayRef output_size, IntArrayRef input_size, Scale sh,
                              Scale sw) {
  if (!float_kernel_dtype(grad.scalar_type()))
    return via_fallback<at::_ops::_upsample_nearest_exact2d_backward>(grad, output_size,
                                                                      input_size, sh, sw);
  return backward(grad, output_size, input_size, TN_UPSAMPLE_NEAREST_EXACT, false, sh, sw,
                  "aten::_upsample_nearest_exact2d_backward");
}

Tensor& nearest_exact_backward_out(const Tensor& grad, IntArrayRef output_size, IntArrayRef input_size, Scale sh,
                                   Scale sw, Tensor& grad_input) {
  if (!float_kernel_dtype(grad.scalar_type()) || grad_input.scalar_type() != grad.scalar_type())
    return via_fallback<at::_ops::_upsample_nearest_exact2d_backward_grad_input>(
        grad, output_size, input_size, sh, sw, grad_input);
  return into(nearest_exact_backward(grad, output_size, input_size, sh, sw), grad_input);
}

// ---- bilinear ----

Tensor bilinear(const Tensor& self, IntArrayRef output_size, bool align, Scale sh, Scale sw) {
  if (!float_kernel_dtype(self.scalar_type()))
    return via_fallback<at::_ops::upsample_bilinear2d>(self, output_size, align, sh, sw);
  return forward(self, output_size, TN_UPSAMPLE_BILINEAR, align, sh, sw, "aten::upsample_bilinear2d");
}

Tensor& bilinear_out(const Tensor& self, IntArrayRef output_size, bool align, Scale sh, Scale sw, Tensor& out) {
  if (!float_kernel_dtype(self.scalar_type()) || out.scalar_type() != self.scalar_type())
    return via_fallback<at::_ops::upsample_bilinear2d_out>(self, output_size, align, sh, sw,
                                                           out);
  return into(bilinear(self, output_size, align, sh, sw), out);
}

Tensor bilinear_backward(const Tensor& grad, IntArrayRef output_size, IntArrayRef input_size, bool align, Scale sh,
                         Scale sw) {
  if (!float_kernel_dtype(grad.scalar_type()))
    return via_fallback<at::_ops::upsample_bilinear2d_backward>(grad, output_size,
                                                                input_size, align, sh, sw);
  return backward(grad, output_size, input_size, TN_UPSAMPLE_BILINEAR, align, sh, sw,
                  "aten::upsample_bilinear2d_backward");
}

Tensor& bilinear_backward_out(const Tensor& grad, IntArrayRef output_size, IntArrayRef input_size, bool align,
                              Scale sh, Scale sw, Tensor& grad_input) {
  if (!float_kernel_dtype(grad.scalar_type()) || grad_input.scalar_type() != grad.scalar_type())
    return via_fallback<at::_ops::upsample_bilinear2d_backward_grad_input>(
        grad, output_size, input_size, align, sh, sw, grad_input);
  return into(bilinear_backward(grad, output_size, input_size, align, sh, sw), grad_input);
}

// ---- bicubic ----
Tensor bicubic(const Tensor& self, IntArrayRef output_size, bool align, Scale sh, Scale sw) {
  if (!float_kernel_dtype(self.scalar_type()))
    return via_fallback<at::_ops::upsample_bicubic2d>(self, output_size, align, sh, sw);
  return forward(self, output_size, TN_UPSAMPLE_BICUBIC, align, sh, sw, "aten::upsample_bicubic2d");
}
Tensor& bicubic_out(const Tensor& self, IntArrayRef output_size, bool align, Scale sh, Scale sw, Tensor& out) {
  if (!float_kernel_dtype(self.scalar_type()) || out.scalar_type() != self.scalar_type())
    return via_fallback<at::_ops::upsample_bicubic2d_out>(self, output_size, align, sh, sw, out);
  return into(bicubic(self, output_size, align, sh, sw), out);
}
Tensor bicubic_backward(const Tensor& grad, IntArrayRef output_size, IntArrayRef input_size, bool align, Scale sh,
                        Scale sw) {
  if (!float_kernel_dtype(grad.scalar_type()))
    return via_fallback<at::_ops::upsample_bicubic2d_backward>(grad, output_size, input_size, align, sh, sw);
  return backward(grad, output_size, input_size, TN_UPSAMPLE_BICUBIC, align, sh, sw,
                  "aten::upsample_bicubic2d_backward");
}
Tensor& bicubic_backward_out(const Tensor& grad, IntArrayRef output_size, IntArrayRef input_size, bool align,
                             Scale sh, Scale sw, Tensor& grad_input) {
  if (!float_kernel_dtype(grad.scalar_type()) || grad_input.scalar_type() != grad.scalar_type())
    return via_fallback<at::_ops::upsample_bicubic2d_backward_grad_input>(grad, output_size, input_size, align, sh,
                                                                          sw, grad_input);
  return into(bicubic_backward(grad, output_size, input_size, align, sh, sw), grad_input);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("upsample_nearest2d", nearest);
  m.impl("upsample_nearest2d.out", nearest_out);
  m.impl("upsample_nearest2d_backward", nearest_backward);
  m.impl("upsample_nearest2d_backward.grad_input", nearest_backward_out);
  m.impl("_upsample_nearest_exact2d", nearest_exact);
  m.impl("_upsample_nearest_exact2d.out", nearest_exact_out);
  m.impl("_upsample_nearest_exact2d_backward", nearest_exact_backward);
  m.impl("_upsample_nearest_exact2d_backward.grad_input", nearest_exact_backward_out);
  m.impl("upsample_bilinear2d", bilinear);
  m.impl("upsample_bilinear2d.out", bilinear_out);
  m.impl("upsample_bilinear2d_backward", bilinear_backward);
  m.impl("upsample_bilinear2d_backward.grad_input", bilinear_backward_out);
  m.impl("upsample_bicubic2d", bicubic);
  m.impl("upsample_bicubic2d.out", bicubic_out);
  m.impl("upsample_bicubic2d_backward", bicubic_backward);
  m.impl("upsample_bicubic2d_backward.grad_input", bicubic_backward_out);
}

} // namespace torch_neuronx::ops
