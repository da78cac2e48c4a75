/* Device trace (see tn/trace.h): one array of events behind a mutex, appended to by the
 * stream workers (and by host threads running a task inline on an idle stream). A task takes
 * the clock twice and the lock once, only while the trace is on. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "trace_internal.h"

int32_t tn_trace_on_;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static tn_trace_event *events;
static int64_t capacity, count, first, dropped;

int64_t tn_trace_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

tn_status tn_trace_start(int64_t want) {
    if (want <= 0) return tn_error(TN_STATUS_INVALID_ARGUMENT, "trace capacity must be positive, got %lld", (long long)want);
    pthread_mutex_lock(&lock);
    tn_status st = TN_STATUS_OK;
    if (want != capacity) {
        /* keep the untaken events, oldest first */
        int64_t keep = count - first < want ? count - first : want;
        tn_trace_event *grown = malloc((size_t)want * sizeof *grown);
        if (!grown) {
            st = tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory for a trace of %lld events", (long long)want);
        } else {
            if (keep) memcpy(grown, events + first, (size_t)keep * sizeof *grown);
            free(events);
            events = grown;
            capacity = want;
            count = keep;
            first = 0;
        }
    }
    if (st == TN_STATUS_OK) {
        dropped = 0;
        __atomic_store_n(&tn_trace_on_, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&lock);
    return st;
}

void tn_trace_stop(void) { __atomic_store_n(&tn_trace_on_, 0, __ATOMIC_RELEASE); }

int32_t tn_trace_enabled(void) { return __atomic_load_n(&tn_trace_on_, __ATOMIC_ACQUIRE); }

void tn_trace_record(const char *name, int32_t device, int32_t stream, int32_t depth, int64_t start_ns,
                     int64_t end_ns) {
    pthread_mutex_lock(&lock);
    if (count == capacity && first > 0) { /* reuse the room of taken events */
        memmove(events, events + first, (size_t)(count - first) * sizeof *events);
        count -= first;
        first = 0;
    }
    if (count < capacity) {
        tn_trace_event *e = &events[count++];
        strncpy(e->name, name ? name : "?", TN_TRACE_NAME_BYTES - 1);
        e->name[TN_TRACE_NAME_BYTES - 1] = 0;
        e->device = device;
        e->stream = stream;
        e->depth = depth;
        e->pad_ = 0;
        e->start_ns = start_ns;
        e->end_ns = end_ns;
    } else {
        dropped++;
    }
    pthread_mutex_unlock(&lock);
}

int64_t tn_trace_take(tn_trace_event *out, int64_t max) {
    pthread_mutex_lock(&lock);
    int64_t n = count - first < max ? count - first : max;
    if (n > 0) memcpy(out, events + first, (size_t)n * sizeof *out);
    first += n > 0 ? n : 0;
    if (first == count) first = count = 0;
    pthread_mutex_unlock(&lock);
    return n > 0 ? n : 0;
}

int64_t tn_trace_pending(void) {
    pthread_mutex_lock(&lock);
    int64_t n = count - first;
    pthread_mutex_unlock(&lock);
    return n;
}

int64_t tn_trace_dropped(void) {
    pthread_mutex_lock(&lock);
    int64_t n = dropped;
    pthread_mutex_unlock(&lock);
    return n;
}
