/* The collectives (src/ccl) with three ranks as three threads of this process, each with its
 * own communicator and stream: results against their definitions (small integers, so every
 * reduction is exact whatever its order), in place and out of place, on both sides of the
 * direct/chunked and slot-sized boundaries, with both ways of staging; point-to-point rings larger than a mailbox;
 * small collectives run at once on the calling threads (tn_comm_run_now), mixed with launched
 * ones; and the failures (mismatched calls, a missing rank) reported on every rank within the
 * deadline. */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "tn/tn.h"

#define RANKS 3

typedef struct group {
    tn_comm_t comm[RANKS];
    tn_stream_t stream[RANKS];
} group;

static int make_group(group *g, int64_t timeout_ms) {
    tn_comm_segment_t seg[RANKS];
    char names[RANKS][TN_COMM_NAME_MAX];
    const char *ptrs[RANKS];
    for (int r = 0; r < RANKS; r++) {
        if (tn_comm_segment_create(RANKS, &seg[r], names[r]) != TN_STATUS_OK) return -1;
        ptrs[r] = names[r];
    }
    for (int r = 0; r < RANKS; r++) {
        tn_comm_desc d = {.rank = r, .size = RANKS, .timeout_ms = timeout_ms, .segment = seg[r],
                          .names = ptrs};
        if (tn_comm_create(&d, &g->comm[r]) != TN_STATUS_OK) return -1;
        if (tn_stream_get(0, 1 + r, &g->stream[r]) != TN_STATUS_OK) return -1;
    }
    for (int r = 0; r < RANKS; r++) tn_comm_unlink(g->comm[r]);
    return 0;
}

static void destroy_group(group *g) {
    for (int r = 0; r < RANKS; r++) tn_comm_destroy(g->comm[r]);
}

/* Launches ops[r] on rank r's stream for every rank and waits; returns each rank's status. */
static void run_all(group *g, tn_coll ops[RANKS], tn_status st[RANKS]) {
    tn_comm_work_t w[RANKS];
    for (int r = 0; r < RANKS; r++) {
        tn_comm_work_create(&w[r]);
        tn_status l = tn_comm_launch(g->comm[r], g->stream[r], "test", &ops[r], 1, w[r]);
        CHECK(l == TN_STATUS_OK);
    }
    for (int r = 0; r < RANKS; r++) {
        st[r] = tn_comm_work_synchronize(w[r]);
        tn_comm_work_release(w[r]);
        tn_stream_synchronize(g->stream[r]); /* takes the kept error, if any */
    }
}

static float value(int rank, uint64_t i) { return (float)((rank + 1) * (int)(i % 97) - 40); }

static void check_all_reduce(group *g, uint64_t n, int in_place, tn_comm_op red) {
    float *send[RANKS], *recv[RANKS];
    tn_coll ops[RANKS];
    for (int r = 0; r < RANKS; r++) {
        send[r] = malloc((n + 1) * sizeof(float));
        recv[r] = in_place ? send[r] : malloc((n + 1) * sizeof(float));
        for (uint64_t i = 0; i < n; i++) send[r][i] = value(r, i);
        ops[r] = (tn_coll){.kind = TN_COLL_KIND_ALL_REDUCE, .dtype = TN_DTYPE_F32, .op = red,
                           .count = n, .send = send[r], .recv = recv[r]};
    }
    tn_status st[RANKS];
    run_all(g, ops, st);
    int bad = 0;
    for (int r = 0; r < RANKS; r++) {
        CHECK(st[r] == TN_STATUS_OK);
        for (uint64_t i = 0; i < n && !bad; i++) {
            float a = value(0, i), b = value(1, i), c = value(2, i);
            float want = red == TN_COMM_OP_SUM ? a + b + c
                         : red == TN_COMM_OP_MAX ? (a > b ? (a > c ? a : c) : (b > c ? b : c))
                                                   : (a + b + c) / 3.0f;
            if (recv[r][i] != want) {
                fprintf(stderr, "all_reduce n=%llu rank %d [%llu]: %g, want %g\n",
                        (unsigned long long)n, r, (unsigned long long)i, recv[r][i], want);
                bad = 1;
            }
        }
    }
    CHECK(!bad);
    for (int r = 0; r < RANKS; r++) {
        if (!in_place) free(recv[r]);
        free(send[r]);
    }
}

