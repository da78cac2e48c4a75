/* The caching device allocator (see tn/memory.h for the rules it follows).
 *
 * One lock guards every device's pools and the pointer map. Blocks are never split; a free
 * block stays with the stream that allocated it, so reuse is ordered by that stream. A block
 * that other streams used (record_stream) waits in `pending` with one event per such stream
 * until their work has run.
 *
 * Every block size is one of the size classes round_size() produces, so free blocks sit in
 * one list per class (most recently freed first), with a bitmap of the non-empty classes: an
 * allocation finds the smallest fitting cached block in a few word scans, however many blocks
 * the cache holds.
 *
 * A capture's pool (tn/capture.h): while a thread records, its allocations on the recorded
 * stream first reuse a block the recording freed, else take a block as usual and add it to
 * the pool. A freed pool block counts as free in the statistics of allocations but stays
 * active and reserved, on the pool's list, until the capture is destroyed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tn/capture.h"
#include "ptrmap.h"

typedef struct tn_block {
    void *ptr;
    uint64_t size;      /* rounded; what the segment holds */
    uint64_t requested; /* as asked */
    tn_stream_t stream; /* allocating stream */
    int32_t device;
    tn_pool pool;
    int allocated;
    uint32_t use_mask; /* other streams (by index) recorded on this block */
    tn_event_t events[TN_STREAMS_PER_DEVICE];
    int32_t nevents;
    tn_capture_pool *owner; /* the capture pool holding the block, or NULL */
    struct tn_block *next;
} tn_block;

/* Size classes: small sizes in TN_BLOCK_ROUND steps up to TN_SMALL_BLOCK, then eight per
 * power of two up to 2^63. */
#define SMALL_CLASSES ((int32_t)(TN_SMALL_BLOCK / TN_BLOCK_ROUND))
#define SMALL_TOP 20 /* log2(TN_SMALL_BLOCK) */
#define CLASSES (SMALL_CLASSES + (64 - SMALL_TOP) * 8)
#define CLASS_WORDS ((CLASSES + 63) / 64)
_Static_assert(TN_SMALL_BLOCK == 1u << SMALL_TOP, "SMALL_TOP must match TN_SMALL_BLOCK");

