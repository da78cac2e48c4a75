/* Collectives over several hosts: shared memory within a host (algorithms.c), the caller's
 * network (tn_comm_net) between hosts.
 *
 * Ranks are numbered host by host: rank = host * L + l for L ranks per host. The network's
 * `cross` group of a rank holds the ranks of its local index l on every host.
 *
 *   all_reduce      reduce within the host (every local rank gets the host's sum), then each
 *                   local rank all-reduces it with its peers of the same index on the other
 *                   hosts. Every rank ends with the same bits: the host sums are the same on a
 *                   host, and the cross all-reduce gives its members the same result.
 *   reduce          as all_reduce; ranks other than the root reduce into scratch memory.
 *   reduce_scatter  as all_reduce over the whole input, into scratch; each rank keeps its piece.
 *   broadcast       the root's local index crosses hosts first, then each host broadcasts it.
 *   all_gather      gather within the host into the host's block of the output, then each local
 *                   rank gathers the hosts' blocks.
 *   gather, scatter, all_to_all, barrier, send and recv: over the network among all ranks.
 *
 * The host-local steps are collectives of the host's own sequence; a network failure fails the
 * communicator as a local one does, so the host's other ranks stop waiting at once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../runtime/internal.h"
#include "ccl_internal.h"

static tn_status local(tn_comm_t c, tn_coll op) {
    tn_comm_next_seq(c);
    return tn_ccl_run_collective(c, &op);
}

static tn_status net_failed(tn_comm_t c, const char *what, const char *error) {
    char msg[TN_COMM_ERROR_MAX + 128];
    snprintf(msg, sizeof msg, "%s on rank %d, between hosts: %s", what, (int)tn_comm_rank(c), error);
    return tn_comm_fail(c, TN_STATUS_COMM_FAILED, msg);
}

/* recv[count] = op over all ranks of send[count] */
static tn_status all_reduce(tn_comm_t c, const tn_coll *op, const void *send, void *recv, uint64_t count) {
    tn_coll l = *op;
    l.kind = TN_COLL_KIND_ALL_REDUCE;
    l.op = op->op == TN_COMM_OP_AVG ? TN_COMM_OP_SUM : op->op; /* PREMUL_SUM: scaled once, here */
    l.send = send;
    l.recv = recv;
    l.count = count;
    tn_status st = local(c, l);
    if (st != TN_STATUS_OK) return st;
    tn_comm_op cross = op->op == TN_COMM_OP_AVG || op->op == TN_COMM_OP_PREMUL_SUM ? TN_COMM_OP_SUM : op->op;
    char err[TN_COMM_ERROR_MAX] = {0};
    if (c->net.all_reduce(c->net.ctx, recv, count, op->dtype, cross, err)) return net_failed(c, "all_reduce", err);
    if (op->op == TN_COMM_OP_AVG) tn_ccl_reduce_finish(TN_COMM_OP_AVG, op->dtype, recv, count, tn_comm_size(c), 0);
    return TN_STATUS_OK;
}

static void *scratch(uint64_t bytes) { return malloc(bytes ? bytes : 1); }

static tn_status reduce(tn_comm_t c, const tn_coll *op, int32_t es) {
    int root = op->root == tn_comm_rank(c);
    void *out = root ? op->recv : scratch(op->count * (uint64_t)es);
    if (!out) return tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory for a reduce across hosts");
    tn_status st = all_reduce(c, op, op->send, out, op->count);
    if (!root) free(out);
    return st;
}

static tn_status reduce_scatter(tn_comm_t c, const tn_coll *op, int32_t es) {
    uint64_t total = op->count * (uint64_t)tn_comm_size(c);
    unsigned char *all = scratch(total * (uint64_t)es);
    if (!all) return tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory for a reduce_scatter across hosts");
    tn_status st = all_reduce(c, op, op->send, all, total);
    if (st == TN_STATUS_OK)
        memcpy(op->recv, all + (uint64_t)tn_comm_rank(c) * op->count * (uint64_t)es, op->count * (uint64_t)es);
    free(all);
    return st;
}

static tn_status broadcast(tn_comm_t c, const tn_coll *op, int32_t es) {
    uint64_t bytes = op->count * (uint64_t)es;
    int32_t root_host = op->root / c->size, root_local = op->root % c->size;
    if (op->root == tn_comm_rank(c) && op->send != op->recv && bytes) memmove(op->recv, op->send, bytes);
    char err[TN_COMM_ERROR_MAX] = {0};
    if (c->rank == root_local && c->net.broadcast(c->net.ctx, op->recv, bytes, root_host, err))
        return net_failed(c, "broadcast", err);
    tn_coll l = *op;
    l.send = op->recv;
    l.root = root_local;
    return local(c, l);
}

static tn_status all_gather(tn_comm_t c, const tn_coll *op, int32_t es) {
    uint64_t block = (uint64_t)c->size * op->count * (uint64_t)es;
    unsigned char *mine = (unsigned char *)op->recv + (uint64_t)c->host * block;
    tn_coll l = *op;
    l.recv = mine;
    tn_status st = local(c, l);
    if (st != TN_STATUS_OK) return st;
    char err[TN_COMM_ERROR_MAX] = {0};
    if (c->net.all_gather(c->net.ctx, mine, op->recv, block, err)) return net_failed(c, "all_gather", err);
    return TN_STATUS_OK;
}

tn_status tn_ccl_run_hierarchical(tn_comm_t c, const tn_coll *ops, int32_t n) {
    const tn_coll *op = &ops[0];
    int32_t es = tn_dtype_size(op->dtype);
    switch (op->kind) {
    case TN_COLL_KIND_ALL_REDUCE:
        return all_reduce(c, op, op->send, op->recv, op->count);
    case TN_COLL_KIND_REDUCE:
        return reduce(c, op, es);
    case TN_COLL_KIND_REDUCE_SCATTER:
        return reduce_scatter(c, op, es);
    case TN_COLL_KIND_BROADCAST:
        return broadcast(c, op, es);
    case TN_COLL_KIND_ALL_GATHER:
        return all_gather(c, op, es);
    default: {
        char err[TN_COMM_ERROR_MAX] = {0};
        if (c->net.world(c->net.ctx, ops, n, err)) return net_failed(c, tn_coll_kind_name(op->kind), err);
        return TN_STATUS_OK;
    }
    }
}
