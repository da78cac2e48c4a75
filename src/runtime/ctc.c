/* Launching the CTC loss and its gradient on a stream, with per-thread scratch. */
#include "internal.h"
#include "tn/ctc.h"
#include "tn/parallel.h"

typedef struct ctc_task {
    tn_ctc problem;
    tn_tensor nll, grad_out, grad;
    int32_t backward, zero_infinity;
    int failed;
} ctc_task;

static void ctc_slice(void *p, int32_t ith, int32_t nth) {
    ctc_task *t = p;
    size_t doubles = (size_t)(2 * t->problem.log_alpha.sizes[2] + t->problem.log_probs.sizes[2]);
    double *scratch = tn_thread_scratch(doubles * sizeof(double));
    if (!scratch) {
        t->failed = 1;
        return;
    }
    if (t->backward)
        tn_kernel_ctc_loss_backward(&t->problem, &t->grad_out, &t->nll, t->zero_infinity, &t->grad, scratch,
                                    ith, nth);
    else
        tn_kernel_ctc_loss(&t->problem, &t->nll, scratch, ith, nth);
}

static tn_status run_ctc(void *p) {
    ctc_task *t = p;
    const tn_tensor *lp = &t->problem.log_probs;
    /* batch elements split across threads: the work of one is its time steps by its states */
    tn_parallel_run(ctc_slice, t, lp->sizes[1] * lp->sizes[0] * (t->problem.log_alpha.sizes[2] + lp->sizes[2]));
    return t->failed ? tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory for the CTC recurrences") : TN_STATUS_OK;
}

static tn_status check_problem(const tn_ctc *p) {
    const tn_tensor *lp = &p->log_probs, *la = &p->log_alpha;
    if (lp->ndim != 3 || la->ndim != 3 || la->sizes[0] != lp->sizes[1] || la->sizes[1] != lp->sizes[0] ||
        la->sizes[2] < 1 || la->dtype != lp->dtype || (lp->dtype != TN_DTYPE_F32 && lp->dtype != TN_DTYPE_F64))
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "ctc_loss: log_probs [T, B, C] and log_alpha [B, T, S] "
                                                    "of one floating dtype expected");
    if (p->blank < 0 || p->blank >= lp->sizes[2])
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "ctc_loss: blank must be in label range");
    return TN_STATUS_OK;
}

tn_status tn_ctc_loss_async(tn_stream_t stream, const tn_ctc *problem, const tn_tensor *nll) {
    tn_status st = check_problem(problem);
    if (st != TN_STATUS_OK) return st;
    if (nll->ndim != 1 || nll->sizes[0] != problem->log_probs.sizes[1] || nll->dtype != problem->log_probs.dtype)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "ctc_loss: nll must be [B] of log_probs' dtype");
    if (problem->log_probs.sizes[1] == 0) return TN_STATUS_OK;
    ctc_task t = {*problem, *nll, *nll, *nll, 0, 0, 0};
    return tn_stream_launch(stream, "aten::_ctc_loss", run_ctc, &t, sizeof t);
}

tn_status tn_ctc_loss_backward_async(tn_stream_t stream, const tn_ctc *problem, const tn_tensor *grad_out,
                                     const tn_tensor *nll, int32_t zero_infinity, const tn_tensor *grad) {
    tn_status st = check_problem(problem);
    if (st != TN_STATUS_OK) return st;
    const tn_tensor *lp = &problem->log_probs;
    int64_t batch = lp->sizes[1];
    if (grad->ndim != 3 || grad->sizes[0] != lp->sizes[0] || grad->sizes[1] != batch || grad->sizes[2] != lp->sizes[2] ||
        grad->dtype != lp->dtype || nll->ndim != 1 || nll->sizes[0] != batch || nll->dtype != lp->dtype ||
        grad_out->ndim != 1 || grad_out->sizes[0] != batch || grad_out->dtype != lp->dtype)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "ctc_loss_backward: grad [T, B, C], nll [B] and grad_out [B] "
                                                    "of log_probs' dtype expected");
    if (batch == 0 || lp->sizes[0] == 0) return TN_STATUS_OK;
    ctc_task t = {*problem, *nll, *grad_out, *grad, 1, zero_infinity, 0};
    return tn_stream_launch(stream, "aten::_ctc_loss_backward", run_ctc, &t, sizeof t);
}
