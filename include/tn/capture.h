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
 * A replay reads and writes the addresses the recording saw, except in relocated ranges:
 * tn_capture_relocate() names ranges of memory (the graph's inputs, its outputs' pool blocks),
 * and each replay gives new addresses for them (tn_capture_replay_at), so a graph's inputs may
 * come from anywhere and its outputs go to fresh memory on every call. Relocation finds every
 * aligned pointer-sized word of the recorded argument bytes that points into a range: task
 * arguments are flat (a launch copies them whole), and every device address a task uses is
 * such a word. Without relocation, the caller keeps the inputs where the recording read them
 * and reads results out of the pool before the next replay overwrites them. */
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
/* The size of the capture pool's block that starts at ptr (at least what was asked for it),
 * 0 if no block of the pool starts there. */
uint64_t tn_capture_block_bytes(tn_capture_t capture, const void *ptr);
/* Non-zero while the calling thread is recording (launch paths use it to avoid work that
 * would not replay, such as caching derived data outside the pool). */
int32_t tn_capture_active(void);
/* Pauses the calling thread's recording: launches and allocations until tn_capture_resume are
 * not part of it (work done once for every replay, such as packing a weight the recorded
 * launches then read). Returns the paused capture, NULL when the thread is not recording. */
tn_capture_t tn_capture_suspend(void);
/* Resumes a capture tn_capture_suspend paused (no-op for NULL). */
void tn_capture_resume(tn_capture_t capture);
/* Marks the recording of the calling thread as not replayable, with the reason; no-op when
 * the thread is not recording. `why` is copied. */
void tn_capture_refuse(const char *why);

/* Enqueues one task on the capture's stream that runs every recorded launch in order. A
 * failing launch stops the replay; its error is kept on the stream like a kernel's. A
 * relocated capture needs tn_capture_replay_at. */
tn_status tn_capture_replay(tn_capture_t capture);

/* After tn_capture_end: the `count` ranges [start[i], start[i] + bytes[i]) (disjoint) move on
 * every replay. Every recorded argument word pointing into range i, `d` bytes past its start,
 * becomes start'[i] + d in a replay given start'. `words` (may be NULL) receives how many
 * words that is. A second call replaces the first. */
tn_status tn_capture_relocate(tn_capture_t capture, int32_t count, const uintptr_t *start,
                              const uint64_t *bytes, int64_t *words);
/* tn_capture_replay with the relocated ranges at start[0 .. count) (count as relocated). The
 * memory there must hold what the recording's ranges held, at the same offsets, until the
 * replay has run (stream order). */
tn_status tn_capture_replay_at(tn_capture_t capture, int32_t count, const uintptr_t *start);

/* Plans: a relocated capture saved as bytes that another process running the same build can
 * load and replay without recording (capture_plan.c). Every address in the recorded arguments
 * is named by what it points into: a relocated range (given per replay, as above), a block of
 * the capture's pool (the graph's intermediates: an offset into one allocation the loaded
 * plan makes), or the code or static data of a loaded object (task and kernel functions,
 * tables: the object's GNU build ID and an offset). A word pointing into any other mapped
 * memory cannot be named, and saving fails (TN_STATUS_UNSUPPORTED, naming the launch).
 *
 * tn_capture_save: *bytes (free() it) and *size receive the plan of a relocated capture.
 * tn_capture_load: a capture that replays on `stream` (tn_capture_replay_at, with as many
 * ranges as the saved one had). Fails, changing nothing, on bytes that are not an intact plan
 * or that name an object not loaded in this process (another build of the runtime or of a
 * generated kernel): TN_STATUS_UNSUPPORTED, with the reason in tn_last_error(). */
tn_status tn_capture_save(tn_capture_t capture, void **bytes, uint64_t *size);
tn_status tn_capture_load(tn_stream_t stream, const void *bytes, uint64_t size, tn_capture_t *capture);

/* Waits for pending replays, then frees the recording and returns the pool's blocks to the
 * allocator's cache (blocks still allocated are returned when freed). NULL is ignored. */
void tn_capture_destroy(tn_capture_t capture);

#ifdef __cplusplus
}
#endif
#endif
