/* Communicators: the waits with their deadline, the step protocol (ccl_internal.h), launches as
 * stream tasks, and the completion objects PyTorch's Work wraps.
 *
 * A wait spins on the peer's counter with pauses for a few microseconds (a small collective's
 * answer usually comes that fast), then yields its CPU, then sleeps in growing naps up to 200 us,
 * so a rank that waits long for a late peer costs the machine almost nothing. Every few hundred
 * rounds it looks at the peer: a peer that marked its segment aborted or exited, or whose process
 * is gone, fails the wait at once; otherwise the deadline does. */
#define _GNU_SOURCE
#include <errno.h>
#include <immintrin.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../runtime/internal.h"
#include "tn/capture.h"
#include "ccl_internal.h"

#define PAUSE_ROUNDS 256
#define YIELD_ROUNDS 320
#define CHECK_EVERY 256

int64_t tn_ccl_now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

void tn_wait_begin(tn_wait *w, tn_comm_t comm, const char *what, uint64_t seq) {
    w->comm = comm;
    w->what = what;
    w->seq = seq;
    w->deadline_ns = tn_ccl_now_ns() + comm->timeout_ms * 1000000;
    w->spins = 0;
}

static tn_status peer_failure(tn_wait *w, int32_t peer, const char *waiting_for) {
    tn_comm_t c = w->comm;
    tn_seg_header *h = c->seg[peer];
    char msg[512];
    uint64_t state = tn_load(&h->state.v);
    if (state == TN_SEG_STATE_ABORTED) {
        char reason[sizeof h->abort_msg];
        memcpy(reason, h->abort_msg, sizeof reason);
        reason[sizeof reason - 1] = 0;
        snprintf(msg, sizeof msg, "%s (sequence #%llu) on rank %d: rank %d failed: %s", w->what,
                 (unsigned long long)w->seq, (int)c->rank, (int)peer, reason);
        return tn_comm_fail(c, TN_STATUS_COMM_FAILED, msg);
    }
    if (state == TN_SEG_STATE_EXITED) {
        snprintf(msg, sizeof msg,
                 "%s (sequence #%llu) on rank %d: rank %d destroyed its process group while this rank waited "
                 "for %s",
                 w->what, (unsigned long long)w->seq, (int)c->rank, (int)peer, waiting_for);
        return tn_comm_fail(c, TN_STATUS_COMM_FAILED, msg);
    }
    if (kill(c->pids[peer], 0) != 0 && errno == ESRCH) {
        snprintf(msg, sizeof msg,
                 "%s (sequence #%llu) on rank %d: rank %d (pid %d) exited or was killed while this rank waited "
                 "for %s",
                 w->what, (unsigned long long)w->seq, (int)c->rank, (int)peer, (int)c->pids[peer],
                 waiting_for);
        return tn_comm_fail(c, TN_STATUS_COMM_FAILED, msg);
    }
    if (tn_ccl_now_ns() > w->deadline_ns) {
        snprintf(msg, sizeof msg,
                 "%s (sequence #%llu) on rank %d timed out after %lld ms waiting for rank %d's %s (rank %d has "
                 "started %llu collectives of this group)",
                 w->what, (unsigned long long)w->seq, (int)c->rank, (long long)c->timeout_ms,
                 (int)peer, waiting_for, (int)peer, (unsigned long long)tn_load(&h->seq.v));
        return tn_comm_fail(c, TN_STATUS_COMM_FAILED, msg);
    }
    return TN_STATUS_OK;
}

tn_status tn_wait_round(tn_wait *w, int32_t peer, const char *waiting_for) {
    uint32_t k = ++w->spins;
    if (k < PAUSE_ROUNDS) {
        _mm_pause();
        return TN_STATUS_OK;
    }
    if (k % CHECK_EVERY == 0) {
        tn_status st = peer_failure(w, peer, waiting_for);
        if (st != TN_STATUS_OK) return st;
    }
    if (k < YIELD_ROUNDS) {
        sched_yield();
    } else {
        long nap = 1000L * (1 + (k - YIELD_ROUNDS) / 64);
        struct timespec t = {0, nap < 200000 ? nap : 200000};
        nanosleep(&t, NULL);
    }
    return TN_STATUS_OK;
}

