// The "neuron" c10d backend (see ProcessGroupNeuron.h): set-up through the store, launching
// tn_coll operations (at once, on the group's streams, or into a recording), coalescing and
// split. The collectives themselves, as tn_coll operations, are in Collectives.cpp.
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
