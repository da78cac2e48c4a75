// The device generator: a Philox (seed, offset) pair. Kernels take one offset per launch, so
// drawing only reserves numbers on the host; the draw itself runs on a stream.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

#include <mutex>
#include <utility>

namespace torch_neuronx {

struct NeuronGeneratorImpl : c10::GeneratorImpl {
  explicit NeuronGeneratorImpl(c10::DeviceIndex device);

  void set_current_seed(uint64_t seed) override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  static c10::DeviceType device_type();

  // The (seed, offset) for one launch; advances the offset.
  std::pair<uint64_t, uint64_t> next_launch();

 private:
  NeuronGeneratorImpl* clone_impl() const override;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

const at::Generator& default_generator(c10::DeviceIndex device);
// The (seed, offset) of one launch on `device` from `gen`, or from the device's default
// generator; raises if `gen` belongs to another device.
std::pair<uint64_t, uint64_t> reserve_launch(c10::Device device, std::optional<at::Generator> gen = std::nullopt);
at::Generator new_generator(c10::DeviceIndex device);

} // namespace torch_neuronx