static void check_all_gather_and_reduce_scatter(group *g, uint64_t n) {
    int64_t *send[RANKS], *gathered[RANKS], *scattered[RANKS];
    tn_coll ops[RANKS];
    for (int r = 0; r < RANKS; r++) {
        send[r] = malloc((RANKS * n + 1) * sizeof(int64_t));
        gathered[r] = malloc((RANKS * n + 1) * sizeof(int64_t));
        scattered[r] = malloc((n + 1) * sizeof(int64_t));
        for (uint64_t i = 0; i < RANKS * n; i++) send[r][i] = (int64_t)(i * 7 + (uint64_t)r * 1000003);
        ops[r] = (tn_coll){.kind = TN_COLL_KIND_ALL_GATHER, .dtype = TN_DTYPE_I64, .count = n,
                           .send = send[r], .recv = gathered[r]};
    }
    tn_status st[RANKS];
    run_all(g, ops, st);
    int bad = 0;
    for (int r = 0; r < RANKS; r++) {
        CHECK(st[r] == TN_STATUS_OK);
        for (int j = 0; j < RANKS; j++)
            for (uint64_t i = 0; i < n; i++) bad |= gathered[r][j * n + i] != send[j][i];
    }
    CHECK(!bad);
    for (int r = 0; r < RANKS; r++)
        ops[r] = (tn_coll){.kind = TN_COLL_KIND_REDUCE_SCATTER, .dtype = TN_DTYPE_I64,
                           .op = TN_COMM_OP_SUM, .count = n, .send = send[r], .recv = scattered[r]};
    run_all(g, ops, st);
    for (int r = 0; r < RANKS; r++) {
        CHECK(st[r] == TN_STATUS_OK);
        for (uint64_t i = 0; i < n; i++)
            bad |= scattered[r][i] != send[0][r * n + i] + send[1][r * n + i] + send[2][r * n + i];
    }
    CHECK(!bad);
    for (int r = 0; r < RANKS; r++) {
        free(send[r]);
        free(gathered[r]);
        free(scattered[r]);
    }
}

static void check_rooted(group *g, uint64_t n, int root) {
    uint8_t *send[RANKS], *recv[RANKS];
    tn_coll ops[RANKS];
    tn_status st[RANKS];
    for (int r = 0; r < RANKS; r++) {
        send[r] = malloc(RANKS * n + 1);
        recv[r] = malloc(RANKS * n + 1);
        for (uint64_t i = 0; i < RANKS * n; i++) send[r][i] = (uint8_t)(i * 3 + (uint64_t)r);
    }
    tn_coll_kind kinds[] = {TN_COLL_KIND_BROADCAST, TN_COLL_KIND_GATHER, TN_COLL_KIND_SCATTER,
                            TN_COLL_KIND_REDUCE};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        for (int r = 0; r < RANKS; r++) {
            memset(recv[r], 0xee, RANKS * n + 1);
            ops[r] = (tn_coll){.kind = kinds[k], .dtype = TN_DTYPE_U8, .op = TN_COMM_OP_MAX,
                               .root = root, .count = n, .send = send[r], .recv = recv[r]};
        }
        run_all(g, ops, st);
        int bad = 0;
        for (int r = 0; r < RANKS; r++) {
            CHECK(st[r] == TN_STATUS_OK);
            for (uint64_t i = 0; i < n; i++) {
                if (kinds[k] == TN_COLL_KIND_BROADCAST) bad |= recv[r][i] != send[root][i];
                if (kinds[k] == TN_COLL_KIND_SCATTER) bad |= recv[r][i] != send[root][r * n + i];
                if (kinds[k] == TN_COLL_KIND_REDUCE && r == root) {
                    uint8_t most = send[0][i];
                    for (int j = 1; j < RANKS; j++) most = send[j][i] > most ? send[j][i] : most;
                    bad |= recv[r][i] != most;
                }
                if (kinds[k] == TN_COLL_KIND_GATHER && r == root)
                    for (int j = 0; j < RANKS; j++) bad |= recv[r][j * n + i] != send[j][i];
            }
        }
        if (bad) fprintf(stderr, "rooted collective %d, n=%llu, root %d: wrong\n", (int)kinds[k],
                         (unsigned long long)n, root);
        CHECK(!bad);
    }
    for (int r = 0; r < RANKS; r++) {
        free(send[r]);
        free(recv[r]);
    }
}

