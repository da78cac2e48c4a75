/* Scaled dot-product attention as one fused, tiled pass (flash-style): per query row the
 * scores of a block of keys are computed, folded into a running maximum, normaliser and
 * output accumulator, and never stored. The backward recomputes the probabilities from the
 * saved log-sum-exp.
 *
 * Views: q (B, Hq, L, E), k (B, Hkv, S, E), v (B, Hkv, S, Ev), out (B, Hq, L, Ev), any
 * strides, float32/bfloat16/float16 (q, k, v and out of one dtype); Hq a multiple of Hkv
 * (grouped-query attention: q head h reads kv head h / (Hq / Hkv)). bias: an additive float
 * view of (B, Hq, L, S), stride 0 where broadcast. causal: key j is visible to query i when
 * j <= i (top-left aligned, PyTorch's is_causal). lse: float32 (B, Hq, L), log-sum-exp of
 * each row's scaled scores. A query row that sees no key (every score -inf) gives zeros, as
 * PyTorch's math path does. All math in float32.
 *
 * dropout_p > 0 drops probabilities after the softmax (the log-sum-exp and the normaliser are
 * those of the full row): element (b, h, i, j) of the (B, Hq, L, S) probabilities, numbered in
 * row-major order, is kept or dropped by the launch (seed, offset) exactly as native_dropout
 * (tn/random.h) would keep it, and kept ones are scaled by 1 / (1 - dropout_p). The backward
 * takes the same seed and offset and draws the same mask again. The mask itself is the one
 * tn_dropout_async of a (B, Hq, L, S) tensor writes for that launch. */
#ifndef TN_ATTENTION_H
#define TN_ATTENTION_H
#include <stdint.h>
#include "tn/status.h"
#include "tn/stream.h"
#include "tn/tensor.h"
#ifdef __cplusplus
extern "C" {
#endif
typedef struct tn_attention {
    tn_tensor q, k, v, out, lse, bias;
    int32_t has_bias, causal;
    double scale;
    double dropout_p;
    uint64_t seed, offset;
    /* backward only: grad_out (like out); dq, dk, dv contiguous float32 of q's, k's, v's shapes */
    tn_tensor grad_out;
    float *dq, *dk, *dv;
    /* backward, for callers of the kernel (the launch makes its own): `slots` slots of
     * tn_attention_backward_slot_floats(a) floats and a group number each, set to -1. With
     * them the threads split query heads instead of whole (batch, kv head) groups, and a group
     * whose heads two threads share leaves its key and value gradients in slots, which
     * tn_kernel_attention_backward_finish adds up. NULL: whole groups. */
    float *slot_dkv;
    int64_t *slot_group;
    int32_t slots;
} tn_attention;

tn_status tn_attention_forward_async(tn_stream_t stream, const char *name, const tn_attention *a);
tn_status tn_attention_backward_async(tn_stream_t stream, const char *name, const tn_attention *a);
/* One thread's share: forward rows (B*Hq*L) / backward (batch, kv head) groups, or query
 * heads with slots. scratch holds tn_attention_scratch_floats(a) floats. */
int64_t tn_attention_scratch_floats(const tn_attention *a);
void tn_kernel_attention_forward(const tn_attention *a, float *scratch, int32_t ith, int32_t nth);
void tn_kernel_attention_backward(const tn_attention *a, float *scratch, int32_t ith, int32_t nth);
/* The slots the backward needs for nth threads to share groups (0: they never need to: every
 * thread takes whole groups), the floats of one, and the sum of the shared groups' slots into
 * dk and dv once every slice has run. */
int32_t tn_attention_backward_slots(const tn_attention *a, int32_t nth);
int64_t tn_attention_backward_slot_floats(const tn_attention *a);
void tn_kernel_attention_backward_finish(const tn_attention *a);
#ifdef __cplusplus
}
#endif
#endif