tn_status tn_wait_counter(tn_wait *w, int32_t peer, const uint64_t *counter, uint64_t target,
                          const char *waiting_for) {
    w->spins = 0;
    while (tn_load(counter) < target) {
        tn_status st = tn_wait_round(w, peer, waiting_for);
        if (st != TN_STATUS_OK) return st;
    }
    return TN_STATUS_OK;
}

tn_status tn_step_begin(tn_wait *w, uint64_t *step) {
    tn_comm_t c = w->comm;
    uint64_t s = c->step + 1;
    if (s > 2)
        for (int32_t p = 0; p < c->size; p++) {
            if (p == c->rank) continue;
            tn_status st = tn_wait_counter(w, p, &c->seg[p]->done.v, s - 2, "reading of the last data");
            if (st != TN_STATUS_OK) return st;
        }
    c->step = s;
    *step = s;
    return TN_STATUS_OK;
}

void tn_step_publish(tn_comm_t c, uint64_t step) { tn_store(&c->seg[c->rank]->ready.v, step); }

tn_status tn_step_wait_all(tn_wait *w, uint64_t step) {
    tn_comm_t c = w->comm;
    for (int32_t p = 0; p < c->size; p++) {
        if (p == c->rank) continue;
        tn_status st = tn_wait_counter(w, p, &c->seg[p]->ready.v, step, "data");
        if (st != TN_STATUS_OK) return st;
    }
    return TN_STATUS_OK;
}

void tn_step_done(tn_comm_t c, uint64_t step) { tn_store(&c->seg[c->rank]->done.v, step); }

tn_status tn_comm_fail(tn_comm_t c, tn_status st, const char *msg) {
    if (!c->failure[0]) {
        snprintf(c->failure, sizeof c->failure, "%s", msg);
        tn_seg_header *h = c->seg[c->rank];
        snprintf(h->abort_msg, sizeof h->abort_msg, "%s", msg);
        tn_store(&h->state.v, TN_SEG_STATE_ABORTED);
    }
    return tn_error(st, "%s", msg);
}

void tn_comm_abort(tn_comm_t c, const char *why) {
    pthread_mutex_lock(&c->run_lock);
    tn_comm_fail(c, TN_STATUS_COMM_FAILED, why);
    pthread_mutex_unlock(&c->run_lock);
}

/* ---- completion objects ---- */

struct tn_comm_work {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    int32_t refs;
    int32_t done;
    tn_status status;
    char msg[512];
};

tn_status tn_comm_work_create(tn_comm_work_t *out) {
    tn_comm_work_t w = calloc(1, sizeof *w);
    if (!w) return tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory for a collective's work");
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->refs = 1;
    *out = w;
    return TN_STATUS_OK;
}

void tn_comm_work_retain(tn_comm_work_t w) {
    pthread_mutex_lock(&w->lock);
    w->refs++;
    pthread_mutex_unlock(&w->lock);
}

void tn_comm_work_release(tn_comm_work_t w) {
    if (!w) return;
    pthread_mutex_lock(&w->lock);
    int32_t refs = --w->refs;
    pthread_mutex_unlock(&w->lock);
    if (refs == 0) {
        pthread_mutex_destroy(&w->lock);
        pthread_cond_destroy(&w->cv);
        free(w);
    }
}

static void work_complete(tn_comm_work_t w, tn_status st, const char *msg) {
    pthread_mutex_lock(&w->lock);
    w->status = st;
    snprintf(w->msg, sizeof w->msg, "%s", msg);
    w->done = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->lock);
}

/* The work's status with its message set as the last error; the caller holds w->lock. */
static tn_status work_status_locked(tn_comm_work_t w) {
    if (!w->done) return TN_STATUS_NOT_READY;
    return w->status == TN_STATUS_OK ? TN_STATUS_OK : tn_error(w->status, "%s", w->msg);
}

tn_status tn_comm_work_query(tn_comm_work_t w) {
    pthread_mutex_lock(&w->lock);
    tn_status st = work_status_locked(w);
    pthread_mutex_unlock(&w->lock);
    return st;
}

tn_status tn_comm_work_synchronize(tn_comm_work_t w) {
    pthread_mutex_lock(&w->lock);
    while (!w->done) pthread_cond_wait(&w->cv, &w->lock);
    tn_status st = work_status_locked(w);
    pthread_mutex_unlock(&w->lock);
    return st;
}

