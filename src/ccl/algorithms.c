/* The collectives, written in the step protocol of ccl_internal.h.
 *
 * Every collective takes at least one step, and its first step also carries the rank's
 * description of the call, which each rank compares with its peers' before reading their data.
 * Reductions combine the ranks' data in rank order (x0 op x1 op x2 ...) and each element is
 * reduced by one rank only, so every rank ends with the same bits.
 *
 *   all_reduce      up to TN_COMM_DIRECT_BYTES: every rank stages its data, every rank reduces
 *                   all of it (one step). Larger: per chunk of a slot, each rank stages the
 *                   pieces the others reduce, reduces its own piece (reduce-scatter), stages the
 *                   result and copies the others' results (all-gather): two steps per chunk, and
 *                   each rank moves about twice the data, whatever the group's size.
 *   broadcast, reduce, all_gather, gather: one step per slot of the per-rank data.
 *   reduce_scatter, scatter, all_to_all: per step, a slot holds one piece per destination. */
#include <stdio.h>
#include <string.h>

#include "../runtime/internal.h"
#include "ccl_internal.h"

typedef struct run {
    tn_comm_t c;
    const tn_coll *op;
    tn_wait w;
    tn_coll_desc desc;
    int32_t es;      /* element bytes */
    int described;   /* the description went with a step already */
    char what[48];
} run;

static unsigned char *at(const void *p, uint64_t elements, int32_t es) {
    return (unsigned char *)p + elements * (uint64_t)es;
}

static void copy(void *dst, const void *src, uint64_t bytes) {
    if (bytes && dst != src) memmove(dst, src, bytes);
}

static void describe(char *buf, size_t n, const tn_coll_desc *d) {
    const char *kind = tn_coll_kind_name((tn_coll_kind)d->kind);
    switch ((tn_coll_kind)d->kind) {
    case TN_COLL_KIND_BARRIER:
        snprintf(buf, n, "%s", kind);
        break;
    case TN_COLL_KIND_ALL_TO_ALL:
        snprintf(buf, n, "%s(%s)", kind, tn_dtype_name((tn_dtype)d->dtype));
        break;
    case TN_COLL_KIND_ALL_REDUCE:
    case TN_COLL_KIND_REDUCE_SCATTER:
        snprintf(buf, n, "%s(%s, %llu elements, %s)", kind, tn_dtype_name((tn_dtype)d->dtype),
                 (unsigned long long)d->count, tn_comm_op_name((tn_comm_op)d->op));
        break;
    case TN_COLL_KIND_REDUCE:
        snprintf(buf, n, "%s(%s, %llu elements, %s, root %d)", kind, tn_dtype_name((tn_dtype)d->dtype),
                 (unsigned long long)d->count, tn_comm_op_name((tn_comm_op)d->op), (int)d->root);
        break;
    case TN_COLL_KIND_BROADCAST:
    case TN_COLL_KIND_GATHER:
    case TN_COLL_KIND_SCATTER:
        snprintf(buf, n, "%s(%s, %llu elements, root %d)", kind, tn_dtype_name((tn_dtype)d->dtype),
                 (unsigned long long)d->count, (int)d->root);
        break;
    default:
        snprintf(buf, n, "%s(%s, %llu elements)", kind, tn_dtype_name((tn_dtype)d->dtype),
                 (unsigned long long)d->count);
    }
}

static int same_call(const tn_coll_desc *a, const tn_coll_desc *b) {
    if (a->kind != b->kind || a->dtype != b->dtype) return 0;
    switch ((tn_coll_kind)a->kind) {
    case TN_COLL_KIND_BARRIER:
    case TN_COLL_KIND_ALL_TO_ALL:
        return 1;
    case TN_COLL_KIND_ALL_REDUCE:
    case TN_COLL_KIND_REDUCE_SCATTER:
        return a->count == b->count && a->op == b->op;
    case TN_COLL_KIND_REDUCE:
        return a->count == b->count && a->op == b->op && a->root == b->root;
    case TN_COLL_KIND_BROADCAST:
    case TN_COLL_KIND_GATHER:
    case TN_COLL_KIND_SCATTER:
        return a->count == b->count && a->root == b->root;
    default:
        return a->count == b->count;
    }
}

