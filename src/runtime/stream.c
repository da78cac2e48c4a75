/* Streams (in-order queues, one worker thread each) and events.
 *
 * A launch writes its task, with its own copy of the arguments, into the stream's ring
 * (task_ring.h) and wakes the worker only if it sleeps; the worker runs tasks one at a time in
 * order. Launches and the worker share no lock: a launch takes the stream's launch lock (other
 * launching threads are its only contenders), the worker reads the ring's counters. Counters
 * of enqueued and completed tasks let a host thread wait for "everything enqueued so far"
 * without a marker task. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sched.h>

#include "internal.h"
#include "task_ring.h"
#include "trace_internal.h"
#include "tn/capture.h"

/* Bytes of a stream's ring: a few hundred launches of elementwise work in flight. */
#define RING_BYTES (256u << 10)

struct tn_stream {
    int32_t device;
    int32_t index;
    tn_task_ring ring;
    pthread_mutex_t launch_lock; /* one launch at a time; held by tn_stream_run_if_idle */
    pthread_mutex_t lock;        /* sleeping and waking, the kept error */
    pthread_cond_t has_work;
    pthread_cond_t progress;
    uint64_t enqueued;      /* atomic, written under launch_lock */
    uint64_t completed;     /* atomic, written by the worker */
    int32_t worker_waiting; /* atomic: the worker sleeps on has_work */
    uint64_t wake_at;       /* atomic: the least `completed` a host thread sleeping on progress
                             * waits for (UINT64_MAX: none), set under lock */
    tn_status error;
    char error_msg[512];
};

/* Before sleeping on a condition variable, the worker and a synchronizing host thread spin
 * this many pauses (tens of microseconds): a launch or a completion that follows closely is
 * then seen without the futex wake-up, which costs 10-30 us on a virtual machine. */
#define SPIN 200

static _Thread_local int8_t current_index[TN_MAX_DEVICES];

/* The stream whose task this thread runs, for the trace of launches inside a replay. */
static _Thread_local tn_stream_t running;

void tn_trace_current_stream(int32_t *device, int32_t *stream) {
    *device = running ? running->device : -1;
    *stream = running ? running->index : -1;
}

/* Runs one task of stream s on the calling thread, timed when the trace is on. */
static tn_status run_task(tn_stream_t s, const char *op, tn_task_fn fn, void *arg) {
    tn_clear_error();
    if (!tn_trace_on()) return fn(arg);
    tn_stream_t outer = running;
    running = s;
    tn_status st = tn_trace_call(op, fn, arg, s->device, s->index, 0);
    running = outer;
    return st;
}

/* Set once a worker thread exists: a fork() after that leaves a child without workers. */
int32_t tn_stream_threads_started;

/* The sleeping side of the two wake-ups below. Each pairs a sequentially consistent store of
 * a counter with a load of a waiting flag on one side, and the opposite on the other side, so
 * either the sleeper sees the new counter or the waker sees the flag (and then takes `lock`,
 * which the sleeper holds until it waits). */
static void sleep_for_work(tn_stream_t s) {
    for (int i = 0; i < SPIN && !tn_task_ring_pending(&s->ring); i++) sched_yield();
    if (tn_task_ring_pending(&s->ring)) return;
    pthread_mutex_lock(&s->lock);
    __atomic_store_n(&s->worker_waiting, 1, __ATOMIC_SEQ_CST);
    while (!tn_task_ring_pending(&s->ring)) pthread_cond_wait(&s->has_work, &s->lock);
    __atomic_store_n(&s->worker_waiting, 0, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&s->lock);
}

static void *worker_main(void *p) {
    tn_stream_t s = p;
    char name[16];
    snprintf(name, sizeof name, "tn-stream%d.%d", (int)s->device, (int)s->index);
    pthread_setname_np(pthread_self(), name);
    for (;;) {
        tn_task *t = tn_task_ring_peek(&s->ring);
        if (!t) {
            sleep_for_work(s);
            continue;
        }
        tn_status st = run_task(s, t->op, t->fn, tn_task_arg(t));
        if (st != TN_STATUS_OK) {
            pthread_mutex_lock(&s->lock);
            if (s->error == TN_STATUS_OK) {
                s->error = st;
                snprintf(s->error_msg, sizeof s->error_msg, "%s failed: %s", t->op,
                         tn_last_error()[0] ? tn_last_error() : tn_status_string(st));
            }
            pthread_mutex_unlock(&s->lock);
        }
        tn_task_ring_release(&s->ring, t);
        uint64_t done = s->completed + 1;
        __atomic_store_n(&s->completed, done, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&s->wake_at, __ATOMIC_SEQ_CST) <= done) {
            /* only when a waiter's task is done: a wake-up per task cost a futex call on this
             * thread and a host thread taking a core from the kernel's threads to go back
             * to sleep (1M-element launches ran 10-15% slower than the CPU's) */
            pthread_mutex_lock(&s->lock);
            __atomic_store_n(&s->wake_at, UINT64_MAX, __ATOMIC_RELAXED);
            pthread_cond_broadcast(&s->progress);
            pthread_mutex_unlock(&s->lock);
        }
    }
    return NULL;
}