/* Uneven all-to-all: rank r sends (r + 1) * (j + 1) * unit elements to rank j. */
static void check_all_to_all(group *g, uint64_t unit) {
    int32_t *send[RANKS], *recv[RANKS];
    tn_coll ops[RANKS];
    for (int r = 0; r < RANKS; r++) {
        memset(&ops[r], 0, sizeof ops[r]);
        ops[r].kind = TN_COLL_KIND_ALL_TO_ALL;
        ops[r].dtype = TN_DTYPE_I32;
        uint64_t so = 0, ro = 0;
        for (int j = 0; j < RANKS; j++) {
            ops[r].send_counts[j] = (uint64_t)(r + 1) * (j + 1) * unit;
            ops[r].send_offsets[j] = so;
            so += ops[r].send_counts[j];
            ops[r].recv_counts[j] = (uint64_t)(j + 1) * (r + 1) * unit;
            ops[r].recv_offsets[j] = ro;
            ro += ops[r].recv_counts[j];
        }
        send[r] = malloc((so + 1) * sizeof(int32_t));
        recv[r] = malloc((ro + 1) * sizeof(int32_t));
        for (uint64_t i = 0; i < so; i++) send[r][i] = (int32_t)(r * 100000000 + (int64_t)i);
        ops[r].send = send[r];
        ops[r].recv = recv[r];
    }
    tn_status st[RANKS];
    run_all(g, ops, st);
    int bad = 0;
    for (int r = 0; r < RANKS; r++) {
        CHECK(st[r] == TN_STATUS_OK);
        for (int j = 0; j < RANKS; j++)
            for (uint64_t i = 0; i < ops[r].recv_counts[j]; i++)
                bad |= recv[r][ops[r].recv_offsets[j] + i] != send[j][ops[j].send_offsets[r] + i];
    }
    CHECK(!bad);
    for (int r = 0; r < RANKS; r++) {
        free(send[r]);
        free(recv[r]);
    }
}

void test_ccl_collectives(void) {
    group g;
    CHECK(make_group(&g, 20000) == 0);
    uint64_t sizes[] = {0, 1, 7, 16385, 70001, (4u << 20) / 4 + 5, 3 * (1u << 20) + 1};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        check_all_reduce(&g, sizes[k], 0, TN_COMM_OP_SUM);
        check_all_reduce(&g, sizes[k], 1, TN_COMM_OP_SUM);
    }
    check_all_reduce(&g, 1000, 0, TN_COMM_OP_MAX);
    check_all_reduce(&g, 3000000, 1, TN_COMM_OP_AVG);
    /* collectives from 1 MiB time the two ways of staging and retry the slower one every 16th
     * call: both ways, whichever each rank picks, give the same results */
    tn_comm_stats before, after;
    tn_comm_get_stats(g.comm[1], &before);
    for (int k = 0; k < 34; k++) check_all_reduce(&g, 300001, k & 1, TN_COMM_OP_SUM);
    tn_comm_get_stats(g.comm[1], &after);
    CHECK(after.launches == before.launches + 34 && after.operations == before.operations + 34);
    CHECK(after.bytes == before.bytes + 34ull * 300001 * sizeof(float));
    CHECK(after.busy_ns > before.busy_ns);
    uint64_t gsizes[] = {0, 5, 200001};
    for (size_t k = 0; k < 3; k++) check_all_gather_and_reduce_scatter(&g, gsizes[k]);
    for (int root = 0; root < RANKS; root++) check_rooted(&g, root == 1 ? (5u << 20) + 3 : 1001, root);
    check_all_to_all(&g, 0);
    check_all_to_all(&g, 3);
    check_all_to_all(&g, 300000);
    tn_coll barrier[RANKS];
    tn_status st[RANKS];
    for (int r = 0; r < RANKS; r++) barrier[r] = (tn_coll){.kind = TN_COLL_KIND_BARRIER};
    run_all(&g, barrier, st);
    for (int r = 0; r < RANKS; r++) CHECK(st[r] == TN_STATUS_OK);
    CHECK(tn_comm_sequence(g.comm[0]) == tn_comm_sequence(g.comm[2]));
    destroy_group(&g);
}

