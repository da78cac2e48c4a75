/* float16 / bfloat16 <-> float32 as inline functions, so that conversion loops in the kernels
 * vectorize. Round to nearest even; NaN stays NaN. half.c exports them for the public API. */
#ifndef TN_KERNELS_HALF_H
#define TN_KERNELS_HALF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline uint32_t tn_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float tn_f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline float tn_bf16_to_f32_inline(uint16_t b) { return tn_f32_from_bits((uint32_t)b << 16); }

/* A NaN first gets its quiet bit and loses its low half, so that the rounding below keeps it
 * a NaN (nothing carries out of the cleared half): one select before the rounding, where a
 * second rounding for the NaN lanes and a select of 16-bit halves after it cost the
 * vectorized loops about five more operations per vector. */
static inline uint16_t tn_f32_to_bf16_inline(float f) {
    uint32_t u = tn_f32_bits(f);
    u = f != f ? (u | 0x400000u) & 0xffff0000u : u;
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static inline float tn_f16_to_f32_inline(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    float normal = tn_f32_from_bits(sign | ((exp + 112u) << 23) | (man << 13));
    float special = tn_f32_from_bits(sign | 0x7f800000u | (man << 13));
    float sub = (float)man * 5.9604644775390625e-8f;
    sub = sign ? -sub : sub;
    return exp == 0x1f ? special : (exp == 0 ? sub : normal);
}

/* Round to nearest even, computed for every class of input and selected at the end (no
 * branch, so that loops of it vectorize, the fused kernels' included): normal results rebase
 * the exponent and round at bit 13 (a carry rolls into the exponent, up to infinity); results
 * below 2^-14 come from adding 0.5, whose ulp is 2^-24, f16's smallest step, so the FPU's own
 * rounding does it. */
static inline uint16_t tn_f32_to_f16_inline(float f) {
    uint32_t u = tn_f32_bits(f), a = u & 0x7fffffffu;
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t normal = ((a - 0x38000000u) + 0xfffu + ((a >> 13) & 1u)) >> 13;
    uint32_t small = tn_f32_bits(tn_f32_from_bits(a) + 0.5f) - 0x3f000000u;
    uint32_t nan = 0x7e00u | ((a >> 13) & 0x3ffu);
    uint32_t h = a > 0x7f800000u ? nan : a >= 0x477ff000u ? 0x7c00u : a < 0x38800000u ? small : normal;
    return (uint16_t)(sign | h);
}

/* float8 storage types, as PyTorch converts them (bit for bit, checked over every code and a
 * sweep of floats in tests/test_copy.py). e4m3fn: 4 exponent bits (bias 7), 3 mantissa bits,
 * no infinity, one NaN per sign (all ones); conversion saturates: every float from 448 up,
 * infinities included, becomes 448 (NaN stays NaN, with its sign). e5m2: the upper byte of a
 * float16, with infinities; conversion rounds to nearest even at bit 21 and overflows to
 * infinity. Results
 * below the smallest normal come from adding a power of two whose ulp is float8's smallest
 * step, so the FPU's rounding does it (as for float16 above). */
static inline float tn_f8e4m3fn_to_f32_inline(uint8_t b) {
    uint32_t sign = (uint32_t)(b & 0x80u) << 24;
    uint32_t exp = (b >> 3) & 0xfu, man = b & 0x7u;
    float normal = tn_f32_from_bits(sign | ((exp + 120u) << 23) | (man << 20));
    float sub = (float)man * 0.001953125f; /* 2^-9 */
    sub = sign ? -sub : sub;
    float nan = tn_f32_from_bits(sign | 0x7ff00000u);
    return (b & 0x7fu) == 0x7fu ? nan : (exp == 0 ? sub : normal);
}

static inline uint8_t tn_f32_to_f8e4m3fn_inline(float f) {
    uint32_t u = tn_f32_bits(f), a = u & 0x7fffffffu;
    uint32_t sign = (u >> 24) & 0x80u;
    uint32_t normal = ((a - (120u << 23)) + 0x7ffffu + ((a >> 20) & 1u)) >> 20;
    uint32_t small = tn_f32_bits(tn_f32_from_bits(a) + 16384.0f) - (141u << 23); /* 2^14 */
    uint32_t r = a > 0x7f800000u ? 0x7fu : a >= 0x43e00000u ? 0x7eu : a < (121u << 23) ? small : normal;
    return (uint8_t)(sign | r);
}

static inline float tn_f8e5m2_to_f32_inline(uint8_t b) { return tn_f16_to_f32_inline((uint16_t)(b << 8)); }

static inline uint8_t tn_f32_to_f8e5m2_inline(float f) {
    uint32_t u = tn_f32_bits(f), a = u & 0x7fffffffu;
    uint32_t sign = (u >> 24) & 0x80u;
    uint32_t normal = ((a - (112u << 23)) + 0xfffffu + ((a >> 21) & 1u)) >> 21;
    uint32_t small = tn_f32_bits(tn_f32_from_bits(a) + 128.0f) - (134u << 23); /* 2^7 */
    uint32_t r = a > 0x7f800000u ? 0x7fu : a >= (143u << 23) ? 0x7cu : a < (113u << 23) ? small : normal;
    return (uint8_t)(sign | r);
}

#endif