typedef struct wait_task {
    tn_comm_work_t work;
} wait_task;

static tn_status run_wait(void *p) {
    tn_comm_work_t w = ((wait_task *)p)->work;
    tn_status st = tn_comm_work_synchronize(w);
    tn_comm_work_release(w);
    return st;
}

/* How long a rank waits on the calling thread for its peers (tn_comm_run_now) or for a launched
 * collective (tn_comm_work_wait) when its streams are idle, before it leaves the rest to the
 * streams: about what the stream path costs (an event, a stream task and a worker's wake-up on
 * each side). */
#define NOW_WAIT_NS 20000

/* Waits up to NOW_WAIT_NS for `done(arg)`, pausing then yielding the CPU: 1 if it came. */
static int wait_briefly(int (*done)(const void *), const void *arg) {
    int64_t until = tn_ccl_now_ns() + NOW_WAIT_NS;
    for (uint32_t k = 0; !done(arg); k++) {
        if (tn_ccl_now_ns() > until) return 0;
        if (k < 64)
            _mm_pause();
        else
            sched_yield();
    }
    return 1;
}

static int streams_idle(const void *p) {
    tn_stream_t const *s = p;
    return tn_stream_query(s[0]) == TN_STATUS_OK && tn_stream_query(s[1]) == TN_STATUS_OK;
}

static int work_finished(const void *w) { return tn_comm_work_query((tn_comm_work_t)w) != TN_STATUS_NOT_READY; }

tn_status tn_comm_work_wait(tn_comm_work_t w, tn_stream_t stream) {
    tn_capture_refuse("a wait for a collective launched outside the recording");
    if (tn_comm_work_query(w) == TN_STATUS_OK) return TN_STATUS_OK;
    /* A stream with nothing queued has nothing to overlap with the wait: a collective about to
     * finish is waited for here, which leaves the stream idle for the next one to run at once
     * (tn_comm_run_now) instead of queueing every later collective behind this wait. */
    if (tn_stream_query(stream) == TN_STATUS_OK && wait_briefly(work_finished, w) &&
        tn_comm_work_query(w) == TN_STATUS_OK)
        return TN_STATUS_OK;
    tn_comm_work_retain(w);
    wait_task t = {w};
    tn_status st = tn_stream_launch(stream, "c10d::wait", run_wait, &t, sizeof t);
    if (st != TN_STATUS_OK) tn_comm_work_release(w);
    return st;
}

/* ---- launches ---- */

typedef struct launch_task {
    tn_comm_t comm;
    const char *name;
    tn_comm_work_t work;
    int32_t counted; /* in comm->pending: not when recorded, since every replay runs it again */
    int32_t n;
    tn_coll ops[];
} launch_task;

static int is_p2p(tn_coll_kind k) { return k == TN_COLL_KIND_SEND || k == TN_COLL_KIND_RECV; }

/* TORCH_NEURONX_CCL_DEBUG=1: one line on stderr per launch (the host's order, with the stream
 * and whether a capture records it) and per collective run (the order the group's sequence
 * numbers follow), so that two ranks' logs can be compared line by line. */
static int trace_enabled(void) {
    static int enabled = -1;
    if (enabled < 0) {
        const char *v = getenv("TORCH_NEURONX_CCL_DEBUG");
        enabled = v && *v && strcmp(v, "0") != 0;
    }
    return enabled;
}

static void trace(tn_comm_t c, const char *what, uint64_t seq, const void *stream, const tn_coll *o) {
    fprintf(stderr, "[tn-ccl pid %d comm %p rank %d] %s #%llu %s(%s, %llu elements, %s) stream %p\n",
            (int)getpid(), (void *)c, (int)tn_comm_rank(c), what, (unsigned long long)seq, tn_coll_kind_name(o->kind),
            tn_dtype_name(o->dtype), (unsigned long long)o->count, tn_comm_op_name(o->op), stream);
}

void tn_comm_next_seq(tn_comm_t c) {
    __atomic_store_n(&c->seq, c->seq + 1, __ATOMIC_RELAXED);
    tn_store(&c->seg[c->rank]->seq.v, c->seq);
}

