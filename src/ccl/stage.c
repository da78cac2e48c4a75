/* Staging: writes into this rank's shared memory that a peer on another core reads next.
 *
 * Two ways to write, and the communicator learns which is faster where it runs. A peer's core
 * may share a cache with the writer's, or sit on another chiplet (CCD) of the host, and which
 * one it is changes as the host moves virtual CPUs around (the processes cannot see it). Seen
 * on a 2-vCPU AMD EPYC VM, a 16 MiB transfer through 4 MiB slots took 0.8-1.0 ms written with
 * memcpy when the cores shared a cache and 4-7 ms when they did not (reading lines that are
 * dirty in another chiplet's cache is slow), and 1.1-1.4 ms in either placement written with
 * non-temporal (streaming) stores, which send the data to memory instead. So each large
 * collective (from TN_COMM_LEARN_BYTES) is timed per byte under the way it used, the faster
 * way on average is kept, and the other one is tried again now and then, since the placement
 * may change. Small writes always stay in the cache: there latency is what counts. */
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || defined(_M_X64)
#include <emmintrin.h>
#define TN_HAVE_STREAM 1
#endif

#include "ccl_internal.h"

#define RETRY_EVERY 16 /* large collectives between two tries of the slower way */

int tn_ccl_stage_choose(tn_comm_t c, uint64_t bytes) {
#ifdef TN_HAVE_STREAM
    if (bytes < TN_COMM_LEARN_BYTES) return c->stage_streaming;
    uint32_t k = ++c->stage_runs;
    int way;
    if (c->stage_cost[0] == 0.0) way = 0;
    else if (c->stage_cost[1] == 0.0) way = 1;
    else way = c->stage_cost[1] < c->stage_cost[0];
    if (k % RETRY_EVERY == 0) way = !way;
    c->stage_streaming = way;
    return way;
#else
    (void)bytes;
    return 0;
#endif
}

void tn_ccl_stage_learn(tn_comm_t c, int way, uint64_t bytes, int64_t ns) {
    if (bytes < TN_COMM_LEARN_BYTES || ns <= 0) return;
    double per_byte = (double)ns / (double)bytes, *cost = &c->stage_cost[way];
    *cost = *cost == 0.0 ? per_byte : 0.7 * *cost + 0.3 * per_byte;
}

void tn_ccl_stage(const tn_comm_t c, void *dst, const void *src, uint64_t bytes) {
    if (!bytes || dst == src) return;
#ifdef TN_HAVE_STREAM
    if (bytes >= TN_COMM_STREAM_BYTES && __atomic_load_n(&c->stage_streaming, __ATOMIC_RELAXED)) {
        unsigned char *d = dst;
        const unsigned char *s = src;
        size_t head = (16 - ((uintptr_t)d & 15)) & 15;
        memcpy(d, s, head);
        d += head, s += head, bytes -= head;
        size_t body = bytes & ~(uint64_t)63;
        for (size_t i = 0; i < body; i += 64) {
            __m128i v0 = _mm_loadu_si128((const __m128i *)(s + i));
            __m128i v1 = _mm_loadu_si128((const __m128i *)(s + i + 16));
            __m128i v2 = _mm_loadu_si128((const __m128i *)(s + i + 32));
            __m128i v3 = _mm_loadu_si128((const __m128i *)(s + i + 48));
            _mm_stream_si128((__m128i *)(d + i), v0);
            _mm_stream_si128((__m128i *)(d + i + 16), v1);
            _mm_stream_si128((__m128i *)(d + i + 32), v2);
            _mm_stream_si128((__m128i *)(d + i + 48), v3);
        }
        memcpy(d + body, s + body, bytes - body);
        _mm_sfence(); /* the stores are visible before the step that publishes them */
        return;
    }
#else
    (void)c;
#endif
    memmove(dst, src, bytes);
}
