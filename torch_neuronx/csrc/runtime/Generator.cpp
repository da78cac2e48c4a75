#include "runtime/Generator.h"

#include <ATen/Utils.h>
#include <ATen/core/DistributionsHelper.h>
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <c10/core/ScalarType.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <deque>
#include <vector>

#include "runtime/Functions.h"

namespace torch_neuronx {

// Same default seed as PyTorch's other generators.
constexpr uint64_t kDefaultSeed = 67280421310721ULL;
constexpr size_t kStateBytes = 2 * sizeof(uint64_t);

NeuronGeneratorImpl::NeuronGeneratorImpl(c10::DeviceIndex device)
    : c10::GeneratorImpl(c10::Device(kNeuron, device), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      seed_(kDefaultSeed) {}

void NeuronGeneratorImpl::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
}

uint64_t NeuronGeneratorImpl::current_seed() const {
  return seed_;
}

uint64_t NeuronGeneratorImpl::seed() {
  uint64_t s = c10::detail::getNonDeterministicRandom(false);
  set_current_seed(s);
  return s;
}

void NeuronGeneratorImpl::set_offset(uint64_t offset) {
  offset_ = offset;
}

uint64_t NeuronGeneratorImpl::get_offset() const {
  return offset_;
}

void NeuronGeneratorImpl::set_state(const c10::TensorImpl& state) {
  TORCH_CHECK_TYPE(state.dtype() == c10::kByte && state.device().is_cpu(),
                   "RNG state must be a torch.ByteTensor on the CPU");
  TORCH_CHECK_VALUE(static_cast<size_t>(state.numel()) == kStateBytes && state.is_contiguous(),
                    "neuron RNG state must hold ", kStateBytes, " bytes, got ", state.numel());
  uint64_t words[2];
  std::memcpy(words, state.data(), kStateBytes);
  seed_ = words[0];
  offset_ = words[1];
}

c10::intrusive_ptr<c10::TensorImpl> NeuronGeneratorImpl::get_state() const {
  auto state = at::detail::empty_cpu({static_cast<int64_t>(kStateBytes)}, c10::kByte,
                                     std::nullopt, std::nullopt, std::nullopt, std::nullopt);
  uint64_t words[2] = {seed_, offset_};
  std::memcpy(state.data_ptr(), words, kStateBytes);
  return state.getIntrusivePtr();
}

c10::DeviceType NeuronGeneratorImpl::device_type() {
  return kNeuron;
}

std::pair<uint64_t, uint64_t> NeuronGeneratorImpl::next_launch() {
  return {seed_, offset_++};
}

NeuronGeneratorImpl* NeuronGeneratorImpl::clone_impl() const {
  auto* g = new NeuronGeneratorImpl(device().index());
  g->seed_ = seed_;
  g->offset_ = offset_;
  return g;
}

std::pair<uint64_t, uint64_t> reserve_launch(c10::Device device, std::optional<at::Generator> gen) {
  auto* g = at::get_generator_or_default<NeuronGeneratorImpl>(gen, default_generator(device.index()));
  TORCH_CHECK(g->device() == device, "the generator is on ", g->device(), " but the tensor on ", device);
  std::lock_guard<std::mutex> lock(g->mutex_);
  return g->next_launch();
}

const at::Generator& default_generator(c10::DeviceIndex device) {
  static std::once_flag once;
  static std::vector<at::Generator> generators;
  std::call_once(once, [] {
    for (c10::DeviceIndex d = 0; d < device_count(); d++)
      generators.push_back(at::make_generator<NeuronGeneratorImpl>(d));
  });
  c10::DeviceIndex d = resolve(device);
  check(tn_device_check(d));
  return generators[static_cast<size_t>(d)];
}

at::Generator new_generator(c10::DeviceIndex device) {
  c10::DeviceIndex d = resolve(device);
  check(tn_device_check(d));
  return at::make_generator<NeuronGeneratorImpl>(d);
}

} // namespace torch_neuronx
