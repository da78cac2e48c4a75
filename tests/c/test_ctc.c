/* The CTC kernels against brute force: every path of T steps over C classes is enumerated,
 * collapsed (repeats merged, then blanks dropped) and compared with its batch element's
 * target; the loss is -log of the summed probability of the matching paths, and the gradient
 * exp(log_probs) - (the share of that probability whose path has class c at time t). Covers a
 * repeated label (a path must pass a blank between), an empty target, a target no path fits
 * (inf, and 0 with zero_infinity), a length shorter than T, a blank other than 0 and a
 * strided float32 input. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tn/tn.h"

enum { T = 5, B = 5, C = 3 };

/* Does the path collapse to target[0..n)? */
static int collapses_to(const int *path, int steps, const int64_t *target, int64_t n, int blank) {
    int64_t k = 0;
    for (int t = 0; t < steps; t++) {
        if (path[t] == blank || (t > 0 && path[t] == path[t - 1])) continue;
        if (k == n || path[t] != target[k]) return 0;
        k++;
    }
    return k == n;
}

/* -log p(target) and the posterior share of each (t, c), by enumerating C^steps paths */
static double brute_force(const double *lp /* [T][C] */, int steps, const int64_t *target, int64_t n, int blank,
                          double share[T][C]) {
    int path[T];
    double total = 0.0;
    memset(share, 0, sizeof(double) * T * C);
    long count = 1;
    for (int t = 0; t < steps; t++) count *= C;
    for (long code = 0; code < count; code++) {
        long rest = code;
        double p = 1.0;
        for (int t = 0; t < steps; t++) path[t] = (int)(rest % C), rest /= C, p *= exp(lp[t * C + path[t]]);
        if (!collapses_to(path, steps, target, n, blank)) continue;
        total += p;
        for (int t = 0; t < steps; t++) share[t][path[t]] += p;
    }
    for (int t = 0; t < steps; t++)
        for (int c = 0; c < C; c++) share[t][c] = total > 0 ? share[t][c] / total : NAN;
    return -log(total);
}

static void check_ctc(tn_dtype dt, int blank, int zero_infinity) {
    int64_t es = dt == TN_DTYPE_F64 ? 8 : 4, stride_c = dt == TN_DTYPE_F32 ? 2 : 1; /* float32 strided */
    double tol = dt == TN_DTYPE_F64 ? 1e-12 : 2e-6;
    char *lp = calloc((size_t)(T * B * C * stride_c), (size_t)es);
    double logp[B][T * C];
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            double z = 0;
            for (int c = 0; c < C; c++) z += exp(sin(1.0 + b + 3.0 * t + 7.0 * c));
            for (int c = 0; c < C; c++) {
                double v = sin(1.0 + b + 3.0 * t + 7.0 * c) - log(z);
                int64_t off = ((int64_t)t * B * C + (int64_t)b * C + c) * stride_c;
                if (dt == TN_DTYPE_F64) ((double *)lp)[off] = v;
                else ((float *)lp)[off] = (float)v, v = (double)(float)v;
                logp[b][t * C + c] = v;
            }
        }
    int64_t l1 = (blank + 1) % C, l2 = (blank + 2) % C;
    /* concatenated targets: [l1 l1 l2] (repeat), [l2 l1], [], [l1 l2 l1 l2 l1] (too long), [l2] */
    int64_t targets[] = {l1, l1, l2, l2, l1, l1, l2, l1, l2, l1, l2};
    int64_t lengths[3 * B] = {0, 3, 5, 5, 10, /* offsets */ T, 4, 2, 4, 3, /* steps */ 3, 2, 0, 5, 1};
    int64_t S = 11;
    double *alpha = malloc(sizeof(double) * B * T * S), nll[B], grad_out[B], grad[T * B * C];
    tn_ctc p = {.log_probs = {.data = lp, .dtype = dt, .ndim = 3, .sizes = {T, B, C},
                              .strides = {B * C * stride_c, C * stride_c, stride_c}},
                .log_alpha = {.data = alpha, .dtype = dt, .ndim = 3, .sizes = {B, T, S}, .strides = {T * S, S, 1}},
                .targets = targets, .target_stride = 1, .lengths = lengths, .blank = blank};
    tn_tensor tnll = {.data = nll, .dtype = dt, .ndim = 1, .sizes = {B}, .strides = {1}};
    tn_tensor tgo = {.data = grad_out, .dtype = dt, .ndim = 1, .sizes = {B}, .strides = {1}};
    tn_tensor tgrad = {.data = grad, .dtype = dt, .ndim = 3, .sizes = {T, B, C}, .strides = {B * C, C, 1}};
    double *scratch = malloc(sizeof(double) * (size_t)(2 * S + C));
    for (int b = 0; b < B; b++) {
        if (dt == TN_DTYPE_F64) ((double *)grad_out)[b] = 1.0 + b;
        else ((float *)grad_out)[b] = 1.0f + (float)b;
    }
    tn_kernel_ctc_loss(&p, &tnll, scratch, 0, 1);
    tn_kernel_ctc_loss_backward(&p, &tgo, &tnll, zero_infinity, &tgrad, scratch, 0, 1);
    for (int b = 0; b < B; b++) {
        double share[T][C];
        int steps = (int)lengths[B + b];
        double expect = brute_force(logp[b], steps, targets + lengths[b], lengths[2 * B + b], blank, share);
        double got = dt == TN_DTYPE_F64 ? nll[b] : ((float *)nll)[b];
        if (isinf(expect)) {
            CHECK(isinf(got) && got > 0);
        } else {
            CHECK(fabs(got - expect) <= tol * (1 + fabs(expect)));
        }
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++) {
                int64_t off = (int64_t)t * B * C + (int64_t)b * C + c;
                double g = dt == TN_DTYPE_F64 ? grad[off] : ((float *)grad)[off];
                double want = t >= steps || (zero_infinity && isinf(expect))
                                  ? 0.0
                                  : (exp(logp[b][t * C + c]) - share[t][c]) * (1.0 + b);
                if (isnan(want)) CHECK(isnan(g));
                else if (fabs(g - want) > tol * 10) {
                    fprintf(stderr, "ctc grad b=%d t=%d c=%d: %g, expected %g\n", b, t, c, g, want);
                    CHECK(0);
                }
            }
    }
    free(lp), free(alpha), free(scratch);
}

void test_ctc_kernels(void) {
    for (int zero_infinity = 0; zero_infinity < 2; zero_infinity++) {
        check_ctc(TN_DTYPE_F64, 0, zero_infinity);
        check_ctc(TN_DTYPE_F32, 0, zero_infinity);
        check_ctc(TN_DTYPE_F64, 2, zero_infinity);
    }
}
