/* Connectionist temporal classification loss (Graves et al., 2006) and its gradient, per batch
 * element, as torch's _ctc_loss and _ctc_loss_backward define them.
 *
 * log_probs is [T, B, C] (time, batch, classes; any strides), float32 or float64. Batch element
 * b reads input_lengths[b] time steps and a target of target_lengths[b] labels, label i at
 * targets[offsets[b] + i * target_stride]; its extended target puts `blank` before, between and
 * after the labels (2 L + 1 states). The recurrences run in double whatever the dtype.
 *
 * Forward: log_alpha[b, t, s] (dtype of log_probs, [B, T, S] with S >= 2 L + 1 for every b) is
 * the log-probability of the prefixes of the extended target ending in state s at time t; -inf
 * where no path reaches, and past input_lengths[b] or 2 L + 1. nll[b] = -log p(target | input):
 * 0 for an empty target over no time steps, inf when no alignment exists.
 *
 * Backward: grad[t, b, c] = (exp(log_probs) - exp(log_gamma + nll - log_probs)) * grad_out[b]
 * for t < input_lengths[b], where log_gamma sums alpha beta over the states labelled c (the
 * gradient with respect to the logits under a log_softmax, as torch returns it); 0 for later
 * t, and for the whole batch element when zero_infinity is set and its nll is inf. */
#ifndef TN_CTC_H
#define TN_CTC_H

#include <stdint.h>

#include "tn/status.h"
#include "tn/stream.h"
#include "tn/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tn_ctc {
    tn_tensor log_probs;    /* [T, B, C] */
    tn_tensor log_alpha;    /* [B, T, S] */
    const int64_t *targets; /* device memory, labels in [0, C) */
    int64_t target_stride;
    const int64_t *lengths; /* device memory, [3 B]: offsets, input lengths, target lengths */
    int64_t blank;
} tn_ctc;

tn_status tn_ctc_loss_async(tn_stream_t stream, const tn_ctc *problem, const tn_tensor *nll);
tn_status tn_ctc_loss_backward_async(tn_stream_t stream, const tn_ctc *problem,
                                     const tn_tensor *grad_out, const tn_tensor *nll,
                                     int32_t zero_infinity, const tn_tensor *grad);

/* scratch: (2 S + C) doubles; batch elements split across nth threads. */
void tn_kernel_ctc_loss(const tn_ctc *problem, const tn_tensor *nll, double *scratch, int32_t ith,
                        int32_t nth);
void tn_kernel_ctc_loss_backward(const tn_ctc *problem, const tn_tensor *grad_out,
                                 const tn_tensor *nll, int32_t zero_infinity,
                                 const tn_tensor *grad, double *scratch, int32_t ith, int32_t nth);

#ifdef __cplusplus
}
#endif
#endif
