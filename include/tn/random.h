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

/* Integers uniform in [from, from + range) (range >= 1) into an integer or float dst. */
tn_status tn_random_int_async(tn_stream_t stream, const tn_tensor *dst, uint64_t seed,
                              uint64_t offset, int64_t from, uint64_t range);

/* Draws num_samples category indices per row of `probs` (rows x n, any float dtype, non-
 * negative weights that need not sum to 1) into `out` (rows x num_samples, int64). Without
 * replacement a drawn category's weight drops to zero. A row with a negative, infinite or NaN
 * weight, or no positive weight left, fails with TN_STATUS_INVALID_ARGUMENT at the next
 * synchronisation ("invalid multinomial distribution"). */
tn_status tn_random_multinomial_async(tn_stream_t stream, const tn_tensor *out,
                                      const tn_tensor *probs, int32_t replacement, uint64_t seed,
                                      uint64_t offset);

/* dst[i] = 1 with probability probs[i] (a view of dst's shape, any float dtype) or, with
 * probs NULL, p; dst any dtype. A probability outside [0, 1] fails with
 * TN_STATUS_INVALID_ARGUMENT at the next synchronisation. */
tn_status tn_random_bernoulli_async(tn_stream_t stream, const tn_tensor *dst, const tn_tensor *probs,
                                    double p, uint64_t seed, uint64_t offset);
/* Dropout in one pass: mask[i] = keep (probability 1 - p), out[i] = keep ? in[i] / (1 - p) : 0.
 * out and in share a float dtype, mask is bool; all three views share a shape. */
tn_status tn_dropout_async(tn_stream_t stream, const tn_tensor *out, const tn_tensor *mask,
                           const tn_tensor *in, double p, uint64_t seed, uint64_t offset);
#ifdef __cplusplus
}
#endif
#endif
