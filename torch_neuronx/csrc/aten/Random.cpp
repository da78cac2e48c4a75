// normal_ and uniform_ (and so randn, rand, nn.init) drawn on the device from the neuron
// generator: the host reserves a Philox offset, the stream does the draw.
#include <ATen/MemoryOverlap.h>
#include <ATen/core/DistributionsHelper.h>
#include <ATen/Utils.h>

#include <mutex>

#include "aten/OpTracking.h"
#include "aten/Ops.h"
#include "aten/TensorView.h"
#include "runtime/Functions.h"
#include "runtime/Generator.h"

namespace torch_neuronx::ops {
namespace {

std::pair<uint64_t, uint64_t> reserve(const at::Tensor& self, std::optional<at::Generator> gen) {
  auto* g = at::get_generator_or_default<NeuronGeneratorImpl>(
      gen, default_generator(self.device().index()));
  TORCH_CHECK(g->device() == self.device(), "the generator is on ", g->device(),
              " but the tensor on ", self.device());
  std::lock_guard<std::mutex> lock(g->mutex_);
  return g->next_launch();
}

void check_floating(const at::Tensor& self, const char* op) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), op, " not implemented for '",
              self.scalar_type(), "'");
  at::assert_no_internal_overlap(self);
}

} // namespace

at::Tensor& normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  track_native("aten::normal_");
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  check_floating(self, "normal_kernel_cpu");
  if (self.numel() == 0) return self;
  auto [seed, offset] = reserve(self, gen);
  tn_tensor d = to_tn_view(self);
  check(tn_random_normal_async(current_stream(self.device().index()), &d, seed, offset, mean, std));
  return self;
}

at::Tensor& uniform_(at::Tensor& self, double from, double to, std::optional<at::Generator> gen) {
  track_native("aten::uniform_");
  check_floating(self, "check_uniform_bounds");
  TORCH_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=", from,
              " > to=", to);
  if (self.numel() == 0) return self;
  auto [seed, offset] = reserve(self, gen);
  tn_tensor d = to_tn_view(self);
  check(tn_random_uniform_async(current_stream(self.device().index()), &d, seed, offset, from, to));
  return self;
}

} // namespace torch_neuronx::ops
