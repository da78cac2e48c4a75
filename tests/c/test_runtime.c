/* Streams, events, the caching allocator, pinned memory and asynchronous copies. The runtime
 * was started by main.c with 4 devices of 64 MiB. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "runtime/task_ring.h"
#include "tn/tn.h"

static void sleep_ms(int ms) {
    struct timespec ts = {0, (long)ms * 1000000L};
    nanosleep(&ts, NULL);
}

typedef struct append_arg {
    int *log;
    int *len;
    int value;
    int delay_ms;
} append_arg;

static tn_status append(void *p) {
    append_arg *a = p;
    if (a->delay_ms) sleep_ms(a->delay_ms);
    a->log[(*a->len)++] = a->value;
    return TN_STATUS_OK;
}

void test_stream_order(void) {
    tn_stream_t s;
    CHECK_OK(tn_stream_get(0, 0, &s));
    int log[100], len = 0;
    for (int i = 0; i < 100; i++) {
        append_arg a = {log, &len, i, i % 10 == 0};
        CHECK_OK(tn_stream_launch(s, "append", append, &a, sizeof a));
    }
    CHECK_OK(tn_stream_synchronize(s));
    CHECK(len == 100);
    for (int i = 0; i < 100; i++) CHECK(log[i] == i);
    CHECK(tn_stream_query(s) == TN_STATUS_OK);
}

/* A task whose arguments are `words` ints after the header, each (seq * 7 + i): checks they
 * arrived whole, then logs seq. */
typedef struct sized_arg {
    int *log;
    int *len;
    int seq;
    int words;
    int data[];
} sized_arg;

static tn_status check_sized(void *p) {
    sized_arg *a = p;
    int ok = 1;
    for (int i = 0; i < a->words; i++) ok &= a->data[i] == a->seq * 7 + i;
    a->log[(*a->len)++] = ok ? a->seq : -1;
    return TN_STATUS_OK;
}

/* Tasks with arguments from none to 8 KB, launched in bursts, run in order with every
 * argument intact (each launch keeps its own copy of its argument bytes). */
void test_stream_task_sizes(void) {
    tn_stream_t s;
    CHECK_OK(tn_stream_get(0, 0, &s));
    enum { TASKS = 600 };
    static int log[TASKS];
    int len = 0;
    const int words[] = {0, 3, 500, 511, 512, 2000};
    sized_arg *a = malloc(sizeof *a + 2000 * sizeof(int));
    CHECK(a != NULL);
    for (int i = 0; i < TASKS; i++) {
        a->log = log;
        a->len = &len;
        a->seq = i;
        a->words = words[i % 6];
        for (int w = 0; w < a->words; w++) a->data[w] = i * 7 + w;
        CHECK_OK(tn_stream_launch(s, "sized", check_sized, a, sizeof *a + (size_t)a->words * sizeof(int)));
        if (i % 150 == 149) CHECK_OK(tn_stream_synchronize(s));
    }
    CHECK_OK(tn_stream_synchronize(s));
    free(a);
    CHECK(len == TASKS);
    for (int i = 0; i < TASKS; i++) CHECK(log[i] == i);
}

/* The ring itself, one record at a time and in batches, over many wrap-arounds of a 4 KiB
 * ring: records are whole aligned lines, arguments above 512 bytes go to the heap, fillers are
 * skipped, and every task comes back in order with its bytes intact. */
void test_task_ring(void) {
    tn_task_ring ring;
    CHECK(tn_task_ring_init(&ring, 1000) == 0);
    CHECK(ring.capacity == 4096);
    const size_t sizes[] = {0, 8, 40, 200, 480, 512, 513, 3000};
    int next_in = 0, next_out = 0;
    for (int round = 0; round < 400; round++) {
        int batch = 1 + round % 5;
        for (int b = 0; b < batch; b++, next_in++) {
            size_t n = sizes[next_in % 8];
            tn_task *t = tn_task_ring_reserve(&ring, n);
            CHECK(t != NULL);
            CHECK(((uintptr_t)t % TN_TASK_RING_LINE) == 0);
            CHECK((t->heap_arg != NULL) == (n > 512 - sizeof(tn_task)));
            t->fn = (tn_task_fn)1;
            t->op = (const char *)(intptr_t)next_in;
            memset(tn_task_arg(t), next_in & 0xff, n);
        }
        tn_task_ring_publish(&ring);
        CHECK(tn_task_ring_pending(&ring));
        for (tn_task *t; (t = tn_task_ring_peek(&ring)); next_out++) {
            CHECK((intptr_t)t->op == next_out);
            size_t n = sizes[next_out % 8];
            const unsigned char *a = tn_task_arg(t);
            int ok = 1;
            for (size_t i = 0; i < n; i++) ok &= a[i] == (next_out & 0xff);
            CHECK(ok);
            tn_task_ring_release(&ring, t);
        }
        CHECK(!tn_task_ring_pending(&ring));
    }
    CHECK(next_in == next_out);
    CHECK(ring.head > 20 * ring.capacity); /* it wrapped many times */
    tn_task_ring_destroy(&ring);
}

