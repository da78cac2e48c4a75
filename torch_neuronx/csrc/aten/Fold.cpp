// im2col and col2im (F.unfold and F.fold: ConvBERT's span convolution, the columns of a
// convolution and the overlap-add of a transposed one): the CPU's checks, then the C kernel
// (tn/fold.h). col2im reads its columns through their strides, so a transposed product's
// result needs no copy. Other dtypes go to the CPU (complex runs there; integers raise its error).
#include <ATen/native/im2col_shape_check.h>
#include <ATen/ops/col2im.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/im2col.h>

#include "aten/FloatKernels.h"
#include "aten/Iter.h"
#include "aten/OpTracking.h"
#include "aten/TensorView.h"
#include "runtime/Functions.h"

namespace torch_neuronx::ops {
namespace {

using at::Tensor;
using c10::IntArrayRef;

void check_pairs(IntArrayRef kernel, IntArrayRef dilation, IntArrayRef padding, IntArrayRef stride) {
  TORCH_CHECK(kernel.size() == 2, "It is expected kernel_size equals to 2, but got size ", kernel.size());
  TORCH_CHECK(dilation.size() == 2, "It is expected dilation equals to 2, but got size ", dilation.size());
  TORCH_CHECK(padding.size() == 2, "It is expected padding equals to 2, but got size ", padding.size());
  TORCH_CHECK(stride.size() == 2, "It is expected stride equals to 2, but got size ", stride.size());
}

tn_fold2d geometry(int64_t batch, int64_t channels, int64_t height, int64_t width, IntArrayRef kernel,
                   IntArrayRef dilation, IntArrayRef padding, IntArrayRef stride) {
  tn_fold2d f{};
  f.batch = batch, f.channels = channels, f.height = height, f.width = width;
  f.kernel_h = kernel[0], f.kernel_w = kernel[1];
  f.dil_h = dilation[0], f.dil_w = dilation[1];
  f.pad_h = padding[0], f.pad_w = padding[1];
  f.stride_h = stride[0], f.stride_w = stride[1];
  f.blocks_h = (height + 2 * f.pad_h - (f.dil_h * (f.kernel_h - 1) + 1)) / f.stride_h + 1;
  f.blocks_w = (width + 2 * f.pad_w - (f.dil_w * (f.kernel_w - 1) + 1)) / f.stride_w + 1;
  tn_fold2d_contiguous_columns(&f);
  return f;
}

// im2col copies elements: the dtypes the CPU takes (floating and bool) but the complex ones.
bool copyable(c10::ScalarType t) { return float_kernel_dtype(t) || t == at::kBool; }

Tensor to_columns(const Tensor& self, IntArrayRef kernel, IntArrayRef dilation, IntArrayRef padding, IntArrayRef stride) {
  if (!copyable(self.scalar_type())) return via_fallback<at::_ops::im2col>(self, kernel, dilation, padding, stride);
  check_pairs(kernel, dilation, padding, stride);
  at::native::im2col_shape_check(self, Tensor(), kernel[0], kernel[1], dilation[0], dilation[1], padding[0],
                                 padding[1], stride[0], stride[1]);
  track_native("aten::im2col");
  Tensor x = self.dim() == 3 ? self.unsqueeze(0).contiguous() : self.contiguous();
  tn_fold2d f = geometry(x.size(0), x.size(1), x.size(2), x.size(3), kernel, dilation, padding, stride);
  Tensor cols = at::empty({f.batch, f.channels * f.kernel_h * f.kernel_w, f.blocks_h * f.blocks_w}, x.options());
  if (cols.numel())
    check(tn_im2col_async(current_stream(x.device().index()), "aten::im2col", &f, to_tn_dtype(x.scalar_type()),
                          cols.data_ptr(), x.const_data_ptr()));
  return self.dim() == 3 ? cols.squeeze(0) : cols;
}

Tensor& to_columns_out(const Tensor& self, IntArrayRef kernel, IntArrayRef dilation, IntArrayRef padding,
                   IntArrayRef stride, Tensor& out) {
  if (!copyable(self.scalar_type()) || out.scalar_type() != self.scalar_type())
    return via_fallback<at::_ops::im2col_out>(self, kernel, dilation, padding, stride, out);
  return into(to_columns(self, kernel, dilation, padding, stride), out);
}

Tensor from_columns(const Tensor& self, IntArrayRef output_size, IntArrayRef kernel, IntArrayRef dilation,
              IntArrayRef padding, IntArrayRef stride) {
  if (!float_kernel_dtype(self.scalar_type()))
    return via_fallback<at::_ops::col2im>(self, output_size, kernel, dilation, padding, stride);
  TORCH_CHECK(output_size.size() == 2, "It is expected output_size equals to 2, but got size ", output_size.size());
  check_pairs(kernel, dilation, padding, stride);
  at::native::col2im_shape_check(self, Tensor(), output_size[0], output_size[1], kernel[0], kernel[1], dilation[0],
                                 dilation[1], padding[0], padding[1], stride[0], stride[1]);
  track_native("aten::col2im");
  Tensor cols = self.dim() == 2 ? self.unsqueeze(0) : self;
  int64_t taps = kernel[0] * kernel[1];
  tn_fold2d f = geometry(cols.size(0), cols.size(1) / taps, output_size[0], output_size[1], kernel, dilation, padding,
                         stride);
  f.col_batch_stride = cols.stride(0), f.col_row_stride = cols.stride(1), f.col_pos_stride = cols.stride(2);
  Tensor out = at::empty({f.batch, f.channels, f.height, f.width}, cols.options());
  if (out.numel())
    check(tn_col2im_async(current_stream(cols.device().index()), "aten::col2im", &f, to_tn_dtype(cols.scalar_type()),
                          out.data_ptr(), cols.const_data_ptr()));
  return self.dim() == 2 ? out.squeeze(0) : out;
}

Tensor& from_columns_out(const Tensor& self, IntArrayRef output_size, IntArrayRef kernel, IntArrayRef dilation,
                   IntArrayRef padding, IntArrayRef stride, Tensor& out) {
  if (!float_kernel_dtype(self.scalar_type()) || out.scalar_type() != self.scalar_type())
    return via_fallback<at::_ops::col2im_out>(self, output_size, kernel, dilation, padding, stride, out);
  return into(from_columns(self, output_size, kernel, dilation, padding, stride), out);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("im2col", to_columns);
  m.impl("im2col.out", to_columns_out);
  m.impl("col2im", from_columns);
  m.impl("col2im.out", from_columns_out);
}

} // namespace torch_neuronx::ops
