/* Page-locked ("pinned") host memory. On the host driver it is ordinary memory, but it is
 * tracked so that copies know it may be used asynchronously, and a block freed while such a
 * copy is pending waits for it. */
#include <stdlib.h>

#include "internal.h"
#include "tn/capture.h"
#include "ptrmap.h"

#define MAX_USES 8

typedef struct pinned_block {
    uint64_t size;
    tn_event_t uses[MAX_USES]; /* events after the last pending copies */
    int32_t nuses;
} pinned_block;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static tn_ptrmap pinned;
static tn_host_stats stats;

tn_status tn_host_alloc(uint64_t size, void **ptr) {
    *ptr = NULL;
    tn_status st = tn_runtime_ensure();
    if (st != TN_STATUS_OK || size == 0) return st;
    const tn_device_interface *drv = tn_driver();
    void *p = NULL;
    if (drv->host_alloc)
        p = drv->host_alloc(drv->ctx, size);
    else if (posix_memalign(&p, 4096, (size_t)size) != 0)
        p = NULL;
    pinned_block *b = calloc(1, sizeof *b);
    if (!p || !b) {
        free(b);
        if (p) drv->host_free ? drv->host_free(drv->ctx, p) : free(p);
        return tn_error(TN_STATUS_OUT_OF_MEMORY, "could not allocate %llu bytes of pinned memory",
                        (unsigned long long)size);
    }
    b->size = size;
    pthread_mutex_lock(&lock);
    int err = tn_ptrmap_put(&pinned, p, b);
    if (!err) {
        tn_stat_add(&stats.blocks, 1);
        tn_stat_add(&stats.bytes, (int64_t)size);
        stats.num_host_alloc++;
    }
    pthread_mutex_unlock(&lock);
    if (err) {
        free(b);
        drv->host_free ? drv->host_free(drv->ctx, p) : free(p);
        return tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory to track a pinned block");
    }
    *ptr = p;
    return TN_STATUS_OK;
}

tn_status tn_host_free(void *ptr) {
    if (!ptr || tn_runtime_forked()) return TN_STATUS_OK;
    pthread_mutex_lock(&lock);
    pinned_block *b = tn_ptrmap_remove(&pinned, ptr);
    if (b) {
        tn_stat_add(&stats.blocks, -1);
        tn_stat_add(&stats.bytes, -(int64_t)b->size);
        stats.num_host_free++;
    }
    pthread_mutex_unlock(&lock);
    if (!b) return tn_error(TN_STATUS_INVALID_ARGUMENT, "%p is not pinned host memory", ptr);
    for (int32_t i = 0; i < b->nuses; i++) {
        tn_event_synchronize(b->uses[i]);
        tn_event_destroy(b->uses[i]);
    }
    free(b);
    const tn_device_interface *drv = tn_driver();
    if (drv->host_free)
        drv->host_free(drv->ctx, ptr);
    else
        free(ptr);
    return TN_STATUS_OK;
}

int32_t tn_host_is_pinned(const void *ptr) {
    if (!ptr || tn_runtime_forked()) return 0;
    pthread_mutex_lock(&lock);
    int32_t found = tn_ptrmap_get(&pinned, ptr) != NULL;
    pthread_mutex_unlock(&lock);
    return found;
}

tn_status tn_host_record_stream(void *ptr, tn_stream_t stream) {
    tn_capture_refuse("a copy between the device and pinned host memory");
    tn_event_t e;
    tn_status st = tn_event_create(TN_EVENT_FLAGS_DEFAULT, &e);
    if (st != TN_STATUS_OK) return st;
    st = tn_event_record(e, stream);
    pthread_mutex_lock(&lock);
    pinned_block *b = tn_ptrmap_get(&pinned, ptr);
    if (!b) {
        pthread_mutex_unlock(&lock);
        tn_event_destroy(e);
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "%p is not pinned host memory", ptr);
    }
    /* Keep the newest event per stream; with too many streams, the oldest must finish. */
    tn_event_t old = NULL;
    if (b->nuses == MAX_USES) {
        old = b->uses[0];
        for (int32_t i = 1; i < MAX_USES; i++) b->uses[i - 1] = b->uses[i];
        b->nuses--;
    }
    b->uses[b->nuses++] = e;
    pthread_mutex_unlock(&lock);
    if (old) {
        tn_event_synchronize(old);
        tn_event_destroy(old);
    }
    return st;
}

void tn_host_get_stats(tn_host_stats *out) {
    pthread_mutex_lock(&lock);
    *out = stats;
    pthread_mutex_unlock(&lock);
}

void tn_host_reset_stats(int32_t peaks) {
    pthread_mutex_lock(&lock);
    tn_stat *all[2] = {&stats.blocks, &stats.bytes};
    for (int k = 0; k < 2; k++) {
        if (peaks) {
            all[k]->peak = all[k]->current;
        } else {
            all[k]->allocated = 0;
            all[k]->freed = 0;
        }
    }
    if (!peaks) stats.num_host_alloc = stats.num_host_free = 0;
    pthread_mutex_unlock(&lock);
}
