/* Kernels: the work that runs on a stream, callable directly for tests.
 *
 * Every kernel takes views plus a thread slice: of the outermost work it does part `ith` of
 * `nth` (0 <= ith < nth), so a caller may split it across threads. Kernels never allocate,
 * lock or fail on valid input; callers validate shapes and dtypes. */
#ifndef TN_KERNELS_H
#define TN_KERNELS_H

#include <stdint.h>

#include "tn/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dst = src converted to dst's dtype; same sizes, any strides. */
void tn_kernel_copy(const tn_tensor *dst, const tn_tensor *src, int32_t ith, int32_t nth);
void tn_kernel_fill(const tn_tensor *dst, const tn_scalar *value, int32_t ith, int32_t nth);

/* Copies, fills and elementwise ops whose output has at least this many bytes write it with
 * non-temporal stores, which bypass the cache (default: 3/4 of the last-level cache). Setting
 * a negative value restores the default; tests set small values to reach that path. */
int64_t tn_nontemporal_min_bytes(void);
void tn_set_nontemporal_min_bytes(int64_t bytes);

/* Philox-4x32 with 10 rounds: out = philox(counter, key). */
void tn_philox4x32_10(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]);
void tn_kernel_uniform(const tn_tensor *dst, uint64_t seed, uint64_t offset, double from,
                       double to, int32_t ith, int32_t nth);
void tn_kernel_normal(const tn_tensor *dst, uint64_t seed, uint64_t offset, double mean,
                      double std, int32_t ith, int32_t nth);

void tn_kernel_random_int(const tn_tensor *dst, uint64_t seed, uint64_t offset, int64_t from,
                          uint64_t range, int32_t ith, int32_t nth);

/* One thread's rows of a multinomial draw (see tn/random.h); `weights` is scratch for a row
 * (n doubles). Returns non-zero if a row was not a valid distribution. */
int tn_kernel_multinomial(const tn_tensor *out, const tn_tensor *probs, int32_t replacement,
                          uint64_t seed, uint64_t offset, double *weights, int32_t ith, int32_t nth);

/* One thread's part of a bernoulli draw / a dropout (see tn/random.h). tn_kernel_bernoulli
 * returns non-zero if a probability was outside [0, 1]. */
int tn_kernel_bernoulli(const tn_tensor *dst, const tn_tensor *probs, double p, uint64_t seed,
                        uint64_t offset, int32_t ith, int32_t nth);
void tn_kernel_dropout(const tn_tensor *out, const tn_tensor *mask, const tn_tensor *in, double p,
                       uint64_t seed, uint64_t offset, int32_t ith, int32_t nth);

/* Conversions used by the kernels, exposed for tests. */
float tn_f16_to_f32(uint16_t h);
uint16_t tn_f32_to_f16(float f);
float tn_bf16_to_f32(uint16_t b);
uint16_t tn_f32_to_bf16(float f);

#ifdef __cplusplus
}
#endif
#endif
