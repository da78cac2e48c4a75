// torch_neuronx._C.FusedKernel: a region of a compiled graph, built by the C graph compiler
// (tn/graph.h) and launched on the current stream. The Python side (torch_neuronx/compiler)
// describes the region; this file only converts it to the C IR and checks launch operands.
#include <torch/extension.h>

#include <string>
#include <vector>

#include "aten/TensorView.h"
#include "runtime/Functions.h"
#include "tn/graph.h"

namespace torch_neuronx {
namespace {


struct Operand {
  c10::ScalarType dtype;
  std::vector<int64_t> sizes, strides;  // the tensor's own (the region sees it broadcast)
};

class FusedKernel {
 public:
  // inputs/outputs: (dtype, sizes, strides, region strides[, node]); nodes: (op, args, value, dtype)
  FusedKernel(std::vector<int64_t> shape, py::list inputs, py::list nodes, py::list outputs,
              const std::string& cache_dir, const std::string& debug_dir) {
    tn_graph g{};
    TORCH_CHECK(!shape.empty() && shape.size() <= TN_MAX_DIMS, "fused region: rank ", shape.size());
    g.ndim = static_cast<int32_t>(shape.size());
    for (size_t d = 0; d < shape.size(); d++) g.sizes[d] = shape[d];
    std::vector<tn_graph_operand> in, out;
    for (auto item : inputs) in.push_back(operand(item.cast<py::tuple>(), g.ndim, inputs_));
    for (auto item : outputs) out.push_back(operand(item.cast<py::tuple>(), g.ndim, outputs_));
    std::vector<tn_graph_node> ns;
    for (auto item : nodes) {
      auto t = item.cast<py::tuple>();
      tn_graph_node n{};
      n.op = static_cast<tn_graph_op>(t[0].cast<int>());
      auto args = t[1].cast<std::vector<int>>();
      for (size_t k = 0; k < args.size() && k < 3; k++) n.arg[k] = args[k];
      n.value = t[2].cast<double>();
      n.dtype = t[3].is_none() ? TN_DTYPE_F32 : to_tn_dtype(t[3].cast<c10::ScalarType>());
      ns.push_back(n);
    }
    g.ninputs = static_cast<int32_t>(in.size());
    g.noutputs = static_cast<int32_t>(out.size());
    g.nnodes = static_cast<int32_t>(ns.size());
    g.inputs = in.data();
    g.outputs = out.data();
    g.nodes = ns.data();
    int hit = 0;
    tn_status st;
    {
      py::gil_scoped_release unlocked;  // a build takes a while: other threads may build too
      st = tn_graph_compile(&g, cache_dir.c_str(), debug_dir.empty() ? nullptr : debug_dir.c_str(),
                            &kernel_, &hit);
    }
    check(st);
    cache_hit_ = hit != 0;
  }
  ~FusedKernel() { tn_fused_kernel_release(kernel_); }
  FusedKernel(const FusedKernel&) = delete;
  FusedKernel& operator=(const FusedKernel&) = delete;

  // Launches on the current stream; the tensors must match the shapes and strides compiled in.
  void launch(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs) const {
    TORCH_CHECK(inputs.size() == inputs_.size() && outputs.size() == outputs_.size(),
                "fused kernel ", key(), ": expected ", inputs_.size(), " inputs and ",
                outputs_.size(), " outputs");
    void* ptr[64];
    TORCH_CHECK(inputs.size() + outputs.size() <= 64, "fused kernel with too many operands");
    size_t i = 0;
    for (size_t k = 0; k < inputs.size(); k++) ptr[i++] = checked(inputs[k], inputs_[k], "input", k);
    for (size_t k = 0; k < outputs.size(); k++) ptr[i++] = checked(outputs[k], outputs_[k], "output", k);
    c10::DeviceIndex device = outputs.empty() ? -1 : outputs[0].device().index();
    check(tn_fused_launch(current_stream(device), kernel_, ptr));
  }

  std::string key() const { return tn_fused_kernel_key(kernel_); }
  bool cache_hit() const { return cache_hit_; }

 private:
  static tn_graph_operand operand(const py::tuple& t, int32_t ndim, std::vector<Operand>& keep) {
    tn_graph_operand o{};
    auto dtype = t[0].cast<c10::ScalarType>();
    o.dtype = to_tn_dtype(dtype);
    auto region_strides = t[3].cast<std::vector<int64_t>>();
    TORCH_CHECK(static_cast<int32_t>(region_strides.size()) == ndim, "fused region: operand strides");
    for (int32_t d = 0; d < ndim; d++) o.strides[d] = region_strides[d];
    o.node = t.size() > 4 ? t[4].cast<int32_t>() : 0;
    keep.push_back({dtype, t[1].cast<std::vector<int64_t>>(), t[2].cast<std::vector<int64_t>>()});
    return o;
  }

  void* checked(const at::Tensor& t, const Operand& want, const char* what, size_t k) const {
    TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1 && t.scalar_type() == want.dtype &&
                    t.sizes() == c10::IntArrayRef(want.sizes) &&
                    (t.numel() <= 1 || t.strides() == c10::IntArrayRef(want.strides)),
                "fused kernel ", key(), ": ", what, " ", k, " is a ", t.scalar_type(), " ", t.sizes(),
                " tensor with strides ", t.strides(), " on ", t.device(), "; it was compiled for ",
                want.dtype, " ", c10::IntArrayRef(want.sizes), " with strides ",
                c10::IntArrayRef(want.strides), " on neuron");
    return t.data_ptr();
  }

  tn_fused_kernel* kernel_ = nullptr;
  bool cache_hit_ = false;
  std::vector<Operand> inputs_, outputs_;
};

}  // namespace

void register_compiler(py::module& m) {
  py::class_<FusedKernel>(m, "FusedKernel")
      .def(py::init<std::vector<int64_t>, py::list, py::list, py::list, const std::string&,
                    const std::string&>())
      .def("launch", &FusedKernel::launch)
      .def_property_readonly("key", &FusedKernel::key)
      .def_property_readonly("cache_hit", &FusedKernel::cache_hit);
  py::dict ops;
  const char* names[] = {"input", "const", "neg", "abs", "exp", "log", "sqrt", "rsqrt",
                         "reciprocal", "sigmoid", "silu", "tanh", "relu", "gelu", "gelu_tanh",
                         "sin", "cos", "round", "add", "sub", "mul", "div", "max", "min", "pow",
                         "where", "row_sum"};
  static_assert(sizeof(names) / sizeof(names[0]) == TN_GRAPH_OP_COUNT_, "op names");
  for (int i = 0; i < TN_GRAPH_OP_COUNT_; i++) ops[names[i]] = i;
  m.attr("graph_ops") = ops;
}

}  // namespace torch_neuronx