static tn_status stream_create(int32_t device, int32_t index, tn_stream_t *out) {
    tn_stream_t s = calloc(1, sizeof *s);
    if (!s || tn_task_ring_init(&s->ring, RING_BYTES) != 0) {
        free(s);
        return tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory for a stream");
    }
    s->device = device;
    s->index = index;
    s->wake_at = UINT64_MAX;
    pthread_mutex_init(&s->launch_lock, NULL);
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->has_work, NULL);
    pthread_cond_init(&s->progress, NULL);
    pthread_t thread;
    if (pthread_create(&thread, NULL, worker_main, s) != 0) {
        tn_task_ring_destroy(&s->ring);
        free(s);
        return tn_error(TN_STATUS_INTERNAL, "could not start a stream worker thread");
    }
    pthread_detach(thread);
    __atomic_store_n(&tn_stream_threads_started, 1, __ATOMIC_RELEASE);
    *out = s;
    return TN_STATUS_OK;
}

tn_status tn_stream_get(int32_t device, int32_t index, tn_stream_t *stream) {
    tn_status st = tn_device_check(device);
    if (st != TN_STATUS_OK) return st;
    if (index < 0 || index >= TN_STREAMS_PER_DEVICE)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "stream index %d is not in 0..%d",
                        (int)index, TN_STREAMS_PER_DEVICE - 1);
    tn_device_state *d = tn_device_state_get(device);
    pthread_mutex_lock(&d->streams_lock);
    if (!d->streams[index]) st = stream_create(device, index, &d->streams[index]);
    *stream = d->streams[index];
    pthread_mutex_unlock(&d->streams_lock);
    return st;
}

tn_status tn_stream_from_pool(int32_t device, int32_t priority, tn_stream_t *stream) {
    tn_status st = tn_device_check(device);
    if (st != TN_STATUS_OK) return st;
    tn_device_state *d = tn_device_state_get(device);
    int high = priority < 0;
    pthread_mutex_lock(&d->streams_lock);
    uint32_t k = d->next_pool[high]++ % TN_STREAM_POOL_SIZE;
    pthread_mutex_unlock(&d->streams_lock);
    return tn_stream_get(device, 1 + high * TN_STREAM_POOL_SIZE + (int32_t)k, stream);
}

int32_t tn_stream_device(tn_stream_t s) { return s->device; }
int32_t tn_stream_index(tn_stream_t s) { return s->index; }
int32_t tn_stream_priority(tn_stream_t s) { return s->index > TN_STREAM_POOL_SIZE ? -1 : 0; }

tn_stream_t tn_stream_current(int32_t device) {
    tn_stream_t s = NULL;
    if (device >= 0 && device < TN_MAX_DEVICES)
        tn_stream_get(device, current_index[device], &s);
    return s;
}

tn_status tn_stream_set_current(tn_stream_t s) {
    if (!s) return tn_error(TN_STATUS_INVALID_ARGUMENT, "stream is NULL");
    current_index[s->device] = (int8_t)s->index;
    return TN_STATUS_OK;
}

/* Appends a task; fails only if nothing was enqueued. */
static tn_status enqueue(tn_stream_t s, const char *op, tn_task_fn fn, const void *arg,
                         size_t arg_size) {
    tn_status st = tn_runtime_ensure();
    if (st != TN_STATUS_OK) return st;
    pthread_mutex_lock(&s->launch_lock);
    tn_task *t = tn_task_ring_reserve(&s->ring, arg_size);
    if (!t) {
        pthread_mutex_unlock(&s->launch_lock);
        return tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory to launch %s", op);
    }
    t->op = op;
    t->fn = fn;
    if (arg_size) memcpy(tn_task_arg(t), arg, arg_size);
    __atomic_store_n(&s->enqueued, s->enqueued + 1, __ATOMIC_RELAXED);
    tn_task_ring_publish(&s->ring);
    pthread_mutex_unlock(&s->launch_lock);
    if (__atomic_load_n(&s->worker_waiting, __ATOMIC_SEQ_CST)) {
        pthread_mutex_lock(&s->lock);
        pthread_cond_signal(&s->has_work);
        pthread_mutex_unlock(&s->lock);
        tn_parallel_prewake(); /* the pool wakes alongside the worker, not after it */
    }
    if (tn_capture_active()) tn_capture_record(s, op, fn, arg, arg_size);
    return TN_STATUS_OK;
}

