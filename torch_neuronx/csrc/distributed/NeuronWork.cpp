// The Work of a neuron collective: a tn_comm_work plus the tensors it keeps alive.
//
// wait() orders the caller's current stream after the collective (the host goes on), then copies
// results that went through staging buffers into the caller's tensors on that stream. Barriers and
// CPU tensors block the host instead. A failure surfaces as torch.distributed.DistBackendError:
// at once where the host waits, else at the stream's next synchronisation.
#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>

#include "distributed/ProcessGroupNeuron.h"
#include "runtime/Functions.h"

namespace torch_neuronx {

NeuronWork::NeuronWork(c10d::OpType type, const char* name, tn_comm_work_t work, c10::Device device,
                       std::shared_ptr<CollectiveTensors> tensors, std::vector<at::Tensor> outputs,
                       bool blocking, uint64_t seq)
    : Work(-1, type),
      name_(name),
      work_(work),
      device_(device),
      tensors_(std::move(tensors)),
      outputs_(std::move(outputs)),
      blocking_(blocking),
      seq_(seq) {}

NeuronWork::~NeuronWork() { tn_comm_work_release(work_); }

bool NeuronWork::isCompleted() { return !work_ || tn_comm_work_query(work_) != TN_STATUS_NOT_READY; }

bool NeuronWork::isSuccess() const { return !work_ || tn_comm_work_query(work_) == TN_STATUS_OK; }

std::exception_ptr NeuronWork::exception() const {
  if (!work_) return nullptr;
  tn_status st = tn_comm_work_query(work_);
  if (st == TN_STATUS_OK || st == TN_STATUS_NOT_READY) return nullptr;
  return std::make_exception_ptr(c10::DistBackendError(
      {__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, tn_last_error()));
}

std::vector<at::Tensor> NeuronWork::result() { return outputs_; }

uint64_t NeuronWork::getSequencenumber() const { return seq_; }

void NeuronWork::wait_on_current_stream() {
  if (!work_) return;
  std::lock_guard<std::mutex> g(lock_);
  if (blocking_) {
    check(tn_comm_work_synchronize(work_));  // c10d's binding released the GIL
  } else {
    check(tn_comm_work_wait(work_, current_stream(device_.index())));
  }
  if (!copied_back_ && tensors_) {
    for (auto& [dst, src] : tensors_->copy_back) dst.copy_(src);
    copied_back_ = true;
  }
}

bool NeuronWork::wait(std::chrono::milliseconds) {
  wait_on_current_stream();
  return true;
}

void NeuronWork::synchronize() { wait_on_current_stream(); }

c10::intrusive_ptr<c10::ivalue::Future> NeuronWork::getFuture() {
  if (!future_) {
    std::vector<c10::Device> devices;
    if (device_.type() != c10::kCPU) devices.push_back(device_);
    future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()), devices);
    wait_on_current_stream();
    future_->markCompleted(c10::IValue(outputs_));
  }
  return future_;
}

}  // namespace torch_neuronx