struct tn_allocator {
    int32_t device;
    tn_block *free_list[CLASSES];
    uint64_t nonempty[CLASS_WORDS]; /* bit c: free_list[c] has blocks */
    tn_block *pending;
    tn_memory_stats stats;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static tn_ptrmap blocks; /* ptr -> tn_block, for every live block of every device */

struct tn_allocator *tn_allocator_create(int32_t device) {
    struct tn_allocator *a = calloc(1, sizeof *a);
    if (a) a->device = device;
    return a;
}

/* Counts n in the aggregate and in the block's pool. */
static void stat_add(tn_stat *s, tn_pool pool, int64_t n) {
    tn_stat_add(&s[TN_POOL_ALL], n);
    tn_stat_add(&s[pool], n);
}

static void publish(struct tn_allocator *a) {
    tn_usage_publish(a->device, (uint64_t)a->stats.allocated_bytes[TN_POOL_ALL].current,
                     (uint64_t)a->stats.reserved_bytes[TN_POOL_ALL].current);
}

/* The class of a size round_size() produced. */
static int32_t size_class(uint64_t size) {
    if (size <= TN_SMALL_BLOCK) return (int32_t)(size / TN_BLOCK_ROUND) - 1;
    int top = 63 - __builtin_clzll(size);
    return SMALL_CLASSES + (top - SMALL_TOP) * 8 + (int32_t)(size >> (top - 3)) - 8;
}

static uint64_t class_size(int32_t c) {
    if (c < SMALL_CLASSES) return (uint64_t)(c + 1) * TN_BLOCK_ROUND;
    int32_t top = SMALL_TOP + (c - SMALL_CLASSES) / 8;
    return (uint64_t)(8 + (c - SMALL_CLASSES) % 8) << (top - 3);
}

/* The first non-empty class at or after c, or -1. */
static int32_t next_class(const struct tn_allocator *a, int32_t c) {
    for (int32_t w = c / 64; w < CLASS_WORDS; w++) {
        uint64_t bits = a->nonempty[w];
        if (w == c / 64) bits &= ~0ull << (c % 64);
        if (bits) return w * 64 + __builtin_ctzll(bits);
    }
    return -1;
}

static void insert_free(struct tn_allocator *a, tn_block *b) {
    int32_t c = size_class(b->size);
    b->next = a->free_list[c];
    a->free_list[c] = b;
    a->nonempty[c / 64] |= 1ull << (c % 64);
}

static void unlink_free(struct tn_allocator *a, int32_t c, tn_block **p) {
    *p = (*p)->next;
    if (!a->free_list[c]) a->nonempty[c / 64] &= ~(1ull << (c % 64));
}

/* Moves pending blocks whose streams have finished with them to the free lists. */
static void process_pending(struct tn_allocator *a) {
    tn_block **p = &a->pending;
    while (*p) {
        tn_block *b = *p;
        int done = 1;
        for (int32_t i = 0; i < b->nevents && done; i++)
            done = tn_event_query(b->events[i]) == TN_STATUS_OK;
        if (!done) {
            p = &b->next;
            continue;
        }
        *p = b->next;
        for (int32_t i = 0; i < b->nevents; i++) tn_event_destroy(b->events[i]);
        b->nevents = 0;
        stat_add(a->stats.active, b->pool, -1);
        stat_add(a->stats.active_bytes, b->pool, -(int64_t)b->size);
        insert_free(a, b);
    }
}

/* Whether a free block of `have` bytes may serve a request of `size` (rounded): it wastes at
 * most a quarter, and small and large pools stay apart. */
static int reusable(uint64_t have, uint64_t size) {
    return have >= size && have * 4 <= size * 5 && (have <= TN_SMALL_BLOCK) == (size <= TN_SMALL_BLOCK);
}

/* The smallest cached block of `stream` that holds `size` without wasting over a quarter. */
static tn_block *take_cached(struct tn_allocator *a, tn_stream_t s, uint64_t size) {
    for (int32_t c = next_class(a, size_class(size)); c >= 0; c = next_class(a, c + 1)) {
        if (!reusable(class_size(c), size)) return NULL; /* every further class is larger still */
        for (tn_block **p = &a->free_list[c]; *p; p = &(*p)->next) {
            if ((*p)->stream != s) continue;
            tn_block *b = *p;
            unlink_free(a, c, p);
            return b;
        }
    }
    return NULL;
}

static void release_cached(struct tn_allocator *a) {
    const tn_device_interface *drv = tn_driver();
    int32_t core = tn_device_state_get(a->device)->physical_core;
    for (int32_t c = next_class(a, 0); c >= 0; c = next_class(a, c + 1)) {
        while (a->free_list[c]) {
            tn_block *b = a->free_list[c];
            unlink_free(a, c, &a->free_list[c]);
            tn_ptrmap_remove(&blocks, b->ptr);
            drv->mem_free(drv->ctx, core, b->ptr, b->size);
            stat_add(a->stats.segment, b->pool, -1);
            stat_add(a->stats.reserved_bytes, b->pool, -(int64_t)b->size);
            a->stats.num_device_free++;
            free(b);
        }
    }
}

static tn_block *new_segment(struct tn_allocator *a, tn_pool pool, uint64_t size) {
    uint64_t reserved = (uint64_t)a->stats.reserved_bytes[TN_POOL_ALL].current;
    tn_device_state *d = tn_device_state_get(a->device);
    if (reserved + size > d->capacity) return NULL;
    tn_block *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    const tn_device_interface *drv = tn_driver();
    b->ptr = drv->mem_alloc(drv->ctx, d->physical_core, size);
    if (!b->ptr || tn_ptrmap_put(&blocks, b->ptr, b) != 0) {
        if (b->ptr) drv->mem_free(drv->ctx, d->physical_core, b->ptr, size);
        free(b);
        return NULL;
    }
    b->size = size;
    b->pool = pool;
    b->device = a->device;
    stat_add(a->stats.segment, pool, 1);
    stat_add(a->stats.reserved_bytes, pool, (int64_t)size);
    a->stats.num_device_alloc++;
    return b;
}

static void fmt_bytes(char *out, size_t n, uint64_t v) {
    static const char *units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
    double x = (double)v;
    int u = 0;
    while (x >= 1024 && u < 4) x /= 1024, u++;
    if (u == 0)
        snprintf(out, n, "%llu bytes", (unsigned long long)v);
    else
        snprintf(out, n, "%.2f %s", x, units[u]);
}

static tn_status out_of_memory(struct tn_allocator *a, uint64_t requested) {
    a->stats.num_ooms++;
    uint64_t cap = tn_device_state_get(a->device)->capacity;
    uint64_t alloc = (uint64_t)a->stats.allocated_bytes[TN_POOL_ALL].current;
    uint64_t res = (uint64_t)a->stats.reserved_bytes[TN_POOL_ALL].current;
    char r[32], c[32], al[32], rs[32], fr[32];
    fmt_bytes(r, sizeof r, requested);
    fmt_bytes(c, sizeof c, cap);
    fmt_bytes(al, sizeof al, alloc);
    fmt_bytes(rs, sizeof rs, res);
    fmt_bytes(fr, sizeof fr, cap > res ? cap - res : 0);
    return tn_error(TN_STATUS_OUT_OF_MEMORY,
                    "Neuron out of memory. Tried to allocate %s on neuron:%d, which has a "
                    "total capacity of %s of which %s is free; %s is allocated by tensors and "
                    "%s is reserved by the caching allocator. Free tensors you no longer need, "
                    "call torch.neuron.empty_cache(), use smaller batches, or raise "
                    "NEURON_RT_DEVICE_MEMORY.",
                    r, (int)a->device, c, fr, al, rs);
}

/* Hands out b (already counted as active). */
static void allocated(struct tn_allocator *a, tn_block *b, tn_stream_t stream, uint64_t size) {
    b->stream = stream;
    b->allocated = 1;
    b->requested = size;
    b->use_mask = 0;
    stat_add(a->stats.allocation, b->pool, 1);
    stat_add(a->stats.allocated_bytes, b->pool, (int64_t)b->size);
    stat_add(a->stats.requested_bytes, b->pool, (int64_t)size);
    publish(a);
}

/* The smallest block the recording freed that holds `size` without wasting over a quarter. */
static tn_block *take_from_pool(tn_capture_pool *c, uint64_t size) {
    tn_block **best = NULL;
    for (tn_block **p = &c->free; *p; p = &(*p)->next) {
        if (reusable((*p)->size, size) && (!best || (*p)->size < (*best)->size)) best = p;
    }
    if (!best) return NULL;
    tn_block *b = *best;
    *best = b->next;
    return b;
}

void tn_memory_release_pool(tn_capture_pool *c) {
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < c->count; i++) {
        tn_block *b = c->blocks[i];
        if (b->owner != c) continue; /* left the pool (record_stream) */
        b->owner = NULL;
        if (b->allocated) continue; /* goes back to the cache when freed */
        struct tn_allocator *a = tn_device_state_get(b->device)->allocator;
        stat_add(a->stats.active, b->pool, -1);
        stat_add(a->stats.active_bytes, b->pool, -(int64_t)b->size);
        insert_free(a, b);
    }
    pthread_mutex_unlock(&lock);
    free(c->blocks);
    c->blocks = NULL;
    c->count = c->capacity = 0;
    c->free = NULL;
}

