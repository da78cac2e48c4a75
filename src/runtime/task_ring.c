/* A stream's ring of task records (see task_ring.h). */
#include "task_ring.h"

#include <sched.h>
#include <stdlib.h>
#include <time.h>

#define MIN_CAPACITY 4096u

int tn_task_ring_init(tn_task_ring *ring, uint64_t capacity) {
    uint64_t cap = MIN_CAPACITY;
    while (cap < capacity) cap *= 2;
    ring->buf = aligned_alloc(TN_TASK_RING_LINE, cap);
    if (!ring->buf) return -1;
    ring->capacity = cap;
    ring->reserved = ring->tail = ring->head = 0;
    return 0;
}

void tn_task_ring_destroy(tn_task_ring *ring) {
    free(ring->buf);
    ring->buf = NULL;
}

static uint64_t round_to_line(uint64_t n) {
    return (n + TN_TASK_RING_LINE - 1) & ~(uint64_t)(TN_TASK_RING_LINE - 1);
}

/* Waits until `bytes` more fit after `reserved`: the worker frees records as tasks finish. A
 * full ring means the device is hundreds of tasks behind, so the launching thread yields its
 * core to it, then sleeps in short steps. */
static void wait_for_room(tn_task_ring *ring, uint64_t bytes) {
    for (int i = 0; ring->reserved + bytes - __atomic_load_n(&ring->head, __ATOMIC_ACQUIRE) >
                    ring->capacity; i++) {
        if (i < 100) {
            sched_yield();
        } else {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
    }
}

tn_task *tn_task_ring_reserve(tn_task_ring *ring, size_t arg_size) {
    void *heap_arg = NULL;
    uint64_t size = round_to_line(sizeof(tn_task) + arg_size);
    if (size > ring->capacity / 8) {
        heap_arg = malloc(arg_size);
        if (!heap_arg) return NULL;
        size = round_to_line(sizeof(tn_task));
    }
    uint64_t offset = ring->reserved & (ring->capacity - 1);
    if (offset + size > ring->capacity) {
        /* a filler up to the end of the ring, then the record at its start */
        uint64_t filler = ring->capacity - offset;
        wait_for_room(ring, filler + size);
        tn_task *f = (tn_task *)(ring->buf + offset);
        f->fn = NULL;
        f->size = filler;
        ring->reserved += filler;
        offset = 0;
    } else {
        wait_for_room(ring, size);
    }
    tn_task *t = (tn_task *)(ring->buf + offset);
    t->heap_arg = heap_arg;
    t->size = size;
    ring->reserved += size;
    return t;
}

void tn_task_ring_publish(tn_task_ring *ring) {
    /* sequentially consistent: the stream then reads whether its worker sleeps (stream.c) */
    __atomic_store_n(&ring->tail, ring->reserved, __ATOMIC_SEQ_CST);
}

tn_task *tn_task_ring_peek(tn_task_ring *ring) {
    for (;;) {
        uint64_t head = __atomic_load_n(&ring->head, __ATOMIC_RELAXED);
        if (head == __atomic_load_n(&ring->tail, __ATOMIC_SEQ_CST)) return NULL;
        tn_task *t = (tn_task *)(ring->buf + (head & (ring->capacity - 1)));
        if (t->fn) return t;
        __atomic_store_n(&ring->head, head + t->size, __ATOMIC_RELEASE); /* a filler */
    }
}

void tn_task_ring_release(tn_task_ring *ring, tn_task *t) {
    free(t->heap_arg);
    uint64_t head = __atomic_load_n(&ring->head, __ATOMIC_RELAXED);
    __atomic_store_n(&ring->head, head + t->size, __ATOMIC_RELEASE);
}

int tn_task_ring_pending(const tn_task_ring *ring) {
    return __atomic_load_n(&ring->head, __ATOMIC_ACQUIRE) !=
           __atomic_load_n(&ring->tail, __ATOMIC_SEQ_CST);
}
