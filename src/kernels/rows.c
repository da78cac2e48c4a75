/* The float32 row kernels for one ISA variant. The Makefile compiles this file once per ISA
 * (rows_ref.o, rows_avx2.o, rows_avx512.o), each with its own flags and TN_ROWS_ISA set to
 * the variant's name, which names the install function. */
#include <string.h>
#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "elem.h"
#include "half.h"
#include "rows_f32.h"
#include "table.h"
#include "typed_rows.h"
#include "vec16.h"

#ifndef TN_ROWS_ISA
#error "compile with -DTN_ROWS_ISA=ref|avx2|avx512"
#endif
#define TN_CONCAT_(a, b) a##b
#define TN_CONCAT(a, b) TN_CONCAT_(a, b)

static int binary_f32(tn_binary_op op, int64_t n, float *o, int64_t os, const float *a,
                      int64_t as, const float *b, int64_t bs, float alpha) {
    return binary_f32_rows(op, n, o, os, a, as, b, bs, alpha);
}

#if defined(__AVX512F__)
/* ln x for 16 lanes on AVX-512's own exponent and mantissa instructions, which a loop the
 * compiler vectorizes cannot reach (tn_logf splits x's bits with seven operations and fixes
 * its special inputs with seven more): x = m 2^e with m in [3/4, 3/2) from getmant (e one more
 * than getexp's where m < 1), subnormal inputs included; ln m = f - f^2/2 + f^3 P(f) for
 * f = m - 1 (exact), P of degree 7 a minimax fit on [-1/4, 1/2) made for this row (4.9e-9
 * relative); ln 2 in two parts as tn_logf. fixupimm gives 0 -> -inf, +inf -> +inf and NaN ->
 * NaN from the input's class. */
static inline __m512 log16(__m512 x) {
    const __m512 one = _mm512_set1_ps(1.0f);
    __m512 m = _mm512_getmant_ps(x, _MM_MANT_NORM_p75_1p5, _MM_MANT_SIGN_zero);
    __m512 e = _mm512_getexp_ps(x);
    e = _mm512_mask_add_ps(e, _mm512_cmp_ps_mask(m, one, _CMP_LT_OQ), e, one);
    __m512 f = _mm512_sub_ps(m, one), z = _mm512_mul_ps(f, f), z2 = _mm512_mul_ps(z, z);
#define TN_C(v) _mm512_set1_ps(v)
    __m512 p01 = _mm512_fmadd_ps(TN_C(-2.5000095367e-1f), f, TN_C(3.3333450556e-1f));
    __m512 p23 = _mm512_fmadd_ps(TN_C(-1.6647312045e-1f), f, TN_C(1.9990859926e-1f));
    __m512 p45 = _mm512_fmadd_ps(TN_C(-1.3161200285e-1f), f, TN_C(1.4478403330e-1f));
    __m512 p67 = _mm512_fmadd_ps(TN_C(-4.5074369758e-2f), f, TN_C(1.0462991148e-1f));
    __m512 p = _mm512_fmadd_ps(_mm512_fmadd_ps(p67, z, p45), z2, _mm512_fmadd_ps(p23, z, p01));
    __m512 l = _mm512_fmadd_ps(z, TN_C(-0.5f), _mm512_mul_ps(_mm512_mul_ps(p, f), z));
    __m512 y = _mm512_fmadd_ps(e, TN_C(-2.12194440e-4f), l);
    __m512 r = _mm512_fmadd_ps(e, TN_C(0.693359375f), _mm512_add_ps(f, y));
#undef TN_C
    /* fixupimm's response per input class, four bits each from QNaN up: QNaN(x), QNaN(x), -inf
     * (zero), +inf (+inf), and the value for the others; then NaN for x < 0 (fixupimm's own NaN
     * is negative, the CPU's and the other rows' positive) */
    r = _mm512_fixupimm_ps(r, x, _mm512_set1_epi32(0x00500422), 0);
    return _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ), _mm512_set1_ps(NAN));
}

