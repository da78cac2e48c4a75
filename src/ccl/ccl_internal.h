/* Internals of the collectives layer (src/ccl): the shared-memory segment layout, the
 * communicator, and the step protocol the algorithms are written in.
 *
 * Step protocol. The collectives of a communicator are a sequence of steps that every rank takes
 * in the same order (a collective's step count follows from its description, which the ranks
 * check against each other). In step s a rank
 *   1. waits until every peer is done with step s - 2 (the last step that used slot s % 2),
 *   2. writes its data into its own slot s % 2 and publishes ready = s,
 *   3. waits until every peer's ready >= s and reads what it needs from their slots,
 *   4. publishes done = s.
 * Two slots let a rank fill the next one while its peers still read the last. Point-to-point
 * messages use per-pair mailboxes instead (p2p.c), outside the step sequence. */
#ifndef TN_CCL_INTERNAL_H
#define TN_CCL_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tn/ccl.h"

#define TN_COMM_MAGIC 0x6c63636e75656e74ull /* "tneuccl" */
#define TN_COMM_VERSION 1

/* A staging slot: the most a rank contributes to one step. */
#define TN_COMM_SLOT_BYTES (4u << 20)
/* A point-to-point mailbox (one per destination): two halves, each a chunk in flight. */
#define TN_COMM_P2P_BYTES (1u << 20)
#define TN_COMM_P2P_HALF (TN_COMM_P2P_BYTES / 2)
#define TN_COMM_P2P_HEADER 64
/* All-reduces up to this size take the one-step path. */
#define TN_COMM_DIRECT_BYTES (64u << 10)

typedef struct tn_line {
    _Alignas(64) uint64_t v;
} tn_line;

/* What a rank said it was doing in one collective, checked by its peers. */
typedef struct tn_coll_desc {
    uint64_t seq;
    int32_t kind, dtype, op, root;
    uint64_t count;
    uint64_t steps;       /* all-to-all: the steps this rank needs (the most of all ranks run) */
} tn_coll_desc;

typedef enum tn_seg_state {
    TN_SEG_STATE_LIVE,
    TN_SEG_STATE_ABORTED, /* failed: abort_msg says why */
    TN_SEG_STATE_EXITED   /* destroyed its communicator */
} tn_seg_state;

typedef struct tn_seg_header {
    uint64_t magic;
    uint32_t version;
    int32_t size;
    int32_t rank; /* -1 until tn_comm_create */
    int32_t pid;
    tn_line ready;
    tn_line done;
    tn_line seq;   /* collectives started */
    tn_line state; /* tn_seg_state */
    char abort_msg[256];
    tn_coll_desc desc[2];                        /* by collective parity */
    uint64_t a2a_bytes[2][TN_COMM_MAX_RANKS];    /* all-to-all: bytes sent to each rank */
    tn_line p2p_sent[TN_COMM_MAX_RANKS];         /* chunks written to each rank's mailbox */
    tn_line p2p_taken[TN_COMM_MAX_RANKS];        /* chunks read from each rank's mailbox */
} tn_seg_header;

#define TN_COMM_HEADER_BYTES ((sizeof(tn_seg_header) + 4095) & ~(size_t)4095)

struct tn_comm_segment {
    char name[TN_COMM_NAME_MAX];
    void *base;
    size_t bytes;
    int linked;
};

struct tn_comm {
    int32_t rank, size;       /* within this host: the segments' ranks */
    int32_t hosts, host;      /* 1, 0 unless the communicator spans hosts */
    tn_comm_net net;          /* hosts > 1: the caller's network (hierarchy.c) */
    int64_t timeout_ms;
    struct tn_comm_segment own;
    tn_seg_header *seg[TN_COMM_MAX_RANKS]; /* every rank's segment, mapped here */
    size_t seg_bytes;
    pid_t pids[TN_COMM_MAX_RANKS];
    pthread_mutex_t run_lock;  /* one collective at a time (launches may come from two streams) */
    pthread_mutex_t send_lock; /* one launch writing the mailboxes at a time */
    pthread_mutex_t recv_lock; /* one launch reading them */
    uint64_t step;            /* last step taken (every rank has the same) */
    uint64_t seq;             /* collectives run */
    uint64_t p2p_seq;         /* point-to-point operations run (atomic) */
    int32_t pending;          /* launched tasks not yet run (atomic) */
    char failure[512];        /* first failure (under run_lock), "" while healthy */
    tn_comm_stats stats;      /* atomic adds */
    int stage_streaming;      /* the way tn_ccl_stage writes now (stage.c) */
    uint32_t stage_runs;      /* large collectives timed */
    double stage_cost[2];     /* ns per byte of each way, averaged; 0: not tried */
};

