// The "neuron" c10d backend (see ProcessGroupNeuron.h): set-up through the store, and the
// collectives as tn_coll launches.
#include "distributed/ProcessGroupNeuron.h"

#include <ATen/ATen.h>
#include <c10/core/StreamGuard.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "aten/TensorView.h"
#include "distributed/HostNetwork.h"
#include "runtime/Functions.h"

namespace torch_neuronx {

namespace {

// The host this process runs on, as the group's ranks compare it: TORCH_NEURONX_DIST_HOST names
// it (tests run two "hosts" on one machine), else the hostname.
std::string host_name() {
  const char* forced = std::getenv("TORCH_NEURONX_DIST_HOST");
  if (forced && *forced) return forced;
  char buf[256] = {0};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

uint64_t elements(const at::Tensor& t) { return static_cast<uint64_t>(t.numel()); }

// The ranks each host has: the group must number its ranks host by host with as many on every
// host (as torchrun numbers them), so that the hierarchical collectives can pair them up.
int ranks_per_host(const std::vector<std::string>& hosts) {
  int size = static_cast<int>(hosts.size()), local = 0;
  while (local < size && hosts[local] == hosts[0]) local++;
  bool regular = size % local == 0;
  for (int r = 0; regular && r < size; r++) {
    regular = hosts[r] == hosts[r - r % local];
    for (int b = 0; regular && b < r - r % local; b += local) regular = hosts[b] != hosts[r];
  }
  if (!regular) {
    std::string layout;
    for (int r = 0; r < size; r++) layout += c10::str(r ? ", " : "", r, ": ", hosts[r]);
    TORCH_CHECK_NOT_IMPLEMENTED(false,
                                "the neuron backend spans hosts when the group numbers its ranks host by host with "
                                "as many on every host (as torchrun does); this group's ranks are on ",
                                layout);
  }
  return local;
}

// `waiter` runs its later work after what `s` has enqueued so far (the host does not wait). An
// event per call: one event re-recorded on several callers' streams (FSDP2 launches from two)
// could let a wait pass on another stream's later record.
void stream_after(tn_stream_t waiter, tn_stream_t s) {
  tn_event_t ready = nullptr;
  check(tn_event_create(TN_EVENT_FLAGS_DEFAULT, &ready));
  tn_status st = tn_event_record(ready, s);
  if (st == TN_STATUS_OK) st = tn_stream_wait_event(waiter, ready);
  tn_event_destroy(ready);  // safe while the record and the wait are pending
  check(st);
}

// The connected groups of this process, for order_graph_after_collectives.
std::mutex groups_lock;
std::vector<ProcessGroupNeuron*> connected_groups;

}  // namespace

void order_graph_after_collectives(tn_stream_t stream, bool recording) {
  std::lock_guard<std::mutex> g(groups_lock);
  if (connected_groups.empty()) return;
  c10::DeviceIndex device = static_cast<c10::DeviceIndex>(tn_stream_device(stream));
  for (ProcessGroupNeuron* pg : connected_groups)
    if (pg->device_ == device && (recording || pg->recorded_.load(std::memory_order_relaxed)))
      stream_after(stream, pg->stream_);
}

ProcessGroupNeuron::ProcessGroupNeuron(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                       std::chrono::milliseconds timeout, c10::DeviceIndex device)
    : Backend(rank, size), store_(store), timeout_(timeout), device_(device) {
  TORCH_CHECK(size <= TN_COMM_MAX_RANKS, "the neuron backend runs groups of up to ", TN_COMM_MAX_RANKS,
              " ranks, not ", size);
}

void ProcessGroupNeuron::eagerConnectSingleDevice(at::Device device) {
  std::lock_guard<std::mutex> g(lock_);
  if (device.type() == kNeuron && device.has_index()) connect(device.index(), "set-up");
}

// Joins the peers (every rank of the group calls it, at its first collective or from
// init_process_group(device_id=...)): segments through the store, then the device binding.
void ProcessGroupNeuron::connect(c10::DeviceIndex device, const char* op) {
  if (comm_) return;
  TORCH_CHECK(!shut_down_, "the process group was destroyed or aborted");
  if (device < 0) device = device_ >= 0 ? device_ : current_device();
  check(tn_device_bind(device));
  device_ = device;
  set_device(device);
  int rank = getRank(), size = getSize();
  auto timeout = timeout_;
  // first where every rank runs: that decides how many share this host's shared memory
  std::vector<std::string> names(size), hosts(size);
  store_->set("tn_ccl/host/" + std::to_string(rank), host_name());
  for (int r = 0; r < size; r++) {
    std::vector<uint8_t> h;
    try {
      h = store_->get("tn_ccl/host/" + std::to_string(r));
    } catch (const c10::DistStoreError& e) {
      C10_THROW_ERROR(DistBackendError,
                      c10::str(op, " (sequence #1) on rank ", rank, ": rank ", r, " did not join the process group within ",
                               timeout.count(), " ms (it exited, or never reached its first collective): ",
                               e.what_without_backtrace()));
    }
    hosts[r].assign(h.begin(), h.end());
  }
  const int local_size = ranks_per_host(hosts);
  const int first = rank - rank % local_size;
  tn_comm_segment_t segment = nullptr;
  char name[TN_COMM_NAME_MAX];
  check(tn_comm_segment_create(local_size, &segment, name));
  tn_comm_net net{};
  try {
    store_->set("tn_ccl/segment/" + std::to_string(rank), std::string(name));
    for (int r = first; r < first + local_size; r++) {
      auto n = store_->get("tn_ccl/segment/" + std::to_string(r));
      names[r].assign(n.begin(), n.end());
    }
    if (local_size < size) net = make_host_network(store_, rank, size / local_size, local_size, timeout);
  } catch (...) {
    tn_comm_segment_destroy(segment);
    throw;
  }
  // the segments of this host's ranks
  std::vector<const char*> ptrs;
  for (int r = first; r < first + local_size; r++) ptrs.push_back(names[r].c_str());
  tn_comm_desc desc{};
  desc.rank = rank - first;
  desc.size = local_size;
  desc.timeout_ms = timeout.count();
  desc.segment = segment;
  desc.names = ptrs.data();
  desc.net = local_size < size ? &net : nullptr;
  tn_status st = tn_comm_create(&desc, &comm_);
  if (st != TN_STATUS_OK) {
    std::string msg = tn_last_error();
    tn_comm_segment_destroy(segment);
    if (net.destroy) net.destroy(net.ctx);
    C10_THROW_ERROR(DistBackendError, msg);
  }
  // every rank has mapped every segment: their names can go (nothing is left in /dev/shm)
  std::vector<std::string> mapped;
  store_->set("tn_ccl/mapped/" + std::to_string(rank), "1");
  for (int r = 0; r < size; r++) mapped.push_back("tn_ccl/mapped/" + std::to_string(r));
  try {
    store_->wait(mapped, timeout);
  } catch (const c10::DistStoreError& e) {
    tn_comm_destroy(comm_);
    comm_ = nullptr;
    C10_THROW_ERROR(DistBackendError, c10::str(op, " (sequence #1) on rank ", rank, ": a rank left during set-up: ",
                                               e.what_without_backtrace()));
  }
  tn_comm_unlink(comm_);
  check(tn_stream_from_pool(device, -1, &stream_));
  check(tn_stream_from_pool(device, -1, &send_stream_));
  std::lock_guard<std::mutex> g(groups_lock);
  connected_groups.push_back(this);
}

ProcessGroupNeuron::~ProcessGroupNeuron() { shutdown(); }

void ProcessGroupNeuron::shutdown() {
  std::lock_guard<std::mutex> g(lock_);
  shut_down_ = true;
  if (!comm_) return;
  {
    std::lock_guard<std::mutex> gl(groups_lock);
    connected_groups.erase(std::find(connected_groups.begin(), connected_groups.end(), this));
  }
  tn_comm_destroy(comm_);  // waits for the group's launched work
  comm_ = nullptr;
  for (auto& p : in_flight_) tn_comm_work_release(p.first);
  in_flight_.clear();
}

void ProcessGroupNeuron::abort() {
  {
    std::lock_guard<std::mutex> g(lock_);
    if (comm_) tn_comm_abort(comm_, "the process group was aborted");
  }
  shutdown();
}

tn_comm_stats ProcessGroupNeuron::stats() const {
  tn_comm_stats s{};
  if (comm_) tn_comm_get_stats(comm_, &s);
  return s;
}

uint64_t ProcessGroupNeuron::getSequenceNumberForGroup() { return comm_ ? tn_comm_sequence(comm_) : 0; }

bool ProcessGroupNeuron::check_tensor(const at::Tensor& t, const char* op) {
  TORCH_CHECK(t.defined(), op, ": undefined tensor");
  TORCH_CHECK(!t.is_sparse(), op, ": the neuron backend does not support sparse tensors");
  TORCH_CHECK(!t.is_complex(), op, ": complex tensors go through their real view (torch.view_as_real)");
  if (t.device().is_cpu()) return true;
  TORCH_CHECK(t.device().type() == kNeuron, op, ": tensors must be on neuron (or the CPU), not ", t.device());
  if (!comm_) {  // the group's first collective binds the core its tensors are on
    std::lock_guard<std::mutex> g(lock_);
    connect(t.device().index(), op);
  }
  TORCH_CHECK(t.device().index() == device_,
              "Attempted to have more than one device per process in distributed setup: ", op,
              " got a tensor on ", t.device(), " but this process group uses neuron:", static_cast<int>(device_));
  return false;
}

at::Tensor ProcessGroupNeuron::input(const at::Tensor& t, CollectiveTensors& tensors) {
  at::Tensor c = t.is_contiguous() ? t : t.contiguous();
  tensors.keep.push_back(c);
  return c;
}

at::Tensor ProcessGroupNeuron::output(const at::Tensor& t, CollectiveTensors& tensors) {
  if (t.is_contiguous()) {
    tensors.keep.push_back(t);
    return t;
  }
  at::Tensor staging = at::empty(t.sizes(), t.options());
  tensors.keep.push_back(staging);
  tensors.copy_back.emplace_back(t, staging);
  return staging;
}

tn_coll ProcessGroupNeuron::make(tn_coll_kind kind, const at::Tensor& send, const at::Tensor& recv,
                                 uint64_t count) const {
  tn_coll c{};
  c.kind = kind;
  c.dtype = to_tn_dtype((send.defined() ? send : recv).scalar_type());
  c.op = TN_COMM_OP_SUM;
  c.count = count;
  c.send = send.defined() ? send.data_ptr() : nullptr;
  c.recv = recv.defined() ? recv.data_ptr() : nullptr;
  return c;
}

void ProcessGroupNeuron::set_reduction(tn_coll& c, const c10d::ReduceOp& op, const at::Tensor& t) const {
  bool is_bool = t.scalar_type() == at::kBool;
  bool is_float = at::isFloatingType(t.scalar_type());
  switch (op.op_) {
    case c10d::ReduceOp::SUM: c.op = TN_COMM_OP_SUM; break;
    case c10d::ReduceOp::PRODUCT: c.op = TN_COMM_OP_PROD; break;
    case c10d::ReduceOp::MIN: c.op = TN_COMM_OP_MIN; break;
    case c10d::ReduceOp::MAX: c.op = TN_COMM_OP_MAX; break;
    case c10d::ReduceOp::AVG:
      TORCH_CHECK(!is_bool, "Cannot use ReduceOp.AVG with boolean inputs");
      c.op = TN_COMM_OP_AVG;
      break;
    case c10d::ReduceOp::PREMUL_SUM: {
      TORCH_CHECK(is_float, "PREMUL_SUM needs floating-point tensors, got ", t.scalar_type());
      auto s = c10::static_intrusive_pointer_cast<c10d::PreMulSumSupplement>(op.supplement_);
      c.op = TN_COMM_OP_PREMUL_SUM;
      c.factor = s->tensor_factor.defined() ? s->tensor_factor.item<double>() : s->double_factor;
      break;
    }
    case c10d::ReduceOp::BAND:
    case c10d::ReduceOp::BOR:
    case c10d::ReduceOp::BXOR:
      TORCH_CHECK(!is_float, "bitwise reductions need integer or bool tensors, got ", t.scalar_type());
      c.op = op.op_ == c10d::ReduceOp::BAND ? TN_COMM_OP_BAND
             : op.op_ == c10d::ReduceOp::BOR ? TN_COMM_OP_BOR
                                             : TN_COMM_OP_BXOR;
      break;
    default:
      TORCH_CHECK(false, "the neuron backend does not support this reduction");
  }
}

void ProcessGroupNeuron::release_finished() {
  while (!in_flight_.empty() && tn_comm_work_query(in_flight_.front().first) != TN_STATUS_NOT_READY) {
    tn_comm_work_release(in_flight_.front().first);
    in_flight_.pop_front();
  }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::launch(c10d::OpType type, const char* name,
                                                          std::vector<tn_coll> ops,
                                                          std::shared_ptr<CollectiveTensors> tensors,
                                                          std::vector<at::Tensor> outputs, bool cpu,
                                                          bool blocking) {
  std::lock_guard<std::mutex> g(lock_);
  connect(-1, name);
  if (coalescing_) {
    coalesced_ops_.insert(coalesced_ops_.end(), ops.begin(), ops.end());
    coalesced_tensors_->keep.insert(coalesced_tensors_->keep.end(), tensors->keep.begin(), tensors->keep.end());
    coalesced_tensors_->copy_back.insert(coalesced_tensors_->copy_back.end(), tensors->copy_back.begin(),
                                         tensors->copy_back.end());
    coalesced_outputs_.insert(coalesced_outputs_.end(), outputs.begin(), outputs.end());
    coalesced_cpu_ = coalesced_cpu_ || cpu;
    // the operation runs at endCoalescing; this work is already complete
    return c10::make_intrusive<NeuronWork>(type, name, nullptr, c10::Device(kNeuron, device_), nullptr,
                                           std::move(outputs), false, 0);
  }
  release_finished();
  bool sends_only = std::all_of(ops.begin(), ops.end(), [](const tn_coll& c) { return c.kind == TN_COLL_KIND_SEND; });
  tn_stream_t s = sends_only ? send_stream_ : stream_;
  if (!cpu && tn_capture_active()) return launch_recorded(type, name, ops, *tensors, std::move(outputs));
  tn_comm_work_t w = nullptr;
  check(tn_comm_work_create(&w));
  // A small collective with nothing queued before it runs now on this thread (no event, task or
  // worker wake-up on either side): its work is complete when it returns.
  tn_status st = TN_STATUS_NOT_READY;
  if (!cpu && ops.size() == 1) st = tn_comm_run_now(comm_, s, current_stream(device_), name, ops.data(), w);
  if (st == TN_STATUS_OK)
    return c10::make_intrusive<NeuronWork>(type, name, w, c10::Device(kNeuron, device_), std::move(tensors),
                                           std::move(outputs), blocking, 0);
  if (st == TN_STATUS_NOT_READY) {
    tn_stream_t caller = current_stream(device_);
    if (!cpu && tn_stream_query(caller) != TN_STATUS_OK) stream_after(s, caller);  // else nothing to wait for
    st = tn_comm_launch(comm_, s, name, ops.data(), static_cast<int32_t>(ops.size()), w);
  }
  if (st != TN_STATUS_OK) {
    std::string msg = tn_last_error();
    tn_comm_work_release(w);
    if (st == TN_STATUS_COMM_FAILED) C10_THROW_ERROR(DistBackendError, msg);
    TORCH_CHECK(false, msg);
  }
  tn_comm_work_retain(w);
  in_flight_.emplace_back(w, tensors);
  return c10::make_intrusive<NeuronWork>(type, name, w, cpu ? c10::Device(c10::kCPU) : c10::Device(kNeuron, device_),
                                         std::move(tensors), std::move(outputs), blocking || cpu, 0);
}

// A collective launched while a compiled graph records (replay.py): it goes on the recording
// stream and runs again at every replay, in the graph's order. No work object (one completes
// once); staged outputs are copied back right after it on the same stream, so the work returned
// is complete. order_graph_after_collectives orders replays after the group's own stream.
c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::launch_recorded(c10d::OpType type, const char* name,
                                                                   const std::vector<tn_coll>& ops,
                                                                   CollectiveTensors& tensors,
                                                                   std::vector<at::Tensor> outputs) {
  recorded_.store(true, std::memory_order_relaxed);
  tn_status st = tn_comm_launch(comm_, current_stream(device_), name, ops.data(), static_cast<int32_t>(ops.size()),
                                nullptr);
  if (st == TN_STATUS_COMM_FAILED) C10_THROW_ERROR(DistBackendError, tn_last_error());
  TORCH_CHECK(st == TN_STATUS_OK, tn_last_error());
  for (auto& [dst, src] : tensors.copy_back) dst.copy_(src);
  return c10::make_intrusive<NeuronWork>(type, name, nullptr, c10::Device(kNeuron, device_), nullptr, std::move(outputs),
                                         false, 0);
}

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

void ProcessGroupNeuron::startCoalescing() {
  std::lock_guard<std::mutex> g(lock_);
  TORCH_CHECK(!coalescing_, "startCoalescing called twice without endCoalescing");
  coalescing_ = true;
  coalesced_ops_.clear();
  coalesced_tensors_ = std::make_shared<CollectiveTensors>();
  coalesced_outputs_.clear();
  coalesced_cpu_ = false;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::endCoalescing() {
  std::vector<tn_coll> ops;
  std::shared_ptr<CollectiveTensors> tensors;
  std::vector<at::Tensor> outputs;
  bool cpu;
  {
    std::lock_guard<std::mutex> g(lock_);
    TORCH_CHECK(coalescing_, "endCoalescing without startCoalescing");
    coalescing_ = false;
    ops.swap(coalesced_ops_);
    tensors = std::move(coalesced_tensors_);
    outputs.swap(coalesced_outputs_);
    cpu = coalesced_cpu_;
  }
  if (ops.empty())
    return c10::make_intrusive<NeuronWork>(c10d::OpType::COALESCED, "c10d::coalesced", nullptr,
                                           c10::Device(kNeuron, device_), nullptr, std::vector<at::Tensor>{}, false, 0);
  return launch(c10d::OpType::COALESCED, "c10d::coalesced", std::move(ops), tensors, outputs, cpu);
}

c10::intrusive_ptr<c10d::Backend> ProcessGroupNeuron::split(const c10::intrusive_ptr<c10d::Store>& store,
                                                            const std::vector<int>& ranks,
                                                            const c10::intrusive_ptr<c10d::Backend::Options>& opts) {
  auto it = std::find(ranks.begin(), ranks.end(), getRank());
  if (it == ranks.end()) return nullptr;
  int rank = static_cast<int>(it - ranks.begin());
  auto timeout = opts ? opts->timeout : timeout_;
  auto group = c10::make_intrusive<ProcessGroupNeuron>(store, rank, static_cast<int>(ranks.size()), timeout, device_);
  if (device_ >= 0) group->setBoundDeviceId(c10::Device(kNeuron, device_));
  return group;
}

}  // namespace torch_neuronx
