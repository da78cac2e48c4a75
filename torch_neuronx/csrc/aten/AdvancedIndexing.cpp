// Advanced indexing: self[indices] (index.Tensor), self[indices] = values (index_put_),
// nonzero, masked_select and count_nonzero.
//
// The indices follow PyTorch's rules: boolean masks become the coordinates of their true
// elements (nonzero), the index tensors broadcast to one shape B, and the indexed dimensions
// move to the front of the result unless they are adjacent, in which case B takes their place.
// The C kernels see self with the indexed dimensions first and the result laid out as
// B + the other dimensions, through permuted views.
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/count_nonzero.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/index.h>
#include <ATen/ops/index_add.h>
#include <ATen/ops/index_copy.h>
#include <ATen/ops/mul.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/index_put.h>
#include <ATen/ops/masked_scatter.h>
#include <ATen/ops/masked_select.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/nonzero.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/view_as_real.h>

#include "aten/Iter.h"
#include "aten/OpTracking.h"
#include "aten/TensorView.h"
#include "runtime/Functions.h"

namespace torch_neuronx::ops {
namespace {

using at::Tensor;
using IndexList = c10::List<std::optional<Tensor>>;

Tensor& nonzero_impl(const Tensor& self, Tensor& out) {
  tn_stream_t stream = current_stream(self.device().index());
  Tensor count = at::empty({}, self.options().dtype(at::kLong));
  tn_tensor c = to_tn_view(count), in = to_tn_view(self);
  check(tn_count_nonzero_async(stream, "aten::nonzero", &c, &in));
  int64_t n = count.item<int64_t>();  // the result's size depends on the data: a device syncs here
  at::native::resize_output(out, {n, self.dim()});
  tn_tensor o = to_tn_view(out);
  check(tn_nonzero_async(stream, "aten::nonzero", &o, &in));
  return out;
}

// The indices of self[indices] in the form the kernels take.
struct IndexPlan {
  Tensor self;                  // self's view with the indexed dimensions first
  std::vector<Tensor> indices;  // int64 on self's device, broadcast to B
  std::vector<int64_t> result_shape;
  std::vector<int64_t> to_kernel_layout;  // permutes a result-shaped tensor into B + rest
};

bool broadcastable(c10::IntArrayRef a, c10::IntArrayRef b) {
  for (size_t i = 1; i <= std::min(a.size(), b.size()); i++) {
    int64_t x = a[a.size() - i], y = b[b.size() - i];
    if (x != y && x != 1 && y != 1) return false;
  }
  return true;
}

// nullopt when the kernels cannot take this indexing (too many index tensors).
std::optional<IndexPlan> plan_indexing(const Tensor& self, const IndexList& raw) {
  std::vector<Tensor> idx;  // one per indexed dimension of self; undefined for ':'
  for (size_t j = 0; j < raw.size(); j++) {
    std::optional<Tensor> t = raw[j];
    if (!t.has_value() || !t->defined()) {
      idx.emplace_back();
      continue;
    }
    auto type = t->scalar_type();
    TORCH_CHECK_INDEX(type == at::kLong || type == at::kInt || type == at::kByte || type == at::kBool,
                      "tensors used as indices must be long, int, byte or bool tensors");
    TORCH_CHECK_INDEX(t->device() == self.device() || t->device().is_cpu(),
                      "indices should be either on cpu or on the same device as the indexed tensor (",
                      self.device(), ")");
    if (type == at::kByte || type == at::kBool) {
      // a mask over the next t->dim() dimensions: the coordinates of its true elements
      int64_t first = static_cast<int64_t>(idx.size());
      for (int64_t d = 0; d < t->dim(); d++) {
        TORCH_CHECK_INDEX(first + d < self.dim(), "too many indices for tensor of dimension ", self.dim());
        TORCH_CHECK_INDEX(t->size(d) == self.size(first + d), "The shape of the mask ", t->sizes(),
                          " at index ", d, " does not match the shape of the indexed tensor ", self.sizes(),
                          " at index ", first + d);
      }
      Tensor mask = t->to(self.device(), at::kBool);
      Tensor coords = at::empty({0}, mask.options().dtype(at::kLong));
      nonzero_impl(mask, coords);
      for (int64_t d = 0; d < t->dim(); d++) idx.push_back(coords.select(1, d));
    } else {
      idx.push_back(t->to(self.device(), at::kLong));
    }
  }
  TORCH_CHECK_INDEX(static_cast<int64_t>(idx.size()) <= self.dim(), "too many indices for tensor of dimension ",
                    self.dim(), " (got ", idx.size(), ")");
  std::vector<int64_t> indexed, others;
  std::vector<Tensor> defined;
  for (int64_t d = 0; d < self.dim(); d++) {
    if (d < static_cast<int64_t>(idx.size()) && idx[d].defined()) {
      indexed.push_back(d);
      defined.push_back(idx[d]);
    } else {
      others.push_back(d);
    }
  }
  TORCH_CHECK_INDEX(!indexed.empty(), "advanced indexing needs at least one index tensor");
  if (indexed.size() > TN_GATHER_MAX) return std::nullopt;
  std::vector<int64_t> b = defined[0].sizes().vec();
  for (size_t j = 1; j < defined.size(); j++) {
    TORCH_CHECK_INDEX(broadcastable(b, defined[j].sizes()),
                      "shape mismatch: indexing tensors could not be broadcast together with shapes ", b, ", ",
                      defined[j].sizes());
    b = at::infer_size(b, defined[j].sizes());
  }
  IndexPlan plan;
  std::vector<int64_t> perm = indexed;
  perm.insert(perm.end(), others.begin(), others.end());
  plan.self = self.permute(perm);
  for (auto& t : defined) plan.indices.push_back(t.expand(b));
  bool adjacent = indexed.back() - indexed.front() + 1 == static_cast<int64_t>(indexed.size());
  int64_t at_pos = adjacent ? indexed.front() : 0;  // where B sits in the result
  int64_t nb = static_cast<int64_t>(b.size());
  std::vector<int64_t> rest;
  for (int64_t d : others) rest.push_back(self.size(d));
  plan.result_shape.assign(rest.begin(), rest.begin() + at_pos);
  plan.result_shape.insert(plan.result_shape.end(), b.begin(), b.end());
  plan.result_shape.insert(plan.result_shape.end(), rest.begin() + at_pos, rest.end());
  for (int64_t d = 0; d < nb; d++) plan.to_kernel_layout.push_back(at_pos + d);
  for (int64_t d = 0; d < static_cast<int64_t>(plan.result_shape.size()); d++)
    if (d < at_pos || d >= at_pos + nb) plan.to_kernel_layout.push_back(d);
  return plan;
}

std::vector<tn_tensor> index_views(const IndexPlan& plan) {
  std::vector<tn_tensor> views;
  for (auto& t : plan.indices) views.push_back(to_tn_view(t));
  return views;
}

// The gather of a planned indexing into result (shaped as plan.result_shape).
void launch_gather(const IndexPlan& plan, const Tensor& result) {
  tn_tensor o = to_tn_view(result.permute(plan.to_kernel_layout)), x = to_tn_view(plan.self);
  auto views = index_views(plan);
  check(tn_gather_nd_async(current_stream(result.device().index()), "aten::index.Tensor_out", &o, &x,
                           static_cast<int32_t>(views.size()), views.data()));
}  // the int64 index copies are freed in stream order, after the gather read them

Tensor& index_out(const Tensor& self, const IndexList& indices, Tensor& out) {
  if (self.is_complex() && out.scalar_type() == self.scalar_type() && self.dim() > 0) {
    // a complex element is a (real, imaginary) pair: gather the pairs of the real view, whose
    // result has the pair as its last dimension
    auto plan = plan_indexing(at::view_as_real(self), indices);
    if (plan && elementwise_dtypes_ok({plan->self.scalar_type()})) {
      c10::IntArrayRef shape(plan->result_shape);
      at::native::resize_output(out, shape.slice(0, shape.size() - 1));
      track_native("aten::index.Tensor_out");
      if (out.numel() != 0) launch_gather(*plan, at::view_as_real(out));
      return out;
    }
  }
  if (!elementwise_dtypes_ok({self.scalar_type()}) || out.scalar_type() != self.scalar_type())
    return via_fallback<at::_ops::index_Tensor_out>(self, indices, out);
  auto plan = plan_indexing(self, indices);
  if (!plan) return via_fallback<at::_ops::index_Tensor_out>(self, indices, out);
  at::native::resize_output(out, plan->result_shape);
  track_native("aten::index.Tensor_out");
  if (out.numel() != 0) launch_gather(*plan, out);
  return out;
}

Tensor& index_put_impl(Tensor& self, const IndexList& indices, const Tensor& values, bool accumulate,
                       bool unsafe) {
  TORCH_CHECK(values.scalar_type() == self.scalar_type(), "Index put requires the source and destination dtypes "
              "match, got ", self.scalar_type(), " for the destination and ", values.scalar_type(), " for the source.");
  Tensor v = values;
  if (v.device() != self.device()) {
    TORCH_CHECK(v.dim() == 0 && v.device().is_cpu(), "Expected all tensors to be on the same device, but found "
                "at least two devices, ", self.device(), " and ", v.device(), "! (in index_put_)");
    v = v.to(self.device());
  }
  if (!elementwise_dtypes_ok({self.scalar_type()}))  // bools accumulate as the CPU's: a logical or
    return via_fallback<at::_ops::_index_put_impl_>(self, indices, v, accumulate, unsafe);
  auto plan = plan_indexing(self, indices);
  if (!plan) return via_fallback<at::_ops::_index_put_impl_>(self, indices, v, accumulate, unsafe);
  TORCH_CHECK(at::is_expandable_to(v.sizes(), plan->result_shape), "shape mismatch: value tensor of shape ",
              v.sizes(), " cannot be broadcast to indexing result of shape ", c10::IntArrayRef(plan->result_shape));
  track_native("aten::_index_put_impl_");
  if (v.is_alias_of(self)) v = v.clone();  // the writes must not change values still to be read
  Tensor laid_out = v.expand(plan->result_shape).permute(plan->to_kernel_layout);
  if (laid_out.numel() == 0) return self;
  tn_tensor s = to_tn_view(plan->self), src = to_tn_view(laid_out);
  auto views = index_views(*plan);
  check(tn_index_put_async(current_stream(self.device().index()), "aten::_index_put_impl_", &s,
                           static_cast<int32_t>(views.size()), views.data(), &src, accumulate));
  return self;
}

Tensor nonzero(const Tensor& self) {
  track_native("aten::nonzero");
  Tensor out = at::empty({0}, self.options().dtype(at::kLong));
  return nonzero_impl(self, out);
}

Tensor& nonzero_out(const Tensor& self, Tensor& out) {
  TORCH_CHECK(out.scalar_type() == at::kLong, "nonzero: Expected out tensor to have scalar type Long but got scalar type",
              out.scalar_type());
  track_native("aten::nonzero.out");
  return nonzero_impl(self, out);
}

Tensor masked_select_kernel(const Tensor& self, const Tensor& mask) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_select: expected BoolTensor for mask");
  track_native("aten::masked_select");
  auto [s, m] = at::expand_outplace(self, mask);
  // flattened, so a 0-dim input selects like a 1-element one
  return at::index(s->reshape({-1}), IndexList({std::optional<Tensor>(m->reshape({-1}))}));
}

Tensor& masked_select_out(const Tensor& self, const Tensor& mask, Tensor& out) {
  at::assert_no_internal_overlap(out);
  at::assert_no_overlap(out, self);
  at::assert_no_overlap(out, mask);
  Tensor r = masked_select_kernel(self, mask);
  at::native::resize_output(out, r.sizes());
  return out.copy_(r);
}

Tensor count_nonzero(const Tensor& self, at::IntArrayRef dims) {
  track_native("aten::count_nonzero.dim_IntList");
  return at::sum(at::ne(self, 0), dims, false, at::kLong);
}

// out[..., index[i], ...] = (or +=) values[..., i, ...] along dim d: an index_put with the
// index at position d.
Tensor& put_along_dim(Tensor& out, int64_t d, const Tensor& index, const Tensor& values, bool accumulate) {
  IndexList indices;
  for (int64_t k = 0; k < d; k++) indices.push_back(std::nullopt);
  indices.push_back(std::optional<Tensor>(index.reshape({-1})));
  index_put_impl(out, indices, values, accumulate, false);
  return out;
}

// index_add: out = self, then out[..., index[i], ...] += alpha * source[..., i, ...] along dim,
// as an accumulating index_put with the index in position `dim`.
Tensor& index_add_out(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                      const c10::Scalar& alpha, Tensor& out) {
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_add_(): Index is supposed to be a vector");
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "index_add_(): Expected dtype int32/int64 for index");
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), "index_add_(): self (", self.scalar_type(),
              ") and source (", source.scalar_type(), ") must have the same scalar type");
  int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  TORCH_CHECK(index.numel() == (source.dim() == 0 ? 1 : source.size(d)),
              "index_add_(): Number of indices (", index.numel(), ") should be equal to source.size(dim) (",
              source.dim() == 0 ? 1 : source.size(d), ")");
  if (!elementwise_dtypes_ok({self.scalar_type()}) || self.scalar_type() == at::kBool)
    return via_fallback<at::_ops::index_add_out>(self, dim, index, source, alpha, out);
  at::native::resize_output(out, self.sizes());
  if (!out.is_same(self)) out.copy_(self);
  track_native("aten::index_add.out");
  Tensor values = alpha.equal(1) ? source : at::mul(source, alpha);
  if (self.dim() == 0) {  // a scalar: as a vector of one element
    Tensor flat = out.view({1});
    put_along_dim(flat, 0, index.reshape({1}), values.reshape({1}), true);
    return out;
  }
  return put_along_dim(out, d, index, values, true);
}