static tn_status after_launch(tn_stream_t s) {
    return tn_runtime_launch_blocking() ? tn_stream_synchronize(s) : TN_STATUS_OK;
}

tn_status tn_stream_launch(tn_stream_t s, const char *op, tn_task_fn fn, const void *arg,
                           size_t arg_size) {
    tn_status st = enqueue(s, op, fn, arg, arg_size);
    return st != TN_STATUS_OK ? st : after_launch(s);
}

static int idle(tn_stream_t s) {
    return __atomic_load_n(&s->completed, __ATOMIC_ACQUIRE) ==
           __atomic_load_n(&s->enqueued, __ATOMIC_ACQUIRE);
}

uint64_t tn_stream_pending(tn_stream_t s) {
    uint64_t done = __atomic_load_n(&s->completed, __ATOMIC_ACQUIRE);
    return __atomic_load_n(&s->enqueued, __ATOMIC_ACQUIRE) - done;
}

tn_status tn_stream_run_if_idle(tn_stream_t s, const char *op, tn_task_fn fn, void *arg) {
    tn_status st = tn_runtime_ensure();
    if (st != TN_STATUS_OK) return st;
    if (tn_capture_active()) return TN_STATUS_NOT_READY; /* recorded launches only */
    pthread_mutex_lock(&s->launch_lock);
    if (!idle(s)) {
        pthread_mutex_unlock(&s->launch_lock);
        return TN_STATUS_NOT_READY;
    }
    /* Holding the launch lock keeps other launches behind this work, as if it had been
     * enqueued. */
    st = run_task(s, op, fn, arg);
    if (st != TN_STATUS_OK)
        tn_error(st, "%s failed: %s", op, tn_last_error()[0] ? tn_last_error() : tn_status_string(st));
    pthread_mutex_unlock(&s->launch_lock);
    return st;
}

tn_status tn_stream_query(tn_stream_t s) {
    return idle(s) ? TN_STATUS_OK : TN_STATUS_NOT_READY;
}

static tn_status take_error_locked(tn_stream_t s) {
    tn_status st = s->error;
    if (st != TN_STATUS_OK) {
        tn_error(st, "%s", s->error_msg);
        s->error = TN_STATUS_OK;
    }
    return st;
}

tn_status tn_stream_take_error(tn_stream_t s) {
    pthread_mutex_lock(&s->lock);
    tn_status st = take_error_locked(s);
    pthread_mutex_unlock(&s->lock);
    return st;
}

tn_status tn_stream_synchronize(tn_stream_t s) {
    tn_capture_refuse("a synchronisation (the host waited for the device's results)");
    tn_status st = tn_runtime_ensure();
    if (st != TN_STATUS_OK) return st;
    tn_stream_wait_idle(s);
    return tn_stream_take_error(s);
}

void tn_stream_wait_idle(tn_stream_t s) {
    uint64_t target = __atomic_load_n(&s->enqueued, __ATOMIC_ACQUIRE);
    for (int i = 0; i < SPIN && __atomic_load_n(&s->completed, __ATOMIC_ACQUIRE) < target; i++)
        sched_yield();
    if (__atomic_load_n(&s->completed, __ATOMIC_ACQUIRE) >= target) return;
    pthread_mutex_lock(&s->lock);
    while (__atomic_load_n(&s->completed, __ATOMIC_SEQ_CST) < target) {
        /* the worker wakes the waiters once the least target is reached; the others then
         * publish theirs again */
        if (target < __atomic_load_n(&s->wake_at, __ATOMIC_RELAXED))
            __atomic_store_n(&s->wake_at, target, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&s->completed, __ATOMIC_SEQ_CST) >= target) break;
        pthread_cond_wait(&s->progress, &s->lock);
    }
    pthread_mutex_unlock(&s->lock);
}

/* ---- events ---- */

struct tn_event {
    pthread_mutex_t lock;
    pthread_cond_t done;
    uint32_t flags;
    int32_t refs;          /* the owner plus each pending task that names the event */
    uint64_t recorded;     /* records issued */
    uint64_t completed;    /* highest record that has run */
    struct timespec time;  /* when the completed record ran (timing events) */
    tn_stream_t stream;    /* stream of the last record */
};

typedef struct event_task {
    tn_event_t event;
    uint64_t version;
} event_task;