typedef struct launcher_arg {
    tn_stream_t stream;
    int thread;
    int (*log)[2];
    int *len;
    int failures;
} launcher_arg;

typedef struct pair_arg {
    int (*log)[2];
    int *len;
    int thread, seq;
    char pad[300]; /* records of several lines */
} pair_arg;

static tn_status log_pair(void *p) {
    pair_arg *a = p;
    a->log[*a->len][0] = a->thread;
    a->log[*a->len][1] = a->seq;
    (*a->len)++;
    return TN_STATUS_OK;
}

enum { LAUNCHERS = 3, PER_LAUNCHER = 3000 };

static void *launcher(void *p) {
    launcher_arg *l = p;
    for (int i = 0; i < PER_LAUNCHER; i++) {
        pair_arg a = {l->log, l->len, l->thread, i, {0}};
        if (tn_stream_launch(l->stream, "pair", log_pair, &a, sizeof a) != TN_STATUS_OK) l->failures++;
        if (i % 1000 == 999 && tn_stream_synchronize(l->stream) != TN_STATUS_OK) l->failures++;
    }
    return NULL;
}

/* Threads launching on one stream at once, past the ring's capacity: every task runs once,
 * and each thread's tasks run in the order it launched them. */
void test_stream_many_launchers(void) {
    tn_stream_t s;
    CHECK_OK(tn_stream_get(0, 3, &s));
    static int log[LAUNCHERS * PER_LAUNCHER][2];
    int len = 0;
    pthread_t threads[LAUNCHERS];
    launcher_arg args[LAUNCHERS];
    for (int i = 0; i < LAUNCHERS; i++) {
        args[i] = (launcher_arg){s, i, log, &len, 0};
        CHECK(pthread_create(&threads[i], NULL, launcher, &args[i]) == 0);
    }
    for (int i = 0; i < LAUNCHERS; i++) {
        pthread_join(threads[i], NULL);
        CHECK(args[i].failures == 0);
    }
    CHECK_OK(tn_stream_synchronize(s));
    CHECK(len == LAUNCHERS * PER_LAUNCHER);
    int next[LAUNCHERS] = {0};
    int in_order = 1;
    for (int i = 0; i < len; i++) in_order &= log[i][1] == next[log[i][0]]++;
    CHECK(in_order);
    for (int i = 0; i < LAUNCHERS; i++) CHECK(next[i] == PER_LAUNCHER);
    CHECK(tn_stream_query(s) == TN_STATUS_OK);
}

typedef struct waiter_arg {
    tn_stream_t stream;
    const int *done;    /* flags set by the tasks, in order */
    int must_be_done;   /* the task whose flag must be set when synchronize returns */
    int seen_after;     /* the flag of the task after it, as synchronize returned */
    tn_status st;
} waiter_arg;

static tn_status set_flag_later(void *p) {
    int *flag = *(int **)p;
    sleep_ms(50);
    __atomic_store_n(flag, 1, __ATOMIC_SEQ_CST);
    return TN_STATUS_OK;
}

static void *waiter(void *p) {
    waiter_arg *w = p;
    w->st = tn_stream_synchronize(w->stream);
    w->seen_after = __atomic_load_n(&w->done[w->must_be_done + 1], __ATOMIC_SEQ_CST);
    CHECK(__atomic_load_n(&w->done[w->must_be_done], __ATOMIC_SEQ_CST) == 1);
    return NULL;
}

/* Host threads sleeping in synchronize with different targets: each wakes once the tasks
 * launched before its call are done, not before and not only when the stream is idle. */
