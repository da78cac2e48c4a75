// TensorIterator -> C elementwise launches. TensorIterator does what PyTorch's own kernels
// rely on it for (broadcasting, type promotion, output resizing, memory-overlap checks); the C
// kernels get its operands as strided views and do the arithmetic.
#pragma once

#include <ATen/TensorIterator.h>
#include <ATen/native/CPUFallback.h>

#include <string>

#include "aten/Ops.h"
#include "tn/tn.h"

namespace torch_neuronx::ops {

// True when the C kernels handle every operand's dtype (not complex, not exotic types).
bool elementwise_dtypes_ok(std::initializer_list<c10::ScalarType> types);
bool elementwise_dtypes_ok(const at::TensorIteratorBase& iter);

// Operand `arg` of an iterator as a view (dimensions slowest-first, strides in elements).
tn_tensor iter_view(const at::TensorIteratorBase& iter, int arg);

void launch_unary(const char* name, tn_unary_op op, const at::TensorIteratorBase& iter);
// Three inputs (or two, for lerp with a scalar weight) and one output.
void launch_ternary(const char* name, tn_ternary_op op, const at::TensorIteratorBase& iter, double scalar);
void launch_binary(const char* name, tn_binary_op op, const at::TensorIteratorBase& iter,
                   const c10::Scalar& alpha = 1);

// "aten::name.overload" of an ATEN_OP, kept for the life of the process (stream error
// messages keep a pointer to it).
template <class Op>
const char* op_name() {
  static const std::string name = std::string(Op::name) +
      (std::string(Op::overload_name).empty() ? "" : "." + std::string(Op::overload_name));
  return name.c_str();
}

// Runs an op through the CPU fallback (counted as such), for dtypes the C kernels lack.
template <class Op, class... Args>
decltype(auto) via_fallback(Args&&... args) {
  return at::native::call_fallback_fn<&cpu_fallback, Op>::call(std::forward<Args>(args)...);
}

// Runs binary op `code` natively when the C kernels take the iterator's dtypes; otherwise the
// op runs through the CPU fallback with its original arguments. An undefined `out` (a
// functional form) takes the result TensorIterator allocated.
template <class Op, class... Args>
at::Tensor& binary(tn_binary_op code, const at::TensorIteratorBase& iter, at::Tensor& out,
                   const c10::Scalar& alpha, Args&&... args) {
  if (!out.defined()) out = iter.output();
  if (!elementwise_dtypes_ok(iter)) return via_fallback<Op>(std::forward<Args>(args)...);
  launch_binary(op_name<Op>(), code, iter, alpha);
  return out;
}

} // namespace torch_neuronx::ops
