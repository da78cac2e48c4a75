/* Stream capture and replay (see tn/capture.h).
 *
 * A recording keeps each launch as (op, fn, a copy of its argument bytes) in one growing
 * array, the argument bytes in another. A replay is one task whose argument names the
 * capture: it copies each recorded argument into a scratch buffer (a task may use its
 * argument as working memory, as the launch's own copy) and calls the function. The memory
 * pool is kept by allocator.c in the capture's tn_capture_pool. */
#include <stdalign.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tn/capture.h"

typedef struct recorded {
    const char *op;
    tn_task_fn fn;
    size_t offset; /* of the argument bytes in `args` */
    size_t size;
} recorded;

struct tn_capture {
    tn_capture_pool pool; /* first: allocator.c sees the capture through it */
    recorded *launches;
    size_t count, capacity;
    unsigned char *args;
    size_t args_used, args_capacity, largest;
    void *scratch; /* `largest` bytes, for the replayed task's copy of its argument */
    int refused;
    char reason[256];
};

static _Thread_local struct tn_capture *recording;

int32_t tn_capture_active(void) { return recording != NULL; }

tn_capture_pool *tn_capture_pool_recording(int32_t device) {
    return recording && recording->pool.device == device ? &recording->pool : NULL;
}

static void refuse(struct tn_capture *c, const char *why) {
    if (c->refused) return; /* the first reason is the one to fix */
    c->refused = 1;
    snprintf(c->reason, sizeof c->reason, "%s", why);
}

void tn_capture_refuse(const char *why) {
    if (recording) refuse(recording, why);
}

void tn_capture_record(tn_stream_t stream, const char *op, tn_task_fn fn, const void *arg,
                       size_t size) {
    struct tn_capture *c = recording;
    if (!c || c->refused) return;
    if (stream != c->pool.stream) {
        char why[160];
        snprintf(why, sizeof why, "%s was launched on another stream than the one recorded", op);
        refuse(c, why);
        return;
    }
    size_t offset = (c->args_used + alignof(max_align_t) - 1) / alignof(max_align_t) * alignof(max_align_t);
    if (tn_grow_array((void **)&c->launches, &c->capacity, c->count + 1, sizeof(recorded)) != 0 ||
        tn_grow_array((void **)&c->args, &c->args_capacity, offset + size, 1) != 0) {
        refuse(c, "no host memory to record a launch");
        return;
    }
    if (size) memcpy(c->args + offset, arg, size);
    c->launches[c->count++] = (recorded){op, fn, offset, size};
    c->args_used = offset + size;
    if (size > c->largest) c->largest = size;
}

tn_status tn_capture_begin(tn_stream_t stream, tn_capture_t *capture) {
    *capture = NULL;
    if (!stream) return tn_error(TN_STATUS_INVALID_ARGUMENT, "capture: stream is NULL");
    if (recording)
        return tn_error(TN_STATUS_INVALID_ARGUMENT,
                        "this thread is already recording a capture; end it first");
    struct tn_capture *c = calloc(1, sizeof *c);
    if (!c) return tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory for a capture");
    c->pool.device = tn_stream_device(stream);
    c->pool.stream = stream;
    c->pool.recording = 1;
    recording = c;
    *capture = c;
    return TN_STATUS_OK;
}

tn_status tn_capture_end(tn_capture_t c) {
    if (!c || recording != c)
        return tn_error(TN_STATUS_INVALID_ARGUMENT,
                        "capture: not the capture this thread is recording");
    recording = NULL;
    c->pool.recording = 0;
    if (!c->refused && c->largest) {
        c->scratch = aligned_alloc(alignof(max_align_t),
                                   (c->largest + alignof(max_align_t) - 1) / alignof(max_align_t) *
                                       alignof(max_align_t));
        if (!c->scratch) refuse(c, "no host memory for a replay's arguments");
    }
    return TN_STATUS_OK;
}

int32_t tn_capture_replayable(tn_capture_t c) { return c && !c->refused && !c->pool.recording; }
const char *tn_capture_reason(tn_capture_t c) { return c ? c->reason : "no capture"; }
int64_t tn_capture_launches(tn_capture_t c) { return c ? (int64_t)c->count : 0; }

int32_t tn_capture_owns(tn_capture_t c, const void *ptr) {
    return c && ptr ? tn_memory_pool_owns(&c->pool, ptr) : 0;
}

typedef struct replay_task {
    struct tn_capture *capture;
} replay_task;

static tn_status run_replay(void *p) {
    struct tn_capture *c = ((replay_task *)p)->capture;
    for (size_t i = 0; i < c->count; i++) {
        const recorded *r = &c->launches[i];
        if (r->size) memcpy(c->scratch, c->args + r->offset, r->size);
        tn_clear_error();
        tn_status st = r->fn(c->scratch);
        if (st != TN_STATUS_OK) {
            char why[400]; /* tn_error writes the buffer tn_last_error() reads */
            snprintf(why, sizeof why, "%s", tn_last_error()[0] ? tn_last_error() : tn_status_string(st));
            return tn_error(st, "launch %lld of %lld (%s) failed: %s", (long long)i + 1,
                            (long long)c->count, r->op, why);
        }
    }
    return TN_STATUS_OK;
}

tn_status tn_capture_replay(tn_capture_t c) {
    if (!c) return tn_error(TN_STATUS_INVALID_ARGUMENT, "capture is NULL");
    if (c->pool.recording)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "a capture cannot be replayed while recording");
    if (c->refused)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "this capture cannot be replayed: %s", c->reason);
    replay_task t = {c};
    return tn_stream_launch(c->pool.stream, "replay", run_replay, &t, sizeof t);
}

void tn_capture_destroy(tn_capture_t c) {
    if (!c) return;
    if (recording == c) recording = NULL;
    tn_stream_wait_idle(c->pool.stream); /* replays still queued read the recording */
    tn_memory_release_pool(&c->pool);
    free(c->launches);
    free(c->args);
    free(c->scratch);
    free(c);
}
