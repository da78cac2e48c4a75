// arange, linspace, cumsum, repeat_interleave, triu/tril and the infinity tests.
#include <ATen/WrapDimUtils.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/Resize.h>
#include <ATen/Dispatch.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/linspace.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/isneginf.h>
#include <ATen/ops/isposinf.h>
#include <ATen/ops/tril.h>
#include <ATen/ops/triu.h>

#include <cmath>

#include <ATen/ops/flip.h>
#include <ATen/ops/eye.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/unfold_backward.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/min.h>
#include "aten/Iter.h"
#include "aten/OpTracking.h"
#include "aten/TensorView.h"
#include "runtime/Functions.h"

namespace torch_neuronx::ops {
namespace {

using at::Tensor;

Tensor& arange_out(const c10::Scalar& start, const c10::Scalar& end, const c10::Scalar& step, Tensor& out) {
  if (!elementwise_dtypes_ok({out.scalar_type()}))
    return via_fallback<at::_ops::arange_start_out>(start, end, step, out);
  double s = start.toDouble(), e = end.toDouble(), d = step.toDouble();
  TORCH_CHECK(std::isfinite(s) && std::isfinite(e), "unsupported range: ", s, " -> ", e);
  bool integral = at::isIntegralType(out.scalar_type(), false);
  // Integer results work on the truncated bounds and step, as PyTorch's kernels do; int64
  // sizes the range in integer arithmetic, the others from the exact bounds.
  int64_t is = integral ? start.to<int64_t>() : 0, ie = integral ? end.to<int64_t>() : 0,
          id = integral ? step.to<int64_t>() : 0;
  TORCH_CHECK(d != 0, "step must be nonzero");
  TORCH_CHECK_VALUE(!integral || id != 0, "step must be nonzero");  // a fractional step of an integer range
  bool consistent = integral ? (id > 0 && ie >= is) || (id < 0 && ie <= is) : (d > 0 && e >= s) || (d < 0 && e <= s);
  TORCH_CHECK(consistent, "upper bound and lower bound inconsistent with step sign");
  int64_t size = out.scalar_type() == at::kLong ? (ie - is + id - (id > 0 ? 1 : -1)) / id
                                                : static_cast<int64_t>(std::ceil((e - s) / d));
  at::native::resize_output(out, {size});
  track_native("aten::arange.start_out");
  if (size == 0) return out;
  tn_tensor o = to_tn_view(out);
  tn_scalar a = to_tn_scalar(integral ? c10::Scalar(is) : start), st = to_tn_scalar(integral ? c10::Scalar(id) : step);
  check(tn_arange_async(current_stream(out.device().index()), &o, &a, &st));
  return out;
}

// The CPU's linspace takes start and end in the result's dtype first (integers truncated), then
// steps from both ends; the kernel does that in double.
Tensor& linspace_out(const c10::Scalar& start, const c10::Scalar& end, int64_t steps, Tensor& out) {
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  auto type = out.scalar_type();
  if (!elementwise_dtypes_ok({type}) || at::isComplexType(type) || type == at::kBool)
    return via_fallback<at::_ops::linspace_out>(start, end, steps, out);
  if (out.numel() != steps) out.resize_({steps});
  track_native("aten::linspace.out");
  if (steps == 0) return out;
  double s = 0, e = 0;
  AT_DISPATCH_ALL_TYPES_AND2(at::kHalf, at::kBFloat16, type, "linspace", [&] {
    s = static_cast<double>(start.to<scalar_t>());
    e = static_cast<double>(end.to<scalar_t>());
  });
  tn_tensor o = to_tn_view(out);
  check(tn_linspace_async(current_stream(out.device().index()), &o, s, e));
  return out;
}

Tensor& cumsum_out(const Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype, Tensor& out) {
  if (!elementwise_dtypes_ok({self.scalar_type(), out.scalar_type()}))
    return via_fallback<at::_ops::cumsum_out>(self, dim, dtype, out);
  int64_t d = at::maybe_wrap_dim(dim, self.dim());
  at::native::resize_output(out, self.sizes());
  track_native("aten::cumsum.out");
  if (self.numel() == 0) return out;
  if (self.dim() == 0) return out.copy_(self);
  tn_tensor o = to_tn_view(out.movedim(d, -1)), i = to_tn_view(self.movedim(d, -1));
  check(tn_cumsum_async(current_stream(out.device().index()), &o, &i));
  return out;
}

// repeat_interleave(repeats): index i repeated repeats[i] times. Each run starts where the
// previous ones end (the inclusive cumsum), so one count at every start (runs of length 0 add
// to the same position) summed up gives the indices. The size depends on the data: one sync
// reads the total and the smallest repeat, which the CPU checks too.
Tensor repeat_interleave_tensor(const Tensor& repeats, std::optional<c10::SymInt> output_size) {
  TORCH_CHECK(repeats.dim() == 1, "repeat_interleave only accept 1D vector as repeat");
  auto type = repeats.scalar_type();
  if (type != at::kLong && type != at::kInt)
    throw c10::NotImplementedError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
                                   std::string("\"repeat_interleave_neuron\" not implemented for '") +
                                       c10::toString(type) + "'");
  track_native("aten::repeat_interleave.Tensor");
  auto options = repeats.options().dtype(at::kLong);
  if (repeats.numel() == 0) {
    TORCH_CHECK(!output_size.has_value() || output_size->expect_int() == 0,
                "allocated size does not match required size");
    return at::empty({0}, repeats.options());
  }
  Tensor ends = at::cumsum(repeats, 0, at::kLong);
  Tensor stats = at::stack({ends.select(0, -1), repeats.min().to(at::kLong)}).cpu();
  int64_t total = stats[0].item<int64_t>();
  TORCH_CHECK(stats[1].item<int64_t>() >= 0, "repeats can not be negative");
  TORCH_CHECK(!output_size.has_value() || output_size->expect_int() == total,
              "allocated size does not match required size");
  Tensor counts = at::zeros({total + 1}, options);
  counts.index_add_(0, ends.slice(0, 0, -1), at::ones({repeats.numel() - 1}, options));
  return at::cumsum(counts.slice(0, 0, total), 0, type);
}

template <class Op, int upper>
Tensor& triangle_out(const Tensor& self, int64_t diagonal, Tensor& out) {
  TORCH_CHECK(self.dim() >= 2, upper ? "triu" : "tril", ": input tensor must have at least 2 dimensions");
  if (!elementwise_dtypes_ok({self.scalar_type()}) || out.scalar_type() != self.scalar_type())
    return via_fallback<Op>(self, diagonal, out);
  at::native::resize_output(out, self.sizes());
  track_native(op_name<Op>());
  if (self.numel() == 0) return out;
  tn_tensor o = to_tn_view(out), i = to_tn_view(self);
  check(tn_triangle_async(current_stream(out.device().index()), &o, &i, diagonal, upper));
  return out;
}

template <int negative>
Tensor& isinf_sign_out(const Tensor& self, Tensor& out) {
  at::native::resize_output(out, self.sizes());
  if (!at::isFloatingType(self.scalar_type())) return out.fill_(false);
  return at::eq_out(out, self, negative ? -INFINITY : INFINITY);
}

// flip as one gather per flipped dimension with a reversed index.
Tensor flip(const Tensor& self, at::IntArrayRef dims) {
  auto wrapped = at::dim_list_to_bitset(dims, self.dim());
  if (!elementwise_dtypes_ok({self.scalar_type()})) return via_fallback<at::_ops::flip>(self, dims);
  track_native("aten::flip");
  Tensor r = self.clone();
  for (int64_t d = 0; d < self.dim(); d++) {
    if (!wrapped[d] || self.size(d) < 2) continue;
    Tensor rev = at::arange(self.size(d) - 1, -1, -1, self.options().dtype(at::kLong));
    r = at::index_select(r, d, rev);
  }
  return r;
}

// unfold's backward: window element k of every window lands at k, k + step, k + 2 step, ...
// of the input, one strided add per window element (windows may overlap; each add does not).
Tensor unfold_backward(const Tensor& grad, c10::IntArrayRef input_sizes, int64_t dim, int64_t size, int64_t step) {
  if (!elementwise_dtypes_ok({grad.scalar_type()}) || grad.scalar_type() == at::kBool)
    return via_fallback<at::_ops::unfold_backward>(grad, input_sizes, dim, size, step);
  track_native("aten::unfold_backward");
  int64_t d = at::maybe_wrap_dim(dim, static_cast<int64_t>(std::max<size_t>(input_sizes.size(), 1)));
  Tensor result = at::zeros(input_sizes, grad.options());
  if (input_sizes.empty()) return result.add_(grad.reshape({}));
  int64_t windows = grad.size(d);
  if (windows == 0) return result;
  for (int64_t k = 0; k < size; k++)
    result.narrow(d, k, (windows - 1) * step + 1).slice(d, 0, c10::nullopt, step).add_(grad.select(-1, k));
  return result;
}

Tensor& eye_out(int64_t n, int64_t m, Tensor& out) {
  TORCH_CHECK(n >= 0 && m >= 0, "n and m must be greater or equal to 0, got ", n, " and ", m);
  at::native::resize_output(out, {n, m});
  track_native("aten::eye.m_out");
  out.zero_();
  if (n && m) out.diagonal().fill_(1);
  return out;
}

Tensor& eye_square_out(int64_t n, Tensor& out) {
  return eye_out(n, n, out);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("flip", flip);
  m.impl("unfold_backward", unfold_backward);
  m.impl("eye.m_out", eye_out);
  m.impl("eye.out", eye_square_out);
  m.impl("arange.start_out", arange_out);
  m.impl("linspace.out", linspace_out);
  m.impl("cumsum.out", cumsum_out);
  m.impl("repeat_interleave.Tensor", repeat_interleave_tensor);
  m.impl("triu.out", triangle_out<at::_ops::triu_out, 1>);
  m.impl("tril.out", triangle_out<at::_ops::tril_out, 0>);
  m.impl("isneginf.out", isinf_sign_out<1>);
  m.impl("isposinf.out", isinf_sign_out<0>);
}

} // namespace torch_neuronx::ops