static void log_row_512(int64_t n, float *o, const float *x) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(o + i, log16(_mm512_loadu_ps(x + i)));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(o + i, m, log16(_mm512_maskz_loadu_ps(m, x + i)));
    }
}
#endif

static int unary_f32(tn_unary_op op, int64_t n, float *o, int64_t os, const float *x,
                     int64_t xs) {
#if defined(__AVX512F__)
    if (op == TN_UNARY_LOG && os == 1 && xs == 1) {
        log_row_512(n, o, x);
        return 1;
    }
#endif
    return unary_f32_rows(op, n, o, os, x, xs);
}

/* Sixteen float16 values to float32 and back with F16C (vcvtps2ph rounding to nearest even,
 * as half.h does): the float16 rows below and the conversion rows share them. */
#if defined(__F16C__)
TN_INLINE void f16_widen16(float *d, const uint16_t *s) {
#if TN_VLANES == 16
    _mm512_storeu_ps(d, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)s)));
#else
    _mm256_storeu_ps(d, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)s)));
    _mm256_storeu_ps(d + 8, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(s + 8))));
#endif
}

TN_INLINE void f16_narrow16(uint16_t *d, const float *s) {
    enum { RNE = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC };
#if TN_VLANES == 16
    _mm256_storeu_si256((__m256i *)(void *)d, _mm512_cvtps_ph(_mm512_loadu_ps(s), RNE));
#else
    _mm_storeu_si128((__m128i *)(void *)d, _mm256_cvtps_ph(_mm256_loadu_ps(s), RNE));
    _mm_storeu_si128((__m128i *)(void *)(d + 8), _mm256_cvtps_ph(_mm256_loadu_ps(s + 8), RNE));
#endif
}
#endif

static int binary_bf16(tn_binary_op op, int64_t n, uint16_t *o, int64_t os, const uint16_t *a, int64_t as,
                       const uint16_t *b, int64_t bs, float alpha) {
    return binary_bf16_rows(op, n, o, os, a, as, b, bs, alpha);
}

static int unary_bf16(tn_unary_op op, int64_t n, uint16_t *o, int64_t os, const uint16_t *x, int64_t xs) {
    return unary_bf16_rows(op, n, o, os, x, xs);
}

/* float16 rows on the F16C conversions (AVX2 and AVX-512), widened, computed and rounded in
 * one loop as the bfloat16 rows are, sixteen elements at a time in registers: through float32
 * chunks in memory (three passes), float16 add ran at half the CPU's speed. Contiguous output,
 * operands contiguous or single values; the tail through half.h's conversions. The results
 * are the chunked path's bit for bit (the same element functions; vcvtps2ph rounds to
 * nearest even as narrow_half). */
#if defined(__F16C__)
TN_INLINE void row2_f16(tn_f32_binary_fn f, int64_t n, uint16_t *restrict o, const uint16_t *a, int64_t as,
                        const uint16_t *b, int64_t bs, float alpha) {
    float x[16], y[16], r[16];
    for (int l = 0; l < 16; l++) x[l] = tn_f16_to_f32_inline(a[0]), y[l] = tn_f16_to_f32_inline(b[0]);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        if (as) f16_widen16(x, a + i);
        if (bs) f16_widen16(y, b + i);
        for (int l = 0; l < 16; l++) r[l] = f(x[l], y[l], alpha);
        f16_narrow16(o + i, r);
    }
    for (; i < n; i++)
        o[i] = tn_f32_to_f16_inline(f(tn_f16_to_f32_inline(a[i * as]), tn_f16_to_f32_inline(b[i * bs]), alpha));
}

TN_INLINE void row1_f16(tn_f32_unary_fn f, int64_t n, uint16_t *restrict o, const uint16_t *x) {
    float v[16], r[16];
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        f16_widen16(v, x + i);
        for (int l = 0; l < 16; l++) r[l] = f(v[l]);
        f16_narrow16(o + i, r);
    }
    for (; i < n; i++) o[i] = tn_f32_to_f16_inline(f(tn_f16_to_f32_inline(x[i])));
}
#endif

