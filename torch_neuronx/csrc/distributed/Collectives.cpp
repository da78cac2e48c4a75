// The c10d collectives of the "neuron" backend (see ProcessGroupNeuron.h), each as the tn_coll
// operations it launches: checks, staged inputs and outputs, then ProcessGroupNeuron::launch.
#include <ATen/ATen.h>

#include <string>

#include "distributed/ProcessGroupNeuron.h"
#include "runtime/Functions.h"

namespace torch_neuronx {

namespace {
uint64_t elements(const at::Tensor& t) { return static_cast<uint64_t>(t.numel()); }
}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::allreduce(std::vector<at::Tensor>& tensors,
                                                             const c10d::AllreduceOptions& opts) {
  TORCH_CHECK(tensors.size() == 1, "the neuron backend takes one tensor per process");
  c10d::AllreduceCoalescedOptions o;
  o.reduceOp = opts.reduceOp;
  auto work = allreduce_coalesced(tensors, o);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  auto keep = std::make_shared<CollectiveTensors>();
  std::vector<tn_coll> ops;
  bool cpu = false;
  for (auto& t : tensors) {
    cpu = check_tensor(t, "all_reduce") || cpu;
    at::Tensor in = input(t, *keep), out = t.is_contiguous() ? in : output(t, *keep);
    tn_coll c = make(TN_COLL_KIND_ALL_REDUCE, in, out, elements(t));
    set_reduction(c, opts.reduceOp, t);
    ops.push_back(c);
  }
  return launch(c10d::OpType::ALLREDUCE, "c10d::allreduce", std::move(ops), keep, tensors, cpu);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::broadcast(std::vector<at::Tensor>& tensors,
                                                             const c10d::BroadcastOptions& opts) {
  TORCH_CHECK(tensors.size() == 1, "the neuron backend takes one tensor per process");
  auto keep = std::make_shared<CollectiveTensors>();
  at::Tensor& t = tensors[0];
  bool cpu = check_tensor(t, "broadcast");
  at::Tensor in = input(t, *keep), out = t.is_contiguous() ? in : output(t, *keep);
  tn_coll c = make(TN_COLL_KIND_BROADCAST, in, out, elements(t));
  c.root = static_cast<int32_t>(opts.rootRank);
  return launch(c10d::OpType::BROADCAST, "c10d::broadcast", {c}, keep, tensors, cpu);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::reduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::ReduceOptions& opts) {
  TORCH_CHECK(tensors.size() == 1, "the neuron backend takes one tensor per process");
  auto keep = std::make_shared<CollectiveTensors>();
  at::Tensor& t = tensors[0];
  bool cpu = check_tensor(t, "reduce");
  at::Tensor in = input(t, *keep), out = t.is_contiguous() ? in : output(t, *keep);
  tn_coll c = make(TN_COLL_KIND_REDUCE, in, out, elements(t));
  set_reduction(c, opts.reduceOp, t);
  c.root = static_cast<int32_t>(opts.rootRank);
  return launch(c10d::OpType::REDUCE, "c10d::reduce", {c}, keep, tensors, cpu);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::_allgather_base(at::Tensor& output_tensor, at::Tensor& input_tensor,
                                                                   const c10d::AllgatherOptions&) {
  bool cpu = check_tensor(input_tensor, "all_gather_into_tensor");
  check_tensor(output_tensor, "all_gather_into_tensor");
  TORCH_CHECK(output_tensor.numel() == input_tensor.numel() * getSize(),
              "output tensor must have ", getSize(), " times the input's elements");
  TORCH_CHECK(output_tensor.scalar_type() == input_tensor.scalar_type(),
              "output and input tensors must have the same dtype");
  auto keep = std::make_shared<CollectiveTensors>();
  at::Tensor in = input(input_tensor, *keep), out = output(output_tensor, *keep);
  tn_coll c = make(TN_COLL_KIND_ALL_GATHER, in, out, elements(input_tensor));
  return launch(c10d::OpType::_ALLGATHER_BASE, "c10d::allgather", {c}, keep, {output_tensor}, cpu);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions&) {
  TORCH_CHECK(outputs.size() == inputs.size(), "as many outputs as inputs");
  auto keep = std::make_shared<CollectiveTensors>();
  std::vector<tn_coll> ops;
  bool cpu = false;
  for (size_t i = 0; i < inputs.size(); i++) {
    cpu = check_tensor(inputs[i], "all_gather_into_tensor") || cpu;
    check_tensor(outputs[i], "all_gather_into_tensor");
    TORCH_CHECK(outputs[i].numel() == inputs[i].numel() * getSize(),
                "output tensor must have ", getSize(), " times the input's elements");
    at::Tensor in = input(inputs[i], *keep), out = output(outputs[i], *keep);
    ops.push_back(make(TN_COLL_KIND_ALL_GATHER, in, out, elements(inputs[i])));
  }
  return launch(c10d::OpType::COALESCED, "c10d::allgather_coalesced", std::move(ops), keep, outputs, cpu);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                             std::vector<at::Tensor>& inputs,
                                                             const c10d::AllgatherOptions&) {
  TORCH_CHECK(inputs.size() == 1 && outputs.size() == 1, "the neuron backend takes one tensor per process");
  TORCH_CHECK(static_cast<int>(outputs[0].size()) == getSize(), "all_gather needs one output per rank (",
              getSize(), "), got ", outputs[0].size());
  const at::Tensor& t = inputs[0];
  bool cpu = check_tensor(t, "all_gather");
  auto keep = std::make_shared<CollectiveTensors>();
  for (auto& o : outputs[0]) {
    check_tensor(o, "all_gather");
    TORCH_CHECK(o.numel() == t.numel() && o.scalar_type() == t.scalar_type(),
                "all_gather's outputs must have the input's size and dtype");
  }
  at::Tensor in = input(t, *keep);
  at::Tensor flat = at::empty({getSize() * t.numel()}, t.options().memory_format(at::MemoryFormat::Contiguous));
  keep->keep.push_back(flat);
  for (int r = 0; r < getSize(); r++)
    keep->copy_back.emplace_back(outputs[0][r], flat.narrow(0, r * t.numel(), t.numel()).view(outputs[0][r].sizes()));
  tn_coll c = make(TN_COLL_KIND_ALL_GATHER, in, flat, elements(t));
  return launch(c10d::OpType::ALLGATHER, "c10d::allgather", {c}, keep, outputs[0], cpu);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(), "as many output lists as inputs");
  startCoalescing();
  try {
    for (size_t i = 0; i < inputs.size(); i++) {
      std::vector<std::vector<at::Tensor>> o{outputs[i]};
      std::vector<at::Tensor> in{inputs[i]};
      allgather(o, in, opts);
    }
  } catch (...) {
    endCoalescing();
    throw;
  }
  return endCoalescing();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::GatherOptions& opts) {
  TORCH_CHECK(inputs.size() == 1, "the neuron backend takes one tensor per process");
  const at::Tensor& t = inputs[0];
  bool cpu = check_tensor(t, "gather");
  bool root = getRank() == opts.rootRank;
  auto keep = std::make_shared<CollectiveTensors>();
  at::Tensor in = input(t, *keep), flat;
  std::vector<at::Tensor> outs;
  if (root) {
    TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(),
                "gather's root needs one output per rank");
    flat = at::empty({getSize() * t.numel()}, t.options().memory_format(at::MemoryFormat::Contiguous));
    keep->keep.push_back(flat);
    for (int r = 0; r < getSize(); r++) {
      check_tensor(outputs[0][r], "gather");
      keep->copy_back.emplace_back(outputs[0][r], flat.narrow(0, r * t.numel(), t.numel()).view(outputs[0][r].sizes()));
    }
    outs = outputs[0];
  }
  tn_coll c = make(TN_COLL_KIND_GATHER, in, flat, elements(t));
  c.root = static_cast<int32_t>(opts.rootRank);
  return launch(c10d::OpType::GATHER, "c10d::gather", {c}, keep, outs, cpu);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::scatter(std::vector<at::Tensor>& outputs,
                                                           std::vector<std::vector<at::Tensor>>& inputs,
                                                           const c10d::ScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == 1, "the neuron backend takes one tensor per process");
  at::Tensor& t = outputs[0];
  bool cpu = check_tensor(t, "scatter");
  bool root = getRank() == opts.rootRank;
  auto keep = std::make_shared<CollectiveTensors>();
  at::Tensor flat;
  if (root) {
    TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
                "scatter's root needs one input per rank");
    std::vector<at::Tensor> parts;
    for (auto& i : inputs[0]) {
      check_tensor(i, "scatter");
      TORCH_CHECK(i.numel() == t.numel(), "scatter's inputs must have the output's size");
      parts.push_back(i.reshape({-1}));
    }
    flat = at::cat(parts);
    keep->keep.push_back(flat);
  }
  at::Tensor out = output(t, *keep);
  tn_coll c = make(TN_COLL_KIND_SCATTER, flat.defined() ? flat : out, out, elements(t));
  if (!root) c.send = nullptr;
  c.root = static_cast<int32_t>(opts.rootRank);
  return launch(c10d::OpType::SCATTER, "c10d::scatter", {c}, keep, outputs, cpu);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::_reduce_scatter_base(at::Tensor& output_tensor,
                                                                        at::Tensor& input_tensor,
                                                                        const c10d::ReduceScatterOptions& opts) {
  bool cpu = check_tensor(input_tensor, "reduce_scatter_tensor");
  check_tensor(output_tensor, "reduce_scatter_tensor");
  TORCH_CHECK(input_tensor.numel() == output_tensor.numel() * getSize(),
              "input tensor must have ", getSize(), " times the output's elements");
  TORCH_CHECK(output_tensor.scalar_type() == input_tensor.scalar_type(),
              "output and input tensors must have the same dtype");
  auto keep = std::make_shared<CollectiveTensors>();
  at::Tensor in = input(input_tensor, *keep), out = output(output_tensor, *keep);
  tn_coll c = make(TN_COLL_KIND_REDUCE_SCATTER, in, out, elements(output_tensor));
  set_reduction(c, opts.reduceOp, output_tensor);
  return launch(c10d::OpType::_REDUCE_SCATTER_BASE, "c10d::reduce_scatter", {c}, keep, {output_tensor}, cpu);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(), "as many outputs as inputs");
  auto keep = std::make_shared<CollectiveTensors>();
  std::vector<tn_coll> ops;
  bool cpu = false;
  for (size_t i = 0; i < inputs.size(); i++) {
    cpu = check_tensor(inputs[i], "reduce_scatter_tensor") || cpu;
    check_tensor(outputs[i], "reduce_scatter_tensor");
    TORCH_CHECK(inputs[i].numel() == outputs[i].numel() * getSize(),
                "input tensor must have ", getSize(), " times the output's elements");
    at::Tensor in = input(inputs[i], *keep), out = output(outputs[i], *keep);
    tn_coll c = make(TN_COLL_KIND_REDUCE_SCATTER, in, out, elements(outputs[i]));
    set_reduction(c, opts.reduceOp, outputs[i]);
    ops.push_back(c);
  }
  return launch(c10d::OpType::COALESCED, "c10d::reduce_scatter_coalesced", std::move(ops), keep, outputs, cpu);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                  std::vector<std::vector<at::Tensor>>& inputs,
                                                                  const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == 1 && inputs.size() == 1, "the neuron backend takes one tensor per process");
  TORCH_CHECK(static_cast<int>(inputs[0].size()) == getSize(), "reduce_scatter needs one input per rank");
  at::Tensor& t = outputs[0];
  bool cpu = check_tensor(t, "reduce_scatter");
  std::vector<at::Tensor> parts;
  for (auto& i : inputs[0]) {
    check_tensor(i, "reduce_scatter");
    TORCH_CHECK(i.numel() == t.numel() && i.scalar_type() == t.scalar_type(),
                "reduce_scatter's inputs must have the output's size and dtype");
    parts.push_back(i.reshape({-1}));
  }
  auto keep = std::make_shared<CollectiveTensors>();
  at::Tensor flat = at::cat(parts);
  keep->keep.push_back(flat);
  at::Tensor out = output(t, *keep);
  tn_coll c = make(TN_COLL_KIND_REDUCE_SCATTER, flat, out, elements(t));
  set_reduction(c, opts.reduceOp, t);
  return launch(c10d::OpType::REDUCE_SCATTER, "c10d::reduce_scatter", {c}, keep, outputs, cpu);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::alltoall_base(at::Tensor& output_tensor, at::Tensor& input_tensor,
                                                                 std::vector<int64_t>& output_splits,
                                                                 std::vector<int64_t>& input_splits,
                                                                 const c10d::AllToAllOptions&) {
  bool cpu = check_tensor(input_tensor, "all_to_all_single");
  check_tensor(output_tensor, "all_to_all_single");
  TORCH_CHECK(output_tensor.scalar_type() == input_tensor.scalar_type(),
              "output and input tensors must have the same dtype");
  int n = getSize();
  auto splits = [n](const at::Tensor& t, const std::vector<int64_t>& s, const char* which) {
    std::vector<int64_t> rows(n);
    int64_t dim0 = t.dim() ? t.size(0) : 1;
    if (s.empty()) {
      TORCH_CHECK(dim0 % n == 0, "all_to_all_single: the ", which, " tensor's first dimension (", dim0,
                  ") does not divide by the group's size (", n, ")");
      std::fill(rows.begin(), rows.end(), dim0 / n);
    } else {
      TORCH_CHECK(static_cast<int>(s.size()) == n, "all_to_all_single: ", which, "_split_sizes needs ", n,
                  " entries");
      int64_t sum = 0;
      for (int i = 0; i < n; i++) sum += rows[i] = s[i];
      TORCH_CHECK(sum == dim0, "all_to_all_single: ", which, "_split_sizes add up to ", sum,
                  " rows, the tensor has ", dim0);
    }
    return rows;
  };
  std::vector<int64_t> in_rows = splits(input_tensor, input_splits, "input");
  std::vector<int64_t> out_rows = splits(output_tensor, output_splits, "output");
  int64_t in_row = input_tensor.dim() && input_tensor.size(0) ? input_tensor.numel() / input_tensor.size(0) : 1;
  int64_t out_row = output_tensor.dim() && output_tensor.size(0) ? output_tensor.numel() / output_tensor.size(0) : 1;
  auto keep = std::make_shared<CollectiveTensors>();
  at::Tensor in = input(input_tensor, *keep), out = output(output_tensor, *keep);
  tn_coll c = make(TN_COLL_KIND_ALL_TO_ALL, in, out, 0);
  uint64_t so = 0, ro = 0;
  for (int j = 0; j < n; j++) {
    c.send_counts[j] = static_cast<uint64_t>(in_rows[j] * in_row);
    c.send_offsets[j] = so;
    so += c.send_counts[j];
    c.recv_counts[j] = static_cast<uint64_t>(out_rows[j] * out_row);
    c.recv_offsets[j] = ro;
    ro += c.recv_counts[j];
  }
  return launch(c10d::OpType::ALLTOALL_BASE, "c10d::alltoall", {c}, keep, {output_tensor}, cpu);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::alltoall(std::vector<at::Tensor>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllToAllOptions&) {
  int n = getSize();
  TORCH_CHECK(static_cast<int>(outputs.size()) == n && static_cast<int>(inputs.size()) == n,
              "all_to_all needs one input and one output per rank (", n, ")");
  bool cpu = false;
  std::vector<at::Tensor> parts;
  for (auto& i : inputs) {
    cpu = check_tensor(i, "all_to_all") || cpu;
    parts.push_back(i.reshape({-1}));
  }
  auto keep = std::make_shared<CollectiveTensors>();
  at::Tensor flat_in = at::cat(parts);
  int64_t total = 0;
  for (auto& o : outputs) {
    check_tensor(o, "all_to_all");
    TORCH_CHECK(o.scalar_type() == flat_in.scalar_type(), "all_to_all's tensors must have one dtype");
    total += o.numel();
  }
  at::Tensor flat_out = at::empty({total}, flat_in.options());
  keep->keep.push_back(flat_in);
  keep->keep.push_back(flat_out);
  tn_coll c = make(TN_COLL_KIND_ALL_TO_ALL, flat_in, flat_out, 0);
  uint64_t so = 0, ro = 0;
  for (int j = 0; j < n; j++) {
    c.send_counts[j] = elements(inputs[j]);
    c.send_offsets[j] = so;
    so += c.send_counts[j];
    c.recv_counts[j] = elements(outputs[j]);
    c.recv_offsets[j] = ro;
    keep->copy_back.emplace_back(outputs[j], flat_out.narrow(0, static_cast<int64_t>(ro), outputs[j].numel())
                                                 .view(outputs[j].sizes()));
    ro += c.recv_counts[j];
  }
  return launch(c10d::OpType::ALLTOALL, "c10d::alltoall", {c}, keep, outputs, cpu);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::barrier(const c10d::BarrierOptions&) {
  tn_coll c{};
  c.kind = TN_COLL_KIND_BARRIER;
  c.dtype = TN_DTYPE_U8;
  return launch(c10d::OpType::BARRIER, "c10d::barrier", {c}, std::make_shared<CollectiveTensors>(), {}, false,
                /*blocking=*/true);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::send(std::vector<at::Tensor>& tensors, int dst, int) {
  TORCH_CHECK(tensors.size() == 1, "the neuron backend takes one tensor per process");
  bool cpu = check_tensor(tensors[0], "send");
  auto keep = std::make_shared<CollectiveTensors>();
  at::Tensor in = input(tensors[0], *keep);
  tn_coll c = make(TN_COLL_KIND_SEND, in, at::Tensor(), elements(in));
  c.peer = dst;
  return launch(c10d::OpType::SEND, "c10d::send", {c}, keep, tensors, cpu);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::recv(std::vector<at::Tensor>& tensors, int src, int) {
  TORCH_CHECK(tensors.size() == 1, "the neuron backend takes one tensor per process");
  bool cpu = check_tensor(tensors[0], "recv");
  auto keep = std::make_shared<CollectiveTensors>();
  at::Tensor out = output(tensors[0], *keep);
  tn_coll c = make(TN_COLL_KIND_RECV, at::Tensor(), out, elements(out));
  c.peer = src;
  return launch(c10d::OpType::RECV, "c10d::recv", {c}, keep, tensors, cpu);
}

}  // namespace torch_neuronx