/* ---- tn_comm_run_now: each rank a thread, as a process's host thread would call it ---- */

typedef struct now_rank {
    group *g;
    int rank, iters, late_every; /* rank 0 sleeps 1 ms before every late_every-th call */
    int ran, launched, wrong, bad_status;
} now_rank;

static void *run_now_rank(void *p) {
    now_rank *a = p;
    tn_stream_t stream = a->g->stream[a->rank], after;
    if (tn_stream_get(0, 4 + a->rank, &after) != TN_STATUS_OK) {
        a->bad_status++;
        return NULL;
    }
    float send[5], recv[5];
    for (int it = 0; it < a->iters; it++) {
        if (a->rank == 0 && a->late_every && it % a->late_every == 0) {
            struct timespec t = {0, 1000000};
            nanosleep(&t, NULL);
        }
        for (int i = 0; i < 5; i++) send[i] = value(a->rank, (uint64_t)(i + it));
        tn_coll op = {.kind = TN_COLL_KIND_ALL_REDUCE, .dtype = TN_DTYPE_F32, .op = TN_COMM_OP_SUM,
                      .count = 5, .send = send, .recv = recv};
        tn_comm_work_t w;
        tn_comm_work_create(&w);
        tn_status st = tn_comm_run_now(a->g->comm[a->rank], stream, after, "test", &op, w);
        if (st == TN_STATUS_OK) {
            a->ran++;
            a->bad_status += tn_comm_work_query(w) != TN_STATUS_OK; /* complete on return */
        } else {
            a->bad_status += st != TN_STATUS_NOT_READY;
            a->bad_status += tn_comm_launch(a->g->comm[a->rank], stream, "test", &op, 1, w) != TN_STATUS_OK;
            a->launched++;
        }
        a->bad_status += tn_comm_work_synchronize(w) != TN_STATUS_OK;
        tn_comm_work_release(w);
        tn_stream_synchronize(stream);
        for (int i = 0; i < 5; i++) {
            uint64_t k = (uint64_t)(i + it);
            a->wrong += recv[i] != value(0, k) + value(1, k) + value(2, k);
        }
    }
    return NULL;
}

static tn_status hold_until_released(void *p) {
    int *flag = *(int **)p;
    while (!__atomic_load_n(flag, __ATOMIC_ACQUIRE)) sched_yield();
    return TN_STATUS_OK;
}

static void run_now_all(group *g, int iters, int late_every, now_rank out[RANKS]) {
    pthread_t t[RANKS];
    for (int r = 0; r < RANKS; r++) {
        out[r] = (now_rank){.g = g, .rank = r, .iters = iters, .late_every = late_every};
        pthread_create(&t[r], NULL, run_now_rank, &out[r]);
    }
    for (int r = 0; r < RANKS; r++) pthread_join(t[r], NULL);
}

