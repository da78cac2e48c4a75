// index_select (and so embedding), where, masked_fill and cat.
#include <ATen/ops/cat_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/gather.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/masked_fill.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/scatter_reduce.h>
#include <ATen/ops/zeros_like.h>
#include <ATen/Dispatch.h>
#include <ATen/ops/scatter.h>
#include <ATen/ops/scatter_add.h>
#include <ATen/ops/where.h>
#include <ATen/TensorUtils.h>
#include <ATen/ops/embedding_dense_backward.h>
#include <ATen/ops/embedding_renorm.h>
#include <ATen/ops/index_copy.h>
#include <ATen/ops/linalg_vector_norm.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/reciprocal.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/isin.h>
#include <ATen/ops/logical_not.h>
#include <ATen/ops/zeros.h>

#include "aten/Iter.h"
#include "aten/OpTracking.h"
#include "aten/TensorView.h"
#include "runtime/Functions.h"
#include "tn/copy.h"

namespace torch_neuronx::ops {
namespace {

using at::Tensor;

void same_device(const char* op, const Tensor& a, const Tensor& b) {
  TORCH_CHECK(a.device() == b.device(), "Expected all tensors to be on the same device, but found at least two devices, ",
              a.device(), " and ", b.device(), "! (in ", op, ")");
}

Tensor& index_select_out(const Tensor& self, int64_t dim, const Tensor& index, Tensor& out) {
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "index_select(): Expected dtype int32 or int64 for index");
  same_device("index_select", self, index);
  if (!elementwise_dtypes_ok({self.scalar_type()}) || out.scalar_type() != self.scalar_type())
    return via_fallback<at::_ops::index_select_out>(self, dim, index, out);
  if (self.dim() == 0) {  // a scalar: one index (which must be 0), a scalar result
    TORCH_CHECK(index.numel() == 1, "index_select(): Index to scalar can have only 1 value, got ",
                index.numel(), " value(s)");
    at::maybe_wrap_dim(dim, static_cast<int64_t>(0));
    at::native::resize_output(out, {});
    Tensor flat = out.view({1});
    index_select_out(self.reshape({1}), 0, index.reshape({1}), flat);
    return out;
  }
  at::assert_no_internal_overlap(out);
  at::assert_no_overlap(out, self);
  at::assert_no_overlap(out, index);
  int64_t d = at::maybe_wrap_dim(dim, self.dim());
  std::vector<int64_t> shape = self.sizes().vec();
  shape[d] = index.numel();
  at::native::resize_output(out, shape);
  track_native("aten::index_select.out");
  if (out.numel() == 0) return out;
  tn_tensor o = to_tn_view(out), i = to_tn_view(self), x = to_tn_view(index.reshape({-1}));
  check(tn_index_select_async(current_stream(out.device().index()), "aten::index_select.out", &o, &i,
                              static_cast<int32_t>(d), &x));
  return out;
}

Tensor index_select(const Tensor& self, int64_t dim, const Tensor& index) {
  Tensor out = at::empty({0}, self.options());
  return index_select_out(self, dim, index, out);
}

// out = cond ? self : other, with self and other already of out's dtype and on its device.
Tensor& where_into(const Tensor& cond, const Tensor& self, const Tensor& other, Tensor& out) {
  auto iter = at::TensorIteratorConfig()
                  .check_all_same_dtype(false)
                  .add_output(out)
                  .add_const_input(cond)
                  .add_const_input(self)
                  .add_const_input(other)
                  .build();
  track_native("aten::where.self_out");
  if (iter.numel() == 0) return out;
  tn_tensor o = iter_view(iter, 0), c = iter_view(iter, 1), a = iter_view(iter, 2), b = iter_view(iter, 3);
  check(tn_where_async(current_stream(out.device().index()), "aten::where.self_out", &o, &c, &a, &b));
  return out;
}

// A value on out's device in out's dtype (Python scalars arrive as 0-dim CPU tensors).
Tensor as_operand(const Tensor& t, const Tensor& out) {
  if (t.device() == out.device() && t.scalar_type() == out.scalar_type()) return t;
  return t.to(out.device(), out.scalar_type());
}

Tensor& where_out(const Tensor& cond, const Tensor& self, const Tensor& other, Tensor& out) {
  TORCH_CHECK(cond.scalar_type() == at::kBool,
              "where expected condition to be a boolean tensor, but got a tensor with dtype ", cond.scalar_type());
  if (!elementwise_dtypes_ok({self.scalar_type(), other.scalar_type(), out.scalar_type()}))
    return via_fallback<at::_ops::where_self_out>(cond, self, other, out);
  Tensor c = cond.device() == out.device() ? cond : cond.to(out.device());
  at::native::resize_output(out, at::infer_size(at::infer_size(cond.sizes(), self.sizes()), other.sizes()));
  return where_into(c, as_operand(self, out), as_operand(other, out), out);
}

Tensor where(const Tensor& cond, const Tensor& self, const Tensor& other) {
  auto dtype = at::native::result_type(self, other);
  Tensor out = at::empty({0}, self.options().dtype(dtype).device(cond.device().is_cpu() ? self.device() : cond.device()));
  return where_out(cond, self, other, out);
}

Tensor& masked_fill_scalar(Tensor& self, const Tensor& mask, const c10::Scalar& value) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_fill_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  TORCH_CHECK(!value.isComplex() || self.is_complex(), "value cannot be converted to type ", self.scalar_type(),
              " without overflow");
  if (!elementwise_dtypes_ok({self.scalar_type()}))
    return via_fallback<at::_ops::masked_fill__Scalar>(self, mask, value);
  same_device("masked_fill_", self, mask);
  TORCH_CHECK(at::is_expandable_to(mask.sizes(), self.sizes()), "masked_fill_: the mask of shape ", mask.sizes(),
              " cannot be broadcast to the tensor of shape ", self.sizes());
  Tensor v = at::scalar_tensor(value, self.options());
  return where_into(mask, v, self, self);
}