static tn_status run_ops(tn_comm_t c, const tn_coll *ops, int32_t n) {
    if (c->failure[0])
        return tn_error(TN_STATUS_COMM_FAILED, "the process group failed earlier and cannot be used: %s",
                        c->failure);
    for (int32_t i = 0; i < n;) {
        int32_t j = i + 1;
        tn_status st;
        if (is_p2p(ops[i].kind)) {
            while (j < n && is_p2p(ops[j].kind)) j++;
            st = c->hosts > 1 ? tn_ccl_run_hierarchical(c, ops + i, j - i) : tn_ccl_run_p2p(c, ops + i, j - i);
        } else if (c->hosts > 1) {
            st = tn_ccl_run_hierarchical(c, ops + i, 1);
        } else {
            tn_comm_next_seq(c);
            if (trace_enabled()) trace(c, "run", c->seq, NULL, ops + i);
            st = tn_ccl_run_collective(c, ops + i);
        }
        if (st != TN_STATUS_OK) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", tn_last_error());
            return tn_comm_fail(c, st, msg);
        }
        i = j;
    }
    return TN_STATUS_OK;
}

/* Counts a launch that has run and completes its work. */
static tn_status finish_launch(launch_task *t, tn_status st, int64_t start) {
    tn_comm_t c = t->comm;
    uint64_t bytes = 0;
    for (int32_t i = 0; i < t->n; i++) bytes += t->ops[i].count * (uint64_t)tn_dtype_size(t->ops[i].dtype);
    __atomic_add_fetch(&c->stats.launches, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&c->stats.operations, (uint64_t)t->n, __ATOMIC_RELAXED);
    __atomic_add_fetch(&c->stats.bytes, bytes, __ATOMIC_RELAXED);
    __atomic_add_fetch(&c->stats.busy_ns, (uint64_t)(tn_ccl_now_ns() - start), __ATOMIC_RELAXED);
    if (t->work) {
        work_complete(t->work, st, st == TN_STATUS_OK ? "" : tn_last_error());
        tn_comm_work_release(t->work);
    }
    if (t->counted) __atomic_sub_fetch(&c->pending, 1, __ATOMIC_ACQ_REL);
    return st;
}

/* Collectives take the step sequence: one at a time. Point-to-point launches only need their
 * direction to themselves (a mailbox's writer or its reader), so a receive runs while a send on
 * another stream waits for its peer: separate isend and irecv calls then do not deadlock. */
static tn_status run_launch(void *p) {
    launch_task *t = p;
    tn_comm_t c = t->comm;
    int sends = 0, recvs = 0, colls = 0;
    for (int32_t i = 0; i < t->n; i++) {
        sends += t->ops[i].kind == TN_COLL_KIND_SEND;
        recvs += t->ops[i].kind == TN_COLL_KIND_RECV;
    }
    colls = t->n - sends - recvs;
    int64_t start = tn_ccl_now_ns();
    if (colls) pthread_mutex_lock(&c->run_lock);
    if (sends) pthread_mutex_lock(&c->send_lock);
    if (recvs) pthread_mutex_lock(&c->recv_lock);
    tn_status st = run_ops(c, t->ops, t->n);
    if (recvs) pthread_mutex_unlock(&c->recv_lock);
    if (sends) pthread_mutex_unlock(&c->send_lock);
    if (colls) pthread_mutex_unlock(&c->run_lock);
    return finish_launch(t, st, start);
}

/* A launch of `ops`, holding a reference to `work`; `counted`: in comm->pending until it runs. */
static void fill_task(launch_task *t, tn_comm_t c, const char *name, const tn_coll *ops, int32_t n,
                      tn_comm_work_t work, int32_t counted) {
    t->comm = c;
    t->name = name;
    t->work = work;
    t->counted = counted;
    t->n = n;
    memcpy(t->ops, ops, (size_t)n * sizeof(tn_coll));
    if (work) tn_comm_work_retain(work);
    if (counted) __atomic_add_fetch(&c->pending, 1, __ATOMIC_ACQ_REL);
}

