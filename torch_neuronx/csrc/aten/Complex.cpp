// Complex arithmetic through real views: view_as_real turns a complex tensor into a float
// tensor with a trailing pair (real, imaginary), so a product or the polar form is a few
// native real ops. This is what complex rotary embeddings need (freqs = polar(1, angles),
// then q * freqs).
#include <ATen/ExpandUtils.h>
#include <ATen/TensorOperators.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/cos.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/add.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/polar.h>
#include <ATen/ops/sin.h>
#include <ATen/ops/view_as_real.h>
#include <torch/library.h>

#include "aten/Iter.h"
#include "aten/OpTracking.h"
#include "aten/Ops.h"

namespace torch_neuronx::ops {

using at::Tensor;

namespace {

// Writes re + i*im into the complex tensor out (re and im broadcast to out's shape).
void store_pair(Tensor& out, const Tensor& re, const Tensor& im) {
  auto pair = at::view_as_real(out);
  pair.select(-1, 0).copy_(re);
  pair.select(-1, 1).copy_(im);
}

Tensor& polar_out(const Tensor& abs, const Tensor& angle, Tensor& out) {
  TORCH_CHECK(abs.scalar_type() == angle.scalar_type(), "Expected object of scalar type ", abs.scalar_type(),
              " but got scalar type ", angle.scalar_type(), " for second argument");
  auto type = abs.scalar_type();
  if (!(type == at::kFloat || type == at::kDouble) || out.scalar_type() != c10::toComplexType(type))
    return via_fallback<at::_ops::polar_out>(abs, angle, out);
  track_native("aten::polar.out");
  at::native::resize_output(out, at::infer_size(abs.sizes(), angle.sizes()));
  if (out.numel() == 0) return out;
  store_pair(out, abs * at::cos(angle), abs * at::sin(angle));
  return out;
}

} // namespace

// (a + bi)(c + di) = (ac - bd) + (ad + bc)i, and (a + bi) r = ar + bri for a real r (a Python
// number, or a real tensor); the complex operands must have out's dtype.
bool complex_mul_out(const Tensor& self, const Tensor& other, Tensor& out) {
  auto type = out.scalar_type();
  auto ok = [&](const Tensor& t) { return t.scalar_type() == type || at::isFloatingType(t.scalar_type()); };
  if (!(type == at::kComplexFloat || type == at::kComplexDouble) || !ok(self) || !ok(other))
    return false;
  track_native("aten::mul.out");
  auto shape = at::infer_size(self.sizes(), other.sizes());
  Tensor re, im;  // computed before out is written: out may alias an operand
  if (self.is_complex() && other.is_complex()) {
    auto x = at::view_as_real(self.expand(shape)), y = at::view_as_real(other.expand(shape));
    auto a = x.select(-1, 0), b = x.select(-1, 1), c = y.select(-1, 0), d = y.select(-1, 1);
    re = a * c - b * d;
    im = a * d + b * c;
  } else {
    const Tensor& z = self.is_complex() ? self : other;
    const Tensor& r = self.is_complex() ? other : self;
    auto x = at::view_as_real(z.expand(shape));
    re = x.select(-1, 0) * r;
    im = x.select(-1, 1) * r;
  }
  at::native::resize_output(out, shape);
  if (out.numel() != 0) store_pair(out, re, im);
  return true;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("polar.out", polar_out);
}

} // namespace torch_neuronx::ops