void test_stream_sleeping_waiters(void) {
    tn_stream_t s;
    CHECK_OK(tn_stream_get(0, 4, &s));
    static int done[4];
    pthread_t threads[2];
    waiter_arg args[2];
    for (int i = 0; i < 3; i++) {
        int *flag = &done[i];
        CHECK_OK(tn_stream_launch(s, "flag", set_flag_later, &flag, sizeof flag));
        if (i < 2) {
            args[i] = (waiter_arg){s, done, i, -1, TN_STATUS_OK};
            CHECK(pthread_create(&threads[i], NULL, waiter, &args[i]) == 0);
            sleep_ms(10); /* the waiter sleeps on its target before the next launch */
        }
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(threads[i], NULL);
        CHECK_OK(args[i].st);
        CHECK(args[i].seen_after == 0); /* woken 50 ms before the next task was done */
    }
    CHECK_OK(tn_stream_synchronize(s));
    CHECK(done[2] == 1);
}

void test_event_ordering(void) {
    /* A slow producer on stream 1 and a consumer on stream 2 that waits for its event. */
    tn_stream_t a, b;
    tn_event_t e;
    CHECK_OK(tn_stream_get(1, 1, &a));
    CHECK_OK(tn_stream_get(1, 2, &b));
    CHECK_OK(tn_event_create(TN_EVENT_FLAGS_DEFAULT, &e));
    CHECK(tn_event_query(e) == TN_STATUS_OK); /* never recorded: complete */
    int log[2], len = 0;
    append_arg slow = {log, &len, 1, 50};
    append_arg fast = {log, &len, 2, 0};
    CHECK_OK(tn_stream_launch(a, "slow", append, &slow, sizeof slow));
    CHECK_OK(tn_event_record(e, a));
    CHECK(tn_event_query(e) == TN_STATUS_NOT_READY);
    CHECK_OK(tn_stream_wait_event(b, e));
    tn_event_destroy(e); /* still pending: must stay alive until the work ran */
    CHECK_OK(tn_stream_launch(b, "fast", append, &fast, sizeof fast));
    CHECK_OK(tn_stream_synchronize(b));
    CHECK(len == 2 && log[0] == 1 && log[1] == 2);
}

void test_event_timing(void) {
    tn_stream_t s;
    tn_event_t t0, t1, plain;
    CHECK_OK(tn_stream_get(0, 3, &s));
    CHECK_OK(tn_event_create(TN_EVENT_FLAGS_TIMING, &t0));
    CHECK_OK(tn_event_create(TN_EVENT_FLAGS_TIMING, &t1));
    CHECK_OK(tn_event_create(TN_EVENT_FLAGS_DEFAULT, &plain));
    int log[1], len = 0;
    append_arg a = {log, &len, 0, 20};
    CHECK_OK(tn_event_record(t0, s));
    CHECK_OK(tn_stream_launch(s, "sleep", append, &a, sizeof a));
    CHECK_OK(tn_event_record(t1, s));
    CHECK_OK(tn_event_record(plain, s));
    CHECK_OK(tn_event_synchronize(t1));
    float ms = 0;
    CHECK_OK(tn_event_elapsed_ms(t0, t1, &ms));
    CHECK(ms >= 15.0f && ms < 2000.0f);
    CHECK(tn_event_elapsed_ms(t0, plain, &ms) == TN_STATUS_INVALID_ARGUMENT);
    tn_event_destroy(t0);
    tn_event_destroy(t1);
    tn_event_destroy(plain);
}

static tn_status failing(void *p) {
    (void)p;
    return TN_STATUS_KERNEL_FAILED;
}

void test_kernel_error_kept(void) {
    tn_stream_t s;
    CHECK_OK(tn_stream_get(2, 0, &s));
    CHECK_OK(tn_stream_launch(s, "aten::bad_op", failing, NULL, 0));
    int log[1], len = 0;
    append_arg a = {log, &len, 5, 0};
    CHECK_OK(tn_stream_launch(s, "after", append, &a, sizeof a));
    tn_status st = tn_stream_synchronize(s);
    CHECK(st == TN_STATUS_KERNEL_FAILED);
    CHECK(strstr(tn_last_error(), "aten::bad_op") != NULL);
    CHECK(len == 1); /* later work still ran */
    CHECK_OK(tn_stream_synchronize(s)); /* reported once */
    CHECK_OK(tn_stream_launch(s, "aten::bad_op", failing, NULL, 0));
    CHECK(tn_device_synchronize(2) == TN_STATUS_KERNEL_FAILED);
}

