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

} // namespace

void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& name = op.schema().operator_name();
  std::string full = name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
  TORCH_CHECK_NOT_IMPLEMENTED(
      !fallback_disabled(), "The operator '", full,
      "' has no native neuron kernel and the CPU fallback is disabled "
      "(TORCH_NEURONX_DISABLE_CPU_FALLBACK=1). Unset that variable to run it on the CPU.");
  if (track_fallback(full)) {
    TORCH_WARN("'", full, "' has no native neuron kernel and runs on the CPU (slow); "
               "see torch_neuronx.get_fallback_ops().");
  }
  at::native::cpu_fallback(op, stack, /*error_on_views=*/true);
}

} // namespace torch_neuronx::ops