Tensor& masked_fill_tensor(Tensor& self, const Tensor& mask, const Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
              value.dim(), " dimension(s).");
  return masked_fill_scalar(self, mask, value.item());
}

// The inputs cat copies (1-D empty tensors are skipped, as PyTorch does), the dimension and
// the result's shape, after PyTorch's checks.
struct CatPlan {
  std::vector<Tensor> inputs;
  int64_t dim = 0;
  std::vector<int64_t> shape{0};
};

CatPlan plan_cat(const at::MaterializedITensorListRef& list, int64_t dim) {
  TORCH_CHECK(!list.empty(), "torch.cat(): expected a non-empty list of Tensors");
  for (size_t i = 0; i < list.size(); i++)
    TORCH_CHECK(list[i].get().dim() > 0, "zero-dimensional tensor (at position ", i, ") cannot be concatenated");
  CatPlan plan;
  for (const Tensor& t : list)
    if (!(t.dim() == 1 && t.numel() == 0)) plan.inputs.push_back(t);
  if (plan.inputs.empty()) return plan;
  const Tensor& ref = plan.inputs[0];
  int64_t d = at::maybe_wrap_dim(dim, ref.dim());
  plan.dim = d;
  plan.shape = ref.sizes().vec();
  int64_t total = 0;
  for (size_t i = 0; i < plan.inputs.size(); i++) {
    const Tensor& t = plan.inputs[i];
    same_device("cat", ref, t);
    TORCH_CHECK(t.dim() == ref.dim(), "Tensors must have same number of dimensions: got ", ref.dim(), " and ", t.dim());
    for (int64_t k = 0; k < ref.dim(); k++)
      TORCH_CHECK(k == d || t.size(k) == ref.size(k), "Sizes of tensors must match except in dimension ", d,
                  ". Expected size ", ref.size(k), " but got size ", t.size(k), " for tensor number ", i,
                  " in the list.");
    total += t.size(d);
  }
  plan.shape[d] = total;
  return plan;
}

