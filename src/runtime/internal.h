/* Runtime internals shared by the files of src/runtime (not installed, not public). */
#ifndef TN_RUNTIME_INTERNAL_H
#define TN_RUNTIME_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "tn/device_interface.h"
#include "tn/memory.h"
#include "tn/runtime.h"
#include "tn/status.h"
#include "tn/stream.h"

/* Sets tn_last_error() and returns status. */
tn_status tn_error(tn_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Empties tn_last_error() (stream workers do it before each task). */
void tn_clear_error(void);

/* Starts the runtime with defaults if needed; fails in a forked child. Every public entry
 * point that touches devices calls it first. */
tn_status tn_runtime_ensure(void);

/* Logical device `device` (validated by the caller). */
typedef struct tn_device_state {
    int32_t physical_core;
    uint64_t capacity;
    struct tn_allocator *allocator;
    struct tn_stream *streams[TN_STREAMS_PER_DEVICE]; /* created lazily */
    pthread_mutex_t streams_lock;
    uint32_t next_pool[2]; /* round-robin cursors: normal, high priority */
} tn_device_state;

tn_device_state *tn_device_state_get(int32_t device);
const tn_device_interface *tn_driver(void);

/* Allocator (allocator.c). */
struct tn_allocator *tn_allocator_create(int32_t device);

/* Streams (stream.c). */
extern int32_t tn_stream_threads_started;

/* Waits for the stream's / device's work without taking their errors (the allocator's
 * out-of-memory path must not swallow a kernel error meant for the user). */
void tn_stream_wait_idle(tn_stream_t stream);
void tn_device_wait_idle(int32_t device);
/* Runs fn(arg) on the calling thread if the stream has no pending work (so the result is the
 * same as enqueueing it) and returns its status; TN_STATUS_NOT_READY if the stream is busy. */
tn_status tn_stream_run_if_idle(tn_stream_t stream, const char *op, tn_task_fn fn, void *arg);
/* Tasks enqueued on the stream and not yet completed. */
uint64_t tn_stream_pending(tn_stream_t stream);
/* Returns and clears the first kernel error kept on the stream. */
tn_status tn_stream_take_error(tn_stream_t stream);

/* Makes room for `need` items of `unit` bytes in the growing array *p of *capacity items
 * (doubling); 0, or -1 when out of host memory (the array is unchanged). */
static inline int tn_grow_array(void **p, size_t *capacity, size_t need, size_t unit) {
    if (need <= *capacity) return 0;
    size_t n = *capacity ? *capacity : 64;
    while (n < need) n *= 2;
    void *q = realloc(*p, n * unit);
    if (!q) return -1;
    *p = q;
    *capacity = n;
    return 0;
}

/* Stream capture (capture.c) and its memory pool (kept by allocator.c). */
typedef struct tn_capture_pool {
    struct tn_block **blocks; /* every block allocated while recording */
    size_t count, capacity;
    struct tn_block *free;    /* pool blocks not allocated; reused while recording */
    int32_t device;
    tn_stream_t stream;
    int recording;
} tn_capture_pool;

/* 1 when the runtime's launch sites were built with their automatic variables zeroed
 * (-ftrivial-auto-var-init=zero, Makefile): a task struct built on the stack then has zero
 * padding, and heap tasks are calloc'ed. A recording (capture.c) reads any aligned word of a
 * task's argument bytes as a possible address, and a stale padding byte beside a small
 * integer field could otherwise read as one. Without it, recordings are not relocated. */
#ifndef TN_TASKS_ZEROED
#define TN_TASKS_ZEROED 0
#endif

/* The pool the calling thread's recording allocates from on `device`, or NULL. */
tn_capture_pool *tn_capture_pool_recording(int32_t device);
/* Records a launch if the calling thread is recording (stream.c calls it for every launch). */
void tn_capture_record(tn_stream_t stream, const char *op, tn_task_fn fn, const void *arg,
                       size_t size);
/* Returns the pool's blocks to the allocator's cache (allocator.c). */
void tn_memory_release_pool(tn_capture_pool *pool);
/* The size of the pool's block that starts at ptr (what the segment holds), 0 if none does. */
uint64_t tn_memory_pool_block_bytes(const tn_capture_pool *pool, const void *ptr);
/* The pool's blocks (start and size), at most `max` of them written; returns how many there are. */
size_t tn_memory_pool_blocks(const tn_capture_pool *pool, uintptr_t *start, uint64_t *bytes, size_t max);

/* Shared-memory usage registry (usage.c). */
void tn_usage_publish(int32_t device, uint64_t allocated, uint64_t reserved);
void tn_usage_start(int32_t count);
void tn_usage_forget(void);

/* This thread's scratch block of at least `bytes` (64-byte aligned), or NULL when out of
 * memory; its contents do not survive the next call (scratch.c). */
void *tn_thread_scratch(size_t bytes);

/* Wakes the kernel pool's sleeping workers so that they spin for a while: a launch that wakes
 * a sleeping stream worker calls it, so the pool wakes alongside the worker and is awake by
 * the time the kernel splits (parallel.c). */
void tn_parallel_prewake(void);

/* Adds n to a statistic, keeping its peak and running totals. */
static inline void tn_stat_add(tn_stat *s, int64_t n) {
    s->current += n;
    if (n > 0)
        s->allocated += n;
    else
        s->freed -= n;
    if (s->current > s->peak) s->peak = s->current;
}

/* Parsing helpers (env.c), exposed for the C tests. */
int32_t tn_parse_core_list(const char *text, int32_t *cores, int32_t max);
int tn_parse_bytes(const char *text, uint64_t *bytes);

#endif
