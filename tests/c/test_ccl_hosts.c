/* Communicators across hosts (src/ccl/hierarchy.c): four ranks as four threads, two "hosts" of
 * two, each host with its own shared-memory group and a fake network between them (the
 * tn_comm_net callbacks, done with barriers and copies in this process). Every collective
 * against its definition (small integers: exact in float32 whatever the order), and a network
 * failure reported as the communicator's. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tn/tn.h"

#define HOSTS 2
#define LOCAL 2
#define WORLD (HOSTS * LOCAL)

/* ---------------------------------------------------------------- the fake network */

typedef struct meeting { /* the members of one group post their arguments, then read each other's */
    pthread_barrier_t bar;
    const void *send[WORLD];
    void *recv[WORLD];
    const tn_coll *ops[WORLD];
    int32_t n[WORLD];
} meeting;

typedef struct network {
    meeting cross[LOCAL]; /* the ranks of local index l, one per host */
    meeting world;
    int fail_cross0;      /* cross calls of local index 0 fail */
    int destroyed;
} network;

typedef struct endpoint {
    network *net;
    int host, local, rank;
} endpoint;

static endpoint endpoints[WORLD];

static int cross_enter(endpoint *e, const void *send, void *recv, char *error) {
    if (e->local == 0 && e->net->fail_cross0) {
        snprintf(error, TN_COMM_ERROR_MAX, "connection reset by peer host%d", 1 - e->host);
        return -1;
    }
    meeting *m = &e->net->cross[e->local];
    m->send[e->host] = send;
    m->recv[e->host] = recv;
    pthread_barrier_wait(&m->bar);
    return 0;
}

static int fake_all_reduce(void *ctx, void *buf, uint64_t count, tn_dtype dtype, tn_comm_op op, char *error) {
    endpoint *e = ctx;
    if (dtype != TN_DTYPE_F32 || (op != TN_COMM_OP_SUM && op != TN_COMM_OP_MAX)) {
        snprintf(error, TN_COMM_ERROR_MAX, "the fake network reduces float32 sums and maxima, not op %d", (int)op);
        return -1;
    }
    if (cross_enter(e, buf, buf, error)) return -1;
    meeting *m = &e->net->cross[e->local];
    float *acc = malloc((count + 1) * sizeof(float));
    for (uint64_t i = 0; i < count; i++) {
        float v = ((const float *)m->send[0])[i];
        for (int h = 1; h < HOSTS; h++) {
            float w = ((const float *)m->send[h])[i];
            v = op == TN_COMM_OP_SUM ? v + w : (w > v ? w : v);
        }
        acc[i] = v;
    }
    pthread_barrier_wait(&m->bar); /* everyone has read every buffer */
    memcpy(buf, acc, count * sizeof(float));
    free(acc);
    return 0;
}

static int fake_broadcast(void *ctx, void *buf, uint64_t bytes, int32_t root_host, char *error) {
    endpoint *e = ctx;
    if (cross_enter(e, buf, buf, error)) return -1;
    meeting *m = &e->net->cross[e->local];
    if (e->host != root_host) memcpy(buf, m->send[root_host], bytes);
    pthread_barrier_wait(&m->bar);
    return 0;
}

static int fake_all_gather(void *ctx, const void *send, void *recv, uint64_t bytes, char *error) {
    endpoint *e = ctx;
    if (cross_enter(e, send, recv, error)) return -1;
    meeting *m = &e->net->cross[e->local];
    for (int h = 0; h < HOSTS; h++)
        if (h != e->host || (unsigned char *)recv + h * bytes != send)
            memcpy((unsigned char *)recv + h * bytes, m->send[h], bytes);
    pthread_barrier_wait(&m->bar);
    return 0;
}

