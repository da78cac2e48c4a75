// torch_neuronx._C trace functions: the device trace of tn/trace.h (stream tasks with their
// device-clock start and end), read by torch_neuronx/neuron/trace.py.
#include <pybind11/pybind11.h>

#include <stdexcept>
#include <vector>

#include "tn/trace.h"

namespace py = pybind11;

namespace torch_neuronx {

void register_trace(py::module& m) {
  m.def("_trace_start", [](int64_t capacity) {
    if (tn_trace_start(capacity) != TN_STATUS_OK) throw std::runtime_error(tn_last_error());
  });
  m.def("_trace_stop", [] { tn_trace_stop(); });
  m.def("_trace_enabled", [] { return tn_trace_enabled() != 0; });
  m.def("_trace_now_ns", [] { return tn_trace_now_ns(); });
  m.def("_trace_dropped", [] { return tn_trace_dropped(); });
  // Takes every recorded event: [(name, device, stream, depth, start_ns, end_ns)], oldest first.
  m.def("_trace_take", [] {
    py::list out;
    std::vector<tn_trace_event> buf(4096);
    for (;;) {
      int64_t n;
      {
        py::gil_scoped_release unlocked;  // workers record while we copy
        n = tn_trace_take(buf.data(), static_cast<int64_t>(buf.size()));
      }
      for (int64_t i = 0; i < n; i++) {
        const tn_trace_event& e = buf[i];
        out.append(py::make_tuple(e.name, e.device, e.stream, e.depth, e.start_ns, e.end_ns));
      }
      if (n < static_cast<int64_t>(buf.size())) return out;
    }
  });
}

} // namespace torch_neuronx
