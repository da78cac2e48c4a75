/* A stream's queue of tasks: a ring of bytes that launches write and the stream's worker reads,
 * without a lock between them and without an allocation per task.
 *
 * Launching threads write records one after the other (holding the stream's launch lock, so
 * one at a time) and publish them by moving `tail`; the worker runs the record at `head` and
 * releases it by moving `head`. Both counters only grow (positions in the ring are them modulo
 * the capacity), so `tail - head` is the bytes in flight. A record holds the task's function,
 * its name and its argument bytes; arguments larger than an eighth of the ring go to the heap
 * and the record keeps a pointer. A record that would run past the end of the ring is preceded
 * by a filler record up to the end. Records are whole cache lines, so the worker reading one
 * task and a launch writing the next touch different lines. */
#ifndef TN_TASK_RING_H
#define TN_TASK_RING_H

#include <stddef.h>
#include <stdint.h>

#include "tn/stream.h"

#define TN_TASK_RING_LINE 64

typedef struct tn_task {
    tn_task_fn fn;   /* NULL: a filler up to the end of the ring */
    const char *op;
    void *heap_arg;  /* the arguments, when they did not fit in the ring */
    uint64_t size;   /* bytes of this record, a multiple of TN_TASK_RING_LINE */
    _Alignas(max_align_t) unsigned char arg[];
} tn_task;

typedef struct tn_task_ring {
    unsigned char *buf;
    uint64_t capacity; /* bytes, a power of two and a multiple of TN_TASK_RING_LINE */
    uint64_t reserved; /* bytes reserved by launches, published or not (launch side only) */
    _Alignas(TN_TASK_RING_LINE) uint64_t tail; /* bytes published by launches (atomic) */
    _Alignas(TN_TASK_RING_LINE) uint64_t head; /* bytes released by the worker (atomic) */
} tn_task_ring;

/* 0, or -1 without host memory. `capacity` is rounded up to a power of two (at least 4 KiB). */
int tn_task_ring_init(tn_task_ring *ring, uint64_t capacity);
void tn_task_ring_destroy(tn_task_ring *ring);

/* Launch side (one thread at a time). Returns a record for a task with `arg_size` argument
 * bytes, waiting for the worker while the ring is full; NULL only when heap arguments could
 * not be allocated. The record is not visible to the worker until it is published. */
tn_task *tn_task_ring_reserve(tn_task_ring *ring, size_t arg_size);
/* The task's argument bytes (in the ring or on the heap). */
static inline void *tn_task_arg(tn_task *t) { return t->heap_arg ? t->heap_arg : (void *)t->arg; }
/* Makes every reserved record visible to the worker, in order. */
void tn_task_ring_publish(tn_task_ring *ring);

/* Worker side. The next published task, or NULL when there is none (fillers are skipped). */
tn_task *tn_task_ring_peek(tn_task_ring *ring);
/* Frees the task's record (and heap arguments) once it has run. */
void tn_task_ring_release(tn_task_ring *ring, tn_task *t);

/* Non-zero while published records have not been released. */
int tn_task_ring_pending(const tn_task_ring *ring);

#endif
