#pragma once

namespace torch_neuronx {

// Waits until PyTorch's autograd thread of every neuron device has finished the work of the
// backward passes run so far, cleanup included (see AutogradExit.cpp). Called at interpreter
// exit; releases the GIL while it waits, and gives up after `timeout_seconds`.
void drain_autograd_threads(double timeout_seconds);

}  // namespace torch_neuronx