uint64_t tn_memory_pool_block_bytes(const tn_capture_pool *c, const void *ptr) {
    pthread_mutex_lock(&lock);
    tn_block *b = tn_ptrmap_get(&blocks, ptr);
    uint64_t bytes = b && b->owner == c ? b->size : 0;
    pthread_mutex_unlock(&lock);
    return bytes;
}

size_t tn_memory_pool_blocks(const tn_capture_pool *c, uintptr_t *start, uint64_t *bytes, size_t max) {
    size_t n = 0;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < c->count; i++) {
        const tn_block *b = c->blocks[i];
        if (b->owner != c) continue;
        if (n < max) start[n] = (uintptr_t)b->ptr, bytes[n] = b->size;
        n++;
    }
    pthread_mutex_unlock(&lock);
    return n;
}

/* Small requests round to TN_BLOCK_ROUND; large ones to one of eight size classes per power
 * of two (at most 12.5% waste), so that slightly different sizes share cached blocks. */
static uint64_t round_size(uint64_t size) {
    uint64_t r = (size + TN_BLOCK_ROUND - 1) / TN_BLOCK_ROUND * TN_BLOCK_ROUND;
    if (r <= TN_SMALL_BLOCK) return r;
    int top = 63 - __builtin_clzll(r);
    uint64_t granule = 1ull << (top - 3);
    return (r + granule - 1) / granule * granule;
}

