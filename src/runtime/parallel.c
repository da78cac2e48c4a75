/* The kernel thread pool (see tn/parallel.h). One job at a time: a generation counter wakes
 * the workers, a cursor hands out slices, a countdown tells the caller when all are done.
 * Idle workers spin briefly before sleeping on a condition variable, so that back-to-back
 * launches hand work over in about a microsecond instead of the tens a futex wake-up costs;
 * they spin with sched_yield, which gives their core to the host thread that is launching
 * the work (a 2-core machine runs the host thread, a stream worker and a pool worker). A
 * launch onto an idle stream wakes sleeping workers too (tn_parallel_prewake), so that the
 * first kernel after a pause does not wait for their wake-up after the stream worker's. The
 * caller waiting for the last slices spins with pauses: that wait is short.
 *
 * A worker spinning with sched_yield stays runnable on its CPU, and when that CPU is the one
 * the caller then computes its slice on, the worker waits behind it for milliseconds (until
 * the scheduler balances the CPUs): the caller ran nearly every slice itself, and one
 * 160 us attention launch took 330 us in about half of the processes. So each worker
 * publishes the CPU it spins on, and a caller that finds a worker on its own CPU moves that
 * worker off it (sched_setaffinity to the process's CPUs but this one), once per collision. */
#define _GNU_SOURCE
#include <immintrin.h>
#include <sched.h>
#include <sys/syscall.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "internal.h"
#include "tn/parallel.h"

#define PAUSE_SPIN 300  /* a worker's pauses (~7 us) before it starts yielding */
#define SPIN 2000       /* a worker's yields before it sleeps */
#define CALLER_SPIN 20000 /* the caller's pauses (~30-40 cycles each) before it sleeps */

static struct {
    pthread_once_t once;
    int32_t nthreads;
    pthread_mutex_t busy; /* held by the caller running a job */
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_cond_t done;
    _Atomic uint64_t generation;
    tn_parallel_fn fn;
    void *ctx;
    int32_t nth;
    int32_t next;    /* next slice to take */
    _Atomic int32_t pending; /* slices not finished */
    _Atomic int32_t sleeping; /* workers waiting on `wake` */
    cpu_set_t cpus;           /* the process's CPUs when the pool started */
    pid_t tid[TN_MAX_THREADS];                /* each worker's thread id (0: the caller's slot) */
    _Atomic int32_t cpu[TN_MAX_THREADS];      /* the CPU each worker last spun or woke on */
    uint64_t nudges;          /* prewakes so far (under lock) */
} pool = {.once = PTHREAD_ONCE_INIT,
          .busy = PTHREAD_MUTEX_INITIALIZER,
          .lock = PTHREAD_MUTEX_INITIALIZER,
          .wake = PTHREAD_COND_INITIALIZER,
          .done = PTHREAD_COND_INITIALIZER};

/* Runs slices of the current job until none are left. Called with pool.lock held. */
static void drain(void) {
    while (pool.next < pool.nth) {
        int32_t ith = pool.next++;
        tn_parallel_fn fn = pool.fn;
        void *ctx = pool.ctx;
        int32_t nth = pool.nth;
        pthread_mutex_unlock(&pool.lock);
        fn(ctx, ith, nth);
        pthread_mutex_lock(&pool.lock);
        if (atomic_fetch_sub(&pool.pending, 1) == 1) pthread_cond_broadcast(&pool.done);
    }
}

static void *worker(void *arg) {
    char name[16];
    snprintf(name, sizeof name, "tn-pool%d", (int)(intptr_t)arg);
    pthread_setname_np(pthread_self(), name);
    int32_t self = (int32_t)(intptr_t)arg;
    uint64_t seen = 0;
    pthread_mutex_lock(&pool.lock);
    pool.tid[self] = (pid_t)syscall(SYS_gettid);
    for (;;) {
        atomic_store_explicit(&pool.cpu[self], sched_getcpu(), memory_order_relaxed);
        if (atomic_load(&pool.generation) == seen) {
            pthread_mutex_unlock(&pool.lock);
            for (int i = 0; i < PAUSE_SPIN && atomic_load_explicit(&pool.generation, memory_order_relaxed) == seen; i++)
                _mm_pause();
            for (int i = 0; i < SPIN && atomic_load_explicit(&pool.generation, memory_order_relaxed) == seen; i++) {
                sched_yield();
                atomic_store_explicit(&pool.cpu[self], sched_getcpu(), memory_order_relaxed);
            }
            pthread_mutex_lock(&pool.lock);
        }
        uint64_t nudges = pool.nudges;
        atomic_fetch_add(&pool.sleeping, 1);
        while (atomic_load(&pool.generation) == seen && pool.nudges == nudges)
            pthread_cond_wait(&pool.wake, &pool.lock);
        atomic_fetch_sub(&pool.sleeping, 1);
        if (atomic_load(&pool.generation) == seen) continue; /* prewoken: spin again */
        seen = atomic_load(&pool.generation);
        drain();
    }
    return NULL;
}

