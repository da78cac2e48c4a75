// The boxed CPU fallback for ops without a native neuron kernel: counted per op, warned once
// per op, refused when TORCH_NEURONX_DISABLE_CPU_FALLBACK=1.
#include <ATen/native/CPUFallback.h>

#include <cstdlib>
#include <cstring>

#include "aten/OpTracking.h"
#include "aten/Ops.h"

namespace torch_neuronx::ops {
namespace {

bool fallback_disabled() {
  const char* v = std::getenv("TORCH_NEURONX_DISABLE_CPU_FALLBACK");
  return v && std::strcmp(v, "1") == 0;
}

// The fallback moves every argument to the CPU, which would hide a device mix-up that a native
// kernel refuses: check as PyTorch's kernels do (a 0-dim CPU tensor passes as a scalar).
void check_same_device(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                       const std::string& name) {
  size_t n = op.schema().arguments().size();
  std::optional<c10::Device> first;
  auto visit = [&](const at::Tensor& t) {
    if (!t.defined() || (t.is_cpu() && t.dim() == 0)) return;
    if (!first) {
      first = t.device();
    } else {
      TORCH_CHECK(*first == t.device(),
                  "Expected all tensors to be on the same device, but found at least two "
                  "devices, ", *first, " and ", t.device(), "! (in ", name, ")");
    }
  };
  for (size_t i = stack.size() - n; i < stack.size(); i++) {
    const c10::IValue& v = stack[i];
    if (v.isTensor()) {
      visit(v.toTensor());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorVector()) visit(t);
    } else if (v.isOptionalTensorList()) {
      for (const auto& ref : v.toOptionalTensorList()) {
        std::optional<at::Tensor> t = ref;
        if (t.has_value()) visit(*t);
      }
    }
  }
}

} // namespace

void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& name = op.schema().operator_name();
  std::string full = name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
  TORCH_CHECK_NOT_IMPLEMENTED(
      !fallback_disabled(), "The operator '", full,
      "' has no native neuron kernel and the CPU fallback is disabled "
      "(TORCH_NEURONX_DISABLE_CPU_FALLBACK=1). Unset that variable to run it on the CPU.");
  check_same_device(op, *stack, full);
  if (track_fallback(full)) {
    TORCH_WARN("'", full, "' has no native neuron kernel and runs on the CPU (slow); "
               "see torch_neuronx.get_fallback_ops().");
  }
  at::native::cpu_fallback(op, stack, /*error_on_views=*/true);
}

} // namespace torch_neuronx::ops