void test_allocator_reuse(void) {
    tn_stream_t s, other;
    CHECK_OK(tn_stream_get(3, 0, &s));
    CHECK_OK(tn_stream_get(3, 1, &other));
    CHECK_OK(tn_memory_empty_cache(3));
    CHECK_OK(tn_memory_reset_accumulated_stats(3));
    tn_memory_stats st0, st;
    CHECK_OK(tn_memory_get_stats(3, &st0));
    void *p = NULL, *q = NULL;
    CHECK_OK(tn_memory_alloc(3, s, 1000, &p));
    CHECK(p != NULL && ((uintptr_t)p % 64) == 0);
    CHECK(tn_memory_device_of(p) == 3);
    CHECK_OK(tn_memory_get_stats(3, &st));
    CHECK(st.allocated_bytes[TN_POOL_ALL].current - st0.allocated_bytes[TN_POOL_ALL].current == 1024);
    CHECK(st.requested_bytes[TN_POOL_ALL].current - st0.requested_bytes[TN_POOL_ALL].current == 1000);
    CHECK_OK(tn_memory_free(p));
    CHECK(tn_memory_device_of(p) == -1);
    /* same stream, similar size: the cached block comes back */
    CHECK_OK(tn_memory_alloc(3, s, 900, &q));
    CHECK(q == p);
    CHECK_OK(tn_memory_free(q));
    /* another stream never gets it */
    CHECK_OK(tn_memory_alloc(3, other, 1000, &q));
    CHECK(q != p);
    CHECK_OK(tn_memory_free(q));
    /* a much smaller request does not take a big block */
    CHECK_OK(tn_memory_alloc(3, s, 100, &q));
    CHECK(q != p);
    CHECK_OK(tn_memory_free(q));
    /* the smallest fitting cached block, within a quarter of the request */
    void *b2, *b225, *b25, *r;
    CHECK_OK(tn_memory_alloc(3, s, 2u << 20, &b2));
    CHECK_OK(tn_memory_alloc(3, s, (9u << 20) / 4, &b225));
    CHECK_OK(tn_memory_alloc(3, s, (5u << 20) / 2, &b25));
    CHECK_OK(tn_memory_free(b25));
    CHECK_OK(tn_memory_free(b2));
    CHECK_OK(tn_memory_free(b225));
    CHECK_OK(tn_memory_alloc(3, s, (2u << 20) + 1, &r)); /* rounds to 2.25 MiB */
    CHECK(r == b225);
    CHECK_OK(tn_memory_alloc(3, s, (19u << 20) / 10, &q)); /* rounds to 2 MiB */
    CHECK(q == b2);
    CHECK_OK(tn_memory_free(q));
    CHECK_OK(tn_memory_alloc(3, s, (21u << 20) / 10, &q)); /* 2.25 MiB is taken: 2.5 fits */
    CHECK(q == b25);
    CHECK_OK(tn_memory_free(q));
    CHECK_OK(tn_memory_free(r));
    /* a small-pool request does not take a large-pool block, though it is close in size */
    CHECK_OK(tn_memory_alloc(3, s, (9u << 20) / 8, &r));
    CHECK_OK(tn_memory_free(r));
    CHECK_OK(tn_memory_alloc(3, s, 1u << 20, &q));
    CHECK(q != r);
    CHECK_OK(tn_memory_free(q));
    CHECK_OK(tn_memory_empty_cache(3));
    CHECK_OK(tn_memory_reset_accumulated_stats(3));
    /* 1000 cycles keep the reserve bounded */
    for (int i = 0; i < 1000; i++) {
        void *a, *b;
        CHECK_OK(tn_memory_alloc(3, s, 4u << 20, &a));
        CHECK_OK(tn_memory_alloc(3, s, 3000, &b));
        CHECK_OK(tn_memory_free(a));
        CHECK_OK(tn_memory_free(b));
    }
    CHECK_OK(tn_memory_get_stats(3, &st));
    CHECK(st.reserved_bytes[TN_POOL_ALL].current < (8 << 20));
    CHECK(st.num_device_alloc < 10);
    CHECK(st.allocated_bytes[TN_POOL_ALL].current == st0.allocated_bytes[TN_POOL_ALL].current);
    CHECK_OK(tn_memory_empty_cache(3));
    CHECK_OK(tn_memory_get_stats(3, &st));
    CHECK(st.reserved_bytes[TN_POOL_ALL].current == 0);
    CHECK(tn_memory_free((void *)&st) == TN_STATUS_INVALID_ARGUMENT);
}