/* Compares the peers' descriptions of this collective with ours (after their first step). */
static tn_status check_peers(run *r) {
    tn_comm_t c = r->c;
    uint64_t seq = r->desc.seq;
    for (int32_t p = 0; p < c->size; p++) {
        if (p == c->rank) continue;
        tn_seg_header *h = c->seg[p];
        tn_coll_desc theirs = h->desc[seq & 1];
        char mine_s[160], theirs_s[160], msg[512];
        if (theirs.seq != seq) {
            snprintf(msg, sizeof msg, "collective #%llu: rank %d is at collective #%llu, rank %d at #%llu "
                     "(the ranks did not call the same collectives)",
                     (unsigned long long)seq, (int)c->rank, (unsigned long long)seq, (int)p,
                     (unsigned long long)theirs.seq);
            return tn_comm_fail(c, TN_STATUS_COMM_FAILED, msg);
        }
        if (!same_call(&r->desc, &theirs)) {
            describe(mine_s, sizeof mine_s, &r->desc);
            describe(theirs_s, sizeof theirs_s, &theirs);
            snprintf(msg, sizeof msg,
                     "mismatched collectives: as collective #%llu of the group, rank %d called %s "
                     "and rank %d called %s",
                     (unsigned long long)seq, (int)c->rank, mine_s, (int)p, theirs_s);
            return tn_comm_fail(c, TN_STATUS_COMM_FAILED, msg);
        }
        if (r->desc.kind == TN_COLL_KIND_ALL_TO_ALL) {
            uint64_t sent = h->a2a_bytes[seq & 1][c->rank];
            uint64_t expected = r->op->recv_counts[p] * (uint64_t)r->es;
            if (sent != expected) {
                snprintf(msg, sizeof msg,
                         "mismatched all_to_all #%llu: rank %d sends %llu elements to rank %d, which "
                         "expects %llu",
                         (unsigned long long)seq, (int)p, (unsigned long long)(sent / (uint64_t)r->es),
                         (int)c->rank, (unsigned long long)r->op->recv_counts[p]);
                return tn_comm_fail(c, TN_STATUS_COMM_FAILED, msg);
            }
        }
    }
    return TN_STATUS_OK;
}

static tn_status begin(run *r, uint64_t *s) { return tn_step_begin(&r->w, s); }

/* Publishes this rank's step (with its description the first time) and waits for the peers'. */
static tn_status exchange(run *r, uint64_t s) {
    tn_comm_t c = r->c;
    int first = !r->described;
    if (first) {
        c->seg[c->rank]->desc[r->desc.seq & 1] = r->desc;
        r->described = 1;
    }
    tn_step_publish(c, s);
    tn_status st = tn_step_wait_all(&r->w, s);
    if (st == TN_STATUS_OK && first) st = check_peers(r);
    return st;
}

/* out = x[0] op x[1] op ... op x[n-1]; `scratch` (m elements) holds the running result when out
 * is one of x[2..] (an in-place call), so no operand is overwritten before it is read. */
static void reduce_ranks(const run *r, void *out, const void *const *x, uint64_t m, void *scratch) {
    const tn_coll *op = r->op;
    int32_t n = r->c->size;
    void *acc = out;
    for (int32_t j = 2; j < n; j++)
        if (x[j] == out) acc = scratch;
    tn_ccl_reduce(op->op, op->dtype, acc, x[0], x[1], m);
    for (int32_t j = 2; j < n; j++) tn_ccl_reduce(op->op, op->dtype, acc, acc, x[j], m);
    tn_ccl_reduce_finish(op->op, op->dtype, acc, m, n, op->factor);
    copy(out, acc, m * (uint64_t)r->es);
}

static tn_status all_reduce_direct(run *r) {
    tn_comm_t c = r->c;
    const tn_coll *op = r->op;
    uint64_t s, bytes = op->count * (uint64_t)r->es;
    tn_status st = begin(r, &s);
    if (st != TN_STATUS_OK) return st;
    tn_ccl_stage(c, tn_comm_slot(c, c->rank, s), op->send, bytes);
    if ((st = exchange(r, s)) != TN_STATUS_OK) return st;
    const void *x[TN_COMM_MAX_RANKS];
    for (int32_t j = 0; j < c->size; j++) x[j] = tn_comm_slot(c, j, s);
    reduce_ranks(r, op->recv, x, op->count, NULL);
    tn_step_done(c, s);
    return TN_STATUS_OK;
}

