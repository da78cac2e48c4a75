/* The GEMM micro-kernel and dot product for one ISA variant. Like rows.c, the Makefile builds
 * this file once per ISA with that ISA's flags and TN_ROWS_ISA naming the install function;
 * the preprocessor picks the intrinsics the flags allow.
 *
 * Micro-kernel contract: c[i*ldc + j] (+)= sum_p ap[p*MR + i] * bp[p*NR + j] for i < MR, j < NR,
 * where ap and bp are the packed panels (see gemm.c); with add == 0, C is written, not read. */
#include <stdint.h>

#include "half.h"
#include "table.h"

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif
#if defined(__AVX512F__)
#include "tile_512.h"
#endif

#ifndef TN_ROWS_ISA
#error "compile with -DTN_ROWS_ISA=ref|avx2|avx512"
#endif
#define TN_CONCAT_(a, b) a##b
#define TN_CONCAT(a, b) TN_CONCAT_(a, b)

#if defined(__AVX512F__)

/* 12 x 32: 24 accumulators (of 32 zmm registers) hide the FMA latency with 14 loads per 24
 * FMAs; in L1 a core ran 6 x 32 at 87% of its FMA peak and 12 x 32 at 93%. */
enum { MR = 12, NR = 32, SHORT_MR = 8, PF = 8 };

typedef __m512 peak_vec;
#define PEAK_LANES 16
#define PEAK_SET1 _mm512_set1_ps
#define PEAK_FMA _mm512_fmadd_ps
#define PEAK_ADD _mm512_add_ps
#define PEAK_FIRST _mm512_cvtss_f32

/* rows (MR, or SHORT_MR for the last rows of a block) x 32 */
static inline __attribute__((always_inline)) void ukernel_rows(int rows, int64_t kc, const float *ap, const float *bp,
                                                               float *c, int64_t ldc, int add) {
    __m512 acc[MR][2];
    for (int i = 0; i < rows; i++) {
        acc[i][0] = acc[i][1] = _mm512_setzero_ps();
        _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + i * ldc + 16), _MM_HINT_T0);
    }
    for (int64_t p = 0; p < kc; p++) {
        /* a step reads two lines of B */
        _mm_prefetch((const char *)(bp + (p + PF) * NR), _MM_HINT_T0);
        _mm_prefetch((const char *)(bp + (p + PF) * NR + 16), _MM_HINT_T0);
        __m512 b0 = _mm512_loadu_ps(bp + p * NR), b1 = _mm512_loadu_ps(bp + p * NR + 16);
        _Pragma("GCC unroll 12") for (int i = 0; i < rows; i++) {
            __m512 a = _mm512_set1_ps(ap[p * rows + i]);
            acc[i][0] = _mm512_fmadd_ps(a, b0, acc[i][0]);
            acc[i][1] = _mm512_fmadd_ps(a, b1, acc[i][1]);
        }
    }
    tn_store_tile_512(c, ldc, acc, rows, add);
}

static void ukernel(int64_t kc, const float *ap, const float *bp, float *c, int64_t ldc, int add) {
    ukernel_rows(MR, kc, ap, bp, c, ldc, add);
}

static void ukernel_short(int64_t kc, const float *ap, const float *bp, float *c, int64_t ldc, int add) {
    ukernel_rows(SHORT_MR, kc, ap, bp, c, ldc, add);
}

static float dot(int64_t n, const float *x, const float *y) {
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(y + i + 16), s1);
    }
    if (i + 16 <= n) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), s0);
        i += 16;
    }
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i), s1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

#elif defined(__AVX2__) && defined(__FMA__)

enum { MR = 6, NR = 16, SHORT_MR = 4 };

typedef __m256 peak_vec;
#define PEAK_LANES 8
#define PEAK_SET1 _mm256_set1_ps
#define PEAK_FMA _mm256_fmadd_ps
#define PEAK_ADD _mm256_add_ps
#define PEAK_FIRST _mm256_cvtss_f32

