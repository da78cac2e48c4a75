// torch_neuronx._C: the Python entry points of the runtime. Thin: each function forwards to
// the C runtime or to the registries in csrc/.
#include <torch/csrc/Generator.h>
#include <torch/extension.h>

#include <mutex>
#include <set>
#include <string>

#include "aten/OpTracking.h"
#include "aten/PackedWeights.h"
#include "runtime/AutogradExit.h"
#include "runtime/Functions.h"
#include "runtime/Generator.h"

namespace torch_neuronx {
void register_compiler(py::module& m);  // compiler/FusedKernels.cpp
void register_capture(py::module& m);   // compiler/GraphCapture.cpp
void register_distributed(py::module& m);  // distributed/Bindings.cpp
void register_trace(py::module& m);        // runtime/Trace.cpp

namespace {

py::dict device_properties(int device) {
  tn_device_props p;
  check(tn_device_get_props(device, &p));
  py::dict d;
  d["name"] = std::string(p.name);
  d["index"] = p.index;
  d["physical_core"] = p.physical_core;
  d["physical_cores"] = p.physical_cores;
  d["total_memory"] = p.total_memory;
  return d;
}

py::list usage_snapshot() {
  std::vector<tn_core_usage> rows(4096);
  int32_t n = 0;
  check(tn_usage_snapshot(rows.data(), static_cast<int32_t>(rows.size()), &n));
  py::list out;
  for (int32_t i = 0; i < n; i++) {
    py::dict r;
    r["pid"] = rows[i].pid;
    r["physical_core"] = rows[i].physical_core;
    r["capacity"] = rows[i].capacity;
    r["allocated"] = rows[i].allocated;
    r["reserved"] = rows[i].reserved;
    out.append(r);
  }
  return out;
}

// A task that fails like a kernel would (e.g. an index out of range), for testing how errors
// travel from a stream to the next synchronisation.
tn_status failing_task(void*) {
  return TN_STATUS_KERNEL_FAILED;
}

void inject_stream_error(int device, const std::string& op) {
  static std::mutex lock;
  static std::set<std::string> names;  // launches keep a pointer to the name
  const char* name;
  {
    std::lock_guard<std::mutex> g(lock);
    name = names.insert(op).first->c_str();
  }
  check(tn_stream_launch(current_stream(static_cast<c10::DeviceIndex>(device)), name,
                         failing_task, nullptr, 0));
}

PyObject* default_generator_object(int device) {
  return THPGenerator_initDefaultGenerator(default_generator(static_cast<c10::DeviceIndex>(device)));
}

} // namespace
} // namespace torch_neuronx

PYBIND11_MODULE(_C, m) {
  torch_neuronx::register_compiler(m);
  torch_neuronx::register_capture(m);
  torch_neuronx::register_distributed(m);
  torch_neuronx::register_trace(m);
  using namespace torch_neuronx;
  m.doc() = "TorchNeuron runtime bindings";
  m.def("_init", [] { check(tn_runtime_init(nullptr)); });
  m.def("_is_in_bad_fork", [] { return tn_runtime_forked() != 0; });
  m.def("_device_count", [] { return static_cast<int>(device_count()); });
  m.def("_init_error", [] {
    tn_status st = tn_runtime_init(nullptr);
    return st == TN_STATUS_OK ? std::string() : std::string(tn_last_error());
  });
  m.def("_current_device", [] { return static_cast<int>(current_device()); });
  m.def("_set_device", [](int d) { set_device(static_cast<c10::DeviceIndex>(d)); });
  m.def("_exchange_device", [](int d) {
    return d < 0 ? static_cast<int>(current_device())
                 : static_cast<int>(exchange_device(static_cast<c10::DeviceIndex>(d)));
  });
  m.def("_device_properties", &device_properties);
  m.def("_synchronize", [](int d) {
    py::gil_scoped_release no_gil;
    check(tn_device_synchronize(resolve(static_cast<c10::DeviceIndex>(d))));
  });
  m.def("_empty_cache", [](int d) {
    torch_neuronx::ops::clear_packed_weights();
    py::gil_scoped_release no_gil;
    check(tn_memory_empty_cache(d));
  });
  m.def("_packed_weights", [] {  // (operands tracked, operands packed, packed bytes)
    auto s = torch_neuronx::ops::packed_weights_stats();
    return py::make_tuple(s.tracked, s.packed, s.bytes);
  });
  m.def("_nontemporal_min_bytes", [] { return tn_nontemporal_min_bytes(); });
  // tests: the size from which kernels treat data as larger than the cache (-1: the default)
  m.def("_set_nontemporal_min_bytes", [](int64_t bytes) { tn_set_nontemporal_min_bytes(bytes); });
  m.def("_isa", [] { return std::string(tn_isa_label()); });
  m.def("_fma_peak_gflops", [](double seconds) {  // the kernel threads' measured FMA peak
    py::gil_scoped_release no_gil;
    return tn_fma_peak_gflops(seconds);
  }, py::arg("seconds") = 0.2);
  m.def("_drain_autograd_threads", &torch_neuronx::drain_autograd_threads, py::arg("timeout_seconds"));
  m.def("_launch_blocking", [] { return tn_runtime_launch_blocking() != 0; });
  m.def("_default_generator", [](int d) {
    return py::reinterpret_steal<py::object>(default_generator_object(d));
  });
  m.def("_usage_snapshot", &usage_snapshot);
  m.def("_inject_stream_error", &inject_stream_error);
  m.def("_executed_ops", &executed_ops);
  m.def("_fallback_ops", &fallback_ops);
  m.def("_clear_op_tracking", &clear_op_tracking);
}
