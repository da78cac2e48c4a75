/* Collective communication between the processes of a host, and across hosts (src/ccl/).
 *
 * A communicator joins `size` processes, one logical NeuronCore each, that exchange data through
 * shared memory: every rank owns a segment (a header of counters, two staging slots for the
 * collectives and one mailbox per peer for point-to-point messages) and maps its peers' segments.
 * Ranks only write their own segment and read the others'. Bootstrap is the caller's: each rank
 * creates its segment, tells the others its name (the PyTorch glue does it through the c10d
 * store), maps theirs with tn_comm_create, and once every rank has mapped every segment, calls
 * tn_comm_unlink so that no name is left in /dev/shm even if a process is killed later.
 *
 * A collective is stream work: tn_comm_launch enqueues it on a stream and returns. It runs when
 * the stream reaches it and waits for its peers there, never on the host thread. Every rank must
 * launch the same collectives (kind, dtype, count, root, reduction) in the same order; the first
 * step of each compares the ranks' descriptions, and a difference fails it on every rank with a
 * message naming both calls. Each wait has the communicator's deadline: a peer that exited, was
 * killed or does not arrive in time fails the collective with TN_STATUS_COMM_FAILED and a message
 * naming the collective, its sequence number and the rank. After a failure the communicator is
 * aborted: its peers see it at once, and every later collective on it fails.
 *
 * Algorithms (ccl/algorithms.c): small all-reduces reduce every rank's copy in rank order (one
 * step); large ones reduce-scatter then all-gather through the slots, chunk by chunk, so each rank
 * reduces 1/size of the data; every rank ends with the same bits. Buffers are contiguous arrays
 * in the process's memory (device memory of the host driver).
 *
 * Across hosts (ccl/hierarchy.c, tn_comm_net): shared memory within each host and the caller's
 * network between the ranks of the same local index on each host, for all_reduce, reduce,
 * reduce_scatter, broadcast and all_gather; the other operations go over the network among all
 * ranks. */
#ifndef TN_CCL_H
#define TN_CCL_H

#include <stdint.h>

#include "tn/dtype.h"
#include "tn/status.h"
#include "tn/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TN_COMM_MAX_RANKS 64
#define TN_COMM_NAME_MAX 64
/* Prefix of the communicators' shared-memory names: /dev/shm/tn_ccl_<pid>_<n>. */
#define TN_COMM_SHM_PREFIX "tn_ccl_"

typedef struct tn_comm *tn_comm_t;
typedef struct tn_comm_segment *tn_comm_segment_t;
typedef struct tn_comm_work *tn_comm_work_t;

typedef enum tn_comm_op {
    TN_COMM_OP_SUM,
    TN_COMM_OP_PROD,
    TN_COMM_OP_MIN,
    TN_COMM_OP_MAX,
    TN_COMM_OP_AVG,        /* sum / size (integers: truncated) */
    TN_COMM_OP_PREMUL_SUM, /* sum of factor * x */
    TN_COMM_OP_BAND,
    TN_COMM_OP_BOR,
    TN_COMM_OP_BXOR,
    TN_COMM_OP_COUNT_
} tn_comm_op;

typedef enum tn_coll_kind {
    TN_COLL_KIND_ALL_REDUCE,     /* recv[count] = op over ranks of send[count] */
    TN_COLL_KIND_BROADCAST,      /* recv[count] = root's send (root: send == recv allowed) */
    TN_COLL_KIND_REDUCE,         /* root's recv[count] = op of send; others' recv unused */
    TN_COLL_KIND_ALL_GATHER,     /* recv[size * count] = every rank's send[count], in rank order */
    TN_COLL_KIND_REDUCE_SCATTER, /* recv[count] = op over ranks of send[rank * count ..] */
    TN_COLL_KIND_ALL_TO_ALL,     /* send_counts[j] elements to rank j, recv_counts[j] from j */
    TN_COLL_KIND_GATHER,         /* root's recv[size * count]; others' recv unused */
    TN_COLL_KIND_SCATTER,        /* recv[count] = root's send[rank * count ..] */
    TN_COLL_KIND_BARRIER,
    TN_COLL_KIND_SEND,           /* count elements of send to rank `peer` */
    TN_COLL_KIND_RECV,           /* count elements into recv from rank `peer` */
    TN_COLL_KIND_COUNT_
} tn_coll_kind;

