/* Random numbers on the device: counter-based Philox-4x32-10.
 *
 * A draw is fully determined by (seed, offset, element index), so a generator only needs to
 * hand out (seed, offset) pairs on the host and the work itself can run later on a stream, in
 * any number of threads. Each launch consumes one offset; element i of the launch uses counter
 * (i / 4, offset) and lane i % 4. */
#ifndef TN_RANDOM_H
#define TN_RANDOM_H

#include <stdint.h>

#include "tn/status.h"
#include "tn/stream.h"
#include "tn/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Floating dst only: uniform in [from, to). */
tn_status tn_random_uniform_async(tn_stream_t stream, const tn_tensor *dst, uint64_t seed,
                                  uint64_t offset, double from, double to);
/* Floating dst only: normal with the given mean and standard deviation. */
tn_status tn_random_normal_async(tn_stream_t stream, const tn_tensor *dst, uint64_t seed,
                                 uint64_t offset, double mean, double std);

#ifdef __cplusplus
}
#endif
#endif