static void start(void) {
    const char *env = getenv("TN_NUM_THREADS");
    long n = env && *env ? strtol(env, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
    /* under torchrun the host's CPUs are shared by the local processes (as OMP_NUM_THREADS) */
    const char *local_world = getenv("LOCAL_WORLD_SIZE");
    if (!(env && *env) && local_world && atol(local_world) > 1) n /= atol(local_world);
    if (n < 1) n = 1;
    if (n > TN_MAX_THREADS) n = TN_MAX_THREADS;
    pool.nthreads = 1;
    if (sched_getaffinity(0, sizeof pool.cpus, &pool.cpus) != 0) CPU_ZERO(&pool.cpus);
    for (long i = 0; i < n; i++) atomic_store(&pool.cpu[i], -1);
    for (long i = 1; i < n; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, worker, (void *)(intptr_t)i) != 0) break;
        pthread_detach(t);
        pool.nthreads++;
    }
}

int32_t tn_parallel_threads(void) {
    pthread_once(&pool.once, start);
    return pool.nthreads;
}

void tn_parallel_prewake(void) {
    if (tn_parallel_threads() <= 1 || atomic_load(&pool.sleeping) == 0) return;
    pthread_mutex_lock(&pool.lock);
    pool.nudges++;
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
}

/* Moves the workers spinning on the caller's CPU off it (see the top of the file). Called
 * with pool.lock held. */
static void move_off_my_cpu(void) {
    int me = sched_getcpu();
    if (me < 0 || !CPU_ISSET(me, &pool.cpus) || CPU_COUNT(&pool.cpus) < 2) return;
    for (int32_t i = 1; i < pool.nthreads; i++)
        if (atomic_load_explicit(&pool.cpu[i], memory_order_relaxed) == me && pool.tid[i] > 0) {
            cpu_set_t others = pool.cpus;
            CPU_CLR(me, &others);
            sched_setaffinity(pool.tid[i], sizeof others, &others); /* failing, it stays: slower, not wrong */
            atomic_store_explicit(&pool.cpu[i], -1, memory_order_relaxed);
        }
}

void tn_parallel_run(tn_parallel_fn fn, void *ctx, int64_t work) {
    int32_t threads = tn_parallel_threads();
    int64_t by_work = work / TN_PARALLEL_GRAIN;
    int32_t nth = by_work < threads ? (int32_t)(by_work > 0 ? by_work : 1) : threads;
    if (nth <= 1 || pthread_mutex_trylock(&pool.busy) != 0) {
        fn(ctx, 0, 1);
        return;
    }
    pthread_mutex_lock(&pool.lock);
    pool.fn = fn;
    pool.ctx = ctx;
    pool.nth = nth;
    pool.next = 0;
    pool.pending = nth;
    move_off_my_cpu();
    atomic_fetch_add(&pool.generation, 1);
    pthread_cond_broadcast(&pool.wake);
    drain();
    if (atomic_load(&pool.pending) > 0) {
        pthread_mutex_unlock(&pool.lock);
        for (int i = 0; i < CALLER_SPIN && atomic_load_explicit(&pool.pending, memory_order_acquire) > 0; i++) _mm_pause();
        pthread_mutex_lock(&pool.lock);
    }
    while (atomic_load(&pool.pending) > 0) pthread_cond_wait(&pool.done, &pool.lock);
    pthread_mutex_unlock(&pool.lock);
    pthread_mutex_unlock(&pool.busy);
}
