// Python bindings of the neuron c10d backend. They are made on demand (_init_distributed), once
// torch.distributed has registered c10d's own types: the backend's Python class derives from
// torch._C._distributed_c10d.Backend, and takes the c10d Store that init_process_group passes.
#include <pybind11/chrono.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/utils/pybind.h>
#include <torch/extension.h>

#include "distributed/HostNetwork.h"
#include "distributed/ProcessGroupNeuron.h"
#include "runtime/Functions.h"

namespace torch_neuronx {

void register_distributed(py::module& m) {
  m.def("_init_distributed", [m]() mutable {
    if (py::hasattr(m, "ProcessGroupNeuron")) return;
    py::module::import("torch.distributed");
    // groups that span hosts cross them through Gloo groups that Python makes
    set_gloo_factory([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                        std::chrono::milliseconds timeout) {
      py::gil_scoped_acquire gil;
      py::object pg = py::module::import("torch_neuronx.distributed").attr("_gloo_group")(store, rank, size, timeout);
      return pg.cast<c10::intrusive_ptr<c10d::Backend>>();
    });
    py::class_<ProcessGroupNeuron, c10d::Backend, c10::intrusive_ptr<ProcessGroupNeuron>>(m, "ProcessGroupNeuron")
        .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                         std::chrono::milliseconds timeout, int device) {
               return c10::make_intrusive<ProcessGroupNeuron>(store, rank, size, timeout,
                                                              static_cast<c10::DeviceIndex>(device));
             }),
             py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"), py::arg("device"),
             py::call_guard<py::gil_scoped_release>())
        .def_property_readonly("device", [](const ProcessGroupNeuron& pg) { return static_cast<int>(pg.device()); })
        .def("_stats",
             [](const ProcessGroupNeuron& pg) {
               tn_comm_stats s = pg.stats();
               py::dict d;
               d["launches"] = s.launches;
               d["operations"] = s.operations;
               d["bytes"] = s.bytes;
               d["seconds"] = static_cast<double>(s.busy_ns) / 1e9;
               return d;
             })
        // split_group deep-copies `options` unless it is None (then C++ asks getBackendOptions)
        .def_property_readonly("options", [](const ProcessGroupNeuron&) { return py::none(); })
        // new_group on a rank outside the new group, when the default group has a bound device:
        // nothing to join (groups are made from the store, not split from a communicator)
        .def("perform_nocolor_split", [](ProcessGroupNeuron&, const at::Device&) {});
  });
  m.def("_device_bound", [] { return static_cast<int>(tn_device_bound()); });
  m.def("_device_unbind", [] { tn_device_unbind(); });
  m.def("_logical_nc_config", [] { return static_cast<int>(tn_device_logical_nc_config()); });
  m.def("_comm_pingpong_us", [](int iterations) {
    py::gil_scoped_release no_gil;
    return tn_comm_pingpong_us(iterations);
  });
}

}  // namespace torch_neuronx