static tn_status all_reduce_chunked(run *r) {
    tn_comm_t c = r->c;
    const tn_coll *op = r->op;
    int32_t n = c->size, me = c->rank, es = r->es;
    uint64_t chunk = TN_COMM_SLOT_BYTES / (uint64_t)es;
    for (uint64_t off = 0; off < op->count; off += chunk) {
        uint64_t m = op->count - off < chunk ? op->count - off : chunk;
        const unsigned char *send = at(op->send, off, es);
        unsigned char *recv = at(op->recv, off, es);
        uint64_t lo[TN_COMM_MAX_RANKS + 1];
        for (int32_t j = 0; j <= n; j++) lo[j] = m * (uint64_t)j / (uint64_t)n;
        uint64_t a, b, mine = lo[me + 1] - lo[me];
        tn_status st = begin(r, &a);
        if (st != TN_STATUS_OK) return st;
        for (int32_t j = 0; j < n; j++)
            if (j != me) tn_ccl_stage(c, at(tn_comm_slot(c, me, a), lo[j], es), at(send, lo[j], es), (lo[j + 1] - lo[j]) * es);
        if ((st = exchange(r, a)) != TN_STATUS_OK) return st;
        if ((st = begin(r, &b)) != TN_STATUS_OK) return st;
        const void *x[TN_COMM_MAX_RANKS];
        for (int32_t j = 0; j < n; j++)
            x[j] = j == me ? at(send, lo[me], es) : at(tn_comm_slot(c, j, a), lo[me], es);
        unsigned char *result = at(tn_comm_slot(c, me, b), lo[me], es);
        /* reduce into this rank's output (the slot's piece holds the running result of an
         * in-place call), then stage it in the slot the others read from */
        reduce_ranks(r, at(recv, lo[me], es), x, mine, result);
        tn_step_done(c, a);
        tn_ccl_stage(c, result, at(recv, lo[me], es), mine * es);
        if ((st = exchange(r, b)) != TN_STATUS_OK) return st;
        for (int32_t j = 0; j < n; j++)
            if (j != me)
                copy(at(recv, lo[j], es), at(tn_comm_slot(c, j, b), lo[j], es), (lo[j + 1] - lo[j]) * es);
        tn_step_done(c, b);
    }
    return TN_STATUS_OK;
}

static tn_status all_reduce(run *r) {
    const tn_coll *op = r->op;
    if (op->count * (uint64_t)r->es <= TN_COMM_DIRECT_BYTES || op->count < (uint64_t)r->c->size)
        return all_reduce_direct(r);
    return all_reduce_chunked(r);
}

/* broadcast, reduce, all_gather, gather: each rank's `count` elements in slot-sized steps. */
static tn_status per_rank_steps(run *r) {
    tn_comm_t c = r->c;
    const tn_coll *op = r->op;
    int32_t n = c->size, me = c->rank, es = r->es;
    uint64_t chunk = TN_COMM_SLOT_BYTES / (uint64_t)es, off = 0;
    tn_coll_kind kind = op->kind;
    int root = me == op->root;
    do {
        uint64_t m = op->count - off < chunk ? op->count - off : chunk, s;
        tn_status st = begin(r, &s);
        if (st != TN_STATUS_OK) return st;
        unsigned char *slot = tn_comm_slot(c, me, s);
        if (kind != TN_COLL_KIND_BROADCAST || root) tn_ccl_stage(c, slot, at(op->send, off, es), m * es);
        if ((st = exchange(r, s)) != TN_STATUS_OK) return st;
        if (kind == TN_COLL_KIND_BROADCAST) {
            copy(at(op->recv, off, es), root ? at(op->send, off, es) : tn_comm_slot(c, op->root, s), m * es);
        } else if (kind == TN_COLL_KIND_REDUCE) {
            if (root) {
                const void *x[TN_COMM_MAX_RANKS];
                for (int32_t j = 0; j < n; j++) x[j] = tn_comm_slot(c, j, s);
                reduce_ranks(r, at(op->recv, off, es), x, m, NULL);
            }
        } else if (kind == TN_COLL_KIND_ALL_GATHER || root) {
            for (int32_t j = 0; j < n; j++)
                copy(at(op->recv, j * op->count + off, es),
                     j == me ? at(op->send, off, es) : tn_comm_slot(c, j, s), m * es);
        }
        tn_step_done(c, s);
        off += m;
    } while (off < op->count);
    return TN_STATUS_OK;
}