static int binary_f16(tn_binary_op op, int64_t n, uint16_t *o, int64_t os, const uint16_t *a, int64_t as,
                      const uint16_t *b, int64_t bs, float alpha) {
#if defined(__F16C__)
    if (os != 1 || (as != 0 && as != 1) || (bs != 0 && bs != 1) || (as == 0 && bs == 0)) return 0;
#define TN_CASE(code, fn)                                                                   \
    case code:                                                                              \
        if (as && bs) row2_f16(fn, n, o, a, 1, b, 1, alpha);                                \
        else if (as) row2_f16(fn, n, o, a, 1, b, 0, alpha);                                 \
        else row2_f16(fn, n, o, a, 0, b, 1, alpha);                                         \
        return 1;
    switch (op) {
    TN_BINARY_ELEMENT_OPS(TN_CASE)
    default: return 0;
    }
#undef TN_CASE
#else
    (void)op, (void)n, (void)o, (void)os, (void)a, (void)as, (void)b, (void)bs, (void)alpha;
    return 0;
#endif
}

static int unary_f16(tn_unary_op op, int64_t n, uint16_t *o, int64_t os, const uint16_t *x, int64_t xs) {
#if defined(__F16C__)
    if (os != 1 || xs != 1) return 0;
#define TN_CASE(code, fn) case code: row1_f16(fn, n, o, x); return 1;
    switch (op) {
    TN_UNARY_ELEMENT_OPS(TN_CASE)
    default: return 0;
    }
#undef TN_CASE
#else
    (void)op, (void)n, (void)o, (void)os, (void)x, (void)xs;
    return 0;
#endif
}

/* y[i] += a[0] x[i] + a[1] x[ldx + i] + ... over `rows` rows of x (four at a time: one pass
 * over y per four rows of B, and four streams of B in flight). */
#define TN_AXPY_ROWS(name, type, load)                                                              \
    static void name(int64_t n, int64_t rows, const float *a, const type *x, int64_t ldx, float *restrict y) { \
        int64_t r = 0;                                                                              \
        for (; r + 4 <= rows; r += 4) {                                                             \
            const type *x0 = x + r * ldx, *x1 = x0 + ldx, *x2 = x1 + ldx, *x3 = x2 + ldx;           \
            float a0 = a[r], a1 = a[r + 1], a2 = a[r + 2], a3 = a[r + 3];                           \
            for (int64_t i = 0; i < n; i++)                                                         \
                y[i] += a0 * load(x0[i]) + a1 * load(x1[i]) + a2 * load(x2[i]) + a3 * load(x3[i]); \
        }                                                                                           \
        for (; r < rows; r++)                                                                       \
            for (int64_t i = 0; i < n; i++) y[i] += a[r] * load(x[r * ldx + i]);                    \
    }
#define TN_AS_F32(v) (v)
TN_AXPY_ROWS(axpy_rows_f32, float, TN_AS_F32)
TN_AXPY_ROWS(axpy_rows_bf16, uint16_t, tn_bf16_to_f32_inline)

/* Sixteen independent partial sums: the compiler vectorizes them without reassociating. */
static float dot_bf16(int64_t n, const uint16_t *x, const uint16_t *y) {
    float acc[16] = {0};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++)
            acc[l] += tn_bf16_to_f32_inline(x[i + l]) * tn_bf16_to_f32_inline(y[i + l]);
    float total = 0.0f;
    for (; i < n; i++) total += tn_bf16_to_f32_inline(x[i]) * tn_bf16_to_f32_inline(y[i]);
    for (int l = 0; l < 16; l++) total += acc[l];
    return total;
}

/* float32 <-> bfloat16 / float16 rows: one loop per pair and layout, so that contiguous rows
 * vectorize with this variant's instructions. */
#define CONVERT_ROW(name, D, S, expr)                                                   \
    static void name(int64_t n, D *restrict d, int64_t ds, const S *restrict s, int64_t ss) { \
        if (ds == 1 && ss == 1)                                                         \
            for (int64_t i = 0; i < n; i++) {                                           \
                S x = s[i];                                                             \
                d[i] = expr;                                                            \
            }                                                                           \
        else                                                                            \
            for (int64_t i = 0; i < n; i++) {                                           \
                S x = s[i * ss];                                                        \
                d[i * ds] = expr;                                                       \
            }                                                                           \
    }