/* world operations: every rank posts its list; each then fills its own receive buffers */
static int fake_world(void *ctx, const tn_coll *ops, int32_t n, char *error) {
    (void)error;
    endpoint *e = ctx;
    meeting *m = &e->net->world;
    m->ops[e->rank] = ops;
    m->n[e->rank] = n;
    pthread_barrier_wait(&m->bar);
    int me = e->rank;
    for (int32_t k = 0; k < n; k++) {
        const tn_coll *op = &ops[k];
        uint64_t es = (uint64_t)tn_dtype_size(op->dtype);
        unsigned char *recv = op->recv;
        switch (op->kind) {
        case TN_COLL_KIND_GATHER:
            if (me == op->root)
                for (int j = 0; j < WORLD; j++)
                    memcpy(recv + j * op->count * es, m->ops[j][k].send, op->count * es);
            break;
        case TN_COLL_KIND_SCATTER:
            memcpy(recv, (const unsigned char *)m->ops[op->root][k].send + me * op->count * es, op->count * es);
            break;
        case TN_COLL_KIND_ALL_TO_ALL:
            for (int j = 0; j < WORLD; j++)
                memcpy(recv + op->recv_offsets[j] * es,
                       (const unsigned char *)m->ops[j][k].send + m->ops[j][k].send_offsets[me] * es,
                       op->recv_counts[j] * es);
            break;
        case TN_COLL_KIND_RECV: { /* the peer's first send to this rank not yet matched */
            int nth = 0;
            for (int32_t q = 0; q < k; q++) nth += ops[q].kind == TN_COLL_KIND_RECV && ops[q].peer == op->peer;
            for (int32_t q = 0; q < m->n[op->peer]; q++) {
                const tn_coll *s = &m->ops[op->peer][q];
                if (s->kind == TN_COLL_KIND_SEND && s->peer == me && nth-- == 0) {
                    memcpy(recv, s->send, op->count * es);
                    break;
                }
            }
            break;
        }
        default:
            break;
        }
    }
    pthread_barrier_wait(&m->bar);
    return 0;
}

static void fake_destroy(void *ctx) { __atomic_add_fetch(&((endpoint *)ctx)->net->destroyed, 1, __ATOMIC_RELAXED); }

/* ---------------------------------------------------------------- the group */

typedef struct group {
    network net;
    tn_comm_t comm[WORLD];
    tn_stream_t stream[WORLD];
} group;

static int make_group(group *g) {
    memset(&g->net, 0, sizeof g->net);
    for (int l = 0; l < LOCAL; l++) pthread_barrier_init(&g->net.cross[l].bar, NULL, HOSTS);
    pthread_barrier_init(&g->net.world.bar, NULL, WORLD);
    for (int h = 0; h < HOSTS; h++) {
        tn_comm_segment_t seg[LOCAL];
        char names[LOCAL][TN_COMM_NAME_MAX];
        const char *ptrs[LOCAL];
        for (int l = 0; l < LOCAL; l++) {
            if (tn_comm_segment_create(LOCAL, &seg[l], names[l]) != TN_STATUS_OK) return -1;
            ptrs[l] = names[l];
        }
        for (int l = 0; l < LOCAL; l++) {
            int r = h * LOCAL + l;
            endpoints[r] = (endpoint){.net = &g->net, .host = h, .local = l, .rank = r};
            tn_comm_net net = {.ctx = &endpoints[r], .hosts = HOSTS, .host = h,
                               .all_reduce = fake_all_reduce, .broadcast = fake_broadcast,
                               .all_gather = fake_all_gather, .world = fake_world,
                               .destroy = fake_destroy};
            tn_comm_desc d = {.rank = l, .size = LOCAL, .timeout_ms = 20000, .segment = seg[l],
                              .names = ptrs, .net = &net};
            if (tn_comm_create(&d, &g->comm[r]) != TN_STATUS_OK) return -1;
            if (tn_stream_get(0, 1 + r, &g->stream[r]) != TN_STATUS_OK) return -1;
        }
        for (int l = 0; l < LOCAL; l++) tn_comm_unlink(g->comm[h * LOCAL + l]);
    }
    return 0;
}