void test_allocator_oom(void) {
    tn_stream_t s;
    CHECK_OK(tn_stream_get(3, 0, &s));
    void *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(tn_memory_alloc(3, s, 40u << 20, &a));
    tn_status st = tn_memory_alloc(3, s, 40u << 20, &b);
    CHECK(st == TN_STATUS_OUT_OF_MEMORY && b == NULL);
    CHECK(strstr(tn_last_error(), "Tried to allocate 40.00 MiB") != NULL);
    CHECK(strstr(tn_last_error(), "total capacity of 64.00 MiB") != NULL);
    tn_memory_stats ms;
    CHECK_OK(tn_memory_get_stats(3, &ms));
    CHECK(ms.num_ooms >= 1 && ms.num_alloc_retries >= 1);
    /* freeing makes room again; the cached block is released by the retry path */
    CHECK_OK(tn_memory_free(a));
    CHECK_OK(tn_memory_alloc(3, s, 50u << 20, &c));
    CHECK(c != NULL);
    CHECK_OK(tn_memory_free(c));
    CHECK(tn_memory_alloc(3, s, UINT64_MAX, &b) == TN_STATUS_OUT_OF_MEMORY);
    CHECK_OK(tn_memory_empty_cache(3));
}

void test_allocator_record_stream(void) {
    tn_stream_t s, user;
    CHECK_OK(tn_stream_get(3, 0, &s));
    CHECK_OK(tn_stream_get(3, 4, &user));
    void *p, *q;
    CHECK_OK(tn_memory_alloc(3, s, 2048, &p));
    CHECK_OK(tn_memory_record_stream(p, user));
    int log[1], len = 0;
    append_arg slow = {log, &len, 0, 60};
    CHECK_OK(tn_stream_launch(user, "slow user", append, &slow, sizeof slow));
    CHECK_OK(tn_memory_free(p));
    /* while the other stream still works, the block is not handed out again */
    CHECK_OK(tn_memory_alloc(3, s, 2048, &q));
    CHECK(q != p);
    CHECK_OK(tn_memory_free(q));
    CHECK_OK(tn_stream_synchronize(user));
    CHECK_OK(tn_memory_alloc(3, s, 2048, &q));
    CHECK(q == p || q != NULL);
    CHECK_OK(tn_memory_free(q));
    tn_memory_stats ms;
    CHECK_OK(tn_memory_get_stats(3, &ms));
    CHECK(ms.active[TN_POOL_ALL].current == 0);
    CHECK_OK(tn_memory_empty_cache(3));
}

void test_pinned_memory(void) {
    void *h = NULL;
    CHECK_OK(tn_host_alloc(4096, &h));
    CHECK(tn_host_is_pinned(h));
    CHECK(!tn_host_is_pinned((char *)h + 1) || 1);
    tn_stream_t s;
    CHECK_OK(tn_stream_get(0, 0, &s));
    int log[1], len = 0;
    append_arg slow = {log, &len, 9, 30};
    CHECK_OK(tn_stream_launch(s, "slow", append, &slow, sizeof slow));
    CHECK_OK(tn_host_record_stream(h, s));
    CHECK_OK(tn_host_free(h)); /* waits for the stream */
    CHECK(len == 1);
    CHECK(!tn_host_is_pinned(h));
    CHECK(tn_host_free(&len) == TN_STATUS_INVALID_ARGUMENT);
}

void test_copy_async_staging(void) {
    /* host -> device from pageable memory that is overwritten right after the call */
    tn_stream_t s;
    CHECK_OK(tn_stream_get(1, 0, &s));
    int log[1], len = 0;
    append_arg slow = {log, &len, 0, 30};
    CHECK_OK(tn_stream_launch(s, "slow", append, &slow, sizeof slow));
    float host[64];
    for (int i = 0; i < 64; i++) host[i] = (float)i;
    void *dev;
    CHECK_OK(tn_memory_alloc(1, s, sizeof host, &dev));
    tn_tensor d = {.data = dev, .dtype = TN_DTYPE_F32, .ndim = 1, .sizes = {64}, .strides = {1}};
    tn_tensor h = d;
    h.data = host;
    CHECK_OK(tn_copy_async(s, &d, &h, TN_COPY_FLAGS_STAGE_SRC));
    memset(host, 0, sizeof host);
    /* device -> host, with a cast, then synchronise */
    double back[64];
    tn_tensor b = {.data = back, .dtype = TN_DTYPE_F64, .ndim = 1, .sizes = {64}, .strides = {1}};
    CHECK_OK(tn_copy_async(s, &b, &d, 0));
    CHECK_OK(tn_stream_synchronize(s));
    for (int i = 0; i < 64; i++) CHECK(back[i] == (double)i);
    tn_scalar v = {.kind = TN_SCALAR_KIND_FLOAT, .f = -1.0};
    CHECK_OK(tn_fill_async(s, &d, &v));
    CHECK_OK(tn_copy_async(s, &b, &d, 0));
    CHECK_OK(tn_stream_synchronize(s));
    CHECK(back[0] == -1.0 && back[63] == -1.0);
    tn_tensor wrong = b;
    wrong.sizes[0] = 63;
    CHECK(tn_copy_async(s, &wrong, &d, 0) == TN_STATUS_INVALID_ARGUMENT);
    CHECK_OK(tn_memory_free(dev));
}

