/* The fused attention kernel (every ISA variant) against a direct softmax(q k^T * scale +
 * bias) v, without and with dropout, and its backward against finite differences of that
 * reference. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/philox.h"
#include "kernels/table.h"
#include "tn/tn.h"

/* S > one key block, L > one query tile; GQA 2:1; E a multiple of every ISA's micro-tile width,
 * so O += P v takes the micro-kernel (tests/test_attention.py covers other head sizes) */
enum { B = 1, HQ = 2, HKV = 1, L = 101, S = 110, E = 32 };

static tn_tensor view4(float *d, int64_t b, int64_t h, int64_t l, int64_t e) {
    tn_tensor t = {.data = d, .dtype = TN_DTYPE_F32, .ndim = 4, .sizes = {b, h, l, e},
                   .strides = {h * l * e, l * e, e, 1}};
    return t;
}

enum { SEED = 11, OFFSET = 3 };

/* out[h][i] = sum_j softmax_j(scale q.k_j + bias) drop_ij v_j, causal j <= i, with drop the
 * dropout factors of probability p (tn/attention.h); returns sum(out * w). */
static double reference(const float *q, const float *k, const float *v, const float *bias, double scale, double p,
                        const float *w, float *out) {
    double total = 0;
    for (int h = 0; h < HQ; h++)
        for (int i = 0; i < L; i++) {
            double s[S], m = -INFINITY, l = 0;
            float drop[S];
            for (int j = 0; j < S; j++) drop[j] = 1.0f;
            if (p > 0)
                tn_dropout_factors(SEED, OFFSET, (int64_t)(h * L + i) * S, S, tn_philox_keep_from(1 - p),
                                   (float)(1 / (1 - p)), drop);
            for (int j = 0; j <= i && j < S; j++) {
                double d = 0;
                for (int e = 0; e < E; e++) d += (double)q[(h * L + i) * E + e] * k[j * E + e];
                s[j] = d * scale + bias[i * S + j];
                if (s[j] > m) m = s[j];
            }
            for (int j = 0; j <= i; j++) l += s[j] = exp(s[j] - m);
            for (int e = 0; e < E; e++) {
                double o = 0;
                for (int j = 0; j <= i; j++) o += s[j] / l * drop[j] * v[j * E + e];
                if (out) out[(h * L + i) * E + e] = (float)o;
                total += o * w[(h * L + i) * E + e];
            }
        }
    return total;
}

/* With slots, 2 and 3 threads split the group's 2 query heads: the thread of each head leaves
 * its dK and dV in a slot, the finish adds them, and the gradients equal one thread's. */
static void check_shared_group(const tn_kernel_table *kt, tn_attention *a, float *scratch, float *const grads[3],
                               const int counts[3]) {
    static float alone[3][HQ * L * E];
    for (int p = 0; p < 3; p++) memcpy(alone[p], grads[p], sizeof(float) * (size_t)counts[p]);
    for (int32_t nth = 2; nth <= 3; nth++) {
        int32_t slots = tn_attention_backward_slots(a, nth);
        CHECK(slots == 2 * nth);
        float *dkv = malloc(sizeof(float) * (size_t)(slots * tn_attention_backward_slot_floats(a)));
        int64_t groups[6];
        for (int32_t s = 0; s < slots; s++) groups[s] = -1;
        a->slot_dkv = dkv, a->slot_group = groups, a->slots = slots;
        for (int p = 0; p < 3; p++) memset(grads[p], 0, sizeof(float) * (size_t)counts[p]);
        for (int32_t t = 0; t < nth; t++) kt->attention_backward(kt, a, scratch, t, nth);
        int used = 0;
        for (int32_t s = 0; s < slots; s++) used += groups[s] == 0;
        CHECK(used == 2); /* the one group, in two threads' slots */
        tn_kernel_attention_backward_finish(a);
        for (int p = 0; p < 3; p++)
            for (int i = 0; i < counts[p]; i++) CHECK(fabsf(grads[p][i] - alone[p][i]) <= 1e-5f + 1e-5f * fabsf(alone[p][i]));
        a->slot_dkv = NULL, a->slot_group = NULL, a->slots = 0;
        free(dkv);
    }
    CHECK(tn_attention_backward_slots(a, 1) == 0);
}

