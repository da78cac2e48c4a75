/* Launching fused attention on a stream: forward rows and backward (batch, kv head) groups
 * (or query heads, with slots for the groups threads share) split across the kernel thread
 * pool, each thread with its own scratch rows. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tn/attention.h"
#include "tn/capture.h"
#include "tn/parallel.h"

typedef struct attention_task {
    tn_attention a;
    int backward, failed;
} attention_task;

static void attention_slice(void *p, int32_t ith, int32_t nth) {
    attention_task *t = p;
    float *scratch = tn_thread_scratch(sizeof(float) * (size_t)tn_attention_scratch_floats(&t->a));
    if (!scratch) {
        t->failed = 1;
        return;
    }
    if (t->backward)
        tn_kernel_attention_backward(&t->a, scratch, ith, nth);
    else
        tn_kernel_attention_forward(&t->a, scratch, ith, nth);
}

static tn_status run_attention(void *p) {
    attention_task *t = p;
    tn_attention *a = &t->a;
    int64_t work = a->q.sizes[0] * a->q.sizes[1] * a->q.sizes[2] * a->k.sizes[2] * a->q.sizes[3];
    int32_t slots = t->backward ? tn_attention_backward_slots(a, tn_parallel_threads()) : 0;
    if (slots) { /* without them the threads take whole groups: slower, still right */
        a->slot_dkv = malloc(sizeof(float) * (size_t)(slots * tn_attention_backward_slot_floats(a)));
        a->slot_group = malloc(sizeof(int64_t) * (size_t)slots);
        if (a->slot_dkv && a->slot_group) {
            a->slots = slots;
            for (int32_t s = 0; s < slots; s++) a->slot_group[s] = -1;
        }
    }
    tn_parallel_run(attention_slice, t, work);
    if (a->slots) tn_kernel_attention_backward_finish(a);
    free(a->slot_dkv);
    free(a->slot_group);
    a->slot_dkv = NULL, a->slot_group = NULL, a->slots = 0;
    return t->failed ? tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory for attention rows") : TN_STATUS_OK;
}

static tn_status check(const tn_attention *a, int backward) {
    const tn_tensor *v4[4] = {&a->q, &a->k, &a->v, &a->out};
    for (int i = 0; i < 4; i++)
        if (v4[i]->ndim != 4 || v4[i]->dtype != a->q.dtype)
            return tn_error(TN_STATUS_INVALID_ARGUMENT, "attention: q, k, v and out must be 4-D of one dtype");
    if (a->q.dtype != TN_DTYPE_F32 && a->q.dtype != TN_DTYPE_BF16 && a->q.dtype != TN_DTYPE_F16)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "attention: float32, bfloat16 or float16 expected");
    int64_t B = a->q.sizes[0], Hq = a->q.sizes[1], L = a->q.sizes[2], Hkv = a->k.sizes[1], S = a->k.sizes[2];
    if (a->k.sizes[0] != B || a->v.sizes[0] != B || a->v.sizes[1] != Hkv || a->v.sizes[2] != S ||
        a->k.sizes[3] != a->q.sizes[3] || Hkv < 1 || Hq % Hkv || a->out.sizes[0] != B || a->out.sizes[1] != Hq ||
        a->out.sizes[2] != L || a->out.sizes[3] != a->v.sizes[3])
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "attention: q, k, v and out shapes do not agree");
    if (a->lse.ndim != 3 || a->lse.dtype != TN_DTYPE_F32)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "attention: lse must be float32 (B, Hq, L)");
    if (a->has_bias && (a->bias.ndim != 4 || a->bias.sizes[0] != B || a->bias.sizes[1] != Hq ||
                        a->bias.sizes[2] != L || a->bias.sizes[3] != S || !tn_dtype_is_float(a->bias.dtype)))
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "attention: bias must be a float (B, Hq, L, S) view");
    if (!(a->dropout_p >= 0 && a->dropout_p <= 1))
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "attention: dropout probability %g is outside [0, 1]", a->dropout_p);
    if (backward && (!a->dq || !a->dk || !a->dv || a->grad_out.ndim != 4 || a->grad_out.dtype != a->q.dtype))
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "attention backward: gradient buffers missing");
    return TN_STATUS_OK;
}

static tn_status launch(tn_stream_t stream, const char *name, const tn_attention *a, int backward) {
    tn_status st = check(a, backward);
    if (st != TN_STATUS_OK) return st;
    if (tn_tensor_numel(&a->q) == 0 && tn_tensor_numel(&a->k) == 0) return TN_STATUS_OK;
    if (a->dropout_p > 0) tn_capture_refuse("attention dropout (a replay would repeat its mask)");
    attention_task t = {*a, backward, 0};
    t.a.slot_dkv = NULL, t.a.slot_group = NULL, t.a.slots = 0; /* the task's own, made when it runs */
    return tn_stream_launch(stream, name ? name : "attention", run_attention, &t, sizeof t);
}

tn_status tn_attention_forward_async(tn_stream_t stream, const char *name, const tn_attention *a) {
    return launch(stream, name, a, 0);
}

tn_status tn_attention_backward_async(tn_stream_t stream, const char *name, const tn_attention *a) {
    return launch(stream, name, a, 1);
}