tn_status tn_memory_alloc(int32_t device, tn_stream_t stream, uint64_t size, void **ptr) {
    *ptr = NULL;
    tn_status st = tn_device_check_bound(device);
    if (st != TN_STATUS_OK || size == 0) return st;
    if (!stream || tn_stream_device(stream) != device)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "allocation stream is not on neuron:%d",
                        (int)device);
    struct tn_allocator *a = tn_device_state_get(device)->allocator;
    if (size > UINT64_MAX - TN_BLOCK_ROUND) return out_of_memory(a, size);
    uint64_t rounded = round_size(size);
    tn_pool pool = rounded <= TN_SMALL_BLOCK ? TN_POOL_SMALL : TN_POOL_LARGE;

    tn_capture_pool *capture = tn_capture_pool_recording(device);
    if (capture && capture->stream != stream) {
        tn_capture_refuse("an allocation on another stream than the one recorded");
        capture = NULL;
    }

    pthread_mutex_lock(&lock);
    process_pending(a);
    if (capture) {
        tn_block *b = take_from_pool(capture, rounded);
        if (b) {
            allocated(a, b, stream, size);
            *ptr = b->ptr;
            pthread_mutex_unlock(&lock);
            return TN_STATUS_OK;
        }
        if (tn_grow_array((void **)&capture->blocks, &capture->capacity, capture->count + 1,
                          sizeof *capture->blocks) != 0) {
            pthread_mutex_unlock(&lock);
            return tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory to track a capture's pool");
        }
    }
    tn_block *b = take_cached(a, stream, rounded);
    if (!b) b = new_segment(a, pool, rounded);
    if (!b) {
        /* Wait for all streams so pending blocks come free, return the cache, try again. */
        a->stats.num_alloc_retries++;
        tn_capture_refuse("an allocation that had to wait for the device");
        pthread_mutex_unlock(&lock);
        tn_device_wait_idle(device);
        pthread_mutex_lock(&lock);
        process_pending(a);
        release_cached(a);
        b = new_segment(a, pool, rounded);
    }
    if (!b) {
        st = out_of_memory(a, rounded);
        pthread_mutex_unlock(&lock);
        return st;
    }
    stat_add(a->stats.active, pool, 1);
    stat_add(a->stats.active_bytes, pool, (int64_t)b->size);
    allocated(a, b, stream, size);
    if (capture) {
        b->owner = capture;
        capture->blocks[capture->count++] = b;
    }
    *ptr = b->ptr;
    pthread_mutex_unlock(&lock);
    return TN_STATUS_OK;
}

tn_status tn_memory_free(void *ptr) {
    if (!ptr) return TN_STATUS_OK;
    /* In a forked child the runtime's threads are gone and the lock may be held by one of
     * them: leak the block rather than risk a deadlock. */
    if (tn_runtime_forked()) return TN_STATUS_OK;
    pthread_mutex_lock(&lock);
    tn_block *b = tn_ptrmap_get(&blocks, ptr);
    if (!b || !b->allocated) {
        pthread_mutex_unlock(&lock);
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "%p is not a live device allocation", ptr);
    }
    struct tn_allocator *a = tn_device_state_get(b->device)->allocator;
    b->allocated = 0;
    stat_add(a->stats.allocation, b->pool, -1);
    stat_add(a->stats.allocated_bytes, b->pool, -(int64_t)b->size);
    stat_add(a->stats.requested_bytes, b->pool, -(int64_t)b->requested);
    if (b->owner && b->use_mask) b->owner = NULL; /* used by other streams: leaves the pool */
    if (b->owner) {
        b->next = b->owner->free;
        b->owner->free = b;
        publish(a);
        pthread_mutex_unlock(&lock);
        return TN_STATUS_OK;
    }
    for (int32_t i = 0; i < TN_STREAMS_PER_DEVICE; i++) {
        tn_stream_t s;
        tn_event_t e;
        if (!(b->use_mask & (1u << i))) continue;
        if (tn_stream_get(b->device, i, &s) != TN_STATUS_OK) continue;
        if (tn_event_create(TN_EVENT_FLAGS_DEFAULT, &e) != TN_STATUS_OK) continue;
        tn_event_record(e, s);
        b->events[b->nevents++] = e;
    }
    if (b->nevents) {
        b->next = a->pending;
        a->pending = b;
    } else {
        stat_add(a->stats.active, b->pool, -1);
        stat_add(a->stats.active_bytes, b->pool, -(int64_t)b->size);
        insert_free(a, b);
    }
    publish(a);
    pthread_mutex_unlock(&lock);
    return TN_STATUS_OK;
}