void test_ccl_run_now(void) {
    group g;
    CHECK(make_group(&g, 20000) == 0);
    /* in step: most calls run at once (a thread descheduled for > 20 us makes the others launch) */
    now_rank out[RANKS];
    run_now_all(&g, 200, 0, out);
    for (int r = 0; r < RANKS; r++) {
        CHECK(out[r].wrong == 0 && out[r].bad_status == 0);
        CHECK(out[r].ran + out[r].launched == 200);
        CHECK(out[r].ran > 0);
    }
    /* rank 0 late every 4th call: the others announce, give up after ~20 us and launch, and the
     * launched tasks run those collectives under the announced numbers */
    run_now_all(&g, 40, 4, out);
    for (int r = 0; r < RANKS; r++) CHECK(out[r].wrong == 0 && out[r].bad_status == 0);
    CHECK(out[1].launched >= 1 && out[2].launched >= 1); /* 10 late calls: a busy machine may delay them too */
    CHECK(tn_comm_sequence(g.comm[0]) == 240 && tn_comm_sequence(g.comm[2]) == 240);

    /* what never runs at once: all-to-all, more than 64 KiB, point-to-point, after a stream
     * with work queued; and an operation that is not valid is refused */
    float x[4] = {0};
    tn_coll small = {.kind = TN_COLL_KIND_ALL_REDUCE, .dtype = TN_DTYPE_F32, .op = TN_COMM_OP_SUM,
                     .count = 4, .send = x, .recv = x};
    tn_coll a2a = {.kind = TN_COLL_KIND_ALL_TO_ALL, .dtype = TN_DTYPE_F32, .send = x, .recv = x};
    tn_coll big = small, send = small, invalid = small;
    big.count = (64u << 10) / 4 + 1;
    send.kind = TN_COLL_KIND_SEND;
    send.peer = 1;
    invalid.kind = TN_COLL_KIND_BROADCAST;
    invalid.root = RANKS;
    tn_stream_t s0 = g.stream[0], busy;
    CHECK_OK(tn_stream_get(0, 7, &busy));
    CHECK(tn_comm_run_now(g.comm[0], s0, s0, "test", &a2a, NULL) == TN_STATUS_NOT_READY);
    CHECK(tn_comm_run_now(g.comm[0], s0, s0, "test", &big, NULL) == TN_STATUS_NOT_READY);
    CHECK(tn_comm_run_now(g.comm[0], s0, s0, "test", &send, NULL) == TN_STATUS_NOT_READY);
    CHECK(tn_comm_run_now(g.comm[0], s0, s0, "test", &invalid, NULL) == TN_STATUS_INVALID_ARGUMENT);
    int release = 0;
    CHECK_OK(tn_stream_launch(busy, "hold", hold_until_released, &(int *){&release}, sizeof(int *)));
    CHECK(tn_comm_run_now(g.comm[0], s0, busy, "test", &small, NULL) == TN_STATUS_NOT_READY);
    __atomic_store_n(&release, 1, __ATOMIC_RELEASE);
    CHECK_OK(tn_stream_synchronize(busy));
    CHECK(tn_comm_sequence(g.comm[0]) == 240); /* nothing refused was announced or run */
    destroy_group(&g);
}

