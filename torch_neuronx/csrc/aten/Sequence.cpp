// arange, cumsum, triu/tril and the infinity tests.
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/isneginf.h>
#include <ATen/ops/isposinf.h>
#include <ATen/ops/tril.h>
#include <ATen/ops/triu.h>

#include <cmath>

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
  TORCH_CHECK(d != 0, "step must be nonzero");
  TORCH_CHECK(std::isfinite(s) && std::isfinite(e), "unsupported range: ", s, " -> ", e);
  TORCH_CHECK((d > 0 && e >= s) || (d < 0 && e <= s), "upper bound and larger bound inconsistent with step sign");
  int64_t size = static_cast<int64_t>(std::ceil((e - s) / d));
  at::native::resize_output(out, {size});
  track_native("aten::arange.start_out");
  if (size == 0) return out;
  tn_tensor o = to_tn_view(out);
  tn_scalar a = to_tn_scalar(start), st = to_tn_scalar(step);
  check(tn_arange_async(current_stream(out.device().index()), &o, &a, &st));
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

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("arange.start_out", arange_out);
  m.impl("cumsum.out", cumsum_out);
  m.impl("triu.out", triangle_out<at::_ops::triu_out, 1>);
  m.impl("tril.out", triangle_out<at::_ops::tril_out, 0>);
  m.impl("isneginf.out", isinf_sign_out<1>);
  m.impl("isposinf.out", isinf_sign_out<0>);
}

} // namespace torch_neuronx::ops
