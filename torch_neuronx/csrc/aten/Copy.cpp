// Copies between neuron and the host or another neuron core, fills and .item().
// Host -> device copies from pageable memory are staged by the runtime and return at once;
// device -> host copies synchronise the stream unless they are non-blocking into pinned memory.
#include <ATen/MemoryOverlap.h>
#include <ATen/ops/_local_scalar_dense.h>
#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>

#include "aten/OpTracking.h"
#include "aten/Ops.h"
#include "aten/TensorView.h"
#include "runtime/Functions.h"

namespace torch_neuronx::ops {
namespace {

bool is_neuron(const at::Tensor& t) {
  return t.device().type() == kNeuron;
}

// Orders `after` behind everything enqueued so far on `before`.
void stream_wait(tn_stream_t after, tn_stream_t before) {
  tn_event_t e = nullptr;
  check(tn_event_create(TN_EVENT_FLAGS_DEFAULT, &e));
  tn_status st = tn_event_record(e, before);
  if (st == TN_STATUS_OK) st = tn_stream_wait_event(after, e);
  tn_event_destroy(e);
  check(st);
}

void* storage_base(const at::Tensor& t) {
  return const_cast<void*>(t.storage().data());
}

} // namespace

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  track_native("aten::_copy_from");
  TORCH_CHECK(self.defined() && dst.defined(), "copy_: both tensors must be defined");
  at::Tensor src = self.sizes() == dst.sizes() ? self : self.expand(dst.sizes());
  if (src.is_conj() || src.is_neg()) src = src.resolve_conj().resolve_neg();
  if (dst.numel() == 0) return dst;
  if (is_neuron(dst)) {
    // What PyTorch's own copy_ refuses on other devices, with the same messages.
    at::assert_no_internal_overlap(dst);
    at::assert_no_partial_overlap(dst, src);
  }
  tn_tensor d = to_tn_view(dst);
  tn_tensor s = to_tn_view(src);

  if (is_neuron(src) && is_neuron(dst)) {
    tn_stream_t stream = current_stream(dst.device().index());
    if (src.device() != dst.device()) {
      // Cross-core: the copy runs on dst's stream after src's pending work, and src's stream
      // waits for the copy before reusing src's memory.
      tn_stream_t other = current_stream(src.device().index());
      stream_wait(stream, other);
      check(tn_copy_async(stream, &d, &s, TN_COPY_FLAGS_NONE));
      stream_wait(other, stream);
    } else {
      check(tn_copy_async(stream, &d, &s, TN_COPY_FLAGS_NONE));
    }
  } else if (is_neuron(dst)) {
    tn_stream_t stream = current_stream(dst.device().index());
    if (non_blocking && tn_host_is_pinned(storage_base(src))) {
      check(tn_copy_async(stream, &d, &s, TN_COPY_FLAGS_NONE));
      check(tn_host_record_stream(storage_base(src), stream));
    } else {
      check(tn_copy_async(stream, &d, &s, TN_COPY_FLAGS_STAGE_SRC));
    }
  } else {
    TORCH_CHECK(is_neuron(src), "copy_: neither tensor is on neuron");
    tn_stream_t stream = current_stream(src.device().index());
    if (non_blocking && tn_host_is_pinned(storage_base(dst))) {
      check(tn_copy_async(stream, &d, &s, TN_COPY_FLAGS_NONE));
      check(tn_host_record_stream(storage_base(dst), stream));
    } else {
      check(tn_copy_async(stream, &d, &s, TN_COPY_FLAGS_BLOCKING));
      check(tn_stream_synchronize(stream));
    }
  }
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) dst.resize_(self.sizes());
  return copy_from(self, dst, false);
}

c10::Scalar local_scalar_dense(const at::Tensor& self) {
  track_native("aten::_local_scalar_dense");
  at::Tensor host = at::empty(self.sizes(), self.options().device(c10::kCPU));
  copy_from(self, host, false);
  return at::_local_scalar_dense(host);
}

at::Tensor& fill_scalar(at::Tensor& self, const c10::Scalar& value) {
  track_native("aten::fill_");
  if (self.numel() == 0) return self;
  tn_tensor d = to_tn_view(self);
  tn_scalar v = to_tn_scalar(value);
  check(tn_fill_async(current_stream(self.device().index()), &d, &v));
  return self;
}

at::Tensor& fill_tensor(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0,
              "fill_ only supports 0-dimension value tensor but got tensor with ", value.dim(),
              " dimensions.");
  return fill_scalar(self, value.item());
}

at::Tensor& zero_(at::Tensor& self) {
  return fill_scalar(self, 0);
}

} // namespace torch_neuronx::ops
