// Resizing a neuron storage: a new block, the old bytes copied on the current stream.
#pragma once

#include <c10/core/StorageImpl.h>

namespace torch_neuronx {

void resize_storage_bytes(c10::StorageImpl& storage, size_t new_nbytes);

} // namespace torch_neuronx
