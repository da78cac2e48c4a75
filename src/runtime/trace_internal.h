/* The runtime's side of the device trace (trace.c): the switch the stream workers read, and
 * the call that records one event. */
#ifndef TN_RUNTIME_TRACE_INTERNAL_H
#define TN_RUNTIME_TRACE_INTERNAL_H

#include <stdint.h>

#include "tn/stream.h"
#include "tn/trace.h"

extern int32_t tn_trace_on_;

static inline int tn_trace_on(void) { return __atomic_load_n(&tn_trace_on_, __ATOMIC_RELAXED) != 0; }

void tn_trace_record(const char *name, int32_t device, int32_t stream, int32_t depth, int64_t start_ns,
                     int64_t end_ns);

/* The stream whose task the calling thread runs (-1, -1 outside a task). */
void tn_trace_current_stream(int32_t *device, int32_t *stream);

/* Runs fn(arg) and records it as `op` on (device, stream) at `depth`. */
static inline tn_status tn_trace_call(const char *op, tn_task_fn fn, void *arg, int32_t device, int32_t stream,
                                      int32_t depth) {
    int64_t t0 = tn_trace_now_ns();
    tn_status st = fn(arg);
    tn_trace_record(op, device, stream, depth, t0, tn_trace_now_ns());
    return st;
}

#endif
