// torch_neuronx._C.Capture: a recording of the launches a compiled graph makes on the current
// stream, replayed as one task (tn/capture.h). torch_neuronx/compiler/replay.py decides when
// a graph is recorded and replayed; this file only owns the C object.
#include <torch/extension.h>

#include <string>
#include <vector>

#include "runtime/Functions.h"
#include "tn/capture.h"

namespace torch_neuronx {
namespace {

class Capture {
 public:
  // Starts recording the calling thread's launches on the current stream of `device`.
  explicit Capture(int device) {
    stream_ = current_stream(static_cast<c10::DeviceIndex>(device));
    check(tn_capture_begin(stream_, &capture_));
  }
  ~Capture() { tn_capture_destroy(capture_); }
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;

  void end() { check(tn_capture_end(capture_)); }
  void replay() { check(tn_capture_replay(capture_)); }
  bool replayable() const { return tn_capture_replayable(capture_) != 0; }
  std::string reason() const { return tn_capture_reason(capture_); }
  int64_t launches() const { return tn_capture_launches(capture_); }
  bool owns(uintptr_t ptr) const { return tn_capture_owns(capture_, reinterpret_cast<void*>(ptr)) != 0; }
  bool on_current_stream() const { return current_stream(tn_stream_device(stream_)) == stream_; }

  // What a replay's inputs must be: the address of each tensor input, the value of each other
  // input, except at the indices in `free` (inputs copied into the graph's buffers).
  void expect(const py::list& inputs, const std::vector<int64_t>& free) {
    expected_.assign(inputs.size(), Expected{});
    for (size_t i = 0; i < inputs.size(); i++) {
      py::handle x = inputs[i];
      if (THPVariable_Check(x.ptr()))
        expected_[i].ptr = THPVariable_Unpack(x.ptr()).data_ptr();
      else
        expected_[i].value = py::reinterpret_borrow<py::object>(x);
    }
    for (int64_t i : free)
      if (i >= 0 && static_cast<size_t>(i) < expected_.size()) expected_[i].free = true;
  }

  // True if `inputs` are where (and what) expect() recorded, on the recorded stream.
  bool matches(const py::list& inputs) const {
    if (inputs.size() != expected_.size() || !on_current_stream()) return false;
    for (size_t i = 0; i < inputs.size(); i++) {
      const Expected& e = expected_[i];
      if (e.free) continue;
      py::handle x = inputs[i];
      if (e.value) {
        if (THPVariable_Check(x.ptr()) || !e.value.equal(x)) return false;
      } else if (!THPVariable_Check(x.ptr()) || THPVariable_Unpack(x.ptr()).data_ptr() != e.ptr) {
        return false;
      }
    }
    return true;
  }

 private:
  struct Expected {
    void* ptr = nullptr;
    py::object value;  // set for inputs that are not tensors
    bool free = false;
  };
  std::vector<Expected> expected_;
  tn_stream_t stream_ = nullptr;
  tn_capture_t capture_ = nullptr;
};

}  // namespace

void register_capture(py::module& m) {
  py::class_<Capture>(m, "Capture")
      .def(py::init<int>())
      .def("end", &Capture::end)
      .def("replay", &Capture::replay)
      .def("owns", &Capture::owns)
      .def("on_current_stream", &Capture::on_current_stream)
      .def("expect", &Capture::expect)
      .def("matches", &Capture::matches)
      .def_property_readonly("replayable", &Capture::replayable)
      .def_property_readonly("reason", &Capture::reason)
      .def_property_readonly("launches", &Capture::launches);
}

}  // namespace torch_neuronx