/* One collective or point-to-point operation. Buffers are contiguous; in-place forms pass the
 * same buffer (or, for all-gather, send inside recv at rank * count). */
typedef struct tn_coll {
    tn_coll_kind kind;
    tn_dtype dtype;
    tn_comm_op op;
    int32_t root;        /* broadcast, reduce, gather, scatter: the root rank */
    int32_t peer;        /* send, recv */
    uint64_t count;      /* elements (see tn_coll_kind); all-to-all: unused */
    double factor;       /* PREMUL_SUM */
    const void *send;
    void *recv;
    /* all-to-all: elements to / from each rank, and where each block starts (elements) */
    uint64_t send_counts[TN_COMM_MAX_RANKS], send_offsets[TN_COMM_MAX_RANKS];
    uint64_t recv_counts[TN_COMM_MAX_RANKS], recv_offsets[TN_COMM_MAX_RANKS];
} tn_coll;

/* Bootstrap: this rank's segment, for a communicator of `size` ranks; `name` receives its name
 * (at most TN_COMM_NAME_MAX bytes with the NUL). Removes segments that dead processes left. */
tn_status tn_comm_segment_create(int32_t size, tn_comm_segment_t *segment, char *name);
/* Unmaps and removes a segment that tn_comm_create did not take over. NULL is ignored. */
void tn_comm_segment_destroy(tn_comm_segment_t segment);

/* Between hosts the communicator does not move bytes itself: the caller lends it a network (the
 * PyTorch glue: Gloo groups over TCP). Ranks are numbered host by host, as torchrun numbers them:
 * rank = host * ranks_per_host + local rank. `cross` calls run among the ranks of this rank's local
 * index on every host (one per host, numbered by host); `world` runs operations among all ranks
 * of every host. Each call blocks until done and returns 0, or fills `error` (TN_COMM_ERROR_MAX
 * bytes) and returns -1. Buffers are contiguous host memory. */
#define TN_COMM_ERROR_MAX 512
typedef struct tn_comm_net {
    void *ctx;
    int32_t hosts;  /* > 1 */
    int32_t host;   /* this rank's host, 0 .. hosts - 1 */
    /* cross: buf[count] = op over hosts (AVG and PREMUL_SUM are not asked for) */
    int (*all_reduce)(void *ctx, void *buf, uint64_t count, tn_dtype dtype, tn_comm_op op, char *error);
    /* cross: buf = root host's buf */
    int (*broadcast)(void *ctx, void *buf, uint64_t bytes, int32_t root_host, char *error);
    /* cross: recv[hosts * bytes] = every host's send[bytes], by host (send may lie inside recv) */
    int (*all_gather)(void *ctx, const void *send, void *recv, uint64_t bytes, char *error);
    /* world: gather, scatter, all-to-all, barrier, or send and receive operations (progressed
     * together), with roots and peers numbered over all ranks */
    int (*world)(void *ctx, const tn_coll *ops, int32_t n, char *error);
    /* called once, when the communicator is destroyed */
    void (*destroy)(void *ctx);
} tn_comm_net;

typedef struct tn_comm_desc {
    int32_t rank;                  /* within this host */
    int32_t size;                  /* ranks on this host */
    int64_t timeout_ms;            /* every wait's deadline; 0: 30 minutes */
    tn_comm_segment_t segment;     /* this rank's, from tn_comm_segment_create (taken over) */
    const char *const *names;      /* [size]: every local rank's segment name (this rank's included) */
    const tn_comm_net *net;        /* NULL: every rank is on this host */
} tn_comm_desc;

/* Maps the peers' segments. Fails with TN_STATUS_COMM_FAILED when a peer's segment cannot be
 * opened or does not belong to this communicator. */
