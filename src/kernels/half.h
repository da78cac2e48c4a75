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

static inline uint16_t tn_f32_to_bf16_inline(float f) {
    uint32_t u = tn_f32_bits(f);
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t nan = (u >> 16) | 0x40u;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
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

static inline uint16_t tn_f32_to_f16_inline(float f) {
    uint32_t u = tn_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to inf (>= 65520) */
    if (a < 0x38800000u) {
        /* subnormal or zero in f16: scale so that rounding happens at 2^-24 */
        float v = tn_f32_from_bits(a) * 16777216.0f; /* exact: multiply by 2^24 */
        uint32_t m = (uint32_t)v;
        float rem = v - (float)m;
        if (rem > 0.5f || (rem == 0.5f && (m & 1u))) m++;
        return (uint16_t)(sign | m);
    }
    uint32_t exp = (a >> 23) - 112u;
    uint32_t man = a & 0x7fffffu;
    uint32_t h = (exp << 10) | (man >> 13);
    uint32_t rest = man & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;
    return (uint16_t)(sign | h);
}

#endif