static void check_attention(double dropout_p) {
    static float q[HQ * L * E], k[S * E], v[S * E], bias[L * S], out[HQ * L * E], want[HQ * L * E], w[HQ * L * E];
    float lse[HQ * L];
    srand(7);
    for (int i = 0; i < HQ * L * E; i++) q[i] = (float)rand() / RAND_MAX - 0.5f, w[i] = (float)rand() / RAND_MAX;
    for (int i = 0; i < S * E; i++) k[i] = (float)rand() / RAND_MAX - 0.5f, v[i] = (float)rand() / RAND_MAX;
    for (int i = 0; i < L * S; i++) bias[i] = (float)rand() / RAND_MAX;
    double scale = 0.7;
    tn_attention a = {0};
    a.q = view4(q, B, HQ, L, E);
    a.k = view4(k, B, HKV, S, E);
    a.v = view4(v, B, HKV, S, E);
    a.out = view4(out, B, HQ, L, E);
    a.lse = (tn_tensor){.data = lse, .dtype = TN_DTYPE_F32, .ndim = 3, .sizes = {B, HQ, L}, .strides = {HQ * L, L, 1}};
    a.bias = (tn_tensor){.data = bias, .dtype = TN_DTYPE_F32, .ndim = 4, .sizes = {B, HQ, L, S},
                         .strides = {0, 0, S, 1}}; /* broadcast over heads */
    a.has_bias = 1;
    a.causal = 1;
    a.scale = scale;
    a.dropout_p = dropout_p;
    a.seed = SEED;
    a.offset = OFFSET;
    reference(q, k, v, bias, scale, dropout_p, w, want);
    static float dq[HQ * L * E], dk[S * E], dv[S * E];
    float *params[3] = {q, k, v}, *grads[3] = {dq, dk, dv};
    int counts[3] = {HQ * L * E, S * E, S * E};
    /* central differences of sum(out * w), every 7th element of q, k and v: the backward's
     * reference, the same for every ISA */
    static float numeric[3][HQ * L * E];
    for (int p = 0; p < 3; p++)
        for (int i = 0; i < counts[p]; i += 7) {
            float keep = params[p][i];
            params[p][i] = keep + 1e-3f;
            double up = reference(q, k, v, bias, scale, dropout_p, w, NULL);
            params[p][i] = keep - 1e-3f;
            double down = reference(q, k, v, bias, scale, dropout_p, w, NULL);
            params[p][i] = keep;
            numeric[p][i] = (float)((up - down) / 2e-3);
        }
    float *scratch = malloc(sizeof(float) * (size_t)tn_attention_scratch_floats(&a));
    for (int isa = 0; isa < TN_ISA_COUNT_; isa++) {
        const tn_kernel_table *kt = tn_kernels_for((tn_isa)isa);
        if (!kt) continue;
        CHECK(kt->attention_scratch_floats(&a) <= tn_attention_scratch_floats(&a));
        a.grad_out = (tn_tensor){0};
        for (int t = 0; t < 3; t++) kt->attention_forward(kt, &a, scratch, t, 3);
        for (int i = 0; i < HQ * L * E; i++) CHECK(fabsf(out[i] - want[i]) < 1e-5f);
        /* the first 5 query rows alone take the row path (decoding) */
        memset(out, 0, sizeof out);
        a.q.sizes[2] = a.out.sizes[2] = a.lse.sizes[2] = a.bias.sizes[2] = 5;
        for (int t = 0; t < 3; t++) kt->attention_forward(kt, &a, scratch, t, 3);
        a.q.sizes[2] = a.out.sizes[2] = a.lse.sizes[2] = a.bias.sizes[2] = L;
        /* (dropout numbers the probabilities by the shape: only head 0's keep their numbers) */
        for (int h = 0; h < (dropout_p > 0 ? 1 : HQ); h++)
            for (int i = 0; i < 5 * E; i++) CHECK(fabsf(out[h * L * E + i] - want[h * L * E + i]) < 1e-5f);
        for (int t = 0; t < 3; t++) kt->attention_forward(kt, &a, scratch, t, 3); /* lse for backward */
        /* backward with grad_out = w */
        a.grad_out = view4(w, B, HQ, L, E);
        a.dq = dq;
        a.dk = dk;
        a.dv = dv;
        kt->attention_backward(kt, &a, scratch, 0, 1);
        check_shared_group(kt, &a, scratch, grads, counts);
        for (int p = 0; p < 3; p++)
            for (int i = 0; i < counts[p]; i += 7) CHECK(fabsf(numeric[p][i] - grads[p][i]) < 2e-3f);
    }
    free(scratch);
}

void test_attention_kernel(void) {
    check_attention(0.0);
    check_attention(0.3);
}
