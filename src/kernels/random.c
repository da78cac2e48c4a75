/* Philox-4x32-10 and the uniform / normal kernels built on it (see tn/random.h). */
#include <math.h>

#include "elem.h"
#include "strided.h"
#include "tn/kernels.h"

void tn_philox4x32_10(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]) {
    uint32_t c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* Four uniform draws in (0, 1] for block `blk`, 24 bits for float dtypes, 32 for double. */
static void block_uniforms(uint64_t seed, uint64_t offset, int64_t blk, double u[4]) {
    uint32_t ctr[4] = {(uint32_t)blk, (uint32_t)((uint64_t)blk >> 32), (uint32_t)offset,
                       (uint32_t)(offset >> 32)};
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    uint32_t r[4];
    tn_philox4x32_10(ctr, key, r);
    for (int k = 0; k < 4; k++) u[k] = ((double)r[k] + 1.0) * (1.0 / 4294967296.0);
}

/* Value of element `i` (in logical order) of a draw. */
static double draw(uint64_t seed, uint64_t offset, int64_t i, int normal, double a, double b) {
    double u[4];
    block_uniforms(seed, offset, i / 4, u);
    int lane = (int)(i % 4);
    if (!normal) return a + (b - a) * (1.0 - u[lane]); /* [a, b) */
    /* Box-Muller on lane pairs (0,1) and (2,3). */
    int pair = lane & 2;
    double radius = sqrt(-2.0 * log(u[pair]));
    double angle = 6.283185307179586 * u[pair + 1];
    return a + b * radius * ((lane & 1) ? sin(angle) : cos(angle));
}

static void fill_random(const tn_tensor *dst, uint64_t seed, uint64_t offset, int normal,
                        double a, double b, int32_t ith, int32_t nth) {
    /* Elements are numbered in logical (row-major) order, so a draw does not depend on the
     * destination's strides. */
    int64_t numel = tn_tensor_numel(dst), first, last;
    int32_t es = tn_dtype_size(dst->dtype);
    tn_slice(numel, ith, nth, &first, &last);
    for (int64_t i = first; i < last; i++) {
        int64_t off = 0, rem = i;
        for (int32_t d = dst->ndim - 1; d >= 0; d--) {
            off += (rem % dst->sizes[d]) * dst->strides[d];
            rem /= dst->sizes[d];
        }
        tn_value v = {draw(seed, offset, i, normal, a, b), 0, 0, 0};
        tn_store((char *)dst->data + off * es, dst->dtype, v);
    }
}

void tn_kernel_uniform(const tn_tensor *dst, uint64_t seed, uint64_t offset, double from,
                       double to, int32_t ith, int32_t nth) {
    fill_random(dst, seed, offset, 0, from, to, ith, nth);
}

void tn_kernel_normal(const tn_tensor *dst, uint64_t seed, uint64_t offset, double mean,
                      double std, int32_t ith, int32_t nth) {
    fill_random(dst, seed, offset, 1, mean, std, ith, nth);
}