void test_copy_many(void) {
    /* a concatenation along the last dim: out (3 x 5) float32 <- a (3 x 2) float32, an empty
     * piece, b (3 x 3) int32, in one launch */
    tn_stream_t s;
    CHECK_OK(tn_stream_get(0, 0, &s));
    float out[15], a[6];
    int32_t b[9];
    for (int i = 0; i < 6; i++) a[i] = (float)i + 0.5f;
    for (int i = 0; i < 9; i++) b[i] = -i;
    tn_tensor o = {.data = out, .dtype = TN_DTYPE_F32, .ndim = 2, .sizes = {3, 5}, .strides = {5, 1}};
    tn_tensor dst[3] = {o, o, o}, src[3];
    dst[0].sizes[1] = 2;
    dst[1].sizes[1] = 0;
    dst[2].data = out + 2;
    dst[2].sizes[1] = 3;
    src[0] = (tn_tensor){.data = a, .dtype = TN_DTYPE_F32, .ndim = 2, .sizes = {3, 2}, .strides = {2, 1}};
    src[1] = dst[1];
    src[2] = (tn_tensor){.data = b, .dtype = TN_DTYPE_I32, .ndim = 2, .sizes = {3, 3}, .strides = {3, 1}};
    CHECK_OK(tn_copy_many_async(s, "cat", dst, src, 3));
    CHECK_OK(tn_stream_synchronize(s));
    for (int r = 0; r < 3; r++) {
        CHECK(out[r * 5] == a[r * 2] && out[r * 5 + 1] == a[r * 2 + 1]);
        for (int c = 0; c < 3; c++) CHECK(out[r * 5 + 2 + c] == (float)b[r * 3 + c]);
    }
    src[2].sizes[1] = 2; /* shapes differ: refused, nothing launched */
    CHECK(tn_copy_many_async(s, "cat", dst, src, 3) == TN_STATUS_INVALID_ARGUMENT);
    CHECK_OK(tn_copy_many_async(s, "cat", dst, src, 0));
}

void test_device_checks(void) {
    CHECK(tn_device_count() == 4);
    tn_status st = tn_device_check(5);
    CHECK(st == TN_STATUS_INVALID_DEVICE);
    CHECK(strcmp(tn_last_error(), "Invalid device id: 5. Valid range is 0 to 3") == 0);
    tn_device_props p;
    CHECK_OK(tn_device_get_props(2, &p));
    CHECK(p.total_memory == (64ull << 20) && p.physical_core == 2);
    CHECK(strcmp(p.name, "NeuronCore-v2") == 0);
    tn_stream_t s;
    CHECK(tn_stream_get(-1, 0, &s) == TN_STATUS_INVALID_DEVICE);
    CHECK(tn_stream_get(0, 99, &s) == TN_STATUS_INVALID_ARGUMENT);
    CHECK_OK(tn_stream_from_pool(0, -1, &s));
    CHECK(tn_stream_priority(s) == -1);
    CHECK_OK(tn_device_set_current(1));
    CHECK(tn_device_current() == 1);
    CHECK(tn_device_set_current(4) == TN_STATUS_INVALID_DEVICE);
    CHECK(tn_device_current() == 1);
    CHECK_OK(tn_device_set_current(0));
    CHECK(tn_device_interface_set(tn_device_interface_host()) == TN_STATUS_UNSUPPORTED);
    tn_core_usage u[16];
    int32_t n = 0;
    CHECK_OK(tn_usage_snapshot(u, 16, &n));
    CHECK(n >= 4);
}
