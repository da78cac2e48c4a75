/* Point-to-point messages: send and receive through per-pair mailboxes.
 *
 * The mailbox from rank a to rank b lives in a's segment and has two halves, so a chunk can be
 * written while the last is read. a counts the chunks it wrote (p2p_sent[b] in its header), b
 * the chunks it took (p2p_taken[a] in its header); a may write while fewer than two are unread.
 * Each chunk starts with the message's size, so a receive that expects another size fails instead
 * of reading a different message. The operations of one launch progress together, one chunk at a
 * time each, in the order given per peer and direction: a ring of sends and receives, of any
 * size, completes. */
#include <stdio.h>
#include <string.h>

#include "../runtime/internal.h"
#include "ccl_internal.h"

#define PAYLOAD (TN_COMM_P2P_HALF - TN_COMM_P2P_HEADER)

typedef struct chunk_header {
    uint64_t message_bytes;
    uint64_t offset;
} chunk_header;

typedef struct progress {
    uint64_t bytes, done_bytes;
    uint64_t chunks, done_chunks;
    uint64_t seq;
} progress;

/* One chunk of a send, if the mailbox has room: 1 if it moved, 0 if not. */
static int try_send(tn_comm_t c, const tn_coll *op, progress *p) {
    int32_t me = c->rank, dst = op->peer;
    uint64_t sent = tn_load(&c->seg[me]->p2p_sent[dst].v);
    uint64_t taken = tn_load(&c->seg[dst]->p2p_taken[me].v);
    if (sent - taken >= 2) return 0;
    unsigned char *half = tn_comm_mailbox(c, me, dst) + (sent & 1) * TN_COMM_P2P_HALF;
    uint64_t m = p->bytes - p->done_bytes < PAYLOAD ? p->bytes - p->done_bytes : PAYLOAD;
    chunk_header h = {p->bytes, p->done_bytes};
    memcpy(half, &h, sizeof h);
    if (m) tn_ccl_stage(c, half + TN_COMM_P2P_HEADER, (const unsigned char *)op->send + p->done_bytes, m);
    tn_store(&c->seg[me]->p2p_sent[dst].v, sent + 1);
    p->done_bytes += m;
    p->done_chunks++;
    return 1;
}

/* One chunk of a receive, if one is waiting: 1 if it moved, 0 if not, -1 on a size mismatch. */
static int try_recv(tn_comm_t c, const tn_coll *op, progress *p) {
    int32_t me = c->rank, src = op->peer;
    uint64_t taken = tn_load(&c->seg[me]->p2p_taken[src].v);
    uint64_t sent = tn_load(&c->seg[src]->p2p_sent[me].v);
    if (sent <= taken) return 0;
    const unsigned char *half = tn_comm_mailbox(c, src, me) + (taken & 1) * TN_COMM_P2P_HALF;
    chunk_header h;
    memcpy(&h, half, sizeof h);
    if (h.message_bytes != p->bytes || h.offset != p->done_bytes) return -1;
    uint64_t m = p->bytes - p->done_bytes < PAYLOAD ? p->bytes - p->done_bytes : PAYLOAD;
    if (m) memcpy((unsigned char *)op->recv + p->done_bytes, half + TN_COMM_P2P_HEADER, m);
    tn_store(&c->seg[me]->p2p_taken[src].v, taken + 1);
    p->done_bytes += m;
    p->done_chunks++;
    return 1;
}

tn_status tn_ccl_run_p2p(tn_comm_t c, const tn_coll *ops, int32_t n) {
    progress pr[64] = {{0}};
    if (n < 1) return TN_STATUS_OK;
    if (n > 64) {
        for (int32_t i = 0; i < n; i += 64) {
            tn_status st = tn_ccl_run_p2p(c, ops + i, n - i < 64 ? n - i : 64);
            if (st != TN_STATUS_OK) return st;
        }
        return TN_STATUS_OK;
    }
    for (int32_t i = 0; i < n; i++) {
        uint64_t bytes = ops[i].count * (uint64_t)tn_dtype_size(ops[i].dtype);
        pr[i] = (progress){bytes, 0, bytes ? (bytes + PAYLOAD - 1) / PAYLOAD : 1, 0, __atomic_add_fetch(&c->p2p_seq, 1, __ATOMIC_RELAXED)};
    }
    tn_wait w;
    tn_wait_begin(&w, c, "send/recv", pr[0].seq);
    int32_t left = n;
    while (left > 0) {
        int moved = 0, blocked = -1;
        for (int32_t i = 0; i < n; i++) {
            if (pr[i].done_chunks == pr[i].chunks) continue;
            /* operations to the same peer in the same direction go in order */
            int earlier = 0;
            for (int32_t k = 0; k < i && !earlier; k++)
                earlier = ops[k].peer == ops[i].peer && ops[k].kind == ops[i].kind &&
                          pr[k].done_chunks < pr[k].chunks;
            if (earlier) continue;
            int r = ops[i].kind == TN_COLL_KIND_SEND ? try_send(c, &ops[i], &pr[i])
                                                     : try_recv(c, &ops[i], &pr[i]);
            if (r < 0) {
                char msg[256];
                const unsigned char *half = tn_comm_mailbox(c, ops[i].peer, c->rank) +
                                            (tn_load(&c->seg[c->rank]->p2p_taken[ops[i].peer].v) & 1) *
                                                TN_COMM_P2P_HALF;
                chunk_header h;
                memcpy(&h, half, sizeof h);
                snprintf(msg, sizeof msg,
                         "recv #%llu on rank %d expected %llu bytes from rank %d, which sent a message "
                         "of %llu bytes",
                         (unsigned long long)pr[i].seq, (int)c->rank, (unsigned long long)pr[i].bytes,
                         (int)ops[i].peer, (unsigned long long)h.message_bytes);
                return tn_comm_fail(c, TN_STATUS_COMM_FAILED, msg);
            }
            if (r > 0) {
                moved = 1;
                if (pr[i].done_chunks == pr[i].chunks) left--;
            } else if (blocked < 0) {
                blocked = i;
            }
        }
        if (moved) { /* the deadline is for a pause in progress, not for the whole transfer */
            tn_wait_begin(&w, c, w.what, w.seq);
            continue;
        }
        if (blocked >= 0) {
            w.seq = pr[blocked].seq;
            w.what = ops[blocked].kind == TN_COLL_KIND_SEND ? "send" : "recv";
            tn_status st = tn_wait_round(&w, ops[blocked].peer,
                                         ops[blocked].kind == TN_COLL_KIND_SEND ? "receive" : "message");
            if (st != TN_STATUS_OK) return st;
        }
    }
    return TN_STATUS_OK;
}
