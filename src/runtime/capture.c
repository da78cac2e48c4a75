/* Stream capture and replay (see tn/capture.h).
 *
 * A recording keeps each launch as (op, fn, a copy of its argument bytes) in one growing
 * array, the argument bytes in another. A replay is one task whose argument names the
 * capture (and the new addresses of its relocated ranges): it copies each recorded argument
 * into a scratch buffer (a task may use its argument as working memory, as the launch's own
 * copy), rewrites the relocated words there, and calls the function. The memory pool is kept
 * by allocator.c in the capture's tn_capture_pool. */
#include <stdalign.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture_internal.h"
#include "trace_internal.h"

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

tn_capture_t tn_capture_suspend(void) {
    struct tn_capture *c = recording;
    recording = NULL;
    return c;
}

void tn_capture_resume(tn_capture_t c) {
    if (c) recording = c;
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
    tn_capture_make_scratch(c);
    return TN_STATUS_OK;
}

void tn_capture_make_scratch(struct tn_capture *c) {
    if (c->refused || !c->largest) return;
    c->scratch = aligned_alloc(alignof(max_align_t),
                               (c->largest + alignof(max_align_t) - 1) / alignof(max_align_t) * alignof(max_align_t));
    if (!c->scratch) refuse(c, "no host memory for a replay's arguments");
}

int32_t tn_capture_replayable(tn_capture_t c) { return c && !c->refused && !c->pool.recording; }
const char *tn_capture_reason(tn_capture_t c) { return c ? c->reason : "no capture"; }
int64_t tn_capture_launches(tn_capture_t c) { return c ? (int64_t)c->count : 0; }

uint64_t tn_capture_block_bytes(tn_capture_t c, const void *ptr) {
    return c && ptr ? tn_memory_pool_block_bytes(&c->pool, ptr) : 0;
}

static void drop_relocations(struct tn_capture *c) {
    free(c->relocations);
    free(c->spans);
    c->relocations = NULL;
    c->spans = NULL;
    c->relocated = 0;
    c->ranges = 0;
}

int tn_span_order(const void *a, const void *b) {
    uintptr_t x = ((const span *)a)->start, y = ((const span *)b)->start;
    return x < y ? -1 : x > y;
}

const span *tn_span_find(const span *s, size_t n, uintptr_t w) {
    size_t lo = 0, hi = n; /* past the last span starting at or before w */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s[mid].start <= w) lo = mid + 1;
        else hi = mid;
    }
    return lo && w < s[lo - 1].end ? &s[lo - 1] : NULL;
}

/* The relocations of every recorded word pointing into one of the n sorted ranges. */
static tn_status find_relocations(struct tn_capture *c, const span *sorted, int32_t n) {
    size_t capacity = 0;
    /* task arguments are flat structs copied at max_align_t offsets, their padding zeroed
     * (TN_TASKS_ZEROED): an address is an aligned word, and no other word reads as one */
    for (size_t l = 0; l < c->count; l++) {
        const recorded *r = &c->launches[l];
        for (size_t at = r->offset; at + sizeof(uintptr_t) <= r->offset + r->size; at += sizeof(uintptr_t)) {
            uintptr_t w;
            memcpy(&w, c->args + at, sizeof w);
            const span *in = tn_span_find(sorted, (size_t)n, w);
            if (!in) continue;
            if (tn_grow_array((void **)&c->relocations, &capacity, c->relocated + 1, sizeof(relocation)) != 0)
                return tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory to relocate a capture");
            c->relocations[c->relocated++] = (relocation){at, (int32_t)in->index, w - in->start};
        }
    }
    return TN_STATUS_OK;
}