CONVERT_ROW(bf16_to_f32, float, uint16_t, tn_bf16_to_f32_inline(x))
CONVERT_ROW(f32_to_bf16, uint16_t, float, tn_f32_to_bf16_inline(x))
CONVERT_ROW(f16_to_f32_scalar, float, uint16_t, tn_f16_to_f32_inline(x))
CONVERT_ROW(f32_to_f16_scalar, uint16_t, float, tn_f32_to_f16_inline(x))

/* float16 on the F16C instructions where the variant has them (AVX2 and AVX-512): the bit
 * arithmetic of half.h has branches that do not vectorize, and float16 ops ran at a tenth of
 * the CPU's speed. vcvtps2ph rounds to nearest even as tn_f32_to_f16_inline does, and both
 * directions are exact otherwise (subnormals included). Strided rows and the tail go through
 * the inline functions. */
static void f16_to_f32(int64_t n, float *restrict d, int64_t ds, const uint16_t *restrict s, int64_t ss) {
    int64_t i = 0;
#if defined(__F16C__)
    if (ds == 1 && ss == 1)
        for (; i + 16 <= n; i += 16) f16_widen16(d + i, s + i);
#endif
    f16_to_f32_scalar(n - i, d + i * ds, ds, s + i * ss, ss);
}

static void f32_to_f16(int64_t n, uint16_t *restrict d, int64_t ds, const float *restrict s, int64_t ss) {
    int64_t i = 0;
#if defined(__F16C__)
    if (ds == 1 && ss == 1)
        for (; i + 16 <= n; i += 16) f16_narrow16(d + i, s + i);
#endif
    f32_to_f16_scalar(n - i, d + i * ds, ds, s + i * ss, ss);
}

#define CONVERT(TD, TS, EXPR)                                                       \
    do {                                                                            \
        TD *o = (TD *)(void *)d;                                                    \
        const TS *v = (const TS *)(const void *)s;                                  \
        for (int64_t i = 0; i < n; i++) {                                           \
            TS x = v[i * ss];                                                       \
            o[i * ds] = (TD)(EXPR);                                                 \
        }                                                                           \
        return 1;                                                                   \
    } while (0)

/* A row converted between bool, int32, int64 and float32 (masks, token ids, positions) as
 * typed loops, with tn_load/tn_store's results; 0 for any other pair. Integer narrowing wraps,
 * and an int64 goes to float32 in one rounding, as the CPU converts it. Built per ISA: float32
 * to int64 vectorizes only with AVX-512's conversions (scalar, it took 1.7x the CPU's time). */
static int typed_convert_row(tn_dtype dt, char *d, int64_t ds, tn_dtype st, const char *s, int64_t ss, int64_t n) {
    switch (dt) {
    case TN_DTYPE_F32:
        if (st == TN_DTYPE_I64) CONVERT(float, int64_t, x);
        if (st == TN_DTYPE_I32) CONVERT(float, int32_t, x);
        if (st == TN_DTYPE_BOOL) CONVERT(float, uint8_t, x != 0);
        return 0;
    case TN_DTYPE_I64:
        if (st == TN_DTYPE_I32) CONVERT(int64_t, int32_t, x);
        if (st == TN_DTYPE_F32) CONVERT(int64_t, float, tn_float_to_i64(x));
        if (st == TN_DTYPE_BOOL) CONVERT(int64_t, uint8_t, x != 0);
        return 0;
    case TN_DTYPE_I32:
        if (st == TN_DTYPE_I64) CONVERT(int32_t, int64_t, (uint32_t)(uint64_t)x);
        if (st == TN_DTYPE_F32) CONVERT(int32_t, float, tn_float_to_i32(x));
        if (st == TN_DTYPE_BOOL) CONVERT(int32_t, uint8_t, x != 0);
        return 0;
    case TN_DTYPE_BOOL:
        if (st == TN_DTYPE_F32) CONVERT(uint8_t, float, x != 0);
        if (st == TN_DTYPE_I64) CONVERT(uint8_t, int64_t, x != 0);
        if (st == TN_DTYPE_I32) CONVERT(uint8_t, int32_t, x != 0);
        return 0;
    default: return 0;
    }
}