void test_ccl_point_to_point(void) {
    group g;
    CHECK(make_group(&g, 20000) == 0);
    /* a ring: every rank sends to the next and receives from the previous, at once */
    uint64_t sizes[] = {0, 13, (3u << 20) + 7};
    for (size_t k = 0; k < 3; k++) {
        uint64_t n = sizes[k];
        uint8_t *send[RANKS], *recv[RANKS];
        tn_comm_work_t w[RANKS];
        for (int r = 0; r < RANKS; r++) {
            send[r] = malloc(n + 1);
            recv[r] = malloc(n + 1);
            for (uint64_t i = 0; i < n; i++) send[r][i] = (uint8_t)(i * 5 + (uint64_t)r);
            tn_coll ops[2] = {
                {.kind = TN_COLL_KIND_SEND, .dtype = TN_DTYPE_U8, .peer = (r + 1) % RANKS, .count = n, .send = send[r]},
                {.kind = TN_COLL_KIND_RECV, .dtype = TN_DTYPE_U8, .peer = (r + RANKS - 1) % RANKS, .count = n, .recv = recv[r]}};
            tn_comm_work_create(&w[r]);
            CHECK_OK(tn_comm_launch(g.comm[r], g.stream[r], "ring", ops, 2, w[r]));
        }
        int bad = 0;
        for (int r = 0; r < RANKS; r++) {
            CHECK_OK(tn_comm_work_synchronize(w[r]));
            tn_comm_work_release(w[r]);
            int prev = (r + RANKS - 1) % RANKS;
            for (uint64_t i = 0; i < n; i++) bad |= recv[r][i] != send[prev][i];
        }
        CHECK(!bad);
        for (int r = 0; r < RANKS; r++) {
            free(send[r]);
            free(recv[r]);
        }
    }
    /* a receive that expects another size fails instead of taking the message */
    uint8_t buf[64] = {0};
    tn_coll s = {.kind = TN_COLL_KIND_SEND, .dtype = TN_DTYPE_U8, .peer = 1, .count = 16, .send = buf};
    tn_coll r = {.kind = TN_COLL_KIND_RECV, .dtype = TN_DTYPE_U8, .peer = 0, .count = 32, .recv = buf + 32};
    tn_comm_work_t ws, wr;
    tn_comm_work_create(&ws);
    tn_comm_work_create(&wr);
    CHECK_OK(tn_comm_launch(g.comm[0], g.stream[0], "send", &s, 1, ws));
    CHECK_OK(tn_comm_launch(g.comm[1], g.stream[1], "recv", &r, 1, wr));
    CHECK_OK(tn_comm_work_synchronize(ws));
    CHECK(tn_comm_work_synchronize(wr) == TN_STATUS_COMM_FAILED);
    CHECK(strstr(tn_last_error(), "expected 32 bytes from rank 0") != NULL);
    tn_comm_work_release(ws);
    tn_comm_work_release(wr);
    tn_stream_synchronize(g.stream[1]);
    destroy_group(&g);
}

static int64_t ms_since(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

void test_ccl_failures(void) {
    /* mismatched sizes: every rank fails with a message naming both calls */
    group g;
    CHECK(make_group(&g, 20000) == 0);
    float buf[RANKS][2000];
    memset(buf, 0, sizeof buf);
    tn_coll ops[RANKS];
    tn_status st[RANKS];
    for (int r = 0; r < RANKS; r++)
        ops[r] = (tn_coll){.kind = TN_COLL_KIND_ALL_REDUCE, .dtype = TN_DTYPE_F32,
                           .count = r == 1 ? 1000 : 10, .send = buf[r], .recv = buf[r]};
    run_all(&g, ops, st);
    for (int r = 0; r < RANKS; r++) CHECK(st[r] == TN_STATUS_COMM_FAILED);
    /* the group stays failed */
    for (int r = 0; r < RANKS; r++) ops[r].count = 10;
    run_all(&g, ops, st);
    for (int r = 0; r < RANKS; r++) CHECK(st[r] == TN_STATUS_COMM_FAILED);
    destroy_group(&g);

    /* a rank that never calls: the others fail at the deadline, naming it */
    CHECK(make_group(&g, 300) == 0);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    tn_comm_work_t w[2];
    for (int r = 0; r < 2; r++) {
        ops[r] = (tn_coll){.kind = TN_COLL_KIND_ALL_REDUCE, .dtype = TN_DTYPE_F32, .count = 10,
                           .send = buf[r], .recv = buf[r]};
        tn_comm_work_create(&w[r]);
        CHECK_OK(tn_comm_launch(g.comm[r], g.stream[r], "late", &ops[r], 1, w[r]));
    }
    for (int r = 0; r < 2; r++) {
        CHECK(tn_comm_work_synchronize(w[r]) == TN_STATUS_COMM_FAILED);
        const char *e = tn_last_error();
        CHECK(strstr(e, "all_reduce (sequence #1)") != NULL);
        CHECK(strstr(e, "rank 2") != NULL || strstr(e, "failed") != NULL);
        tn_comm_work_release(w[r]);
        tn_stream_synchronize(g.stream[r]);
    }
    int64_t ms = ms_since(&t0);
    CHECK(ms >= 250 && ms < 5000);
    destroy_group(&g);
}
