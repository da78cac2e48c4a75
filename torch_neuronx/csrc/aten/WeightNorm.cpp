// The fused weight norm nn.utils.weight_norm and its parametrization reach (w = g v / ||v||,
// the norm over every dimension but `dim`, which is the first or the last) and its backward,
// composed from native ops (no element loops here). As on the CPU, half-precision inputs are
// computed in float32, the norms are returned in float32 and the results rounded once.
#include <ATen/OpMathType.h>
#include <ATen/ops/_weight_norm_interface.h>
#include <ATen/ops/_weight_norm_interface_backward.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/div.h>
#include <ATen/ops/linalg_vector_norm.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>

#include "aten/Iter.h"
#include "aten/OpTracking.h"

namespace torch_neuronx::ops {
namespace {

using at::Tensor;

// The dimensions the norm runs over, and the shape that broadcasts g and the norms against v
// (v's rank, size 1 but at `dim`).
struct NormShape {
  std::vector<int64_t> dims, broadcast;
};

NormShape norm_shape(const Tensor& v, const Tensor& g, int64_t dim) {
  TORCH_CHECK(v.dim() > 0 && (dim == 0 || dim == v.dim() - 1),
              "_weight_norm_interface: dim must be the first or the last dimension of v (a ",
              v.dim(), "-d tensor), got ", dim, "; torch._weight_norm takes any dim");
  TORCH_CHECK(g.numel() == v.size(dim), "_weight_norm_interface: g has ", g.numel(),
              " elements, expected v.size(", dim, ") = ", v.size(dim));
  NormShape s;
  for (int64_t d = 0; d < v.dim(); d++) {
    if (d != dim) s.dims.push_back(d);
    s.broadcast.push_back(d == dim ? v.size(d) : 1);
  }
  return s;
}

bool weight_norm_dtypes_ok(std::initializer_list<c10::ScalarType> types) {
  for (auto t : types)
    if (!at::isFloatingType(t)) return false;
  return elementwise_dtypes_ok(types);
}

std::tuple<Tensor, Tensor> weight_norm_interface(const Tensor& v, const Tensor& g, int64_t dim) {
  if (!weight_norm_dtypes_ok({v.scalar_type(), g.scalar_type()}))
    return via_fallback<at::_ops::_weight_norm_interface>(v, g, dim);
  track_native("aten::_weight_norm_interface");
  NormShape s = norm_shape(v, g, dim);
  auto math = at::toOpMathType(v.scalar_type());
  Tensor norms = s.dims.empty() ? at::abs(v).to(math)
                                : at::linalg_vector_norm(v, 2, s.dims, /*keepdim=*/true, math);
  Tensor w = at::mul(v.to(math), at::div(g.reshape(s.broadcast).to(math), norms));
  return {w.to(v.scalar_type()), norms.reshape(g.sizes())};
}

// grad_g = sum(grad_w v) / ||v||, grad_v = (g / ||v||) (grad_w - v grad_g / ||v||).
std::tuple<Tensor, Tensor> weight_norm_interface_backward(const Tensor& grad_w, const Tensor& v,
                                                          const Tensor& g, const Tensor& norms,
                                                          int64_t dim) {
  if (!weight_norm_dtypes_ok({grad_w.scalar_type(), v.scalar_type(), g.scalar_type(),
                              norms.scalar_type()}))
    return via_fallback<at::_ops::_weight_norm_interface_backward>(grad_w, v, g, norms, dim);
  track_native("aten::_weight_norm_interface_backward");
  NormShape s = norm_shape(v, g, dim);
  auto math = at::toOpMathType(v.scalar_type());
  Tensor vm = v.to(math), gw = grad_w.to(math), n = norms.reshape(s.broadcast).to(math);
  Tensor dot = s.dims.empty() ? at::mul(gw, vm) : at::sum(at::mul(gw, vm), s.dims, /*keepdim=*/true);
  Tensor grad_g = at::div(dot, n);
  Tensor grad_v = at::mul(at::div(g.reshape(s.broadcast).to(math), n),
                          at::sub(gw, at::mul(vm, at::div(grad_g, n))));
  return {grad_v.to(v.scalar_type()), grad_g.reshape(g.sizes()).to(g.scalar_type())};
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_weight_norm_interface", weight_norm_interface);
  m.impl("_weight_norm_interface_backward", weight_norm_interface_backward);
}

} // namespace torch_neuronx::ops
