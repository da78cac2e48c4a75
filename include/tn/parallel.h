/* Splitting a kernel across the CPU's threads.
 *
 * The runtime keeps one pool of worker threads (TN_NUM_THREADS, default: the online CPUs) for
 * the kernels that stream workers run. tn_parallel_run calls fn(ctx, ith, nth) for ith in
 * [0, nth), one call per thread, the calling thread included, and returns when all are done.
 * Small work (under TN_PARALLEL_GRAIN elements) and calls made while another stream holds the
 * pool run on the calling thread alone (nth = 1). */
#ifndef TN_PARALLEL_H
#define TN_PARALLEL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TN_PARALLEL_GRAIN 32768
#define TN_MAX_THREADS 256 /* the most threads the pool runs (nth never exceeds it) */

typedef void (*tn_parallel_fn)(void *ctx, int32_t ith, int32_t nth);

/* `work` is the number of elements (or comparable units) the call processes. */
void tn_parallel_run(tn_parallel_fn fn, void *ctx, int64_t work);
int32_t tn_parallel_threads(void);

#ifdef __cplusplus
}
#endif
#endif
