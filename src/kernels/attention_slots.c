/* The slots through which the tiled attention backward's threads share a (batch, kv head)
 * group (see tn/attention.h and attention_backward.c). */
#include "attention_impl.h"

int32_t tn_attention_backward_slots(const tn_attention *a, int32_t nth) {
    int64_t groups = a->k.sizes[0] * a->k.sizes[1], group = a->q.sizes[1] / a->k.sizes[1];
    if (nth <= 1 || group <= 1 || groups % nth == 0 || a->q.sizes[2] < ROWS_BELOW) return 0;
    return 2 * nth; /* a thread's first and last parts */
}

int64_t tn_attention_backward_slot_floats(const tn_attention *a) {
    return a->k.sizes[2] * (a->q.sizes[3] + a->v.sizes[3]);
}

void tn_kernel_attention_backward_finish(const tn_attention *a) {
    if (!a->slot_dkv) return;
    int64_t S = a->k.sizes[2], E = a->q.sizes[3], Ev = a->v.sizes[3], n = tn_attention_backward_slot_floats(a);
    for (int32_t s = 0; s < a->slots; s++) {
        int64_t g = a->slot_group[s];
        int seen = g < 0;
        for (int32_t r = 0; r < s && !seen; r++) seen = a->slot_group[r] == g;
        if (seen) continue; /* no part, or the group was summed at its first slot */
        float *dk = a->dk + g * S * E, *dv = a->dv + g * S * Ev;
        const float *f = a->slot_dkv + s * n;
        memcpy(dk, f, sizeof(float) * (size_t)(S * E));
        memcpy(dv, f + S * E, sizeof(float) * (size_t)(S * Ev));
        for (int32_t r = s + 1; r < a->slots; r++) {
            if (a->slot_group[r] != g) continue;
            const float *o = a->slot_dkv + r * n;
            for (int64_t i = 0; i < S * E; i++) dk[i] += o[i];
            for (int64_t i = 0; i < S * Ev; i++) dv[i] += o[S * E + i];
        }
    }
}
