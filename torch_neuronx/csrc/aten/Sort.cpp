// sort and topk along any dimension (moved last by permuting the views).
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/sort.h>
#include <ATen/ops/topk.h>

#include "aten/Iter.h"
#include "aten/OpTracking.h"
#include "aten/TensorView.h"
#include "runtime/Functions.h"

namespace torch_neuronx::ops {
namespace {

using at::Tensor;

// Complex values have no order (the CPU's error comes through the fallback); neither has
// topk of bools on the CPU, which sorts them.
bool sortable(const Tensor& t, bool bools) {
  auto type = t.scalar_type();
  return elementwise_dtypes_ok({type}) && !at::isComplexType(type) && (bools || type != at::kBool);
}

void launch(const char* name, const Tensor& values, const Tensor& indices, const Tensor& self, int64_t dim,
            bool descending) {
  track_native(name);
  if (values.numel() == 0) return;
  auto last = [&](const Tensor& t) { return to_tn_view(t.dim() ? t.movedim(dim, -1) : t); };
  tn_tensor v = last(values), i = last(indices), x = last(self);
  check(tn_sort_async(current_stream(self.device().index()), name, &v, &i, &x, descending));
}

std::tuple<Tensor&, Tensor&> sort_out(const Tensor& self, std::optional<bool> stable, int64_t dim, bool descending,
                                      Tensor& values, Tensor& indices) {
  if (!sortable(self, true) || values.scalar_type() != self.scalar_type())
    return via_fallback<at::_ops::sort_values_stable>(self, stable, dim, descending, values, indices);
  int64_t d = at::maybe_wrap_dim(dim, self.dim());
  at::native::resize_output(values, self.sizes());
  at::native::resize_output(indices, self.sizes());
  launch("aten::sort.values_stable", values, indices, self, d, descending);
  return {values, indices};
}

std::tuple<Tensor&, Tensor&> topk_out(const Tensor& self, int64_t k, int64_t dim, bool largest, bool sorted,
                                      Tensor& values, Tensor& indices) {
  int64_t d = at::maybe_wrap_dim(dim, self.dim());
  int64_t size = self.dim() ? self.size(d) : 1;
  TORCH_CHECK(k >= 0 && k <= size, "selected index k out of range");
  if (!sortable(self, false) || values.scalar_type() != self.scalar_type())
    return via_fallback<at::_ops::topk_values>(self, k, dim, largest, sorted, values, indices);
  std::vector<int64_t> shape = self.sizes().vec();
  if (self.dim()) shape[d] = k;
  at::native::resize_output(values, shape);
  at::native::resize_output(indices, shape);
  launch("aten::topk.values", values, indices, self, d, largest);  // always sorted
  return {values, indices};
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("sort.values_stable", sort_out);
  m.impl("topk.values", topk_out);
}

} // namespace torch_neuronx::ops