static void widen_half(tn_dtype t, int64_t n, float *d, int64_t ds, const uint16_t *s, int64_t ss) {
    (t == TN_DTYPE_BF16 ? bf16_to_f32 : f16_to_f32)(n, d, ds, s, ss);
}

static void narrow_half(tn_dtype t, int64_t n, uint16_t *d, int64_t ds, const float *s, int64_t ss) {
    (t == TN_DTYPE_BF16 ? f32_to_bf16 : f32_to_f16)(n, d, ds, s, ss);
}

/* The sum of 16 float partial sums as a tree in double. */
static double fold16(const float p[16]) {
    double d[8];
    for (int l = 0; l < 8; l++) d[l] = (double)p[l] + (double)p[l + 8];
    for (int l = 0; l < 4; l++) d[l] += d[l + 4];
    return (d[0] + d[2]) + (d[1] + d[3]);
}

/* `body` for j over a row of n elements, sixteen at a time with the next rows of two inputs
 * (the usual layout: rows one after the other; a and b may be the same) fetched a line per
 * sixteen, then the tail: the pass that runs from the cache brings the next rows in while the
 * cores compute. */
#define ROW_FETCHING_NEXT(n, a, b, ...)                        \
    do {                                                       \
        int64_t j_ = 0;                                        \
        for (; j_ + 16 <= (n); j_ += 16) {                     \
            __builtin_prefetch((a) + j_);                      \
            __builtin_prefetch((b) + j_);                      \
            for (int64_t j = j_; j < j_ + 16; j++) __VA_ARGS__; \
        }                                                      \
        for (int64_t j = j_; j < (n); j++) __VA_ARGS__;        \
    } while (0)

/* Three passes (max, exponentials and their sum, scale), each vectorized. The maximum runs
 * in 64 lanes (four independent vector chains: max's latency would otherwise bound the pass),
 * the sum in 16 (the exponentials bound that pass); tails go into the lanes and the lanes fold
 * as trees, so a row has no serial chain of scalar steps. */
static void softmax_f32(int64_t n, const float *x, float *restrict y, int log) {
    float m64[64], m16[16], s16[16];
    for (int l = 0; l < 64; l++) m64[l] = -INFINITY;
    int64_t i = 0;
    /* NaNs are skipped here: exp(NaN - max) is NaN, so the sum, and with it every output of
     * the row, is NaN, as PyTorch gives (no separate pass looks for them) */
    for (; i + 64 <= n; i += 64)
        for (int l = 0; l < 64; l++) m64[l] = x[i + l] > m64[l] ? x[i + l] : m64[l];
    for (int l = 0; l < 16; l++) {
        float a = m64[l] > m64[l + 16] ? m64[l] : m64[l + 16], b = m64[l + 32] > m64[l + 48] ? m64[l + 32] : m64[l + 48];
        m16[l] = a > b ? a : b;
    }
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++) m16[l] = x[i + l] > m16[l] ? x[i + l] : m16[l];
    for (int64_t l = 0; i + l < n; l++) m16[l] = x[i + l] > m16[l] ? x[i + l] : m16[l];
    for (int w = 8; w >= 1; w /= 2)
        for (int l = 0; l < w; l++) m16[l] = m16[l + w] > m16[l] ? m16[l + w] : m16[l];
    float mx = m16[0];
    for (int l = 0; l < 16; l++) s16[l] = 0.0f;
    /* Both loops fetch the next row (the usual layout: rows one after the other) a line per
     * 16 elements: the first pass over a row reads memory while the cores compute
     * exponentials, and a 16M-element softmax went from 55-69% of the copy bandwidth to
     * 80-110%. Past the buffer's end the prefetches are hints that fault nothing. */
    if (log) { /* two loops: no test per element, and the constants stay in registers */
        for (i = 0; i + 16 <= n; i += 16) {
            __builtin_prefetch(x + n + i);
            for (int l = 0; l < 16; l++) s16[l] += tn_expf(x[i + l] - mx);
        }
        for (int64_t l = 0; i + l < n; l++) s16[l] += tn_expf(x[i + l] - mx);
    } else {
        for (i = 0; i + 16 <= n; i += 16) {
            __builtin_prefetch(x + n + i);
            for (int l = 0; l < 16; l++) s16[l] += y[i + l] = tn_expf(x[i + l] - mx);
        }
        for (int64_t l = 0; i + l < n; l++) s16[l] += y[i + l] = tn_expf(x[i + l] - mx);
    }
    double sum = fold16(s16);
    if (log) {
        float shift = mx + (float)logf((float)sum);
        for (int64_t j = 0; j < n; j++) y[j] = x[j] - shift;
    } else {
        float inv = (float)(1.0 / sum);
        for (int64_t j = 0; j < n; j++) y[j] *= inv;
    }
}

