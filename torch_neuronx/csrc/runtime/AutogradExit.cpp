// Autograd's device threads at interpreter exit.
//
// A backward pass through neuron tensors runs on PyTorch's autograd thread of the device
// (pt_autograd_<index>), not on the caller's. The caller's backward() returns when the graph
// task is marked complete; the device thread then drops its references to the task, and
// dropping a tensor that has a Python object takes the GIL. If the program ends at that
// moment, Python is finalizing: taking the GIL makes the thread exit by unwinding, the unwind
// meets a noexcept frame, and the process aborts with "terminate called without an active
// exception" after its work is done (a PyTorch bug that CUDA devices share).
//
// The device thread takes tasks in order and finishes one, cleanup included, before it takes
// the next. So a backward of tensors that never had a Python object, run on each device at
// exit (from an atexit handler, while Python is still whole), returns only after the earlier
// cleanups have run, and its own cleanup does not touch Python.
#include "runtime/AutogradExit.h"

#include <ATen/ATen.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/autograd/autograd.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "runtime/Functions.h"

namespace torch_neuronx {

namespace {
struct Done {
  std::mutex lock;
  std::condition_variable cv;
  bool done = false;
};
}  // namespace

void drain_autograd_threads(double timeout_seconds) {
  pybind11::gil_scoped_release no_gil;
  // A thread of its own, so that a device thread that never gets to it (a backward still
  // running in a daemon thread) delays the exit by the timeout, not forever.
  auto state = std::make_shared<Done>();
  std::thread([state] {
    try {
      for (c10::DeviceIndex d = 0; d < device_count(); d++) {
        at::Tensor x = at::ones({1}, at::TensorOptions().device(c10::DeviceType::PrivateUse1, d)).requires_grad_(true);
        torch::autograd::backward({(x * 2.0).sum()});
      }
    } catch (const std::exception&) {
      // a device already in error: its error was reported where it happened
    }
    std::lock_guard<std::mutex> hold(state->lock);
    state->done = true;
    state->cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> hold(state->lock);
  state->cv.wait_for(hold, std::chrono::duration<double>(timeout_seconds), [&] { return state->done; });
}

}  // namespace torch_neuronx