/* The accumulators are named variables, not an array: GCC 12 kept an array of them in
 * registers but also stored ten of them to the stack on every step of the k loop, which
 * held this kernel to a third of the FMA peak. */
#define TN_ROW_ACC(i) __m256 c##i##0 = _mm256_setzero_ps(), c##i##1 = c##i##0;
#define TN_ROW_FETCH(i)                                          \
    _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);      \
    _mm_prefetch((const char *)(c + i * ldc + NR - 1), _MM_HINT_T0);
#define TN_ROW_FMA(i)                                     \
    a = _mm256_broadcast_ss(ap + i);                      \
    c##i##0 = _mm256_fmadd_ps(a, b0, c##i##0);            \
    c##i##1 = _mm256_fmadd_ps(a, b1, c##i##1);
#define TN_ROW_STORE(i) store_row(c + i * ldc, c##i##0, c##i##1, add);
#define TN_ROWS_6(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define TN_ROWS_4(X) X(0) X(1) X(2) X(3)

static inline void store_row(float *row, __m256 lo, __m256 hi, int add) {
    if (add) {
        lo = _mm256_add_ps(_mm256_loadu_ps(row), lo);
        hi = _mm256_add_ps(_mm256_loadu_ps(row + 8), hi);
    }
    _mm256_storeu_ps(row, lo);
    _mm256_storeu_ps(row + 8, hi);
}

/* A micro-kernel of ROWS x 16. The tile of C it adds to or stores at the end comes from L3 or
 * memory (the tiles of a large C are visited once per k block): it is fetched while the
 * products run, so that neither the loads nor the stores wait for it. Four k steps per loop
 * turn: with one, the loop's own instructions held the kernel to 75-80% of the FMA peak once
 * A's panels came from L2 (126-154 against 163-173 GFLOP/s on two Zen 3 cores). The four-row
 * kernel keeps eight chains of FMAs in flight, as many as two FMA pipes of four cycles'
 * latency take. */
#define TN_UKERNEL(name, ROWS)                                                                     \
    static void name(int64_t kc, const float *ap, const float *bp, float *c, int64_t ldc, int add) { \
        TN_ROWS_##ROWS(TN_ROW_ACC)                                                                 \
        TN_ROWS_##ROWS(TN_ROW_FETCH)                                                               \
        _Pragma("GCC unroll 4") for (int64_t p = 0; p < kc; p++, ap += ROWS, bp += NR) {          \
            __m256 b0 = _mm256_loadu_ps(bp), b1 = _mm256_loadu_ps(bp + 8), a;                     \
            TN_ROWS_##ROWS(TN_ROW_FMA)                                                             \
        }                                                                                          \
        TN_ROWS_##ROWS(TN_ROW_STORE)                                                               \
    }

TN_UKERNEL(ukernel, 6)
TN_UKERNEL(ukernel_short, 4)

static float dot(int64_t n, const float *x, const float *y) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), s1);
    }
    __m256 s = _mm256_add_ps(s0, s1);
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    float total = _mm_cvtss_f32(h);
    for (; i < n; i++) total += x[i] * y[i];
    return total;
}

#else

enum { MR = 4, NR = 8 };

typedef float peak_vec; /* no FMA instruction here: a multiply and an add */
#define PEAK_LANES 1
#define PEAK_SET1(v) (v)
#define PEAK_FMA(x, m, a) ((x) * (m) + (a))
#define PEAK_ADD(x, y) ((x) + (y))
#define PEAK_FIRST(v) (v)

static void ukernel(int64_t kc, const float *ap, const float *bp, float *c, int64_t ldc, int add) {
    float acc[MR][NR] = {{0}};
    for (int64_t p = 0; p < kc; p++)
        for (int i = 0; i < MR; i++)
            for (int j = 0; j < NR; j++) acc[i][j] += ap[p * MR + i] * bp[p * NR + j];
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) c[i * ldc + j] = add ? c[i * ldc + j] + acc[i][j] : acc[i][j];
}

