/* Streams and events.
 *
 * A stream is an in-order queue of work on one device, executed by a worker thread of the
 * runtime: a launch enqueues and returns at once. Each device has a default stream (index 0)
 * and a pool of TN_STREAM_POOL_SIZE streams per priority (low: 1..N, high: N+1..2N), so a
 * stream is named by (device, index) and never destroyed.
 *
 * A task returns a tn_status. The first failure is kept on its stream with the op's name and
 * returned by the next synchronisation of that stream (tn_stream_synchronize, an event wait on
 * the host, tn_device_synchronize), then cleared. Later work on the stream still runs.
 *
 * An event marks a point in a stream. Waiting for an event on another stream orders the two
 * streams without blocking the host. */
#ifndef TN_STREAM_H
#define TN_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "tn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TN_STREAM_POOL_SIZE 8
#define TN_STREAMS_PER_DEVICE (1 + 2 * TN_STREAM_POOL_SIZE)

typedef struct tn_stream *tn_stream_t;
typedef struct tn_event *tn_event_t;

/* A unit of work. `arg` points to the launch's own copy of the argument bytes. */
typedef tn_status (*tn_task_fn)(void *arg);

tn_status tn_stream_get(int32_t device, int32_t index, tn_stream_t *stream);
/* Next pool stream of a priority (0 = normal, negative = high), round-robin. */
tn_status tn_stream_from_pool(int32_t device, int32_t priority, tn_stream_t *stream);
int32_t tn_stream_device(tn_stream_t stream);
int32_t tn_stream_index(tn_stream_t stream);
int32_t tn_stream_priority(tn_stream_t stream);

/* The calling thread's current stream of a device (the default stream until set). */
tn_stream_t tn_stream_current(int32_t device);
tn_status tn_stream_set_current(tn_stream_t stream);

/* Enqueues fn(copy of arg[0..arg_size)). `op` names the work in error messages and must be a
 * string literal or otherwise outlive the task. In launch-blocking mode it waits and returns
 * the task's status. */
tn_status tn_stream_launch(tn_stream_t stream, const char *op, tn_task_fn fn, const void *arg,
                           size_t arg_size);

/* TN_STATUS_OK when all enqueued work has finished, TN_STATUS_NOT_READY otherwise. */
tn_status tn_stream_query(tn_stream_t stream);
tn_status tn_stream_synchronize(tn_stream_t stream);
tn_status tn_stream_wait_event(tn_stream_t stream, tn_event_t event);

typedef enum tn_event_flags {
    TN_EVENT_FLAGS_DEFAULT = 0,
    TN_EVENT_FLAGS_TIMING = 1 /* record a timestamp for tn_event_elapsed_ms */
} tn_event_flags;

tn_status tn_event_create(uint32_t flags, tn_event_t *event);
/* Safe while a record is still pending: the event lives until that work has run. */
void tn_event_destroy(tn_event_t event);
tn_status tn_event_record(tn_event_t event, tn_stream_t stream);
/* TN_STATUS_OK when the last record has completed (or none was made), else NOT_READY. */
tn_status tn_event_query(tn_event_t event);
tn_status tn_event_synchronize(tn_event_t event);
/* Milliseconds from start to end; both must have completed records with timing enabled. */
tn_status tn_event_elapsed_ms(tn_event_t start, tn_event_t end, float *ms);

#ifdef __cplusplus
}
#endif
#endif