// Every input into its slice of out, in one launch.
void launch_cat(const CatPlan& plan, const Tensor& out) {
  track_native("aten::cat.out");
  if (out.numel() == 0) return;
  tn_tensor o = to_tn_view(out);
  std::vector<tn_tensor> dst, src;
  int64_t offset = 0, d = plan.dim;
  for (const Tensor& t : plan.inputs) {
    if (t.size(d)) {
      tn_tensor slice = o;
      slice.data = static_cast<char*>(o.data) + offset * o.strides[d] * static_cast<int64_t>(out.element_size());
      slice.sizes[d] = t.size(d);
      dst.push_back(slice);
      src.push_back(to_tn_view(t));
    }
    offset += t.size(d);
  }
  check(tn_copy_many_async(current_stream(out.device().index()), "aten::cat.out", dst.data(), src.data(),
                           static_cast<int32_t>(dst.size())));
}

Tensor& cat_out(const at::ITensorListRef& tensors, int64_t dim, Tensor& out) {
  auto list = tensors.materialize();
  at::assert_no_internal_overlap(out);
  for (const Tensor& t : list) at::assert_no_overlap(out, t);
  CatPlan plan = plan_cat(list, dim);
  at::native::resize_output(out, plan.shape);
  if (!plan.inputs.empty()) launch_cat(plan, out);
  return out;
}

// Functional cat, registered directly for inputs of one dtype that are all contiguous (the
// usual case): the composite form's meta function would check the inputs a second time and
// dispatch again. Mixed dtypes and other layouts (the result's dtype and memory format follow
// PyTorch's rules) take the composite form.
Tensor cat(const at::ITensorListRef& tensors, int64_t dim) {
  auto list = tensors.materialize();
  bool simple = !list.empty();
  for (const Tensor& t : list)
    simple = simple && t.is_contiguous() && t.scalar_type() == list[0].get().scalar_type() &&
             t.device() == list[0].get().device();
  if (!simple) return at::compositeexplicitautogradnonfunctional::cat(tensors, dim);
  CatPlan plan = plan_cat(list, dim);
  Tensor out = at::empty(plan.shape, list[0].get().options());
  if (!plan.inputs.empty()) launch_cat(plan, out);
  return out;
}

Tensor embedding_dense_backward(const Tensor& grad, const Tensor& indices, int64_t num_weights,
                                int64_t padding_idx, bool scale_grad_by_freq) {
  if (scale_grad_by_freq || !elementwise_dtypes_ok({grad.scalar_type()}) || grad.scalar_type() == at::kBool)
    return via_fallback<at::_ops::embedding_dense_backward>(grad, indices, num_weights, padding_idx,
                                                            scale_grad_by_freq);
  track_native("aten::embedding_dense_backward");
  int64_t d = grad.size(-1);
  Tensor out = at::zeros({num_weights, d}, grad.options());
  Tensor src = grad.reshape({-1, d});
  Tensor idx = indices.reshape({-1});
  if (src.numel() == 0) return out;
  tn_tensor o = to_tn_view(out), i = to_tn_view(idx), x = to_tn_view(src);
  check(tn_index_add_rows_async(current_stream(out.device().index()), "aten::embedding_dense_backward", &o, &i,
                                &x, padding_idx < 0 ? -1 : padding_idx));
  return out;
}

// embedding(max_norm=...): the rows the indices name are scaled down in place to max_norm
// where their p-norm (in self's dtype, as the CPU's) exceeds it. A row named twice is
// written twice with the same value.
Tensor& embedding_renorm(Tensor& self, const Tensor& indices, double max_norm, double norm_type) {
  at::checkDim("embedding_renorm_", at::TensorArg(self, "self", 1), 2);
  at::checkScalarTypes("embedding_renorm_", at::TensorArg(indices, "indices", 2), {at::kLong, at::kInt});
  if (!at::isFloatingType(self.scalar_type()) || !elementwise_dtypes_ok({self.scalar_type()}))
    return via_fallback<at::_ops::embedding_renorm_>(self, indices, max_norm, norm_type);
  track_native("aten::embedding_renorm_");
  Tensor idx = indices.reshape({-1});
  if (idx.numel() == 0) return self;
  Tensor rows = self.index_select(0, idx);
  Tensor norms = at::linalg_vector_norm(rows, norm_type, 1, true).to(at::kFloat);
  Tensor scale = at::where(norms.gt(max_norm), at::reciprocal(norms.add(1e-7)).mul(max_norm), at::ones_like(norms));
  self.index_copy_(0, idx, rows.to(at::kFloat).mul(scale).to(self.scalar_type()));
  return self;
}