/* reduce_scatter and scatter: per step, piece j of a slot carries elements for rank j. */
static tn_status per_piece_steps(run *r) {
    tn_comm_t c = r->c;
    const tn_coll *op = r->op;
    int32_t n = c->size, me = c->rank, es = r->es;
    uint64_t piece = TN_COMM_SLOT_BYTES / (uint64_t)n / (uint64_t)es, off = 0, cnt = op->count;
    int scatter = op->kind == TN_COLL_KIND_SCATTER;
    do {
        uint64_t m = cnt - off < piece ? cnt - off : piece, s;
        tn_status st = begin(r, &s);
        if (st != TN_STATUS_OK) return st;
        unsigned char *slot = tn_comm_slot(c, me, s);
        if (!scatter || me == op->root)
            for (int32_t j = 0; j < n; j++)
                if (j != me) tn_ccl_stage(c, at(slot, j * piece, es), at(op->send, j * cnt + off, es), m * es);
        if ((st = exchange(r, s)) != TN_STATUS_OK) return st;
        unsigned char *out = at(op->recv, off, es);
        if (scatter) {
            copy(out, me == op->root ? at(op->send, me * cnt + off, es)
                                     : at(tn_comm_slot(c, op->root, s), me * piece, es), m * es);
        } else {
            const void *x[TN_COMM_MAX_RANKS];
            for (int32_t j = 0; j < n; j++)
                x[j] = j == me ? at(op->send, me * cnt + off, es) : at(tn_comm_slot(c, j, s), me * piece, es);
            /* this rank's own piece of its slot is unused: the running sum of an in-place call */
            reduce_ranks(r, out, x, m, at(slot, me * piece, es));
        }
        tn_step_done(c, s);
        off += m;
    } while (off < cnt);
    return TN_STATUS_OK;
}

static tn_status all_to_all(run *r) {
    tn_comm_t c = r->c;
    const tn_coll *op = r->op;
    int32_t n = c->size, me = c->rank, es = r->es;
    uint64_t piece = (TN_COMM_SLOT_BYTES / (uint64_t)n) & ~(uint64_t)63, most = 0;
    uint64_t *sent = c->seg[me]->a2a_bytes[r->desc.seq & 1];
    for (int32_t j = 0; j < n; j++) {
        uint64_t sb = op->send_counts[j] * (uint64_t)es, rb = op->recv_counts[j] * (uint64_t)es;
        sent[j] = sb;
        if (j == me) continue;
        if (sb > most) most = sb;
        if (rb > most) most = rb;
    }
    r->desc.steps = most ? (most + piece - 1) / piece : 1;
    copy(at(op->recv, op->recv_offsets[me], es), at(op->send, op->send_offsets[me], es),
         op->send_counts[me] * (uint64_t)es);
    uint64_t steps = r->desc.steps;
    for (uint64_t t = 0; t < steps; t++) {
        uint64_t s, lo = t * piece;
        tn_status st = begin(r, &s);
        if (st != TN_STATUS_OK) return st;
        unsigned char *slot = tn_comm_slot(c, me, s);
        for (int32_t j = 0; j < n; j++) {
            uint64_t sb = op->send_counts[j] * (uint64_t)es;
            if (j != me && lo < sb)
                tn_ccl_stage(c, slot + j * piece, at(op->send, op->send_offsets[j], es) + lo,
                             sb - lo < piece ? sb - lo : piece);
        }
        if ((st = exchange(r, s)) != TN_STATUS_OK) return st;
        if (t == 0)
            for (int32_t p = 0; p < n; p++) {
                uint64_t theirs = c->seg[p]->desc[r->desc.seq & 1].steps;
                if (p != me && theirs > steps) steps = theirs;
            }
        for (int32_t j = 0; j < n; j++) {
            uint64_t rb = op->recv_counts[j] * (uint64_t)es;
            if (j != me && lo < rb)
                copy(at(op->recv, op->recv_offsets[j], es) + lo, tn_comm_slot(c, j, s) + me * piece,
                     rb - lo < piece ? rb - lo : piece);
        }
        tn_step_done(c, s);
    }
    return TN_STATUS_OK;
}