static void event_unref(tn_event_t e) {
    pthread_mutex_lock(&e->lock);
    int32_t refs = --e->refs;
    pthread_mutex_unlock(&e->lock);
    if (refs == 0) {
        pthread_mutex_destroy(&e->lock);
        pthread_cond_destroy(&e->done);
        free(e);
    }
}

tn_status tn_event_create(uint32_t flags, tn_event_t *event) {
    tn_event_t e = calloc(1, sizeof *e);
    if (!e) return tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory for an event");
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->done, NULL);
    e->flags = flags;
    e->refs = 1;
    *event = e;
    return TN_STATUS_OK;
}

void tn_event_destroy(tn_event_t e) {
    if (e) event_unref(e);
}

static tn_status run_record(void *p) {
    event_task *t = p;
    tn_event_t e = t->event;
    pthread_mutex_lock(&e->lock);
    if (t->version > e->completed) {
        e->completed = t->version;
        if (e->flags & TN_EVENT_FLAGS_TIMING) clock_gettime(CLOCK_MONOTONIC, &e->time);
    }
    pthread_cond_broadcast(&e->done);
    pthread_mutex_unlock(&e->lock);
    event_unref(e);
    return TN_STATUS_OK;
}

static tn_status run_wait(void *p) {
    event_task *t = p;
    tn_event_t e = t->event;
    pthread_mutex_lock(&e->lock);
    while (e->completed < t->version) pthread_cond_wait(&e->done, &e->lock);
    pthread_mutex_unlock(&e->lock);
    event_unref(e);
    return TN_STATUS_OK;
}

tn_status tn_event_record(tn_event_t e, tn_stream_t s) {
    tn_capture_refuse("an event record");
    pthread_mutex_lock(&e->lock);
    event_task t = {e, ++e->recorded};
    e->refs++;
    e->stream = s;
    pthread_mutex_unlock(&e->lock);
    tn_status st = enqueue(s, "event_record", run_record, &t, sizeof t);
    if (st != TN_STATUS_OK) {
        event_unref(e);
        return st;
    }
    return after_launch(s);
}

tn_status tn_stream_wait_event(tn_stream_t s, tn_event_t e) {
    tn_capture_refuse("an event wait");
    pthread_mutex_lock(&e->lock);
    event_task t = {e, e->recorded};
    int pending = e->completed < e->recorded;
    if (pending) e->refs++;
    pthread_mutex_unlock(&e->lock);
    if (!pending) return TN_STATUS_OK;
    tn_status st = enqueue(s, "event_wait", run_wait, &t, sizeof t);
    if (st != TN_STATUS_OK) {
        event_unref(e);
        return st;
    }
    return after_launch(s);
}

tn_status tn_event_query(tn_event_t e) {
    pthread_mutex_lock(&e->lock);
    int done = e->completed >= e->recorded;
    pthread_mutex_unlock(&e->lock);
    return done ? TN_STATUS_OK : TN_STATUS_NOT_READY;
}

tn_status tn_event_synchronize(tn_event_t e) {
    tn_capture_refuse("a synchronisation (the host waited for an event)");
    tn_status st = tn_runtime_ensure();
    if (st != TN_STATUS_OK) return st;
    pthread_mutex_lock(&e->lock);
    uint64_t target = e->recorded;
    while (e->completed < target) pthread_cond_wait(&e->done, &e->lock);
    tn_stream_t s = e->stream;
    pthread_mutex_unlock(&e->lock);
    return s ? tn_stream_take_error(s) : TN_STATUS_OK;
}

tn_status tn_event_elapsed_ms(tn_event_t a, tn_event_t b, float *ms) {
    if (!(a->flags & TN_EVENT_FLAGS_TIMING) || !(b->flags & TN_EVENT_FLAGS_TIMING))
        return tn_error(TN_STATUS_INVALID_ARGUMENT,
                        "both events must be created with timing enabled (enable_timing=True)");
    if (tn_event_query(a) != TN_STATUS_OK || tn_event_query(b) != TN_STATUS_OK ||
        !a->recorded || !b->recorded)
        return tn_error(TN_STATUS_NOT_READY,
                        "both events must be recorded and completed before measuring time");
    pthread_mutex_lock(&a->lock);
    struct timespec ta = a->time;
    pthread_mutex_unlock(&a->lock);
    pthread_mutex_lock(&b->lock);
    struct timespec tb = b->time;
    pthread_mutex_unlock(&b->lock);
    *ms = (float)((double)(tb.tv_sec - ta.tv_sec) * 1e3 + (double)(tb.tv_nsec - ta.tv_nsec) / 1e6);
    return TN_STATUS_OK;
}