// Membership against a short list (end-of-sequence ids and the like) as one comparison and
// an any(); long lists go to the fallback.
Tensor& isin_out(const Tensor& elements, const Tensor& test, bool assume_unique, bool invert, Tensor& out) {
  if (test.numel() > 4096 || !elementwise_dtypes_ok({elements.scalar_type(), test.scalar_type()}))
    return via_fallback<at::_ops::isin_Tensor_Tensor_out>(elements, test, assume_unique, invert, out);
  track_native("aten::isin.Tensor_Tensor_out");
  at::native::resize_output(out, elements.sizes());
  Tensor hit = at::eq(elements.unsqueeze(-1), test.reshape({-1})).any(-1);
  return out.copy_(invert ? at::logical_not(hit) : hit);
}

// int32 indices are accepted as PyTorch's CPU kernels accept them.
Tensor long_index(const Tensor& index, const char* op) {
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt || index.numel() == 0, op,
              "(): Expected dtype int64 for index");
  return index.scalar_type() == at::kLong ? index : index.to(at::kLong);
}

tn_scatter_reduce scatter_reduce_code(std::optional<c10::string_view> reduce) {
  if (!reduce) return TN_SCATTER_ASSIGN;
  if (*reduce == "add") return TN_SCATTER_ADD;
  TORCH_CHECK(*reduce == "multiply", "reduce argument must be either add or multiply.");
  return TN_SCATTER_MUL;
}

// out = self with src's values (or a scalar's) written at index along dim, the index's
// shape selecting src; `src` undefined means `value`.
template <class Fallback>
Tensor& scatter_impl(const char* name, const Tensor& self, int64_t dim, const Tensor& raw_index, const Tensor& src,
                     const c10::Scalar& value, tn_scatter_reduce reduce, Tensor& out, Fallback fallback) {
  Tensor index = long_index(raw_index, "scatter");
  if (!elementwise_dtypes_ok({self.scalar_type()}) || (src.defined() && !elementwise_dtypes_ok({src.scalar_type()})))
    return fallback();
  TORCH_CHECK(index.dim() == self.dim() || (index.dim() <= 1 && self.dim() <= 1),
              "Index tensor must have the same number of dimensions as self tensor");
  if (src.defined()) {
    TORCH_CHECK(src.scalar_type() == self.scalar_type(), "scatter(): Expected self.dtype to be equal to src.dtype");
    TORCH_CHECK(src.dim() == self.dim() || (src.dim() <= 1 && self.dim() <= 1),
                "Index tensor must have the same number of dimensions as src tensor");
    same_device("scatter", self, src);
  }
  same_device("scatter", self, index);
  // 0-dim tensors scatter as 1-element vectors
  Tensor s1 = self.dim() == 0 ? self.reshape({1}) : self, i1 = index.dim() == 0 ? index.reshape({1}) : index;
  Tensor x1 = src.defined() && src.dim() == 0 ? src.reshape({1}) : src;
  int64_t d = at::maybe_wrap_dim(dim, s1.dim());
  for (int64_t k = 0; k < s1.dim(); k++)
    TORCH_CHECK((!x1.defined() || i1.size(k) <= x1.size(k)) && (k == d || i1.size(k) <= s1.size(k)),
                "Expected index ", index.sizes(), " to be smaller than self ", self.sizes(), " apart from dimension ",
                d, src.defined() ? " and to be smaller size than src " : "", src.defined() ? src.sizes() : self.sizes());
  at::native::resize_output(out, self.sizes());
  if (!out.is_same(self)) out.copy_(self);
  track_native(name);
  if (index.numel() == 0) return out;
  Tensor src_view = x1.defined() ? x1.as_strided(i1.sizes(), x1.strides(), x1.storage_offset())
                                 : at::scalar_tensor(value, self.options()).expand(i1.sizes());
  Tensor o1 = out.dim() == 0 ? out.reshape({1}) : out;
  tn_tensor o = to_tn_view(o1), i = to_tn_view(i1), x = to_tn_view(src_view);
  check(tn_scatter_async(current_stream(out.device().index()), name, &o, static_cast<int32_t>(d), &i, &x, reduce));
  return out;
}

