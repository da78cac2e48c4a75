// linalg.solve_triangular on the batched substitution kernel: batch dimensions broadcast,
// a right-hand solve X A = B runs as the left solve of the transposes (views, no copies).
#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
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

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("linalg_solve_triangular.out", solve_triangular_out);
  m.impl("linalg_solve_triangular", solve_triangular);
}

} // namespace torch_neuronx::ops