/* Sum of a contiguous float32 row: 64 float partial sums (vectorized without reassociation,
 * four independent vector chains on AVX-512 so the adds' latency overlaps), folded to 16 for
 * the rest and the tail, then a tree in double. No serial chain of adds and little folding:
 * on rows of 1000 elements the old chain of 16 double adds took a third of the time. */
static double sum_f32(int64_t n, const float *x) {
    tn_v16 a0 = v16_zero(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        a0 = v16_add(a0, v16_load(x + i));
        a1 = v16_add(a1, v16_load(x + i + 16));
        a2 = v16_add(a2, v16_load(x + i + 32));
        a3 = v16_add(a3, v16_load(x + i + 48));
    }
    tn_v16 part = v16_add(v16_add(a0, a1), v16_add(a2, a3));
    for (; i + 16 <= n; i += 16) part = v16_add(part, v16_load(x + i));
    if (i < n) { /* the tail into the first lanes */
        float tail[16] = {0};
        memcpy(tail, x + i, (size_t)(n - i) * sizeof(float));
        part = v16_add(part, v16_load(tail));
    }
    float lanes[16];
    v16_store(lanes, part);
    return fold16(lanes);
}

/* The backward of softmax (out = y * (g - sum(g * y))) or log_softmax (out = g - exp(y) *
 * sum(g)) over a contiguous float32 row; 16 partial sums keep the reduction vectorizable, and
 * the second pass fetches the next rows. */
static void softmax_backward_f32(int64_t n, const float *g, const float *y, float *restrict out,
                                 int log) {
    float s16[16] = {0};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++) s16[l] += log ? g[i + l] : g[i + l] * y[i + l];
    double sum = 0;
    for (; i < n; i++) sum += log ? g[i] : g[i] * y[i];
    for (int l = 0; l < 16; l++) sum += s16[l];
    float s = (float)sum;
    const float *next_g = g + n, *next_y = y + n;
    if (log)
        ROW_FETCHING_NEXT(n, next_g, next_y, out[j] = g[j] - tn_expf(y[j]) * s);
    else
        ROW_FETCHING_NEXT(n, next_g, next_y, out[j] = y[j] * (g[j] - s));
}

/* Layer norm (or RMS norm: mean 0) of a contiguous float32 row (tn/norm.h): the mean from
 * sum_f32, the variance (or mean square) from a pass over the row with 64 partial sums (four
 * vector chains, not one whose latency bound the pass) folded in double, then
 * y = (x - mean) * rstd * w + b, one loop per combination of weight and bias so each
 * vectorizes. stats: mean and rstd. The variance pass, the longest, fetches the next row (the
 * usual layout), so that memory works while the core computes: a 16M-element layer norm went
 * from 22 to 34 GB/s, an RMS norm from 28-31 to 37-44. */