Tensor& scatter_src_out(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, Tensor& out) {
  return scatter_impl("aten::scatter.src_out", self, dim, index, src, 0, TN_SCATTER_ASSIGN, out,
                      [&]() -> Tensor& { return via_fallback<at::_ops::scatter_src_out>(self, dim, index, src, out); });
}

Tensor& scatter_value_out(const Tensor& self, int64_t dim, const Tensor& index, const c10::Scalar& value, Tensor& out) {
  return scatter_impl("aten::scatter.value_out", self, dim, index, Tensor(), value, TN_SCATTER_ASSIGN, out,
                      [&]() -> Tensor& { return via_fallback<at::_ops::scatter_value_out>(self, dim, index, value, out); });
}

Tensor& scatter_reduce_out(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                           c10::string_view reduce, Tensor& out) {
  return scatter_impl("aten::scatter.reduce_out", self, dim, index, src, 0, scatter_reduce_code(reduce), out,
                      [&]() -> Tensor& {
                        return via_fallback<at::_ops::scatter_reduce_out>(self, dim, index, src, reduce, out);
                      });
}

Tensor& scatter_value_reduce_out(const Tensor& self, int64_t dim, const Tensor& index, const c10::Scalar& value,
                                 c10::string_view reduce, Tensor& out) {
  return scatter_impl("aten::scatter.value_reduce_out", self, dim, index, Tensor(), value, scatter_reduce_code(reduce),
                      out, [&]() -> Tensor& {
                        return via_fallback<at::_ops::scatter_value_reduce_out>(self, dim, index, value, reduce, out);
                      });
}

// scatter_reduce.two: sum / prod / amax / amin on the scatter kernel; mean as a sum divided by
// how many values each position took (self counting as one when included); without self, the
// positions the scatter reaches start from the reduction's identity, as on the CPU.
Tensor& scatter_reduce_two_out(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                               c10::string_view reduce, bool include_self, Tensor& out) {
  auto fallback = [&]() -> Tensor& {
    return via_fallback<at::_ops::scatter_reduce_two_out>(self, dim, index, src, reduce, include_self, out);
  };
  auto type = self.scalar_type();
  bool known = reduce == "sum" || reduce == "prod" || reduce == "mean" || reduce == "amax" || reduce == "amin";
  if (!known || (type == at::kBool && reduce == "mean") || at::isComplexType(type)) return fallback();
  tn_scatter_reduce code = reduce == "prod"   ? TN_SCATTER_MUL
                           : reduce == "amax" ? TN_SCATTER_MAX
                           : reduce == "amin" ? TN_SCATTER_MIN
                                              : TN_SCATTER_ADD;
  Tensor idx = long_index(index, "scatter_reduce"), start = self;
  if (!include_self && index.numel() > 0) {
    c10::Scalar identity = 0;
    bool floating = at::isFloatingType(type);
    if (reduce == "prod") identity = 1;
    if (reduce == "amax" || reduce == "amin") {
      bool lowest = reduce == "amax";
      AT_DISPATCH_ALL_TYPES_AND3(at::kHalf, at::kBFloat16, at::kBool, type, "scatter_reduce", [&] {
        using limits = std::numeric_limits<scalar_t>;
        identity = floating ? c10::Scalar(lowest ? -limits::infinity() : limits::infinity())
                            : c10::Scalar(lowest ? limits::lowest() : limits::max());
      });
    }
    start = at::scatter(self, dim, idx, identity);
  }
  scatter_impl("aten::scatter_reduce.two_out", start, dim, idx, src, 0, code, out, fallback);
  if (reduce == "mean" && index.numel() > 0) {
    Tensor count = include_self ? at::ones_like(out) : at::zeros_like(out);
    count.scatter_add_(dim, idx, at::ones_like(src));
    count.masked_fill_(at::eq(count, 0), 1);
    if (at::isFloatingType(type)) out.div_(count);
    else out.div_(count, "floor");
  }
  return out;
}