static tn_status check_ops(tn_comm_t c, const char *name, const tn_coll *ops, int32_t n) {
    if (n < 1) return tn_error(TN_STATUS_INVALID_ARGUMENT, "%s: no operation to launch", name);
    for (int32_t i = 0; i < n; i++) {
        const tn_coll *o = &ops[i];
        if ((unsigned)o->kind >= TN_COLL_KIND_COUNT_ || (unsigned)o->op >= TN_COMM_OP_COUNT_ ||
            tn_dtype_size(o->dtype) <= 0)
            return tn_error(TN_STATUS_INVALID_ARGUMENT, "%s: not a valid operation", name);
        int32_t who = is_p2p(o->kind) ? o->peer : o->root, size = tn_comm_size(c);
        if (who < 0 || who >= size || (is_p2p(o->kind) && who == tn_comm_rank(c)))
            return tn_error(TN_STATUS_INVALID_ARGUMENT, "%s: rank %d is not a %s in a group of %d",
                            name, (int)who, is_p2p(o->kind) ? "peer" : "root", (int)size);
    }
    return TN_STATUS_OK;
}

tn_status tn_comm_launch(tn_comm_t c, tn_stream_t stream, const char *name, const tn_coll *ops,
                         int32_t n, tn_comm_work_t work) {
    tn_status checked = check_ops(c, name, ops, n);
    if (checked != TN_STATUS_OK) return checked;
    int recording = tn_capture_active();
    if (trace_enabled())
        for (int32_t i = 0; i < n; i++) trace(c, recording ? "record" : "launch", 0, stream, &ops[i]);
    if (recording && work)
        return tn_error(TN_STATUS_INVALID_ARGUMENT,
                        "%s: a collective recorded into a capture runs at every replay and cannot "
                        "complete a work object; launch it with work = NULL", name);
    size_t bytes = sizeof(launch_task) + (size_t)n * sizeof(tn_coll);
    launch_task *t = calloc(1, bytes);
    if (!t) return tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory to launch %s", name);
    fill_task(t, c, name, ops, n, work, !recording);
    tn_status st = tn_stream_launch(stream, name, run_launch, t, bytes);
    free(t);
    if (st != TN_STATUS_OK && tn_runtime_launch_blocking() == 0) {
        /* nothing was enqueued */
        if (!recording) __atomic_sub_fetch(&c->pending, 1, __ATOMIC_ACQ_REL);
        if (work) tn_comm_work_release(work);
    }
    return st;
}

/* ---- running at once ---- */

static uint64_t moved_bytes(tn_comm_t c, const tn_coll *o) {
    uint64_t bytes = o->count * (uint64_t)tn_dtype_size(o->dtype);
    switch (o->kind) {
    case TN_COLL_KIND_ALL_GATHER:
    case TN_COLL_KIND_GATHER:
    case TN_COLL_KIND_REDUCE_SCATTER:
    case TN_COLL_KIND_SCATTER:
        return bytes * (uint64_t)c->size;
    default:
        return bytes;
    }
}

typedef struct started_at {
    tn_comm_t comm;
    uint64_t seq;
} started_at;

static int peers_started(const void *p) {
    const started_at *a = p;
    for (int32_t r = 0; r < a->comm->size; r++)
        if (r != a->comm->rank && tn_load(&a->comm->seg[r]->seq.v) < a->seq) return 0;
    return 1;
}

/* Runs on the calling thread, holding the stream's launch lock and the communicator's run lock. */
static tn_status run_now_task(void *p) {
    launch_task *t = p;
    int64_t start = tn_ccl_now_ns();
    finish_launch(t, run_ops(t->comm, t->ops, 1), start);
    return TN_STATUS_OK; /* the collective's own outcome is the work's */
}

