/* Sixteen floats as one value, for the per-ISA files whose loops the compiler does not
 * vectorize well by itself.
 *
 * A tn_v16 is an array of the ISA's own vectors: one AVX-512 register, two AVX ones, four SSE
 * ones. (A single 64-byte vector type is what AVX-512 wants, but GCC lowers it on a narrower
 * ISA through the stack, a store and reloads per add: a row sum on AVX2 ran at a seventh of its
 * speed.) The helpers are inlined and walk the parts with constant bounds, so every part
 * stays in a register. */
#ifndef TN_KERNELS_VEC16_H
#define TN_KERNELS_VEC16_H

#include <stdint.h>
#include <string.h>

#if defined(__AVX512F__)
#include <immintrin.h>
#define TN_VLANES 16
#elif defined(__AVX__)
#define TN_VLANES 8
#else
#define TN_VLANES 4
#endif
#define TN_VPARTS (16 / TN_VLANES)

typedef float tn_vnative __attribute__((vector_size(4 * TN_VLANES)));
typedef float tn_vnative_u __attribute__((vector_size(4 * TN_VLANES), aligned(4), may_alias));
typedef float tn_v4 __attribute__((vector_size(16)));
typedef struct {
    tn_vnative p[TN_VPARTS];
} tn_v16;

static inline tn_v16 v16_zero(void) {
    tn_v16 r;
    for (int i = 0; i < TN_VPARTS; i++) r.p[i] = (tn_vnative){0};
    return r;
}

/* Sixteen floats from any float address. */
static inline tn_v16 v16_load(const float *x) {
    tn_v16 r;
    for (int i = 0; i < TN_VPARTS; i++) r.p[i] = *(const tn_vnative_u *)(const void *)(x + i * TN_VLANES);
    return r;
}

/* Sixteen bfloat16 values from any address, widened (a bfloat16 is the upper half of a
 * float32): a zero extension and a shift per part. (GCC splits the generic form's 16-lane
 * conversion in two on AVX-512, with an insert: four operations where two do.) */
static inline tn_v16 v16_load_bf16(const uint16_t *x) {
    tn_v16 r;
#if TN_VLANES == 16
    __m512i w = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)x)), 16);
    memcpy(&r.p[0], &w, sizeof w);
#else
    typedef uint16_t halves __attribute__((vector_size(2 * TN_VLANES)));
    typedef uint32_t words __attribute__((vector_size(4 * TN_VLANES)));
    for (int i = 0; i < TN_VPARTS; i++) {
        halves h;
        memcpy(&h, x + i * TN_VLANES, sizeof h);
        words w = __builtin_convertvector(h, words) << 16;
        memcpy(&r.p[i], &w, sizeof w);
    }
#endif
    return r;
}

static inline void v16_store(float *x, tn_v16 v) { memcpy(x, &v, sizeof v); }

/* x > a ? x : a per lane, as a select on the comparison's mask (a NaN in x never wins). */
static inline tn_v16 v16_max(tn_v16 a, tn_v16 x) {
    typedef int32_t ints __attribute__((vector_size(4 * TN_VLANES)));
    tn_v16 r;
    for (int i = 0; i < TN_VPARTS; i++) {
        ints m = x.p[i] > a.p[i];
        r.p[i] = (tn_vnative)(((ints)x.p[i] & m) | ((ints)a.p[i] & ~m));
    }
    return r;
}

static inline tn_v16 v16_add(tn_v16 a, tn_v16 b) {
    for (int i = 0; i < TN_VPARTS; i++) a.p[i] += b.p[i];
    return a;
}

static inline tn_v16 v16_mul(tn_v16 a, tn_v16 b) {
    for (int i = 0; i < TN_VPARTS; i++) a.p[i] *= b.p[i];
    return a;
}

/* acc + a * b, rounded twice (the files build with -std=c11: no contraction into an FMA). */
static inline tn_v16 v16_mul_add(tn_v16 acc, tn_v16 a, tn_v16 b) {
    for (int i = 0; i < TN_VPARTS; i++) acc.p[i] += a.p[i] * b.p[i];
    return acc;
}

/* acc + s * b. */
static inline tn_v16 v16_scale_add(tn_v16 acc, float s, tn_v16 b) {
    for (int i = 0; i < TN_VPARTS; i++) acc.p[i] += s * b.p[i];
    return acc;
}

