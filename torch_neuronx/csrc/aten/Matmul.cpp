// Matrix products: mm, addmm (nn.Linear), bmm, baddbmm (attention) on the C GEMM. Operands
// keep their strides (transposes are free); integer products run on the C integer GEMM;
// float64 and complex products go to the CPU fallback.
#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/baddbmm.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/mm.h>

#include <ATen/ops/addmv.h>
#include <ATen/ops/dot.h>
#include "aten/Iter.h"
#include "aten/OpTracking.h"
#include "aten/PackedWeights.h"
#include "aten/TensorView.h"
#include "runtime/Functions.h"

namespace torch_neuronx::ops {
namespace {

using at::Tensor;

bool gemm_dtype(c10::ScalarType t) {
  return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf || at::isIntegralType(t, /*includeBool=*/false);
}

// The last two dimensions as a matrix; the first (for 3-D tensors) as the batch.
tn_matrix matrix(const Tensor& t) {
  int64_t d = t.dim();
  tn_matrix m{};
  m.data = t.numel() ? const_cast<void*>(t.const_data_ptr()) : nullptr;
  m.dtype = to_tn_dtype(t.scalar_type());
  m.row_stride = t.stride(d - 2);
  m.col_stride = t.stride(d - 1);
  m.batch_stride = d == 3 ? t.stride(0) : 0;
  return m;
}

void check_same_device(const char* op, std::initializer_list<const Tensor*> tensors) {
  const Tensor* first = *tensors.begin();
  for (const Tensor* t : tensors)
    TORCH_CHECK(t->device() == first->device(),
                "Expected all tensors to be on the same device, but found at least two devices, ",
                first->device(), " and ", t->device(), "! (in ", op, ")");
}

void check_operands(const char* op, const Tensor& a, const Tensor& b, int64_t dims) {
  check_same_device(op, {&a, &b});
  TORCH_CHECK(a.dim() == dims, op, ": self must be a ", dims == 2 ? "matrix" : "3D tensor");
  TORCH_CHECK(b.dim() == dims, op, ": mat2 must be a ", dims == 2 ? "matrix" : "3D tensor");
  TORCH_CHECK(a.size(-1) == b.size(-2), "mat1 and mat2 shapes cannot be multiplied (",
              a.size(-2), "x", a.size(-1), " and ", b.size(-2), "x", b.size(-1), ")");
  if (dims == 3)
    TORCH_CHECK(a.size(0) == b.size(0), "batch1 and batch2 must have same number of batches, got ",
                a.size(0), " and ", b.size(0));
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "expected m1 and m2 to have the same dtype, but got: ",
              a.scalar_type(), " != ", b.scalar_type());
}

// out = beta * out + alpha * a @ b (out already holds the addend when beta != 0).
void gemm(const char* name, const Tensor& a, const Tensor& b, Tensor& out, const c10::Scalar& beta,
          const c10::Scalar& alpha) {
  track_native(name);
  if (out.numel() == 0) return;
  tn_gemm g{};
  g.batch = a.dim() == 3 ? a.size(0) : 1;
  g.m = a.size(-2);
  g.k = a.size(-1);
  g.n = b.size(-1);
  g.a = matrix(a);
  g.b = matrix(b);
  g.c = matrix(out);
  if (at::isIntegralType(out.scalar_type(), /*includeBool=*/false)) {
    check(tn_gemm_int_async(current_stream(out.device().index()), name, &g, alpha.toLong(), beta.toLong()));
    return;
  }
  g.alpha = alpha.toFloat();
  g.beta = beta.toFloat();
  tn_stream_t stream = current_stream(out.device().index());
  g.b_packed = packed_b(b, g, stream);
  check(tn_gemm_async(stream, name, &g));
}

bool native(const Tensor& a, const Tensor& b, const Tensor& out) {
  return gemm_dtype(a.scalar_type()) && a.scalar_type() == b.scalar_type() &&
         out.scalar_type() == a.scalar_type();
}

Tensor& mm_out(const Tensor& self, const Tensor& mat2, Tensor& out) {
  check_operands("mm", self, mat2, 2);
  check_same_device("mm", {&self, &out});
  if (!native(self, mat2, out)) return via_fallback<at::_ops::mm_out>(self, mat2, out);
  at::native::resize_output(out, {self.size(0), mat2.size(1)});
  gemm("aten::mm.out", self, mat2, out, 0, 1);
  return out;
}

Tensor& bmm_out(const Tensor& self, const Tensor& mat2, Tensor& out) {
  check_operands("bmm", self, mat2, 3);
  check_same_device("bmm", {&self, &out});
  if (!native(self, mat2, out)) return via_fallback<at::_ops::bmm_out>(self, mat2, out);
  at::native::resize_output(out, {self.size(0), self.size(1), mat2.size(2)});
  gemm("aten::bmm.out", self, mat2, out, 0, 1);
  return out;
}

// out = beta * input + alpha * (a @ b), input broadcast to out's shape.
Tensor& add_product(const char* name, const Tensor& input, const Tensor& a, const Tensor& b,
                    const c10::Scalar& beta, const c10::Scalar& alpha, Tensor& out,
                    c10::IntArrayRef shape) {
  at::native::resize_output(out, shape);
  bool use_input = beta.toComplexDouble() != 0.0;
  if (use_input && !out.is_same(input)) {
    TORCH_CHECK(at::is_expandable_to(input.sizes(), shape), name, ": the input of shape ",
                input.sizes(), " cannot be broadcast to ", shape);
    out.copy_(input.expand(shape));
  }
  gemm(name, a, b, out, use_input ? beta : c10::Scalar(0), alpha);
  return out;
}

Tensor& addmm_out(const Tensor& input, const Tensor& mat1, const Tensor& mat2, const c10::Scalar& beta,
                  const c10::Scalar& alpha, Tensor& out) {
  check_operands("addmm", mat1, mat2, 2);
  check_same_device("addmm", {&mat1, &input, &out});
  if (!native(mat1, mat2, out) || input.scalar_type() != out.scalar_type())
    return via_fallback<at::_ops::addmm_out>(input, mat1, mat2, beta, alpha, out);
  return add_product("aten::addmm.out", input, mat1, mat2, beta, alpha, out,
                     {mat1.size(0), mat2.size(1)});
}

Tensor& baddbmm_out(const Tensor& input, const Tensor& b1, const Tensor& b2, const c10::Scalar& beta,
                    const c10::Scalar& alpha, Tensor& out) {
  check_operands("baddbmm", b1, b2, 3);
  check_same_device("baddbmm", {&b1, &input, &out});
  if (!native(b1, b2, out) || input.scalar_type() != out.scalar_type())
    return via_fallback<at::_ops::baddbmm_out>(input, b1, b2, beta, alpha, out);
  return add_product("aten::baddbmm.out", input, b1, b2, beta, alpha, out,
                     {b1.size(0), b1.size(1), b2.size(2)});
}

// Vector products as matrix products of one row or column.
Tensor dot(const Tensor& self, const Tensor& other) {
  TORCH_CHECK(self.dim() == 1 && other.dim() == 1, "1D tensors expected, but got ", self.dim(), "D and ",
              other.dim(), "D tensors");
  TORCH_CHECK(self.scalar_type() == other.scalar_type(), "dot : expected both vectors to have same dtype, but found ",
              self.scalar_type(), " and ", other.scalar_type());
  TORCH_CHECK(self.numel() == other.numel(), "inconsistent tensor size, expected tensor [", self.numel(),
              "] and src [", other.numel(), "] to have the same number of elements, but got ", self.numel(), " and ",
              other.numel(), " elements respectively");
  if (!gemm_dtype(self.scalar_type())) return via_fallback<at::_ops::dot>(self, other);
  track_native("aten::dot");
  return at::mm(self.unsqueeze(0), other.unsqueeze(1)).reshape({});
}

Tensor& addmv_out(const Tensor& input, const Tensor& mat, const Tensor& vec, const c10::Scalar& beta,
                  const c10::Scalar& alpha, Tensor& out) {
  TORCH_CHECK(mat.dim() == 2 && vec.dim() == 1, "vector + matrix @ vector expected, got ", input.dim(), ", ",
              mat.dim(), ", ", vec.dim());
  TORCH_CHECK(mat.size(1) == vec.size(0) && (input.numel() == mat.size(0) || input.numel() == 1),
              "size mismatch, got input (", input.size(0), "), mat (", mat.size(0), "x", mat.size(1), "), vec (",
              vec.size(0), ")");
  if (!gemm_dtype(mat.scalar_type())) return via_fallback<at::_ops::addmv_out>(input, mat, vec, beta, alpha, out);
  track_native("aten::addmv.out");
  Tensor r = at::addmm(input.dim() == 1 ? input.unsqueeze(1) : input, mat, vec.unsqueeze(1), beta, alpha);
  at::native::resize_output(out, {mat.size(0)});
  return out.copy_(r.squeeze(1));
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mm.out", mm_out);
  m.impl("bmm.out", bmm_out);
  m.impl("addmm.out", addmm_out);
  m.impl("baddbmm.out", baddbmm_out);
  m.impl("dot", dot);
  m.impl("addmv.out", addmv_out);
}

} // namespace torch_neuronx::ops
