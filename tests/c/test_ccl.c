/* The collectives (src/ccl) with three ranks as three threads of this process, each with its
 * own communicator and stream: results against their definitions (small integers, so every
 * reduction is exact whatever its order), in place and out of place, on both sides of the
 * direct/chunked and slot-sized boundaries, with both ways of staging; point-to-point rings larger than a mailbox; and the
 * failures (mismatched calls, a missing rank) reported on every rank within the deadline. */
#include <pthread.h>
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
