/* Stream capture: record the launches a piece of host code makes, then replay them as one task.
 *
 * A compiled graph with static shapes launches the same kernels with the same arguments every
 * call; only the host time spent deciding them differs. tn_capture_begin() makes the calling
 * thread record every launch it makes on `stream` (the work still runs as usual), and
 * allocations it makes on that stream's device come from the capture's own memory pool: a
 * block freed while recording is reused by a later allocation of the same recording, and no
 * block of the pool goes back to the allocator's cache until tn_capture_destroy(). So the
 * addresses baked into the recorded launches stay valid, and tn_capture_replay() enqueues one
 * task that runs the recorded launches again, in order, on the same memory.
 *
 * Work that cannot be replayed makes the capture unreplayable (tn_capture_replayable() == 0,
 * tn_capture_reason() says what it was): a synchronisation or event on the recording thread
 * (the host read something the device computed), a launch on another stream, a copy to or from
 * host memory, random numbers (a replay would repeat them), an optimizer step, record_stream.
 *
 * A replay reads and writes the addresses the recording saw: the caller keeps the inputs the
 * recording read at those addresses (or copies new values into them) and reads results out of
 * the pool before the next replay overwrites them. */
#ifndef TN_CAPTURE_H
#define TN_CAPTURE_H

#include <stdint.h>

#include "tn/status.h"
#include "tn/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tn_capture *tn_capture_t;

/* Starts recording the calling thread's launches on `stream`. One capture per thread at a
 * time. */
tn_status tn_capture_begin(tn_stream_t stream, tn_capture_t *capture);
/* Stops recording (on the thread that began it). */
tn_status tn_capture_end(tn_capture_t capture);

/* Non-zero if everything recorded can be replayed. */
int32_t tn_capture_replayable(tn_capture_t capture);
/* Why it cannot be replayed ("" when it can). */
const char *tn_capture_reason(tn_capture_t capture);
/* Launches recorded. */
int64_t tn_capture_launches(tn_capture_t capture);
/* Non-zero if ptr is the start of a block of the capture's memory pool. */
int32_t tn_capture_owns(tn_capture_t capture, const void *ptr);
/* Non-zero while the calling thread is recording (launch paths use it to avoid work that
 * would not replay, such as caching derived data outside the pool). */
int32_t tn_capture_active(void);
/* Marks the recording of the calling thread as not replayable, with the reason; no-op when
 * the thread is not recording. `why` is copied. */
void tn_capture_refuse(const char *why);

/* Enqueues one task on the capture's stream that runs every recorded launch in order. A
 * failing launch stops the replay; its error is kept on the stream like a kernel's. */
tn_status tn_capture_replay(tn_capture_t capture);

/* Waits for pending replays, then frees the recording and returns the pool's blocks to the
 * allocator's cache (blocks still allocated are returned when freed). NULL is ignored. */
void tn_capture_destroy(tn_capture_t capture);

#ifdef __cplusplus
}
#endif
#endif