static void destroy_group(group *g) {
    for (int r = 0; r < WORLD; r++) tn_comm_destroy(g->comm[r]);
    CHECK(g->net.destroyed == WORLD);
    for (int l = 0; l < LOCAL; l++) pthread_barrier_destroy(&g->net.cross[l].bar);
    pthread_barrier_destroy(&g->net.world.bar);
}

/* Launches ops[r][0..n) on every rank and waits; returns each rank's status. */
static void run_all(group *g, tn_coll ops[WORLD][WORLD * 2], int32_t n, tn_status st[WORLD]) {
    tn_comm_work_t w[WORLD];
    for (int r = 0; r < WORLD; r++) {
        tn_comm_work_create(&w[r]);
        CHECK_OK(tn_comm_launch(g->comm[r], g->stream[r], "test", ops[r], n, w[r]));
    }
    for (int r = 0; r < WORLD; r++) {
        st[r] = tn_comm_work_synchronize(w[r]);
        tn_comm_work_release(w[r]);
        tn_stream_synchronize(g->stream[r]);
    }
}

static float value(int rank, uint64_t i) { return (float)((rank + 1) * (int)(i % 89) - 30); }

static void expect(const char *what, int rank, const float *got, const float *want, uint64_t n) {
    for (uint64_t i = 0; i < n; i++)
        if (got[i] != want[i]) {
            fprintf(stderr, "%s: rank %d [%llu] = %g, want %g\n", what, rank, (unsigned long long)i, got[i], want[i]);
            tn_test_failures++;
            return;
        }
}

static tn_coll ops[WORLD][WORLD * 2];
static float *send[WORLD], *recv[WORLD], *want;

static void fill(uint64_t n_send, uint64_t n_recv) {
    for (int r = 0; r < WORLD; r++) {
        send[r] = realloc(send[r], (n_send + 1) * sizeof(float));
        recv[r] = realloc(recv[r], (n_recv + 1) * sizeof(float));
        for (uint64_t i = 0; i < n_send; i++) send[r][i] = value(r, i);
        for (uint64_t i = 0; i < n_recv; i++) recv[r][i] = -999.0f;
    }
    want = realloc(want, (n_send + n_recv + 1) * sizeof(float));
    memset(ops, 0, sizeof ops);
}

static void check_all_reduce(group *g, uint64_t n, tn_comm_op op) {
    fill(n, n);
    for (int r = 0; r < WORLD; r++)
        ops[r][0] = (tn_coll){.kind = TN_COLL_KIND_ALL_REDUCE, .dtype = TN_DTYPE_F32, .op = op, .count = n,
                              .factor = 0.5, .send = send[r], .recv = recv[r]};
    tn_status st[WORLD];
    run_all(g, ops, 1, st);
    for (uint64_t i = 0; i < n; i++) {
        float s = 0, mx = value(0, i);
        for (int r = 0; r < WORLD; r++) s += value(r, i), mx = value(r, i) > mx ? value(r, i) : mx;
        want[i] = op == TN_COMM_OP_SUM ? s : op == TN_COMM_OP_MAX ? mx : op == TN_COMM_OP_AVG ? s / WORLD : s * 0.5f;
    }
    for (int r = 0; r < WORLD; r++) {
        CHECK(st[r] == TN_STATUS_OK);
        expect("all_reduce", r, recv[r], want, n);
    }
}

