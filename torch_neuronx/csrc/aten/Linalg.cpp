// linalg.solve_triangular on the batched substitution kernel: batch dimensions broadcast,
// a right-hand solve X A = B runs as the left solve of the transposes (views, no copies).
// _linalg_svd (and so linalg.svd, svdvals, matrix_norm's "nuc" and 2, pinv) on the Jacobi
// kernel; like CUDA's, it synchronises to check its input (NaN raises LinAlgError).
#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_linalg_svd.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/linalg_solve_triangular.h>
#include <torch/library.h>

#include "aten/Iter.h"
#include "aten/OpTracking.h"
#include "aten/TensorView.h"
#include "runtime/Functions.h"

namespace torch_neuronx::ops {
namespace {

using at::Tensor;

Tensor& solve_triangular_out(const Tensor& a, const Tensor& b, bool upper, bool left, bool unitriangular, Tensor& out) {
  TORCH_CHECK(a.dim() >= 2 && b.dim() >= 2, "linalg.solve_triangular: The input tensor A must have at least 2 "
              "dimensions.");
  TORCH_CHECK(a.size(-1) == a.size(-2), "linalg.solve_triangular: A must be batches of square matrices, but they are ",
              a.size(-2), " by ", a.size(-1), " matrices");
  int64_t n = a.size(-1);
  TORCH_CHECK(left ? b.size(-2) == n : b.size(-1) == n, "linalg.solve_triangular: Incompatible shapes of A and B for "
              "the equation ", left ? "AX = B" : "XA = B", " (", a.sizes(), " and ", b.sizes(), ")");
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "linalg.solve_triangular: Expected A and B to have the same dtype, "
              "but found A of type ", a.scalar_type(), " and B of type ", b.scalar_type(), " instead");
  auto type = a.scalar_type();
  if (!(type == at::kFloat || type == at::kDouble || type == at::kBFloat16 || type == at::kHalf) ||
      out.scalar_type() != type)
    return via_fallback<at::_ops::linalg_solve_triangular_out>(a, b, upper, left, unitriangular, out);
  track_native("aten::linalg_solve_triangular.out");
  auto batch = at::infer_size(a.sizes().slice(0, a.dim() - 2), b.sizes().slice(0, b.dim() - 2));
  std::vector<int64_t> a_shape = batch, b_shape = batch;
  a_shape.insert(a_shape.end(), {n, n});
  b_shape.insert(b_shape.end(), {b.size(-2), b.size(-1)});
  at::native::resize_output(out, b_shape);
  if (out.numel() == 0) return out;
  // (batch..., r, c) -> (batch, r, c): reshape copies only when the expanded layout needs it
  Tensor a3 = a.expand(a_shape).reshape({-1, n, n});
  Tensor b3 = b.expand(b_shape).reshape({-1, b.size(-2), b.size(-1)});
  Tensor o3 = out.is_contiguous() ? out.view({-1, b.size(-2), b.size(-1)}) : at::empty_like(b3);
  if (!left) {  // X A = B  <=>  A^T X^T = B^T, with the other triangle
    a3 = a3.transpose(1, 2);
    b3 = b3.transpose(1, 2);
    o3 = o3.transpose(1, 2);
    upper = !upper;
  }
  tn_tensor tv_o = to_tn_view(o3), tv_a = to_tn_view(a3), tv_b = to_tn_view(b3);
  check(tn_solve_triangular_async(current_stream(out.device().index()), "aten::linalg_solve_triangular.out", &tv_o,
                                  &tv_a, &tv_b, upper, unitriangular));
  if (!out.is_contiguous()) out.copy_((left ? o3 : o3.transpose(1, 2)).reshape(b_shape));
  return out;
}

Tensor solve_triangular(const Tensor& a, const Tensor& b, bool upper, bool left, bool unitriangular) {
  Tensor out = at::empty({0}, b.options());
  return solve_triangular_out(a, b, upper, left, unitriangular, out);
}

// (batch..., r, c) as (batch, r, c) (also when a side is empty)
Tensor as_batch3(const Tensor& t) {
  int64_t batch = 1;
  for (int64_t d = 0; d + 2 < t.dim(); d++) batch *= t.size(d);
  return t.reshape({batch, t.size(-2), t.size(-1)});
}

std::tuple<Tensor&, Tensor&, Tensor&> svd_out(const Tensor& a, bool full_matrices, bool compute_uv,
                                               std::optional<c10::string_view> driver, Tensor& u, Tensor& s, Tensor& vh) {
  TORCH_CHECK(a.dim() >= 2, "linalg.svd: The input tensor A must have at least 2 dimensions.");
  auto type = a.scalar_type();
  // Past kMaxJacobiSide the host's LAPACK (bidiagonalisation) beats Jacobi's sweeps by more
  // than 8x, so larger matrices take the CPU fallback, counted and warned about as usual.
  constexpr int64_t kMaxJacobiSide = 64;
  if (!(type == at::kFloat || type == at::kDouble) || s.scalar_type() != type ||
      (compute_uv && (u.scalar_type() != type || vh.scalar_type() != type)) ||
      std::min(a.size(-2), a.size(-1)) > kMaxJacobiSide)
    return via_fallback<at::_ops::_linalg_svd_U>(a, full_matrices, compute_uv, driver, u, s, vh);
  track_native("aten::_linalg_svd.U");
  int64_t m = a.size(-2), n = a.size(-1), k = std::min(m, n);
  std::vector<int64_t> batch(a.sizes().begin(), a.sizes().end() - 2);
  auto shape = [&](int64_t r, int64_t c) {
    std::vector<int64_t> v = batch;
    v.insert(v.end(), {r, c});
    return v;
  };
  // U and Vh column-major per matrix, as LAPACK (and PyTorch's meta function) lay them out
  auto column_major = [&](Tensor& t, int64_t r, int64_t c) {
    bool ok = t.dim() == a.dim() && t.sizes().vec() == shape(r, c) && t.stride(-2) == 1 &&
              t.transpose(-2, -1).is_contiguous();
    if (!ok) at::native::resize_output(t, shape(c, r)), t.transpose_(-2, -1);
  };
  std::vector<int64_t> s_shape = batch;
  s_shape.push_back(k);
  at::native::resize_output(s, s_shape);
  if (compute_uv) {
    column_major(u, m, full_matrices ? m : k);
    column_major(vh, full_matrices ? n : k, n);
  } else {
    at::native::resize_output(u, {0});
    at::native::resize_output(vh, {0});
  }
  Tensor a3 = as_batch3(a), s3 = s.reshape({a3.size(0), 1, k});
  tn_tensor ta = to_tn_view(a3), ts = to_tn_view(s3), tu{}, tvh{};
  if (compute_uv) tu = to_tn_view(as_batch3(u)), tvh = to_tn_view(as_batch3(vh));
  std::vector<uint8_t> bad(static_cast<size_t>(std::max<int64_t>(a3.size(0), 1)), 0);
  tn_stream_t stream = current_stream(a.device().index());
  check(tn_svd_async(stream, "aten::_linalg_svd.U", &ta, compute_uv ? &tu : nullptr, &ts, compute_uv ? &tvh : nullptr,
                     bad.data()));
  check(tn_stream_synchronize(stream));
  for (size_t b = 0; b < bad.size(); b++)
    TORCH_CHECK_LINALG(!bad[b], "linalg.svd: ", a.dim() > 2 ? "(Batch element " + std::to_string(b) + "): " : "",
                       "The algorithm failed to converge because the input matrix contained non-finite values.");
  return {u, s, vh};
}

std::tuple<Tensor, Tensor, Tensor> svd(const Tensor& a, bool full_matrices, bool compute_uv,
                                       std::optional<c10::string_view> driver) {
  Tensor u = at::empty({0}, a.options()), s = at::empty({0}, a.options()), vh = at::empty({0}, a.options());
  svd_out(a, full_matrices, compute_uv, driver, u, s, vh);
  return {u, s, vh};
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_linalg_svd.U", svd_out);
  m.impl("_linalg_svd", svd);
  m.impl("linalg_solve_triangular.out", solve_triangular_out);
  m.impl("linalg_solve_triangular", solve_triangular);
}

} // namespace torch_neuronx::ops