// index_copy: out = self, then out[..., index[i], ...] = source[..., i, ...] along dim (the
// static KV cache writes its new keys this way), as an index_put with the index at `dim`.
Tensor& index_copy_out(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, Tensor& out) {
  TORCH_CHECK_INDEX(index.dim() < 2, "index_copy_(): Index should have dimension 1 or 0 (got ", index.dim(), ")");
  TORCH_CHECK(index.scalar_type() == at::kLong, "index_copy_(): Expected a long tensor for index, but got ",
              index.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), "index_copy_(): self and source expected to have the same "
              "dtype, but got (self) ", self.scalar_type(), " and (source) ", source.scalar_type());
  int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  TORCH_CHECK_INDEX(index.numel() == (source.dim() == 0 ? 1 : source.size(d)), "index_copy_(): Number of indices (",
                    index.numel(), ") should be equal to source.size(dim) (", source.dim() == 0 ? 1 : source.size(d),
                    ")");
  if (!elementwise_dtypes_ok({self.scalar_type()}) || self.dim() == 0 || source.dim() != self.dim())
    return via_fallback<at::_ops::index_copy_out>(self, dim, index, source, out);
  at::native::resize_output(out, self.sizes());
  if (!out.is_same(self)) out.copy_(self);
  track_native("aten::index_copy.out");
  return put_along_dim(out, d, index, source, false);
}