static void check_rooted(group *g, uint64_t n, int root) {
    /* broadcast in place from root, then reduce (sum) to root */
    fill(n, n);
    for (int r = 0; r < WORLD; r++)
        ops[r][0] = (tn_coll){.kind = TN_COLL_KIND_BROADCAST, .dtype = TN_DTYPE_F32, .root = root, .count = n,
                              .send = send[r], .recv = send[r]};
    tn_status st[WORLD];
    run_all(g, ops, 1, st);
    for (uint64_t i = 0; i < n; i++) want[i] = value(root, i);
    for (int r = 0; r < WORLD; r++) {
        CHECK(st[r] == TN_STATUS_OK);
        expect("broadcast", r, send[r], want, n);
    }
    fill(n, n);
    for (int r = 0; r < WORLD; r++)
        ops[r][0] = (tn_coll){.kind = TN_COLL_KIND_REDUCE, .dtype = TN_DTYPE_F32, .root = root, .count = n,
                              .send = send[r], .recv = recv[r]};
    run_all(g, ops, 1, st);
    for (uint64_t i = 0; i < n; i++) {
        want[i] = 0;
        for (int r = 0; r < WORLD; r++) want[i] += value(r, i);
    }
    for (int r = 0; r < WORLD; r++) CHECK(st[r] == TN_STATUS_OK);
    expect("reduce", root, recv[root], want, n);
}

static void check_gather_family(group *g, uint64_t n) {
    tn_status st[WORLD];
    /* all_gather, in place (send inside recv at rank * n) */
    fill(n, WORLD * n);
    for (int r = 0; r < WORLD; r++) {
        memcpy(recv[r] + r * n, send[r], n * sizeof(float));
        ops[r][0] = (tn_coll){.kind = TN_COLL_KIND_ALL_GATHER, .dtype = TN_DTYPE_F32, .count = n,
                              .send = recv[r] + r * n, .recv = recv[r]};
    }
    run_all(g, ops, 1, st);
    for (int j = 0; j < WORLD; j++)
        for (uint64_t i = 0; i < n; i++) want[j * n + i] = value(j, i);
    for (int r = 0; r < WORLD; r++) {
        CHECK(st[r] == TN_STATUS_OK);
        expect("all_gather", r, recv[r], want, WORLD * n);
    }
    /* reduce_scatter: rank r keeps the sum of piece r */
    fill(WORLD * n, n);
    for (int r = 0; r < WORLD; r++)
        ops[r][0] = (tn_coll){.kind = TN_COLL_KIND_REDUCE_SCATTER, .dtype = TN_DTYPE_F32, .count = n,
                              .send = send[r], .recv = recv[r]};
    run_all(g, ops, 1, st);
    for (int r = 0; r < WORLD; r++) {
        for (uint64_t i = 0; i < n; i++) {
            want[i] = 0;
            for (int j = 0; j < WORLD; j++) want[i] += value(j, r * n + i);
        }
        CHECK(st[r] == TN_STATUS_OK);
        expect("reduce_scatter", r, recv[r], want, n);
    }
}