static void layer_norm_f32(int64_t n, const float *x, float *restrict y, const float *w,
                           const float *b, double eps, int rms, double stats[2]) {
    double mean = rms ? 0.0 : sum_f32(n, x) / (double)n;
    float m = (float)mean, s16[16] = {0}, s64[64] = {0};
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        for (int q = 0; q < 64; q += 16) __builtin_prefetch(x + n + i + q);
        for (int l = 0; l < 64; l++) {
            float d = x[i + l] - m;
            s64[l] += d * d;
        }
    }
    for (int l = 0; l < 16; l++) s16[l] = (s64[l] + s64[l + 16]) + (s64[l + 32] + s64[l + 48]);
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++) {
            float d = x[i + l] - m;
            s16[l] += d * d;
        }
    for (int64_t l = 0; i + l < n; l++) {
        float d = x[i + l] - m;
        s16[l] += d * d;
    }
    double rstd = 1.0 / sqrt(fold16(s16) / (double)n + eps);
    float r = (float)rstd;
    const float *next = x + n;
    if (w && b)
        ROW_FETCHING_NEXT(n, next, next, y[j] = (x[j] - m) * r * w[j] + b[j]);
    else if (w)
        ROW_FETCHING_NEXT(n, next, next, y[j] = (x[j] - m) * r * w[j]);
    else if (b)
        ROW_FETCHING_NEXT(n, next, next, y[j] = (x[j] - m) * r + b[j]);
    else
        ROW_FETCHING_NEXT(n, next, next, y[j] = (x[j] - m) * r);
    stats[0] = mean;
    stats[1] = rstd;
}

/* The input gradient of layer norm over a contiguous float32 row, given the forward's mean
 * and rstd: dx = rstd * (g*w - mean(g*w) - xhat * mean(g*w*xhat)), w optional; for RMS norm
 * (mean 0) without the mean(g*w) term. */
static inline __attribute__((always_inline)) void layer_norm_backward_row(
    int64_t n, const float *x, const float *g, const float *w, float mean, float rstd,
    float *restrict dx, int weighted, int rms) {
    float a16[16] = {0}, b16[16] = {0};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++) {
            float gw = weighted ? g[i + l] * w[i + l] : g[i + l], xhat = (x[i + l] - mean) * rstd;
            a16[l] += gw;
            b16[l] += gw * xhat;
        }
    for (int64_t l = 0; i + l < n; l++) {
        float gw = weighted ? g[i + l] * w[i + l] : g[i + l], xhat = (x[i + l] - mean) * rstd;
        a16[l] += gw;
        b16[l] += gw * xhat;
    }
    float a = rms ? 0.0f : (float)(fold16(a16) / (double)n), c = (float)(fold16(b16) / (double)n);
    const float *next_x = x + n, *next_g = g + n;
    ROW_FETCHING_NEXT(n, next_x, next_g, {
        float gw = weighted ? g[j] * w[j] : g[j], xhat = (x[j] - mean) * rstd;
        dx[j] = rstd * (gw - a - xhat * c);
    });
}

static void layer_norm_backward_f32(int64_t n, const float *x, const float *g, const float *w,
                                    float mean, float rstd, int rms, float *restrict dx) {
    if (w && rms)
        layer_norm_backward_row(n, x, g, w, mean, rstd, dx, 1, 1);
    else if (w)
        layer_norm_backward_row(n, x, g, w, mean, rstd, dx, 1, 0);
    else if (rms)
        layer_norm_backward_row(n, x, g, w, mean, rstd, dx, 0, 1);
    else
        layer_norm_backward_row(n, x, g, w, mean, rstd, dx, 0, 0);
}

/* The float32 rows of ternary.c's kernel, with its operations in its order (and so its
 * values): value * b * c and value * (b / c) are added last, and lerp takes the two-sided form
 * that is exact at both ends. No restrict: o is a in place. */
static inline float lerp_f32(float a, float b, float w) {
    float d = b - a;
    return fabsf(w) < 0.5f ? a + w * d : b - d * (1.0f - w);
}

