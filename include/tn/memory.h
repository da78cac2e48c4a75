/* Device memory: a caching allocator per logical device, and page-locked host memory.
 *
 * Each device has a capacity (NEURON_RT_DEVICE_MEMORY). Blocks are cached after free and reused
 * in stream order: a freed block goes back to the pool of the stream it was allocated on, and
 * is only handed to that stream again, unless tn_memory_record_stream() said other streams use
 * it, in which case it waits for their work first. When a request does not fit, the allocator
 * synchronises the device, returns its cached blocks and tries once more (an "alloc retry");
 * if it still does not fit the call fails with TN_STATUS_OUT_OF_MEMORY and tn_last_error()
 * gives the requested, capacity, allocated and reserved figures.
 *
 * Requests up to TN_SMALL_BLOCK bytes are rounded up to TN_BLOCK_ROUND and belong to the small
 * pool; larger ones to the large pool, rounded up to one of eight size classes per power of two
 * (at most 12.5% waste). A cached block is reused for a request of at least 4/5 of its size
 * (blocks are not split). */
#ifndef TN_MEMORY_H
#define TN_MEMORY_H

#include <stdint.h>

#include "tn/status.h"
#include "tn/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TN_BLOCK_ROUND 512
#define TN_SMALL_BLOCK (1u << 20)

/* size 0 gives *ptr == NULL and TN_STATUS_OK. */
tn_status tn_memory_alloc(int32_t device, tn_stream_t stream, uint64_t size, void **ptr);
/* Returns a block from tn_memory_alloc to its pool; NULL is ignored. */
tn_status tn_memory_free(void *ptr);
/* Marks the block holding `ptr` as used by `stream` (see above). */
tn_status tn_memory_record_stream(void *ptr, tn_stream_t stream);
/* Synchronises the device and returns every cached, unused block to the system. */
tn_status tn_memory_empty_cache(int32_t device);
/* Logical device owning the allocation that contains ptr, or -1. */
int32_t tn_memory_device_of(const void *ptr);

/* One statistic: current value, peak since reset, and running totals added and removed. */
typedef struct tn_stat {
    int64_t current;
    int64_t peak;
    int64_t allocated;
    int64_t freed;
} tn_stat;

typedef enum tn_pool {
    TN_POOL_ALL,
    TN_POOL_SMALL,
    TN_POOL_LARGE,
    TN_POOL_COUNT_
} tn_pool;

typedef struct tn_memory_stats {
    tn_stat allocation[TN_POOL_COUNT_];      /* blocks handed out */
    tn_stat segment[TN_POOL_COUNT_];         /* blocks obtained from the system */
    tn_stat active[TN_POOL_COUNT_];          /* blocks allocated or awaiting stream work */
    tn_stat allocated_bytes[TN_POOL_COUNT_];
    tn_stat reserved_bytes[TN_POOL_COUNT_];
    tn_stat active_bytes[TN_POOL_COUNT_];
    tn_stat requested_bytes[TN_POOL_COUNT_]; /* before rounding */
    int64_t num_alloc_retries;
    int64_t num_ooms;
    int64_t num_device_alloc;
    int64_t num_device_free;
    uint64_t capacity;
} tn_memory_stats;

tn_status tn_memory_get_stats(int32_t device, tn_memory_stats *stats);
tn_status tn_memory_reset_peak_stats(int32_t device);
tn_status tn_memory_reset_accumulated_stats(int32_t device);

/* Page-locked host memory ("pinned"), for asynchronous copies. A block freed while a
 * non-blocking copy still reads or writes it waits for that copy first. */
tn_status tn_host_alloc(uint64_t size, void **ptr);
tn_status tn_host_free(void *ptr);
/* Non-zero if ptr lies inside a live pinned block. */
int32_t tn_host_is_pinned(const void *ptr);
/* The pinned block holding ptr is in use by work enqueued so far on `stream`. */
tn_status tn_host_record_stream(void *ptr, tn_stream_t stream);

typedef struct tn_host_stats {
    tn_stat blocks;
    tn_stat bytes;
    int64_t num_host_alloc;
    int64_t num_host_free;
} tn_host_stats;

void tn_host_get_stats(tn_host_stats *stats);
/* peaks != 0: peaks to current; otherwise the running totals and counts to zero. */
void tn_host_reset_stats(int32_t peaks);

#ifdef __cplusplus
}
#endif
#endif