static float dot(int64_t n, const float *x, const float *y) {
    float s[4] = {0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int l = 0; l < 4; l++) s[l] += x[i + l] * y[i + l];
    for (; i < n; i++) s[0] += x[i] * y[i];
    return (s[0] + s[1]) + (s[2] + s[3]);
}

#endif

/* A panel of A for the micro-kernels: dst[p * h + r] = alpha * A[r, p] for p < kc, where row r
 * (r < rows <= h) is contiguous along k at a + r * lda elements of the dtype `half` names
 * (TN_PACK_F32, TN_PACK_BF16 or TN_PACK_F16), and zero for rows <= r < h. */
static inline float load_a(const void *a, int64_t i, int half) {
    if (half == TN_PACK_F32) return ((const float *)a)[i];
    if (half == TN_PACK_F16) return tn_f16_to_f32_inline(((const uint16_t *)a)[i]);
    return tn_bf16_to_f32_inline(((const uint16_t *)a)[i]);
}

static void pack_a_scalar(int64_t p0, int64_t kc, int32_t h, int32_t rows, const void *a, int64_t lda, int half,
                          float alpha, float *dst) {
    for (int32_t r = 0; r < h; r++)
        for (int64_t p = p0; p < kc; p++) dst[p * h + r] = r < rows ? alpha * load_a(a, r * lda + p, half) : 0.0f;
}

#if defined(__AVX2__)
static inline __m256 load_a8(const void *a, int64_t i, int half) {
    if (half == TN_PACK_F32) return _mm256_loadu_ps((const float *)a + i);
    if (half == TN_PACK_F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)a + i)));
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)a + i));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* Eight rows' vectors of eight k steps (the missing rows zero) transposed in place: v[q]
 * then holds k step q for all eight rows. */
static inline void transpose_8x8(__m256 v[8]) {
    __m256 u0 = _mm256_unpacklo_ps(v[0], v[1]), u1 = _mm256_unpackhi_ps(v[0], v[1]);
    __m256 u2 = _mm256_unpacklo_ps(v[2], v[3]), u3 = _mm256_unpackhi_ps(v[2], v[3]);
    __m256 u4 = _mm256_unpacklo_ps(v[4], v[5]), u5 = _mm256_unpackhi_ps(v[4], v[5]);
    __m256 u6 = _mm256_unpacklo_ps(v[6], v[7]), u7 = _mm256_unpackhi_ps(v[6], v[7]);
    __m256 q0 = _mm256_shuffle_ps(u0, u2, 0x44), q1 = _mm256_shuffle_ps(u0, u2, 0xEE);
    __m256 q2 = _mm256_shuffle_ps(u1, u3, 0x44), q3 = _mm256_shuffle_ps(u1, u3, 0xEE);
    __m256 q4 = _mm256_shuffle_ps(u4, u6, 0x44), q5 = _mm256_shuffle_ps(u4, u6, 0xEE);
    __m256 q6 = _mm256_shuffle_ps(u5, u7, 0x44), q7 = _mm256_shuffle_ps(u5, u7, 0xEE);
    v[0] = _mm256_permute2f128_ps(q0, q4, 0x20), v[1] = _mm256_permute2f128_ps(q1, q5, 0x20);
    v[2] = _mm256_permute2f128_ps(q2, q6, 0x20), v[3] = _mm256_permute2f128_ps(q3, q7, 0x20);
    v[4] = _mm256_permute2f128_ps(q0, q4, 0x31), v[5] = _mm256_permute2f128_ps(q1, q5, 0x31);
    v[6] = _mm256_permute2f128_ps(q2, q6, 0x31), v[7] = _mm256_permute2f128_ps(q3, q7, 0x31);
}

/* Eight k steps at a time, in groups of up to eight rows: each group's vectors transposed
 * into one vector per k step, of which the group's lanes are stored. Writing one float at a
 * time at stride h instead cost 4-5% of a product at M = 128 (six rows on AVX2), and 3.5% of
 * one at M = 512 (twelve rows on AVX-512). */