/* The lanes' sum in the same order on every ISA: lane l plus lane l + 8, then l plus l + 4,
 * then (0 + 2) + (1 + 3). */
static inline float v16_sum(tn_v16 v) {
    tn_v4 q;
#if TN_VLANES == 16
    typedef float v8 __attribute__((vector_size(32)));
    v8 h = __builtin_shufflevector(v.p[0], v.p[0], 0, 1, 2, 3, 4, 5, 6, 7) +
           __builtin_shufflevector(v.p[0], v.p[0], 8, 9, 10, 11, 12, 13, 14, 15);
    q = __builtin_shufflevector(h, h, 0, 1, 2, 3) + __builtin_shufflevector(h, h, 4, 5, 6, 7);
#elif TN_VLANES == 8
    tn_vnative h = v.p[0] + v.p[1];
    q = __builtin_shufflevector(h, h, 0, 1, 2, 3) + __builtin_shufflevector(h, h, 4, 5, 6, 7);
#else
    q = (v.p[0] + v.p[2]) + (v.p[1] + v.p[3]);
#endif
    return (q[0] + q[2]) + (q[1] + q[3]);
}

/* v16_sum of four values at once, with the same additions in the same order (on AVX2 and
 * AVX-512 the four reductions share their shuffles). */
static inline void v16_sum4(tn_v16 a, tn_v16 b, tn_v16 c, tn_v16 d, float out[4]) {
#if TN_VLANES == 16
    /* lanes l + 8: a's eight sums and b's in one vector, c's and d's in another */
    __m512 va = (__m512)a.p[0], vb = (__m512)b.p[0], vc = (__m512)c.p[0], vd = (__m512)d.p[0];
    __m512 hab = _mm512_add_ps(_mm512_shuffle_f32x4(va, vb, 0x44), _mm512_shuffle_f32x4(va, vb, 0xee));
    __m512 hcd = _mm512_add_ps(_mm512_shuffle_f32x4(vc, vd, 0x44), _mm512_shuffle_f32x4(vc, vd, 0xee));
    /* lanes l + 4: each value's four sums in a 128-bit lane of its own, a's first */
    __m512 q = _mm512_add_ps(_mm512_shuffle_f32x4(hab, hcd, 0x88), _mm512_shuffle_f32x4(hab, hcd, 0xdd));
    /* (q0 + q2) + (q1 + q3) in each lane's first float */
    __m512 x = _mm512_add_ps(q, _mm512_permute_ps(q, 0x4e));
    __m512 y = _mm512_add_ps(x, _mm512_permute_ps(x, 0xb1));
    __m128 z = _mm512_castps512_ps128(_mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), y));
    _mm_storeu_ps(out, z);
#elif TN_VLANES == 8
    tn_vnative ha = a.p[0] + a.p[1], hb = b.p[0] + b.p[1], hc = c.p[0] + c.p[1], hd = d.p[0] + d.p[1];
    /* lanes l + 4: the first value's four sums, then the second's */
    tn_vnative qab = __builtin_shufflevector(ha, hb, 0, 1, 2, 3, 8, 9, 10, 11) +
                     __builtin_shufflevector(ha, hb, 4, 5, 6, 7, 12, 13, 14, 15);
    tn_vnative qcd = __builtin_shufflevector(hc, hd, 0, 1, 2, 3, 8, 9, 10, 11) +
                     __builtin_shufflevector(hc, hd, 4, 5, 6, 7, 12, 13, 14, 15);
    /* q0 + q2 and q1 + q3 of each value */
    tn_vnative xab = qab + __builtin_shufflevector(qab, qab, 2, 3, 0, 1, 6, 7, 4, 5);
    tn_vnative xcd = qcd + __builtin_shufflevector(qcd, qcd, 2, 3, 0, 1, 6, 7, 4, 5);
    tn_vnative y = __builtin_shufflevector(xab, xcd, 0, 1, 4, 5, 8, 9, 12, 13);
    tn_v4 z = __builtin_shufflevector(y, y, 0, 2, 4, 6) + __builtin_shufflevector(y, y, 1, 3, 5, 7);
    memcpy(out, &z, sizeof z);
#else
    out[0] = v16_sum(a), out[1] = v16_sum(b), out[2] = v16_sum(c), out[3] = v16_sum(d);
#endif
}

#endif