tn_status tn_memory_record_stream(void *ptr, tn_stream_t stream) {
    pthread_mutex_lock(&lock);
    tn_block *b = tn_ptrmap_get(&blocks, ptr);
    tn_status st = TN_STATUS_OK;
    if (!b || !b->allocated)
        st = tn_error(TN_STATUS_INVALID_ARGUMENT, "%p is not a live device allocation", ptr);
    else if (tn_stream_device(stream) != b->device)
        st = tn_error(TN_STATUS_INVALID_ARGUMENT,
                      "record_stream: the stream is on neuron:%d but the tensor on neuron:%d",
                      (int)tn_stream_device(stream), (int)b->device);
    else if (stream != b->stream) {
        b->use_mask |= 1u << tn_stream_index(stream);
        tn_capture_refuse("record_stream (a tensor used by another stream)");
    }
    pthread_mutex_unlock(&lock);
    return st;
}

tn_status tn_memory_empty_cache(int32_t device) {
    tn_status st = tn_device_check(device);
    if (st != TN_STATUS_OK) return st;
    tn_device_wait_idle(device);
    struct tn_allocator *a = tn_device_state_get(device)->allocator;
    pthread_mutex_lock(&lock);
    process_pending(a);
    release_cached(a);
    publish(a);
    pthread_mutex_unlock(&lock);
    return TN_STATUS_OK;
}

int32_t tn_memory_device_of(const void *ptr) {
    if (tn_runtime_forked()) return -1;
    pthread_mutex_lock(&lock);
    tn_block *b = tn_ptrmap_get(&blocks, ptr);
    int32_t device = b && b->allocated ? b->device : -1;
    pthread_mutex_unlock(&lock);
    return device;
}

tn_status tn_memory_get_stats(int32_t device, tn_memory_stats *stats) {
    tn_status st = tn_device_check(device);
    if (st != TN_STATUS_OK) return st;
    struct tn_allocator *a = tn_device_state_get(device)->allocator;
    pthread_mutex_lock(&lock);
    *stats = a->stats;
    stats->capacity = tn_device_state_get(device)->capacity;
    pthread_mutex_unlock(&lock);
    return TN_STATUS_OK;
}

static void reset_stats(int32_t device, int peaks) {
    struct tn_allocator *a = tn_device_state_get(device)->allocator;
    tn_stat *all[] = {a->stats.allocation,      a->stats.segment,        a->stats.active,
                      a->stats.allocated_bytes, a->stats.reserved_bytes, a->stats.active_bytes,
                      a->stats.requested_bytes};
    pthread_mutex_lock(&lock);
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) {
        for (int p = 0; p < TN_POOL_COUNT_; p++) {
            if (peaks) {
                all[k][p].peak = all[k][p].current;
            } else {
                all[k][p].allocated = 0;
                all[k][p].freed = 0;
            }
        }
    }
    if (!peaks) {
        a->stats.num_alloc_retries = 0;
        a->stats.num_ooms = 0;
        a->stats.num_device_alloc = 0;
        a->stats.num_device_free = 0;
    }
    pthread_mutex_unlock(&lock);
}

tn_status tn_memory_reset_peak_stats(int32_t device) {
    tn_status st = tn_device_check(device);
    if (st == TN_STATUS_OK) reset_stats(device, 1);
    return st;
}

tn_status tn_memory_reset_accumulated_stats(int32_t device) {
    tn_status st = tn_device_check(device);
    if (st == TN_STATUS_OK) reset_stats(device, 0);
    return st;
}