Tensor& scatter_add_out(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, Tensor& out) {
  return scatter_impl("aten::scatter_add.out", self, dim, index, src, 0, TN_SCATTER_ADD, out,
                      [&]() -> Tensor& { return via_fallback<at::_ops::scatter_add_out>(self, dim, index, src, out); });
}

Tensor& gather_out(const Tensor& self, int64_t dim, const Tensor& raw_index, bool sparse_grad, Tensor& out) {
  Tensor index = long_index(raw_index, "gather");
  if (index.numel() == 0 && elementwise_dtypes_ok({self.scalar_type()}) && out.scalar_type() == self.scalar_type()) {
    // nothing to read: the CPU checks no shapes either, whatever the index's dimensions
    at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
    track_native("aten::gather.out");
    at::native::resize_output(out, index.sizes());
    return out;
  }
  if (self.dim() == 0 && index.dim() <= 1 && out.scalar_type() == self.scalar_type()) {
    // a 0-dim self gathers as one of size 1 (the index can only hold 0); out has the index's shape
    at::maybe_wrap_dim(dim, 1);
    at::native::resize_output(out, index.sizes());
    Tensor flat = out.view({out.numel()});
    gather_out(self.view({1}), 0, index.view({index.numel()}), sparse_grad, flat);
    return out;
  }
  if (!elementwise_dtypes_ok({self.scalar_type()}) || self.dim() == 0 || index.dim() != self.dim() ||
      out.scalar_type() != self.scalar_type())
    return via_fallback<at::_ops::gather_out>(self, dim, raw_index, sparse_grad, out);
  same_device("gather", self, index);
  int64_t d = at::maybe_wrap_dim(dim, self.dim());
  for (int64_t k = 0; k < self.dim(); k++)
    TORCH_CHECK(k == d || index.size(k) <= self.size(k), "Size does not match at dimension ", k,
                " expected index ", index.sizes(), " to be no larger than self ", self.sizes(),
                " apart from dimension ", d);
  at::native::resize_output(out, index.sizes());
  at::assert_no_internal_overlap(out);
  at::assert_no_overlap(out, self);
  at::assert_no_partial_overlap(out, raw_index);
  track_native("aten::gather.out");
  if (out.numel() == 0) return out;
  tn_tensor o = to_tn_view(out), x = to_tn_view(self), i = to_tn_view(index);
  check(tn_gather_async(current_stream(out.device().index()), "aten::gather.out", &o, &x, static_cast<int32_t>(d), &i));
  return out;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("gather.out", gather_out);
  m.impl("scatter.src_out", scatter_src_out);
  m.impl("scatter.value_out", scatter_value_out);
  m.impl("scatter.reduce_out", scatter_reduce_out);
  m.impl("scatter.value_reduce_out", scatter_value_reduce_out);
  m.impl("scatter_reduce.two_out", scatter_reduce_two_out);
  m.impl("scatter_add.out", scatter_add_out);
  m.impl("embedding_dense_backward", embedding_dense_backward);
  m.impl("embedding_renorm_", embedding_renorm);
  m.impl("isin.Tensor_Tensor_out", isin_out);
  m.impl("index_select.out", index_select_out);
  m.impl("index_select", index_select);
  m.impl("where.self_out", where_out);
  m.impl("where.self", where);
  m.impl("masked_fill_.Scalar", masked_fill_scalar);
  m.impl("masked_fill_.Tensor", masked_fill_tensor);
  m.impl("cat.out", cat_out);
  m.impl("cat", cat);
}

} // namespace torch_neuronx::ops
