// The "neuron" c10d backend: PyTorch's process-group API over the C collectives (src/ccl).
//
// Thin by design: each method checks its tensors, turns them into contiguous buffers and a
// tn_coll description, and launches it; the C layer moves and reduces the bytes.
//
// Streams, as NCCL's backend does it: a group runs its collectives, in the order they are called,
// on a stream of its own (a high-priority pool stream), after the kernels that the caller's
// current stream had enqueued (an event). Work::wait() makes the caller's current stream wait for
// the collective, so the host does not block. The group keeps every tensor of a collective alive
// until the collective has run, so memory freed by the caller is not reused under it. While a
// stream capture records (compiled graphs), collectives go on the recording stream instead
// (launch_recorded), and replays wait for the group's stream (order_graph_after_collectives).
// CPU tensors run the same way; waiting for them blocks the host.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "distributed/GraphOrder.h"
#include "tn/tn.h"

namespace torch_neuronx {

// Tensors a launch must keep alive, and the copies from its staging buffers into the caller's
// tensors that a wait performs (outputs that were not contiguous).
struct CollectiveTensors {
  std::vector<at::Tensor> keep;
  std::vector<std::pair<at::Tensor, at::Tensor>> copy_back;  // (destination, staging)
};

class NeuronWork : public c10d::Work {
 public:
  NeuronWork(c10d::OpType type, const char* name, tn_comm_work_t work, c10::Device device,
             std::shared_ptr<CollectiveTensors> tensors, std::vector<at::Tensor> outputs,
             bool blocking, uint64_t seq);
  ~NeuronWork() override;

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  bool wait(std::chrono::milliseconds timeout) override;
  void synchronize() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  uint64_t getSequencenumber() const override;

 private:
  void wait_on_current_stream();

  const char* name_;
  tn_comm_work_t work_;
  c10::Device device_;
  std::shared_ptr<CollectiveTensors> tensors_;
  std::vector<at::Tensor> outputs_;
  bool blocking_;  // barrier, and CPU tensors: waiting blocks the host
  uint64_t seq_;
  std::mutex lock_;
  bool copied_back_ = false;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

class ProcessGroupNeuron : public c10d::Backend {
 public:
  ProcessGroupNeuron(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                     std::chrono::milliseconds timeout, c10::DeviceIndex device);
  ~ProcessGroupNeuron() override;

  const std::string getBackendName() const override { return "neuron"; }
  bool supportsCoalescing() const override { return true; }
  bool supportsSplitting() const override { return true; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;

  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  c10::intrusive_ptr<c10d::Backend::Options> getBackendOptions() override {
    return c10::make_intrusive<c10d::Backend::Options>("neuron", timeout_);
  }
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override;
  void eagerConnectSingleDevice(at::Device device) override;
  void abort() override;
  void shutdown() override;

  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store,
                                          const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<c10d::Backend::Options>& opts) override;

  c10::DeviceIndex device() const { return device_; }
  // What this group's collectives have cost so far (zeros before its first collective).
  tn_comm_stats stats() const;
  // See GraphOrder.h.
  friend void order_graph_after_collectives(tn_stream_t stream, bool recording);

 private:
  // A launch: `ops` as one task; the work keeps `tensors`; `outputs` are what result() returns.
  c10::intrusive_ptr<c10d::Work> launch(c10d::OpType type, const char* name, std::vector<tn_coll> ops,
                                        std::shared_ptr<CollectiveTensors> tensors,
                                        std::vector<at::Tensor> outputs, bool cpu,
                                        bool blocking = false);
  // Contiguous input (a copy on the current stream when needed), kept by `tensors`.
  at::Tensor input(const at::Tensor& t, CollectiveTensors& tensors);
  // A contiguous buffer for output `t` (t itself when it is one), copied back on wait.
  at::Tensor output(const at::Tensor& t, CollectiveTensors& tensors);
  // Checks a tensor's device and dtype; returns true for a CPU tensor.
  bool check_tensor(const at::Tensor& t, const char* op);
  tn_coll make(tn_coll_kind kind, const at::Tensor& send, const at::Tensor& recv, uint64_t count) const;
  void set_reduction(tn_coll& c, const c10d::ReduceOp& op, const at::Tensor& t) const;
  c10::intrusive_ptr<c10d::Work> launch_recorded(c10d::OpType type, const char* name, const std::vector<tn_coll>& ops,
                                                 CollectiveTensors& tensors, std::vector<at::Tensor> outputs);
  void release_finished();
  void connect(c10::DeviceIndex device, const char* op);  // under lock_; `op` names the first collective

  c10::intrusive_ptr<c10d::Store> store_;
  std::chrono::milliseconds timeout_;
  c10::DeviceIndex device_;
  tn_comm_t comm_ = nullptr;  // made by the first collective (connect)
  bool shut_down_ = false;
  tn_stream_t stream_ = nullptr;       // the group's stream
  tn_stream_t send_stream_ = nullptr;  // sends outside a batch: they wait for their receiver
                                       // while the group's stream runs this rank's receives
  std::atomic<bool> recorded_{false};  // a graph recorded one of its collectives
  std::mutex lock_;
  std::deque<std::pair<tn_comm_work_t, std::shared_ptr<CollectiveTensors>>> in_flight_;
  // startCoalescing .. endCoalescing: the operations gathered
  bool coalescing_ = false;
  std::vector<tn_coll> coalesced_ops_;
  std::shared_ptr<CollectiveTensors> coalesced_tensors_;
  std::vector<at::Tensor> coalesced_outputs_;
  bool coalesced_cpu_ = false;
};

}  // namespace torch_neuronx