// masked_scatter_: the positions where mask is true take source's leading elements in order.
Tensor& masked_scatter_(Tensor& self, const Tensor& mask, const Tensor& source) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_scatter_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), "masked_scatter_: expected self and source to have same "
              "dtypes but got ", self.scalar_type(), " and ", source.scalar_type());
  track_native("aten::masked_scatter_");
  Tensor m = mask.expand(self.sizes());
  int64_t n = at::sum(m, at::kLong).item<int64_t>();  // a sync, as on every device: the count sizes the write
  TORCH_CHECK(source.numel() >= n, "Number of elements of source < number of ones in mask");
  if (n == 0) return self;
  index_put_impl(self, IndexList({std::optional<Tensor>(m)}), source.reshape({-1}).narrow(0, 0, n), false, false);
  return self;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("index.Tensor_out", index_out);
  m.impl("_index_put_impl_", index_put_impl);
  m.impl("nonzero", nonzero);
  m.impl("nonzero.out", nonzero_out);
  m.impl("masked_select", masked_select_kernel);
  m.impl("masked_select.out", masked_select_out);
  m.impl("count_nonzero.dim_IntList", count_nonzero);
  m.impl("index_add.out", index_add_out);
  m.impl("index_copy.out", index_copy_out);
  m.impl("masked_scatter_", masked_scatter_);
}

} // namespace torch_neuronx::ops