tn_status tn_comm_create(const tn_comm_desc *desc, tn_comm_t *comm);
/* Removes this rank's segment name (the mappings stay): call once every rank has mapped it. */
tn_status tn_comm_unlink(tn_comm_t comm);
/* Marks the communicator failed with a reason that its peers and later collectives report. */
void tn_comm_abort(tn_comm_t comm, const char *why);
/* Waits for the communicator's pending work to finish, then unmaps everything; peers that wait
 * for this rank afterwards fail at once. NULL is ignored. */
void tn_comm_destroy(tn_comm_t comm);
/* Over every host: rank = host * ranks per host + local rank, size = hosts * ranks per host. */
int32_t tn_comm_rank(tn_comm_t comm);
int32_t tn_comm_size(tn_comm_t comm);
/* Collectives that have run (the sequence number of the last one). */
uint64_t tn_comm_sequence(tn_comm_t comm);

/* What the communicator's launches have cost, since it was made: launched tasks run, and the
 * time they took on their streams (waiting for peers included), in nanoseconds. */
typedef struct tn_comm_stats {
    uint64_t launches;
    uint64_t operations; /* collectives and point-to-point operations in them */
    uint64_t bytes;      /* the operations' count times their element size */
    uint64_t busy_ns;
} tn_comm_stats;
void tn_comm_get_stats(tn_comm_t comm, tn_comm_stats *stats);

/* Enqueues `n` operations on `stream`, run as one task. Collectives run one after another;
 * point-to-point operations in one call progress together (so a ring of sends and receives does
 * not deadlock), as PyTorch's batch_isend_irecv needs. `work` (may be NULL) completes when they
 * have run, with their status. `name` names the work in errors (a string that outlives it).
 * While this thread records a stream capture (tn/capture.h), the launch is recorded with the
 * stream's other work and runs again at every replay: `work` must then be NULL (a completion
 * object completes once), and ordering it after the communicator's launches on other streams
 * is the caller's (a replay is the next collective of the group wherever it runs). */
tn_status tn_comm_launch(tn_comm_t comm, tn_stream_t stream, const char *name, const tn_coll *ops,
                         int32_t n, tn_comm_work_t work);

/* Runs one small collective at once on the calling thread, when that changes nothing but its
 * latency: a collective (not point-to-point, not all-to-all) of up to 64 KiB within one host,
 * no capture recording, `stream` (where it would be launched) and `after` (the stream it would
 * be ordered after) both idle, and every peer starting the same collective within ~20 us.
 * Returns OK when it ran (its outcome is `work`'s), NOT_READY when it must be launched with
 * tn_comm_launch instead, another status for operations that are not valid. */
tn_status tn_comm_run_now(tn_comm_t comm, tn_stream_t stream, tn_stream_t after, const char *name,
                          const tn_coll *op, tn_comm_work_t work);

/* Completion of launched work, shared by the launch and its owner (reference counted). */
tn_status tn_comm_work_create(tn_comm_work_t *work);
void tn_comm_work_retain(tn_comm_work_t work);
void tn_comm_work_release(tn_comm_work_t work);
/* OK once completed successfully, NOT_READY while pending, the work's failure otherwise. */
tn_status tn_comm_work_query(tn_comm_work_t work);
/* Makes `stream` wait for the work (the host does not wait); the work's failure becomes a
 * failure of the stream, raised at its next synchronisation. A recording capture refuses it (a
 * replay would wait for the completed work again). */
tn_status tn_comm_work_wait(tn_comm_work_t work, tn_stream_t stream);
/* The host waits for the work and returns its status. */
tn_status tn_comm_work_synchronize(tn_comm_work_t work);

/* The round-trip time of a 64-byte message between two threads through shared memory, as the
 * communicators' waits do it: the floor of a small collective's latency (bench/collectives.py).
 * Microseconds, averaged over `iterations`. */
double tn_comm_pingpong_us(int32_t iterations);

#ifdef __cplusplus
}
#endif
#endif