tn_status tn_comm_run_now(tn_comm_t c, tn_stream_t stream, tn_stream_t after, const char *name, const tn_coll *op,
                          tn_comm_work_t work) {
    tn_status checked = check_ops(c, name, op, 1);
    if (checked != TN_STATUS_OK) return checked;
    if (c->hosts > 1 || is_p2p(op->kind) || op->kind == TN_COLL_KIND_ALL_TO_ALL ||
        moved_bytes(c, op) > TN_COMM_DIRECT_BYTES || tn_capture_active())
        return TN_STATUS_NOT_READY;
    /* A stream with one task left is most often finishing the last collective or the wait for
     * it (the work completed, the task not yet counted): give it the moment it needs, so that
     * one late peer does not put every later collective on the streams. */
    tn_stream_t both[2] = {stream, after};
    if (tn_stream_pending(stream) > 1 || tn_stream_pending(after) > 1 || !wait_briefly(streams_idle, both))
        return TN_STATUS_NOT_READY;
    /* a collective of a replayed graph may be running on another stream */
    if (pthread_mutex_trylock(&c->run_lock) != 0) return TN_STATUS_NOT_READY;
    if (c->failure[0]) { /* the launched task reports it */
        pthread_mutex_unlock(&c->run_lock);
        return TN_STATUS_NOT_READY;
    }
    /* Announce the collective (the number run_ops publishes when it starts it), then wait a
     * little for the peers to announce it too. Once every rank has, each finishes it waiting
     * for nothing but the others, so this thread does not block for long. If they are late,
     * the task launched instead starts it under the same number. */
    started_at next = {c, c->seq + 1};
    tn_store(&c->seg[c->rank]->seq.v, next.seq);
    if (!wait_briefly(peers_started, &next)) {
        pthread_mutex_unlock(&c->run_lock);
        return TN_STATUS_NOT_READY;
    }
    if (trace_enabled()) trace(c, "run now", 0, stream, op);
    _Alignas(launch_task) unsigned char buf[sizeof(launch_task) + sizeof(tn_coll)];
    launch_task *t = (launch_task *)buf;
    fill_task(t, c, name, op, 1, work, 1);
    /* holding the stream's launch lock keeps later launches on it behind the collective */
    tn_status st = tn_stream_run_if_idle(stream, name, run_now_task, t);
    pthread_mutex_unlock(&c->run_lock);
    if (st == TN_STATUS_NOT_READY) { /* a graph replay recorded an event on the stream meanwhile */
        __atomic_sub_fetch(&c->pending, 1, __ATOMIC_ACQ_REL);
        if (work) tn_comm_work_release(work);
    }
    return st;
}

void tn_comm_get_stats(tn_comm_t c, tn_comm_stats *stats) {
    stats->launches = __atomic_load_n(&c->stats.launches, __ATOMIC_RELAXED);
    stats->operations = __atomic_load_n(&c->stats.operations, __ATOMIC_RELAXED);
    stats->bytes = __atomic_load_n(&c->stats.bytes, __ATOMIC_RELAXED);
    stats->busy_ns = __atomic_load_n(&c->stats.busy_ns, __ATOMIC_RELAXED);
}

void tn_comm_destroy(tn_comm_t c) {
    if (!c) return;
    while (__atomic_load_n(&c->pending, __ATOMIC_ACQUIRE) > 0) {
        struct timespec t = {0, 100000};
        nanosleep(&t, NULL);
    }
    tn_seg_header *h = c->seg[c->rank];
    if (tn_load(&h->state.v) == TN_SEG_STATE_LIVE) tn_store(&h->state.v, TN_SEG_STATE_EXITED);
    tn_comm_unmap(c);
    if (c->hosts > 1 && c->net.destroy) c->net.destroy(c->net.ctx);
    pthread_mutex_destroy(&c->run_lock);
    pthread_mutex_destroy(&c->send_lock);
    pthread_mutex_destroy(&c->recv_lock);
    free(c);
}

/* ---- the latency floor ---- */

typedef struct pingpong {
    _Alignas(64) uint64_t ping;
    _Alignas(64) uint64_t pong;
    int32_t iterations;
} pingpong;

static void *pong_main(void *p) {
    pingpong *pp = p;
    for (int32_t i = 1; i <= pp->iterations; i++) {
        while (tn_load(&pp->ping) < (uint64_t)i) _mm_pause();
        tn_store(&pp->pong, (uint64_t)i);
    }
    return NULL;
}

double tn_comm_pingpong_us(int32_t iterations) {
    pingpong *pp = aligned_alloc(64, sizeof *pp);
    if (!pp || iterations < 1) {
        free(pp);
        return -1.0;
    }
    memset(pp, 0, sizeof *pp);
    pp->iterations = iterations;
    pthread_t t;
    if (pthread_create(&t, NULL, pong_main, pp) != 0) {
        free(pp);
        return -1.0;
    }
    int64_t start = tn_ccl_now_ns();
    for (int32_t i = 1; i <= iterations; i++) {
        tn_store(&pp->ping, (uint64_t)i);
        while (tn_load(&pp->pong) < (uint64_t)i) _mm_pause();
    }
    int64_t end = tn_ccl_now_ns();
    pthread_join(t, NULL);
    free(pp);
    return (double)(end - start) / 1e3 / iterations;
}
