#include "aten/Iter.h"

#include "aten/OpTracking.h"
#include "aten/TensorView.h"
#include "runtime/Functions.h"

namespace torch_neuronx::ops {
namespace {

bool supported(c10::ScalarType t) {
  switch (t) {
    case c10::kBool: case c10::kByte: case c10::kChar: case c10::kShort: case c10::kInt:
    case c10::kLong: case c10::kHalf: case c10::kBFloat16: case c10::kFloat: case c10::kDouble:
      return true;
    default:
      return false;
  }
}

} // namespace

// TensorIterator lists dimensions fastest-first with byte strides; views want the opposite.
tn_tensor iter_view(const at::TensorIteratorBase& iter, int arg) {
  TORCH_CHECK(iter.ndim() <= TN_MAX_DIMS, "neuron elementwise ops support at most ",
              TN_MAX_DIMS, " dimensions after coalescing, got ", iter.ndim());
  tn_tensor v{};
  v.data = iter.data_ptr(arg);
  v.dtype = to_tn_dtype(iter.dtype(arg));
  v.ndim = static_cast<int32_t>(iter.ndim());
  int64_t es = static_cast<int64_t>(c10::elementSize(iter.dtype(arg)));
  auto shape = iter.shape();
  auto strides = iter.strides(arg);
  for (int d = 0; d < v.ndim; d++) {
    v.sizes[v.ndim - 1 - d] = shape[d];
    v.strides[v.ndim - 1 - d] = strides[d] / es;
  }
  return v;
}

namespace {

tn_input input_of(const at::TensorIteratorBase& iter, int arg) {
  tn_input in{};
  if (iter.is_cpu_scalar(arg)) {
    // A Python number (or 0-dim CPU tensor): its value travels with the launch.
    in.scalar = 1;
    in.t.dtype = to_tn_dtype(iter.dtype(arg));
    in.value = to_tn_scalar(iter.tensor(arg).item());
  } else {
    in.t = iter_view(iter, arg);
  }
  return in;
}

tn_stream_t stream_of(const at::TensorIteratorBase& iter) {
  return current_stream(iter.device(0).index());
}

} // namespace

bool elementwise_dtypes_ok(std::initializer_list<c10::ScalarType> types) {
  for (auto t : types)
    if (!supported(t)) return false;
  return true;
}

bool elementwise_dtypes_ok(const at::TensorIteratorBase& iter) {
  for (int i = 0; i < iter.ntensors(); i++)
    if (!supported(iter.dtype(i))) return false;
  return supported(iter.common_dtype());
}

void launch_unary(const char* name, tn_unary_op op, const at::TensorIteratorBase& iter) {
  track_native(name);
  if (iter.numel() == 0) return;
  tn_tensor out = iter_view(iter, 0);
  tn_tensor in = iter_view(iter, 1);
  check(tn_unary_async(stream_of(iter), name, op, &out, &in, to_tn_dtype(iter.common_dtype())));
}

void launch_binary(const char* name, tn_binary_op op, const at::TensorIteratorBase& iter,
                   const c10::Scalar& alpha) {
  track_native(name);
  if (iter.numel() == 0) return;
  tn_tensor out = iter_view(iter, 0);
  tn_input a = input_of(iter, 1);
  tn_input b = input_of(iter, 2);
  tn_scalar al = to_tn_scalar(alpha);
  check(tn_binary_async(stream_of(iter), name, op, &out, &a, &b, &al,
                        to_tn_dtype(iter.common_dtype())));
}

void launch_ternary(const char* name, tn_ternary_op op, const at::TensorIteratorBase& iter, double scalar) {
  track_native(name);
  if (iter.numel() == 0) return;
  tn_tensor out = iter_view(iter, 0), a = iter_view(iter, 1), b = iter_view(iter, 2);
  tn_tensor c = iter.ninputs() == 3 ? iter_view(iter, 3) : b;
  check(tn_ternary_async(stream_of(iter), name, op, &out, &a, &b, iter.ninputs() == 3 ? &c : nullptr, scalar,
                         to_tn_dtype(iter.common_dtype())));
}

} // namespace torch_neuronx::ops
