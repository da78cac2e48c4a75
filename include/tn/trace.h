/* Device trace: while it is on, every stream task records its name, its stream and when it ran
 * on the device's clock (CLOCK_MONOTONIC, nanoseconds), and so does each launch a replayed
 * capture runs (depth 1, inside the replay's own event). Off, a task pays one relaxed load.
 * The profiler's device rows and device-time columns are built from these events. */
#ifndef TN_TRACE_H
#define TN_TRACE_H

#include <stdint.h>

#include "tn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TN_TRACE_NAME_BYTES 48

typedef struct tn_trace_event {
    char name[TN_TRACE_NAME_BYTES]; /* the launch's op name, cut to fit */
    int32_t device;
    int32_t stream;  /* index on the device (0: the default stream) */
    int32_t depth;   /* 0: a stream task; 1: a launch inside a replay */
    int32_t pad_;
    int64_t start_ns;
    int64_t end_ns;
} tn_trace_event;

/* Starts recording (keeping at most `capacity` events; later ones are counted as dropped)
 * or, if on, keeps recording. Events already taken are gone; untaken ones stay. */
tn_status tn_trace_start(int64_t capacity);
/* Stops recording; recorded events stay until taken. */
void tn_trace_stop(void);
int32_t tn_trace_enabled(void);
/* Moves up to `max` of the oldest recorded events into `out`; returns how many. */
int64_t tn_trace_take(tn_trace_event *out, int64_t max);
/* Events recorded and not taken; events dropped since the last start. */
int64_t tn_trace_pending(void);
int64_t tn_trace_dropped(void);
/* The device clock, in nanoseconds. */
int64_t tn_trace_now_ns(void);

#ifdef __cplusplus
}
#endif
#endif
