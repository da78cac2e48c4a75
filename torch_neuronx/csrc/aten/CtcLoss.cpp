// The CTC loss (speech models' training objective: wav2vec2, HuBERT, ...): argument checks with
// the CPU's messages, then the C recurrences (tn/ctc.h). The lengths, and the targets when they
// are checked against the class count, are read on the host, as the CPU kernel reads them.
#include <ATen/ops/_ctc_loss.h>
#include <ATen/ops/_ctc_loss_backward.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/tensor.h>

#include "aten/Iter.h"
#include "aten/OpTracking.h"
#include "aten/TensorView.h"
#include "runtime/Functions.h"

namespace torch_neuronx::ops {
namespace {

using at::Tensor;

// The checked problem: targets as contiguous int64 on the device, and [offsets, input lengths,
// target lengths] on the device, kept alive until the launch.
struct CtcProblem {
  Tensor targets, lengths;
  int64_t max_target_length = 0, target_stride = 1;
};

bool ctc_dtypes_ok(const Tensor& log_probs, const Tensor& targets) {
  auto lp = log_probs.scalar_type(), tg = targets.scalar_type();
  return (lp == at::kFloat || lp == at::kDouble) && (tg == at::kLong || tg == at::kInt);
}

CtcProblem check_ctc(const Tensor& log_probs, const Tensor& targets, c10::IntArrayRef input_lengths,
                     c10::IntArrayRef target_lengths, int64_t blank) {
  TORCH_CHECK(log_probs.dim() == 3, "Expected 3-dimensional tensor, but got ", log_probs.dim(),
              "-dimensional tensor for argument #1 'log_probs' (while checking arguments for ctc_loss)");
  TORCH_CHECK(targets.dim() == 1 || targets.dim() == 2, "ctc_loss: targets must be 1-d (concatenated) or 2-d "
              "(batch, max target length), got ", targets.dim(), " dimensions");
  int64_t steps = log_probs.size(0), batch = log_probs.size(1), classes = log_probs.size(2);
  TORCH_CHECK(blank < classes && blank >= 0, "blank must be in label range");
  TORCH_CHECK(static_cast<int64_t>(input_lengths.size()) == batch, "input_lengths must be of size batch_size");
  TORCH_CHECK(static_cast<int64_t>(target_lengths.size()) == batch, "target_lengths must be of size batch_size");
  CtcProblem p;
  p.targets = targets.to(at::kLong).contiguous();
  std::vector<int64_t> meta(3 * batch);
  int64_t total = 0;
  for (int64_t b = 0; b < batch; b++) {
    int64_t in = input_lengths[b], tl = target_lengths[b];
    TORCH_CHECK(in >= 0 && in <= steps, "Expected input_lengths to have value ", in < 0 ? "at least 0" : "at most ",
                in < 0 ? "" : std::to_string(steps), ", but got value ", in, " (while checking arguments for ctc_loss)");
    TORCH_CHECK(tl >= 0, "Expected target_lengths to have value at least 0, but got value ", tl,
                " (while checking arguments for ctc_loss)");
    meta[b] = targets.dim() == 1 ? total : b * (targets.dim() == 2 ? targets.size(1) : 0);
    meta[batch + b] = in;
    meta[2 * batch + b] = tl;
    total += tl;
    p.max_target_length = std::max(p.max_target_length, tl);
  }
  if (targets.dim() == 1) {
    TORCH_CHECK(targets.size(0) == total, "Expected tensor to have size ", total, " at dimension 0, but got size ",
                targets.size(0), " for argument #2 'targets' (while checking arguments for ctc_loss)");
  } else {
    TORCH_CHECK(targets.size(0) == batch, "Expected tensor to have size ", batch, " at dimension 0, but got size ",
                targets.size(0), " for argument #2 'targets' (while checking arguments for ctc_loss)");
    TORCH_CHECK(targets.size(1) >= p.max_target_length, "Expected tensor to have size at least ",
                p.max_target_length, " at dimension 1, but got size ", targets.size(1),
                " for argument #2 'targets' (while checking arguments for ctc_loss)");
  }
  // Labels outside [0, C) would index past log_probs' rows: refused (the CPU reads them unchecked).
  Tensor host = p.targets.cpu();
  const int64_t* labels = host.const_data_ptr<int64_t>();
  for (int64_t b = 0; b < batch; b++)
    for (int64_t i = 0; i < target_lengths[b]; i++) {
      int64_t c = labels[meta[b] + i];
      TORCH_CHECK_INDEX(c >= 0 && c < classes, "ctc_loss: target label ", c, " of batch element ", b,
                        " is out of range for ", classes, " classes");
    }
  p.lengths = at::tensor(meta, at::TensorOptions().dtype(at::kLong)).to(log_probs.device());
  return p;
}

tn_ctc to_tn_ctc(const Tensor& log_probs, const Tensor& log_alpha, const CtcProblem& p, int64_t blank) {
  tn_ctc c{};
  c.log_probs = to_tn_view(log_probs);
  c.log_alpha = to_tn_view(log_alpha);
  c.targets = p.targets.const_data_ptr<int64_t>();
  c.target_stride = 1;
  c.lengths = p.lengths.const_data_ptr<int64_t>();
  c.blank = blank;
  return c;
}

std::tuple<Tensor, Tensor> ctc_loss(const Tensor& log_probs, const Tensor& targets, c10::IntArrayRef input_lengths,
                                    c10::IntArrayRef target_lengths, int64_t blank, bool zero_infinity) {
  if (!ctc_dtypes_ok(log_probs, targets))
    return via_fallback<at::_ops::_ctc_loss>(log_probs, targets, input_lengths, target_lengths, blank,
                                             zero_infinity);
  CtcProblem p = check_ctc(log_probs, targets, input_lengths, target_lengths, blank);
  track_native("aten::_ctc_loss");
  auto options = log_probs.options();
  Tensor nll = at::empty({log_probs.size(1)}, options);
  Tensor log_alpha = at::empty({log_probs.size(1), log_probs.size(0), 2 * p.max_target_length + 1}, options);
  tn_ctc c = to_tn_ctc(log_probs, log_alpha, p, blank);
  tn_tensor n = to_tn_view(nll);
  check(tn_ctc_loss_async(current_stream(log_probs.device().index()), &c, &n));
  return {nll, log_alpha};
}

Tensor ctc_loss_backward(const Tensor& grad, const Tensor& log_probs, const Tensor& targets,
                         c10::IntArrayRef input_lengths, c10::IntArrayRef target_lengths, const Tensor& nll,
                         const Tensor& log_alpha, int64_t blank, bool zero_infinity) {
  if (!ctc_dtypes_ok(log_probs, targets) || grad.scalar_type() != log_probs.scalar_type())
    return via_fallback<at::_ops::_ctc_loss_backward>(grad, log_probs, targets, input_lengths, target_lengths, nll,
                                                      log_alpha, blank, zero_infinity);
  CtcProblem p = check_ctc(log_probs, targets, input_lengths, target_lengths, blank);
  TORCH_CHECK(log_alpha.dim() == 3 && log_alpha.size(0) == log_probs.size(1) &&
                  log_alpha.size(1) == log_probs.size(0) && log_alpha.size(2) >= 2 * p.max_target_length + 1,
              "ctc_loss_backward: log_alpha has the wrong shape ", log_alpha.sizes(), " for log_probs ",
              log_probs.sizes());
  track_native("aten::_ctc_loss_backward");
  Tensor out = at::empty(log_probs.sizes(), log_probs.options());
  tn_ctc c = to_tn_ctc(log_probs, log_alpha, p, blank);
  tn_tensor g = to_tn_view(grad.expand({log_probs.size(1)})), n = to_tn_view(nll), o = to_tn_view(out);
  check(tn_ctc_loss_backward_async(current_stream(log_probs.device().index()), &c, &g, &n, zero_infinity, &o));
  return out;
}

std::vector<int64_t> host_lengths(const Tensor& lengths, const char* name) {
  TORCH_CHECK(lengths.dim() <= 1 && !at::isFloatingType(lengths.scalar_type()), name,
              " must be a 1-d tensor of integers");
  Tensor h = lengths.to(at::kCPU, at::kLong).contiguous();
  return {h.const_data_ptr<int64_t>(), h.const_data_ptr<int64_t>() + h.numel()};
}

std::tuple<Tensor, Tensor> ctc_loss_tensor(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                                           const Tensor& target_lengths, int64_t blank, bool zero_infinity) {
  return ctc_loss(log_probs, targets, host_lengths(input_lengths, "input_lengths"),
                  host_lengths(target_lengths, "target_lengths"), blank, zero_infinity);
}

Tensor ctc_loss_backward_tensor(const Tensor& grad, const Tensor& log_probs, const Tensor& targets,
                                const Tensor& input_lengths, const Tensor& target_lengths, const Tensor& nll,
                                const Tensor& log_alpha, int64_t blank, bool zero_infinity) {
  return ctc_loss_backward(grad, log_probs, targets, host_lengths(input_lengths, "input_lengths"),
                           host_lengths(target_lengths, "target_lengths"), nll, log_alpha, blank, zero_infinity);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_ctc_loss", ctc_loss);
  m.impl("_ctc_loss.Tensor", ctc_loss_tensor);
  m.impl("_ctc_loss_backward", ctc_loss_backward);
  m.impl("_ctc_loss_backward.Tensor", ctc_loss_backward_tensor);
}

} // namespace torch_neuronx::ops