void test_ccl_across_hosts(void) {
    group g;
    CHECK(make_group(&g) == 0);
    CHECK(tn_comm_rank(g.comm[3]) == 3 && tn_comm_size(g.comm[3]) == WORLD);
    const uint64_t sizes[] = {0, 1, 1000, 300000};
    for (int s = 0; s < 4; s++) {
        check_all_reduce(&g, sizes[s], TN_COMM_OP_SUM);
        check_gather_family(&g, sizes[s]);
    }
    check_all_reduce(&g, 777, TN_COMM_OP_MAX);
    check_all_reduce(&g, 777, TN_COMM_OP_AVG);
    check_all_reduce(&g, 777, TN_COMM_OP_PREMUL_SUM);
    for (int root = 0; root < WORLD; root++) check_rooted(&g, 513, root);

    /* over the network among all ranks: gather to 1, scatter from 2, all_to_all, a ring of sends */
    tn_status st[WORLD];
    const uint64_t n = 37;
    fill(WORLD * n, WORLD * n);
    for (int r = 0; r < WORLD; r++)
        ops[r][0] = (tn_coll){.kind = TN_COLL_KIND_GATHER, .dtype = TN_DTYPE_F32, .root = 1, .count = n,
                              .send = send[r], .recv = recv[r]};
    run_all(&g, ops, 1, st);
    for (int j = 0; j < WORLD; j++)
        for (uint64_t i = 0; i < n; i++) want[j * n + i] = value(j, i);
    expect("gather", 1, recv[1], want, WORLD * n);
    for (int r = 0; r < WORLD; r++)
        ops[r][0] = (tn_coll){.kind = TN_COLL_KIND_SCATTER, .dtype = TN_DTYPE_F32, .root = 2, .count = n,
                              .send = send[r], .recv = recv[r]};
    run_all(&g, ops, 1, st);
    for (int r = 0; r < WORLD; r++) {
        for (uint64_t i = 0; i < n; i++) want[i] = value(2, r * n + i);
        CHECK(st[r] == TN_STATUS_OK);
        expect("scatter", r, recv[r], want, n);
    }
    for (int r = 0; r < WORLD; r++) { /* rank r sends n elements of block j to rank j */
        ops[r][0] = (tn_coll){.kind = TN_COLL_KIND_ALL_TO_ALL, .dtype = TN_DTYPE_F32,
                              .send = send[r], .recv = recv[r]};
        for (int j = 0; j < WORLD; j++) {
            ops[r][0].send_counts[j] = ops[r][0].recv_counts[j] = n;
            ops[r][0].send_offsets[j] = ops[r][0].recv_offsets[j] = j * n;
        }
    }
    run_all(&g, ops, 1, st);
    for (int r = 0; r < WORLD; r++) {
        for (int j = 0; j < WORLD; j++)
            for (uint64_t i = 0; i < n; i++) want[j * n + i] = value(j, r * n + i);
        CHECK(st[r] == TN_STATUS_OK);
        expect("all_to_all", r, recv[r], want, WORLD * n);
    }
    for (int r = 0; r < WORLD; r++) {
        ops[r][0] = (tn_coll){.kind = TN_COLL_KIND_SEND, .dtype = TN_DTYPE_F32, .peer = (r + 1) % WORLD,
                              .count = n, .send = send[r]};
        ops[r][1] = (tn_coll){.kind = TN_COLL_KIND_RECV, .dtype = TN_DTYPE_F32, .peer = (r + WORLD - 1) % WORLD,
                              .count = n, .recv = recv[r]};
    }
    run_all(&g, ops, 2, st);
    for (int r = 0; r < WORLD; r++) {
        for (uint64_t i = 0; i < n; i++) want[i] = value((r + WORLD - 1) % WORLD, i);
        CHECK(st[r] == TN_STATUS_OK);
        expect("ring", r, recv[r], want, n);
    }

    /* the network fails for local index 0: those ranks report it; host 0's other rank fails
     * at its next collective, because the host's group is failed */
    g.net.fail_cross0 = 1;
    fill(10, 10);
    for (int r = 0; r < WORLD; r++)
        ops[r][0] = (tn_coll){.kind = TN_COLL_KIND_ALL_REDUCE, .dtype = TN_DTYPE_F32, .count = 10,
                              .send = send[r], .recv = recv[r]};
    run_all(&g, ops, 1, st);
    CHECK(st[0] == TN_STATUS_COMM_FAILED && st[2] == TN_STATUS_COMM_FAILED);
    CHECK(st[1] == TN_STATUS_OK && st[3] == TN_STATUS_OK);
    g.net.fail_cross0 = 0;
    for (int r = 0; r < WORLD; r++) {
        tn_comm_work_t w;
        tn_comm_work_create(&w);
        CHECK_OK(tn_comm_launch(g.comm[r], g.stream[r], "after", ops[r], 1, w));
        if (r == 1) {
            CHECK(tn_comm_work_synchronize(w) == TN_STATUS_COMM_FAILED);
            CHECK(strstr(tn_last_error(), "between hosts: connection reset by peer host1") != NULL);
        }
        tn_comm_work_release(w);
        tn_stream_synchronize(g.stream[r]);
        if (r == 1) break;
    }
    destroy_group(&g);
    for (int r = 0; r < WORLD; r++) free(send[r]), free(recv[r]), send[r] = recv[r] = NULL;
    free(want);
    want = NULL;
}