/* Segment layout: the header, two slots, one mailbox per destination. */
static inline size_t tn_comm_segment_bytes(int32_t size) {
    return TN_COMM_HEADER_BYTES + 2 * (size_t)TN_COMM_SLOT_BYTES + (size_t)size * TN_COMM_P2P_BYTES;
}
static inline unsigned char *tn_comm_slot(const tn_comm_t c, int32_t rank, uint64_t step) {
    return (unsigned char *)c->seg[rank] + TN_COMM_HEADER_BYTES + (step & 1) * TN_COMM_SLOT_BYTES;
}
static inline unsigned char *tn_comm_mailbox(const tn_comm_t c, int32_t rank, int32_t dst) {
    return (unsigned char *)c->seg[rank] + TN_COMM_HEADER_BYTES + 2 * (size_t)TN_COMM_SLOT_BYTES +
           (size_t)dst * TN_COMM_P2P_BYTES;
}

static inline uint64_t tn_load(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static inline void tn_store(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

/* Removes this rank's name and unmaps every segment (segment.c). */
void tn_comm_unmap(tn_comm_t c);

/* ---- waiting (comm.c) ---- */

int64_t tn_ccl_now_ns(void); /* CLOCK_MONOTONIC */

/* A wait with the communicator's deadline, for messages that name what was waited for. */
typedef struct tn_wait {
    tn_comm_t comm;
    const char *what; /* "all_reduce", "send", ... */
    uint64_t seq;     /* the collective's (or point-to-point operation's) sequence number */
    int64_t deadline_ns;
    uint32_t spins;
} tn_wait;

void tn_wait_begin(tn_wait *w, tn_comm_t comm, const char *what, uint64_t seq);
/* One round of waiting for `peer`, who is expected to move a counter; returns TN_STATUS_OK to
 * go on waiting, or the failure (the peer exited, aborted, or the deadline passed; the error
 * names `waiting_for`, e.g. "its data", and the peer). Spins, then yields, then sleeps. */
tn_status tn_wait_round(tn_wait *w, int32_t peer, const char *waiting_for);
/* Waits until *counter >= target, where counter lives in peer's segment. */
tn_status tn_wait_counter(tn_wait *w, int32_t peer, const uint64_t *counter, uint64_t target,
                          const char *waiting_for);

/* ---- steps (comm.c) ---- */

/* Step 1 of the protocol: returns the new step number in *step. */
tn_status tn_step_begin(tn_wait *w, uint64_t *step);
void tn_step_publish(tn_comm_t c, uint64_t step);
/* Step 3: waits for every peer's data of this step. */
tn_status tn_step_wait_all(tn_wait *w, uint64_t step);
void tn_step_done(tn_comm_t c, uint64_t step);

/* Fails the collective: records the first failure, marks the segment aborted for the peers. */
tn_status tn_comm_fail(tn_comm_t c, tn_status st, const char *msg);

/* ---- algorithms (algorithms.c, p2p.c) ---- */

/* Starts the host's next collective: its sequence number goes up by one. */
void tn_comm_next_seq(tn_comm_t c);
/* Runs one collective among this host's ranks (not send or recv); tn_comm_next_seq was called. */
tn_status tn_ccl_run_collective(tn_comm_t c, const tn_coll *op);
/* Runs one collective or a batch of send and receive operations over every host (hierarchy.c);
 * ranks in `ops` are numbered over all hosts. */
tn_status tn_ccl_run_hierarchical(tn_comm_t c, const tn_coll *ops, int32_t n);
/* Runs send and receive operations together. */
tn_status tn_ccl_run_p2p(tn_comm_t c, const tn_coll *ops, int32_t n);

/* Copies into this rank's shared memory for a peer to read (stage.c): from TN_COMM_STREAM_BYTES
 * up with streaming stores while the communicator finds them faster. src and dst do not
 * overlap. */
#define TN_COMM_STREAM_BYTES (64u << 10)
#define TN_COMM_LEARN_BYTES (1u << 20) /* collectives from this size teach the choice */
void tn_ccl_stage(const tn_comm_t c, void *dst, const void *src, uint64_t bytes);
/* Picks the way a collective of `bytes` stages (0: memcpy, 1: streaming), then tells how long
 * it took; under run_lock. */
int tn_ccl_stage_choose(tn_comm_t c, uint64_t bytes);
void tn_ccl_stage_learn(tn_comm_t c, int way, uint64_t bytes, int64_t ns);

/* out = a op b over n elements of dtype (both ends of the reduction: rank order is the caller's).
 * AVG and PREMUL_SUM reduce as SUM; tn_ccl_reduce_finish applies their scaling. */
void tn_ccl_reduce(tn_comm_op op, tn_dtype dtype, void *out, const void *a, const void *b,
                   uint64_t n);
void tn_ccl_reduce_finish(tn_comm_op op, tn_dtype dtype, void *buf, uint64_t n, int32_t size,
                          double factor);

const char *tn_coll_kind_name(tn_coll_kind kind);
const char *tn_comm_op_name(tn_comm_op op);

#endif