static void pack_a_panel(int64_t kc, int32_t h, int32_t rows, const void *a, int64_t lda, int half, float alpha,
                         float *dst) {
    int64_t p = 0;
    if (h == 4 || h == 6 || h == 8 || h == 12) {
        const __m256 scale = _mm256_set1_ps(alpha);
        for (; p + 8 <= kc; p += 8)
            for (int32_t g = 0; g < h; g += 8) {
                int32_t width = h - g < 8 ? h - g : 8;
                __m256 v[8];
                for (int r = 0; r < 8; r++)
                    v[r] = g + r < rows && r < width ? _mm256_mul_ps(scale, load_a8(a, (g + r) * lda + p, half))
                                                     : _mm256_setzero_ps();
                transpose_8x8(v);
                for (int q = 0; q < 8; q++) {
                    float *d = dst + (p + q) * h + g;
                    if (width == 8) {
                        _mm256_storeu_ps(d, v[q]);
                        continue;
                    }
                    _mm_storeu_ps(d, _mm256_castps256_ps128(v[q]));
                    if (width == 6) _mm_storel_pi((__m64 *)(d + 4), _mm256_extractf128_ps(v[q], 1));
                }
            }
    }
    pack_a_scalar(p, kc, h, rows, a, lda, half, alpha, dst);
}
#else
static void pack_a_panel(int64_t kc, int32_t h, int32_t rows, const void *a, int64_t lda, int half, float alpha,
                         float *dst) {
    pack_a_scalar(0, kc, h, rows, a, lda, half, alpha, dst);
}
#endif

/* The FMA peak probe: twelve independent chains x = x * m + a, enough to keep two FMA pipes of
 * four or five cycles' latency busy, and nothing else in the loop. m < 1 and a = 1 - m keep
 * the values between 1 and their start. The chains are named variables for the reason given
 * above. */
#define PEAK_STEP(i) x##i = PEAK_FMA(x##i, m, a);
#define PEAK_CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

static double fma_burst(int64_t iters, float *sink) {
    const peak_vec m = PEAK_SET1(0.9999999f), a = PEAK_SET1(1e-7f);
    /* different starting values (1 + i / 16, drifting towards 1): equal chains would be one
     * chain to the compiler */
#define PEAK_START(i) peak_vec x##i = PEAK_SET1(1.0f + (float)(i) / 16);
    PEAK_CHAINS(PEAK_START)
    for (int64_t i = 0; i < iters; i++) { PEAK_CHAINS(PEAK_STEP) }
    peak_vec s = PEAK_ADD(PEAK_ADD(PEAK_ADD(x0, x1), PEAK_ADD(x2, x3)),
                          PEAK_ADD(PEAK_ADD(x4, x5), PEAK_ADD(x6, x7)));
    s = PEAK_ADD(s, PEAK_ADD(PEAK_ADD(x8, x9), PEAK_ADD(x10, x11)));
    *sink = PEAK_FIRST(s); /* the result is used, so the loop is not dropped */
    return 2.0 * PEAK_LANES * 12 * (double)iters;
}

void TN_CONCAT(tn_gemm_install_, TN_ROWS_ISA)(tn_kernel_table *t) {
    t->gemm_mr = MR;
    t->gemm_nr = NR;
    t->gemm_ukernel = ukernel;
#if defined(__AVX512F__)
    t->gemm_prefetch_b = 0;
    t->gemm_a_panel_outer = 1;
#else
    t->gemm_prefetch_b = 1;
    t->gemm_a_panel_outer = 0;
#endif
#if defined(__AVX512F__) || defined(__AVX2__) /* the reference kernel has 4 rows already */
    t->gemm_short_mr = SHORT_MR;
    t->gemm_ukernel_short = ukernel_short;
#endif
    t->gemm_pack_a = pack_a_panel;
    t->dot_f32 = dot;
    t->fma_burst = fma_burst;
}
