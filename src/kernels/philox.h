/* Philox-4x32-10 inline, and the dropout rule every dropout kernel shares.
 *
 * Element i of a launch (seed, offset) reads lane i % 4 of block i / 4, whose counter is
 * (i / 4, offset). An element is kept when its uniform draw in [0, 1) is below 1 - p; kept
 * elements are scaled by (float)(1 / (1 - p)). native_dropout (random.c) and fused attention
 * (attention.c) both follow it, so attention's dropout keeps exactly the probabilities that
 * dropout applied to softmax(scores) in row-major order would keep. */
#ifndef TN_KERNELS_PHILOX_H
#define TN_KERNELS_PHILOX_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

static inline void tn_philox_block(uint64_t seed, uint64_t offset, uint64_t blk, uint32_t out[4]) {
    uint32_t c0 = (uint32_t)blk, c1 = (uint32_t)(blk >> 32), c2 = (uint32_t)offset, c3 = (uint32_t)(offset >> 32);
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
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

/* The uniform draw in [0, 1) that a 32-bit Philox word stands for. */
static inline double tn_philox_uniform01(uint32_t r) { return 1.0 - ((double)r + 1.0) * (1.0 / 4294967296.0); }

/* The smallest 32-bit word whose draw is below `keep_below`; 2^32 when none is. The draw
 * falls as the word grows, so "draw < keep_below" is exactly "word >= this". */
static inline uint64_t tn_philox_keep_from(double keep_below) {
    uint64_t lo = 0, hi = (uint64_t)1 << 32; /* the answer lies in [lo, hi] */
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (tn_philox_uniform01((uint32_t)mid) < keep_below)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

enum { TN_PHILOX_LANES = 16 };

/* Philox lanes as 64-bit vector lanes holding 32-bit words (the high halves are don't-care:
 * the 32x32->64 multiply reads only the low ones), as wide as the ISA this file is built for. */
#if defined(__AVX512F__)
#define TN_PHILOX_VBYTES 64
#elif defined(__AVX2__)
#define TN_PHILOX_VBYTES 32
#else
#define TN_PHILOX_VBYTES 16
#endif
typedef uint64_t tn_philox_v __attribute__((vector_size(TN_PHILOX_VBYTES)));
enum { TN_PHILOX_V = TN_PHILOX_VBYTES / 8 };

/* low 32 bits of a times low 32 bits of b, 64-bit products */
static inline tn_philox_v tn_philox_mul(tn_philox_v a, tn_philox_v b) {
#if defined(__AVX512F__)
    return (tn_philox_v)_mm512_mul_epu32((__m512i)a, (__m512i)b);
#elif defined(__AVX2__)
    return (tn_philox_v)_mm256_mul_epu32((__m256i)a, (__m256i)b);
#else
    return (tn_philox_v)_mm_mul_epu32((__m128i)a, (__m128i)b);
#endif
}

/* The words of blocks blk .. blk + TN_PHILOX_LANES, in element order (w[4 * l + lane]):
 * TN_PHILOX_V blocks to a vector, the vectors' rounds interleaved so that their multiplies
 * overlap. */
static inline void tn_philox_blocks(uint64_t seed, uint64_t offset, uint64_t blk, uint32_t w[4 * TN_PHILOX_LANES]) {
    enum { NV = TN_PHILOX_LANES / TN_PHILOX_V };
    const tn_philox_v m0 = (tn_philox_v){0} + 0xD2511F53u, m1 = (tn_philox_v){0} + 0xCD9E8D57u;
    tn_philox_v c0[NV], c1[NV], c2[NV], c3[NV];
    for (int v = 0; v < NV; v++) {
        uint64_t lo[TN_PHILOX_V], hi[TN_PHILOX_V];
        for (int l = 0; l < TN_PHILOX_V; l++) {
            uint64_t b = blk + (uint64_t)(v * TN_PHILOX_V + l);
            lo[l] = (uint32_t)b;
            hi[l] = b >> 32;
        }
        memcpy(&c0[v], lo, sizeof lo);
        memcpy(&c1[v], hi, sizeof hi);
        c2[v] = (tn_philox_v){0} + (uint32_t)offset;
        c3[v] = (tn_philox_v){0} + (offset >> 32);
    }
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int round = 0; round < 10; round++) {
        for (int v = 0; v < NV; v++) {
            tn_philox_v p0 = tn_philox_mul(c0[v], m0), p1 = tn_philox_mul(c2[v], m1);
            c0[v] = (p1 >> 32) ^ c1[v] ^ k0;
            c2[v] = (p0 >> 32) ^ c3[v] ^ k1;
            c1[v] = p1;
            c3[v] = p0;
        }
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    for (int v = 0; v < NV; v++)
        for (int l = 0; l < TN_PHILOX_V; l++) {
            uint32_t *o = w + 4 * (v * TN_PHILOX_V + l);
            o[0] = (uint32_t)c0[v][l];
            o[1] = (uint32_t)c1[v][l];
            o[2] = (uint32_t)c2[v][l];
            o[3] = (uint32_t)c3[v][l];
        }
}

/* factor[j] = keep ? scale : 0 for elements first .. first + n of a dropout launch, with
 * keep_from = tn_philox_keep_from(1 - p) for probability p (see above). */
static inline void tn_dropout_factors(uint64_t seed, uint64_t offset, int64_t first, int64_t n, uint64_t keep_from,
                                      float scale, float *factor) {
    uint32_t w[4 * TN_PHILOX_LANES];
    for (int64_t base = first / 4 * 4; base < first + n; base += 4 * TN_PHILOX_LANES) {
        tn_philox_blocks(seed, offset, (uint64_t)base / 4, w);
        int64_t lo = base > first ? base : first;
        int64_t hi = first + n < base + 4 * TN_PHILOX_LANES ? first + n : base + 4 * TN_PHILOX_LANES;
        for (int64_t i = lo; i < hi; i++) factor[i - first] = w[i - base] >= keep_from ? scale : 0.0f;
    }
}

#endif