static void ternary_f32(tn_ternary_op op, int64_t n, float *o, const float *a, const float *b, const float *c,
                        float s) {
    if (op == TN_TERNARY_ADDCMUL)
        for (int64_t i = 0; i < n; i++) o[i] = a[i] + s * b[i] * c[i];
    else if (op == TN_TERNARY_ADDCDIV)
        for (int64_t i = 0; i < n; i++) o[i] = a[i] + s * (b[i] / c[i]);
    else if (c)
        for (int64_t i = 0; i < n; i++) o[i] = lerp_f32(a[i], b[i], c[i]);
    else
        for (int64_t i = 0; i < n; i++) o[i] = lerp_f32(a[i], b[i], s);
}

/* optim.c's float32 Adam step, with its operations in its order; one loop per combination of
 * the flags, so that each has no branch and vectorizes. */
static inline __attribute__((always_inline)) void adam_row(const tn_adam_f32_step *c, int64_t n, float *p,
                                                           float *g, float *m, float *v, float *vmax,
                                                           int scaled, int decoupled, int ams) {
    const float lr = c->lr, wd = c->wd, b1 = c->b1, b2 = c->b2, eps = c->eps, step_size = c->step_size,
                bc2 = c->bc2, inv_scale = c->inv_scale, sign = c->sign;
    for (int64_t i = 0; i < n; i++) {
        float grad = g[i];
        if (scaled) {
            grad *= inv_scale;
            g[i] = grad;
        }
        grad *= sign;
        if (decoupled)
            p[i] -= lr * wd * p[i];
        else
            grad += wd * p[i];
        m[i] += (1 - b1) * (grad - m[i]);
        v[i] = b2 * v[i] + (1 - b2) * grad * grad;
        float second = v[i];
        if (ams) {
            vmax[i] = vmax[i] > v[i] ? vmax[i] : v[i];
            second = vmax[i];
        }
        p[i] -= step_size * m[i] / (sqrtf(second) / bc2 + eps);
    }
}

static void adam_f32(const tn_adam_f32_step *c, int64_t n, float *p, float *g, float *m, float *v, float *vmax) {
    int flags = (c->scaled ? 4 : 0) | (c->decoupled ? 2 : 0) | (vmax ? 1 : 0);
    switch (flags) {
    case 0: adam_row(c, n, p, g, m, v, vmax, 0, 0, 0); break;
    case 1: adam_row(c, n, p, g, m, v, vmax, 0, 0, 1); break;
    case 2: adam_row(c, n, p, g, m, v, vmax, 0, 1, 0); break;
    case 3: adam_row(c, n, p, g, m, v, vmax, 0, 1, 1); break;
    case 4: adam_row(c, n, p, g, m, v, vmax, 1, 0, 0); break;
    case 5: adam_row(c, n, p, g, m, v, vmax, 1, 0, 1); break;
    case 6: adam_row(c, n, p, g, m, v, vmax, 1, 1, 0); break;
    default: adam_row(c, n, p, g, m, v, vmax, 1, 1, 1); break;
    }
}

void TN_CONCAT(tn_kernels_install_, TN_ROWS_ISA)(tn_kernel_table *t) {
    t->adam_f32 = adam_f32;
    t->ternary_f32 = ternary_f32;
    t->layer_norm_f32 = layer_norm_f32;
    t->layer_norm_backward_f32 = layer_norm_backward_f32;
    t->softmax_backward_f32 = softmax_backward_f32;
    t->sum_f32 = sum_f32;
    t->softmax_f32 = softmax_f32;
    t->dot_bf16 = dot_bf16;
    t->binary_f32 = binary_f32;
    t->unary_f32 = unary_f32;
    t->binary_bf16 = binary_bf16;
    t->unary_bf16 = unary_bf16;
    t->binary_f16 = binary_f16;
    t->unary_f16 = unary_f16;
    t->axpy_rows_f32 = axpy_rows_f32;
    t->axpy_rows_bf16 = axpy_rows_bf16;
    t->widen_half = widen_half;
    t->convert_row = typed_convert_row;
    t->typed_unary_row = typed_unary_row;
    t->typed_binary_row = typed_binary_row;
    t->narrow_half = narrow_half;
}