tn_status tn_capture_relocate(tn_capture_t c, int32_t count, const uintptr_t *start, const uint64_t *bytes,
                              int64_t *words) {
    if (words) *words = 0;
    if (!c || c->pool.recording || count < 0 || (count && (!start || !bytes)))
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "capture relocation: no capture, still recording, or bad ranges");
    if (!TN_TASKS_ZEROED)
        return tn_error(TN_STATUS_UNSUPPORTED, "capture relocation needs the runtime built with "
                                               "-ftrivial-auto-var-init=zero (a C compiler that has it)");
    span *sorted = malloc(sizeof *sorted * (size_t)(count ? count : 1));
    if (!sorted) return tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory to relocate a capture");
    for (int32_t i = 0; i < count; i++) sorted[i] = (span){start[i], start[i] + bytes[i], i};
    qsort(sorted, (size_t)count, sizeof *sorted, tn_span_order);
    drop_relocations(c);
    tn_status st = TN_STATUS_OK;
    for (int32_t i = 1; i < count && st == TN_STATUS_OK; i++)
        if (sorted[i].start < sorted[i - 1].end)
            st = tn_error(TN_STATUS_INVALID_ARGUMENT, "capture relocation: ranges %d and %d overlap",
                          (int)sorted[i - 1].index, (int)sorted[i].index);
    if (st == TN_STATUS_OK) st = find_relocations(c, sorted, count);
    if (st != TN_STATUS_OK) {
        free(sorted);
        drop_relocations(c);
        return st;
    }
    c->spans = sorted;
    c->ranges = count;
    if (words) *words = (int64_t)c->relocated;
    return TN_STATUS_OK;
}

typedef struct replay_task {
    struct tn_capture *capture;
    uintptr_t start[]; /* the relocated ranges' addresses for this replay (capture->ranges) */
} replay_task;

static tn_status run_replay(void *p) {
    const replay_task *t = p;
    struct tn_capture *c = t->capture;
    size_t next = 0; /* relocations are in the order of the launches' bytes */
    for (size_t i = 0; i < c->count; i++) {
        const recorded *r = &c->launches[i];
        if (r->size) memcpy(c->scratch, c->args + r->offset, r->size);
        for (; next < c->relocated && c->relocations[next].at < r->offset + r->size; next++) {
            const relocation *x = &c->relocations[next];
            uintptr_t w = t->start[x->range] + x->delta;
            memcpy((char *)c->scratch + (x->at - r->offset), &w, sizeof w);
        }
        tn_clear_error();
        tn_status st;
        if (tn_trace_on()) {
            int32_t device, stream;
            tn_trace_current_stream(&device, &stream);
            st = tn_trace_call(r->op, r->fn, c->scratch, device, stream, 1);
        } else {
            st = r->fn(c->scratch);
        }
        if (st != TN_STATUS_OK) {
            char why[400]; /* tn_error writes the buffer tn_last_error() reads */
            snprintf(why, sizeof why, "%s", tn_last_error()[0] ? tn_last_error() : tn_status_string(st));
            return tn_error(st, "launch %lld of %lld (%s) failed: %s", (long long)i + 1,
                            (long long)c->count, r->op, why);
        }
    }
    return TN_STATUS_OK;
}

tn_status tn_capture_replay_at(tn_capture_t c, int32_t count, const uintptr_t *start) {
    if (!c) return tn_error(TN_STATUS_INVALID_ARGUMENT, "capture is NULL");
    if (c->pool.recording)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "a capture cannot be replayed while recording");
    if (c->refused)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "this capture cannot be replayed: %s", c->reason);
    if (count != c->ranges || (count && !start))
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "capture replay: %d addresses for %d relocated ranges",
                        (int)count, (int)c->ranges);
    size_t size = sizeof(replay_task) + sizeof(uintptr_t) * (size_t)count;
    replay_task *t = malloc(size);
    if (!t) return tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory to launch a replay");
    t->capture = c;
    if (count) memcpy(t->start, start, sizeof(uintptr_t) * (size_t)count);
    tn_status st = tn_stream_launch(c->pool.stream, "replay", run_replay, t, size);
    free(t);
    return st;
}

tn_status tn_capture_replay(tn_capture_t c) {
    if (c && c->ranges)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "a relocated capture replays with its ranges' addresses");
    return tn_capture_replay_at(c, 0, NULL);
}

void tn_capture_destroy(tn_capture_t c) {
    if (!c) return;
    if (recording == c) recording = NULL;
    tn_stream_wait_idle(c->pool.stream); /* replays still queued read the recording */
    tn_memory_release_pool(&c->pool);
    tn_memory_free(c->arena);
    tn_capture_unpin(c);
    free(c->names);
    free(c->launches);
    free(c->args);
    drop_relocations(c);
    free(c->scratch);
    free(c);
}