static tn_status barrier(run *r) {
    uint64_t s;
    tn_status st = begin(r, &s);
    if (st == TN_STATUS_OK) st = exchange(r, s);
    if (st == TN_STATUS_OK) tn_step_done(r->c, s);
    return st;
}

/* A group of one: the data moves within this process. */
static tn_status alone(run *r) {
    const tn_coll *op = r->op;
    int32_t es = r->es;
    uint64_t bytes = op->count * (uint64_t)es;
    switch (op->kind) {
    case TN_COLL_KIND_ALL_REDUCE:
    case TN_COLL_KIND_REDUCE:
    case TN_COLL_KIND_REDUCE_SCATTER:
        copy(op->recv, op->send, bytes);
        tn_ccl_reduce_finish(op->op, op->dtype, op->recv, op->count, 1, op->factor);
        break;
    case TN_COLL_KIND_ALL_TO_ALL:
        copy(at(op->recv, op->recv_offsets[0], es), at(op->send, op->send_offsets[0], es),
             op->send_counts[0] * (uint64_t)es);
        break;
    case TN_COLL_KIND_BARRIER:
        break;
    default:
        copy(op->recv, op->send, bytes);
    }
    return TN_STATUS_OK;
}

static tn_status run_algorithm(run *r) {
    switch (r->op->kind) {
    case TN_COLL_KIND_ALL_REDUCE:
        return all_reduce(r);
    case TN_COLL_KIND_BROADCAST:
    case TN_COLL_KIND_REDUCE:
    case TN_COLL_KIND_ALL_GATHER:
    case TN_COLL_KIND_GATHER:
        return per_rank_steps(r);
    case TN_COLL_KIND_REDUCE_SCATTER:
    case TN_COLL_KIND_SCATTER:
        return per_piece_steps(r);
    case TN_COLL_KIND_ALL_TO_ALL:
        return all_to_all(r);
    case TN_COLL_KIND_BARRIER:
        return barrier(r);
    default:
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "not a collective");
    }
}

/* The bytes of this rank's data in a collective (what the staging choice is timed against). */
static uint64_t data_bytes(const run *r) {
    const tn_coll *op = r->op;
    uint64_t elements = op->count;
    if (op->kind == TN_COLL_KIND_ALL_TO_ALL)
        for (int32_t j = 0; j < r->c->size; j++) elements += op->send_counts[j];
    if (op->kind == TN_COLL_KIND_REDUCE_SCATTER) elements *= (uint64_t)r->c->size;
    return elements * (uint64_t)r->es;
}

tn_status tn_ccl_run_collective(tn_comm_t c, const tn_coll *op) {
    run r = {.c = c, .op = op, .es = tn_dtype_size(op->dtype)};
    r.desc = (tn_coll_desc){.seq = c->seq, .kind = op->kind, .dtype = op->dtype, .op = op->op,
                            .root = op->root, .count = op->count, .steps = 0};
    snprintf(r.what, sizeof r.what, "%s", tn_coll_kind_name(op->kind));
    tn_wait_begin(&r.w, c, r.what, c->seq);
    if (c->size == 1) return alone(&r);
    uint64_t bytes = data_bytes(&r);
    int way = tn_ccl_stage_choose(c, bytes);
    int64_t start = tn_ccl_now_ns();
    tn_status st = run_algorithm(&r);
    if (st == TN_STATUS_OK) tn_ccl_stage_learn(c, way, bytes, tn_ccl_now_ns() - start);
    return st;
}
