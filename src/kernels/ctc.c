/* CTC loss and gradient (see tn/ctc.h): the forward (alpha) and backward (beta) recurrences
 * over the extended target, in log space and in double, one batch element at a time. */
#include <math.h>

#include "strided.h"
#include "tn/ctc.h"

static double load(const tn_tensor *t, int64_t offset) {
    return t->dtype == TN_DTYPE_F64 ? ((const double *)t->data)[offset] : ((const float *)t->data)[offset];
}

static void store(const tn_tensor *t, int64_t offset, double v) {
    if (t->dtype == TN_DTYPE_F64)
        ((double *)t->data)[offset] = v;
    else
        ((float *)t->data)[offset] = (float)v;
}

/* log(e^a + e^b + e^c), -inf when all three are */
static double log_add3(double a, double b, double c) {
    double m = fmax(a, fmax(b, c));
    if (m == -INFINITY) return -INFINITY;
    return m + log(exp(a - m) + exp(b - m) + exp(c - m));
}

typedef struct element {
    int64_t b, steps, labels, states; /* states = 2 labels + 1 */
    const int64_t *target;            /* label i at target[i * stride] */
    int64_t stride, blank;
} element;

static element element_of(const tn_ctc *p, int64_t b) {
    int64_t batch = p->log_probs.sizes[1];
    element e = {b, p->lengths[batch + b], p->lengths[2 * batch + b], 0, p->targets + p->lengths[b],
                 p->target_stride, p->blank};
    e.states = 2 * e.labels + 1;
    return e;
}

/* the label of extended state s */
static int64_t label(const element *e, int64_t s) { return s % 2 ? e->target[(s / 2) * e->stride] : e->blank; }

static double log_prob(const tn_ctc *p, int64_t t, int64_t b, int64_t c) {
    const tn_tensor *lp = &p->log_probs;
    return load(lp, t * lp->strides[0] + b * lp->strides[1] + c * lp->strides[2]);
}

static int64_t alpha_at(const tn_ctc *p, int64_t b, int64_t t, int64_t s) {
    const tn_tensor *la = &p->log_alpha;
    return b * la->strides[0] + t * la->strides[1] + s * la->strides[2];
}

/* alpha[t][s] from the previous row: staying in s, or coming from s - 1, or from s - 2 when
 * that skips a blank between two different labels */
static double alpha_step(const element *e, const double *prev, int64_t s) {
    double stay = prev[s], from1 = s > 0 ? prev[s - 1] : -INFINITY;
    double from2 = s > 1 && label(e, s) != label(e, s - 2) ? prev[s - 2] : -INFINITY;
    return log_add3(stay, from1, from2);
}

static void forward_one(const tn_ctc *p, const element *e, const tn_tensor *nll, double *rows) {
    int64_t steps_max = p->log_alpha.sizes[1], states_max = p->log_alpha.sizes[2];
    double *prev = rows, *cur = rows + states_max;
    /* an empty target over no time steps has probability 1; otherwise 0 until the last step */
    double ll = e->steps == 0 && e->labels == 0 ? 0.0 : -INFINITY;
    for (int64_t t = 0; t < steps_max; t++) {
        for (int64_t s = 0; s < states_max; s++) {
            double a = -INFINITY;
            if (t < e->steps && s < e->states) {
                if (t == 0)
                    a = s < 2 ? log_prob(p, 0, e->b, label(e, s)) : -INFINITY;
                else
                    a = alpha_step(e, prev, s) + log_prob(p, t, e->b, label(e, s));
            }
            cur[s] = a;
            store(&p->log_alpha, alpha_at(p, e->b, t, s), a);
        }
        /* paths end in the last label or in the blank after it */
        if (t == e->steps - 1)
            ll = log_add3(cur[e->states - 1], e->labels ? cur[e->states - 2] : -INFINITY, -INFINITY);
        double *swap = prev;
        prev = cur, cur = swap;
    }
    store(nll, e->b * nll->strides[0], -ll);
}

void tn_kernel_ctc_loss(const tn_ctc *p, const tn_tensor *nll, double *scratch, int32_t ith, int32_t nth) {
    int64_t first, last;
    tn_slice(p->log_probs.sizes[1], ith, nth, &first, &last);
    for (int64_t b = first; b < last; b++) {
        element e = element_of(p, b);
        forward_one(p, &e, nll, scratch);
    }
}

/* beta[t][s] from the next row: the mirror image of alpha_step */
static double beta_step(const element *e, const double *next, int64_t s) {
    double stay = next[s], to1 = s + 1 < e->states ? next[s + 1] : -INFINITY;
    double to2 = s + 2 < e->states && label(e, s) != label(e, s + 2) ? next[s + 2] : -INFINITY;
    return log_add3(stay, to1, to2);
}

static void backward_one(const tn_ctc *p, const element *e, double gr, double nll, int32_t zero_infinity,
                         const tn_tensor *grad, double *scratch) {
    int64_t steps_max = p->log_probs.sizes[0], classes = p->log_probs.sizes[2];
    int64_t states_max = p->log_alpha.sizes[2];
    double *next = scratch, *cur = scratch + states_max, *gamma = scratch + 2 * states_max;
    int zero = zero_infinity && nll == INFINITY;
    for (int64_t t = steps_max - 1; t >= 0; t--) {
        int64_t row = t * grad->strides[0] + e->b * grad->strides[1];
        if (t >= e->steps || zero) {
            for (int64_t c = 0; c < classes; c++) store(grad, row + c * grad->strides[2], 0.0);
            continue;
        }
        for (int64_t c = 0; c < classes; c++) gamma[c] = -INFINITY;
        for (int64_t s = e->states - 1; s >= 0; s--) {
            int64_t c = label(e, s);
            double beta;
            if (t == e->steps - 1)
                beta = s >= e->states - 2 ? log_prob(p, t, e->b, c) : -INFINITY;
            else
                beta = beta_step(e, next, s) + log_prob(p, t, e->b, c);
            cur[s] = beta;
            double ab = load(&p->log_alpha, alpha_at(p, e->b, t, s)) + beta;
            gamma[c] = log_add3(gamma[c], ab, -INFINITY);
        }
        for (int64_t c = 0; c < classes; c++) {
            double lp = log_prob(p, t, e->b, c);
            store(grad, row + c * grad->strides[2], (exp(lp) - exp(gamma[c] + nll - lp)) * gr);
        }
        double *swap = next;
        next = cur, cur = swap;
    }
}

void tn_kernel_ctc_loss_backward(const tn_ctc *p, const tn_tensor *grad_out, const tn_tensor *nll,
                                 int32_t zero_infinity, const tn_tensor *grad, double *scratch, int32_t ith,
                                 int32_t nth) {
    int64_t first, last;
    tn_slice(p->log_probs.sizes[1], ith, nth, &first, &last);
    for (int64_t b = first; b < last; b++) {
        element e = element_of(p, b);
        backward_one(p, &e, load(grad_out, b * grad_out->strides[0]), load(nll, b * nll->strides[0]),
                     zero_infinity, grad, scratch);
    }
}
