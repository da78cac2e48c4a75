/* The float32 reduction rows for one ISA variant (built once per ISA like rows.c; see
 * table.h for each function's contract). reduce.c and foreach_norm.c call them on rows and
 * blocks of rows: sums of squares, deviations from a mean, products, extremes, and rows
 * folded into a row of accumulators (a reduction over the outer dimension). */
#include <math.h>
#include <string.h>
#include <immintrin.h>

#include "half.h"
#include "table.h"
#include "vec16.h"

#ifndef TN_ROWS_ISA
#error "compile with -DTN_ROWS_ISA=ref|avx2|avx512"
#endif
#define TN_CONCAT_(a, b) a##b
#define TN_CONCAT(a, b) TN_CONCAT_(a, b)

/* Float partial sums over at most BLOCK elements, then double: the partial sums of a long row
 * stay short. */
enum { BLOCK = 4096 };

typedef int32_t vmask __attribute__((vector_size(4 * TN_VLANES)));
typedef uint32_t uvmask __attribute__((vector_size(4 * TN_VLANES)));

/* whether any lane of m is nonzero */
static inline int vmask_any(vmask m) {
#if TN_VLANES == 16
    __m512i v;
    memcpy(&v, &m, sizeof v);
    return _mm512_test_epi32_mask(v, v) != 0;
#elif TN_VLANES == 8
    __m256i v;
    memcpy(&v, &m, sizeof v);
    return !_mm256_testz_si256(v, v);
#else
    __m128i v;
    memcpy(&v, &m, sizeof v);
    return _mm_movemask_epi8(v) != 0;
#endif
}

static double lanes_sum(tn_v16 v) {
    float p[16];
    v16_store(p, v);
    double d[8];
    for (int l = 0; l < 8; l++) d[l] = (double)p[l] + (double)p[l + 8];
    for (int l = 0; l < 4; l++) d[l] += d[l + 4];
    return (d[0] + d[2]) + (d[1] + d[3]);
}

static tn_v16 v16_sub_scalar(tn_v16 a, float s) {
    for (int i = 0; i < TN_VPARTS; i++) a.p[i] -= s;
    return a;
}

/* sum of (x[i] - mu)^2 over one block (mu 0: sum of squares); four chains of vector adds */
static double squares_block(int64_t n, const float *x, float mu) {
    tn_v16 a0 = v16_zero(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        tn_v16 d0 = v16_sub_scalar(v16_load(x + i), mu), d1 = v16_sub_scalar(v16_load(x + i + 16), mu);
        tn_v16 d2 = v16_sub_scalar(v16_load(x + i + 32), mu), d3 = v16_sub_scalar(v16_load(x + i + 48), mu);
        a0 = v16_mul_add(a0, d0, d0);
        a1 = v16_mul_add(a1, d1, d1);
        a2 = v16_mul_add(a2, d2, d2);
        a3 = v16_mul_add(a3, d3, d3);
    }
    tn_v16 s = v16_add(v16_add(a0, a1), v16_add(a2, a3));
    for (; i + 16 <= n; i += 16) {
        tn_v16 d = v16_sub_scalar(v16_load(x + i), mu);
        s = v16_mul_add(s, d, d);
    }
    double total = lanes_sum(s);
    for (; i < n; i++) total += ((double)x[i] - mu) * ((double)x[i] - mu);
    return total;
}

static double sq_dev_f32(int64_t n, const float *x, float mu) {
    double total = 0;
    for (int64_t i = 0; i < n; i += BLOCK) total += squares_block(n - i < BLOCK ? n - i : BLOCK, x + i, mu);
    return total;
}

/* The exact product's state: 32 double lanes and their binary exponents, kept apart. */
typedef struct {
    double lane[32];
    int64_t shift[32];
} exact_lanes;

/* Multiplies m <= 1024 factors into the double lanes (a float32 product of many elements
 * leaves float's range long before double's; each factor is converted exactly and each step
 * rounds at double's precision). After the block, a normal lane's binary exponent moves into
 * its integer (its value back to [1, 2)), so that a long product never crawls through
 * double's subnormals; a lane that is not normal keeps its value. */
static void exact_block(exact_lanes *s, int64_t m, const float *x) {
    int64_t j = 0;
#if TN_VLANES == 16 /* each conversion from memory: GCC's loop loaded 16 and extracted halves */
    __m512d l0 = _mm512_loadu_pd(s->lane), l1 = _mm512_loadu_pd(s->lane + 8), l2 = _mm512_loadu_pd(s->lane + 16),
            l3 = _mm512_loadu_pd(s->lane + 24);
    for (; j + 32 <= m; j += 32) {
        l0 = _mm512_mul_pd(l0, _mm512_cvtps_pd(_mm256_loadu_ps(x + j)));
        l1 = _mm512_mul_pd(l1, _mm512_cvtps_pd(_mm256_loadu_ps(x + j + 8)));
        l2 = _mm512_mul_pd(l2, _mm512_cvtps_pd(_mm256_loadu_ps(x + j + 16)));
        l3 = _mm512_mul_pd(l3, _mm512_cvtps_pd(_mm256_loadu_ps(x + j + 24)));
    }
    _mm512_storeu_pd(s->lane, l0), _mm512_storeu_pd(s->lane + 8, l1), _mm512_storeu_pd(s->lane + 16, l2),
        _mm512_storeu_pd(s->lane + 24, l3);
#endif
    for (; j + 32 <= m; j += 32)
        for (int l = 0; l < 32; l++) s->lane[l] *= x[j + l];
    for (int l = 0; l < 32 && j + l < m; l++) s->lane[l] *= x[j + l]; /* j is a multiple of 32 */
    for (int l = 0; l < 32; l++) {
        uint64_t bits;
        memcpy(&bits, &s->lane[l], 8);
        int64_t e = (int64_t)((bits >> 52) & 0x7ff);
        int normal = e != 0 && e != 0x7ff;
        uint64_t unit = (bits & ~((uint64_t)0x7ff << 52)) | ((uint64_t)1023 << 52);
        s->shift[l] += normal ? e - 1023 : 0;
        bits = normal ? unit : bits;
        memcpy(&s->lane[l], &bits, 8);
    }
}

/* mant * 2^exp *= v * 2^shift, mant kept in [0.5, 1) (frexp's range) */
static void fold_factor(double *mant, int64_t *exp, double v, int64_t shift) {
    int e;
    *mant = frexp(*mant * v, &e);
    *exp += e + shift;
}

/* The float32 lanes' blocks: 1024 factors, 16 to each of 64 lanes. */
enum { PROD_BLOCK = 1024, PROD_PARTS = 64 / TN_VLANES, FTZ = 0x8000 };

/* Product of a contiguous float32 row, returned in double.
 *
 * Whole blocks of 1024 factors multiply in 64 float32 lanes, as PyTorch's CPU kernel does
 * (one multiply per element: an exact double product converts every element, and ran at
 * 0.6-0.8x the CPU's speed on rows of 1M-4M). What float lanes lack is range, so after each
 * block every lane's binary exponent moves into an integer and its value back to [1, 2): a
 * lane then overflows or underflows only within one block of 16 factors. The blocks run with
 * flush-to-zero set, so that a lane that leaves float's normal range part way through a block
 * is infinite or zero at its end, like a lane that met a zero, an infinity or a NaN; such a
 * block is multiplied instead into 32 exact double lanes (exact_block), with the float lanes
 * as they were before it. The tail of the row, and a row shorter than a block, go there too:
 * a short row's product is exact.
 *
 * The float lanes round as the CPU's do: a relative error of at most (n - 1) 2^-24, about
 * sqrt(n) 2^-24 on random data. Every ISA multiplies the same lanes in the same order, so all
 * give the reference's result bit for bit. */
static double prod_f32(int64_t n, const float *x) {
    exact_lanes ex;
    for (int l = 0; l < 32; l++) ex.lane[l] = 1.0, ex.shift[l] = 0;
    tn_vnative lane[PROD_PARTS];
    vmask shift[PROD_PARTS]; /* per block at most 127 in size: int32 holds 2^24 blocks */
    int64_t shifts[64] = {0};
    int64_t blocks = 0, i = 0;
    for (int p = 0; p < PROD_PARTS; p++) lane[p] = (tn_vnative){0} + 1.0f, shift[p] = (vmask){0};
    int fast = 0; /* a block went through the float lanes */
    unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | FTZ);
    for (; i + PROD_BLOCK <= n; i += PROD_BLOCK) {
        tn_vnative before[PROD_PARTS];
        memcpy(before, lane, sizeof lane);
        for (int j = 0; j < PROD_BLOCK; j += 64)
            for (int p = 0; p < PROD_PARTS; p++) {
                tn_vnative v;
                memcpy(&v, x + i + j + p * TN_VLANES, sizeof v);
                lane[p] *= v;
            }
        vmask e[PROD_PARTS], bad = {0};
        for (int p = 0; p < PROD_PARTS; p++) { /* exponent fields 0 and 255: not normal */
            e[p] = ((vmask)lane[p] >> 23) & 0xff;
            bad |= (vmask)((uvmask)(e[p] - 1) > 253);
        }
        if (vmask_any(bad)) {
            memcpy(lane, before, sizeof lane);
            _mm_setcsr(csr); /* double's subnormals are kept there */
            exact_block(&ex, PROD_BLOCK, x + i);
            _mm_setcsr(csr | FTZ);
            continue;
        }
        for (int p = 0; p < PROD_PARTS; p++) {
            shift[p] += e[p] - 127;
            lane[p] = (tn_vnative)(((vmask)lane[p] & (int32_t)0x807fffff) | 0x3f800000);
        }
        fast = 1;
        if (++blocks == (1 << 24)) { /* before shift could overflow */
            for (int p = 0; p < PROD_PARTS; p++)
                for (int l = 0; l < TN_VLANES; l++) shifts[p * TN_VLANES + l] += shift[p][l];
            memset(shift, 0, sizeof shift);
            blocks = 0;
        }
    }
    _mm_setcsr(csr);
    for (; i < n; i += PROD_BLOCK) exact_block(&ex, n - i < PROD_BLOCK ? n - i : PROD_BLOCK, x + i);
    double mant = 1.0;
    int64_t exponent = 0;
    for (int p = 0; p < PROD_PARTS && fast; p++)
        for (int l = 0; l < TN_VLANES; l++)
            fold_factor(&mant, &exponent, lane[p][l], shifts[p * TN_VLANES + l] + shift[p][l]);
    for (int l = 0; l < 32; l++) fold_factor(&mant, &exponent, ex.lane[l], ex.shift[l]);
    if (exponent > 100000) exponent = 100000; /* ldexp saturates to inf or 0 long before */
    if (exponent < -100000) exponent = -100000;
    return ldexp(mant, (int)exponent);
}

/* x where x > m (x < m), else m, lane by lane: the ISA's max (min) instruction, which returns
 * its second operand when either is NaN */
static inline tn_vnative pick(tn_vnative x, tn_vnative m, int want_max) {
#if TN_VLANES == 16
    return want_max ? _mm512_max_ps(x, m) : _mm512_min_ps(x, m);
#elif TN_VLANES == 8
    return want_max ? _mm256_max_ps(x, m) : _mm256_min_ps(x, m);
#else
    return want_max ? _mm_max_ps(x, m) : _mm_min_ps(x, m);
#endif
}

/* m = the larger (smaller) of m and x lane by lane; a NaN in x sets its lane of `nan` */
static inline void extreme_step(tn_v16 *m, vmask *nan, tn_v16 x, int want_max) {
    for (int i = 0; i < TN_VPARTS; i++) {
        m->p[i] = pick(x.p[i], m->p[i], want_max);
        nan[i] |= x.p[i] != x.p[i];
    }
}

static float extreme_f32(int64_t n, const float *x, int want_max) {
    if (n <= 0) return want_max ? -INFINITY : INFINITY;
    float first[16]; /* a short row's unused lanes repeat x[0] */
    for (int l = 0; l < 16; l++) first[l] = l < n ? x[l] : x[0];
    tn_v16 start = v16_load(first);
    tn_v16 m0 = start, m1 = start, m2 = start, m3 = start;
    vmask nan[TN_VPARTS];
    memset(nan, 0, sizeof nan);
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        extreme_step(&m0, nan, v16_load(x + i), want_max);
        extreme_step(&m1, nan, v16_load(x + i + 16), want_max);
        extreme_step(&m2, nan, v16_load(x + i + 32), want_max);
        extreme_step(&m3, nan, v16_load(x + i + 48), want_max);
    }
    for (; i + 16 <= n; i += 16) extreme_step(&m0, nan, v16_load(x + i), want_max);
    extreme_step(&m0, nan, m1, want_max);
    extreme_step(&m0, nan, m2, want_max);
    extreme_step(&m0, nan, m3, want_max);
    float lanes[16];
    v16_store(lanes, m0);
    float best = lanes[0];
    for (int l = 1; l < 16; l++) best = want_max ? (lanes[l] > best ? lanes[l] : best) : (lanes[l] < best ? lanes[l] : best);
    int any_nan = 0;
    for (int p = 0; p < TN_VPARTS; p++)
        for (int l = 0; l < TN_VLANES; l++) any_nan |= nan[p][l] != 0;
    for (; i < n; i++) {
        any_nan |= x[i] != x[i];
        best = want_max ? (x[i] > best ? x[i] : best) : (x[i] < best ? x[i] : best);
    }
    return any_nan ? NAN : best;
}

/* One loop per direction, which vectorizes with AVX2 or AVX-512 (an int64 compare has no SSE2
 * instruction, hence a per-ISA row: reduce.c's scalar loop ran at a third of the CPU's speed). */
static int64_t extreme_i64(int64_t n, const int64_t *x, int want_max) {
    int64_t m = x[0];
    if (want_max)
        for (int64_t i = 1; i < n; i++) m = x[i] > m ? x[i] : m;
    else
        for (int64_t i = 1; i < n; i++) m = x[i] < m ? x[i] : m;
    return m;
}

/* Eight partial sums, wrapping as two's complement (the CPU's int64 sum), so that the loop
 * vectorizes with the ISA's 64-bit adds (reduce.c's loop is built for SSE2: 1M int64 took
 * 1.16x the CPU's time). The order does not change a wrapping sum. */
static uint64_t sum_i64(int64_t n, const int64_t *x) {
    uint64_t s[8] = {0}, sum = 0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) s[l] += (uint64_t)x[i + l];
    for (; i < n; i++) sum += (uint64_t)x[i];
    for (int l = 0; l < 8; l++) sum += s[l];
    return sum;
}

/* Sixteen float16 values from any address, widened (exactly): F16C where the variant has it. */
static inline tn_v16 v16_load_f16(const uint16_t *x) {
    tn_v16 r;
#if defined(__F16C__) && TN_VLANES == 16
    __m512 w = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)x));
    memcpy(&r.p[0], &w, sizeof w);
#elif defined(__F16C__)
    for (int i = 0; i < TN_VPARTS; i++) {
        __m256 w = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(x + 8 * i)));
        memcpy(&r.p[i], &w, sizeof w);
    }
#else
    float f[16];
    for (int l = 0; l < 16; l++) f[l] = tn_f16_to_f32_inline(x[l]);
    memcpy(&r, f, sizeof f);
#endif
    return r;
}

/* Sixteen values of a row of `kind` (TN_DTYPE_F32, BF16 or F16) from element i on, as floats. */
static inline tn_v16 load16(tn_dtype kind, const void *x, int64_t i) {
    return kind == TN_DTYPE_F32    ? v16_load((const float *)x + i)
           : kind == TN_DTYPE_BF16 ? v16_load_bf16((const uint16_t *)x + i)
                                   : v16_load_f16((const uint16_t *)x + i);
}

/* acc[i..i+32) += the sum (of squares) of `rows` rows' elements there (float32, or bfloat16
 * and float16 widened as they are loaded), summed in registers: even rows and odd rows in two
 * chains, added at the end; acc is read and written once per block of rows instead of once
 * per four rows (the column sums of x.sum(0) ran 15-20% faster on rows from L3). The order is
 * the same on every ISA. */
static void fold_sums_32(tn_dtype kind, int squares, int64_t rows, const void *x, int64_t ldx, float *acc) {
    tn_v16 e0 = v16_zero(), e1 = e0, o0 = e0, o1 = e0;
    int64_t r = 0, at = 0;
    for (; r + 2 <= rows; r += 2, at += 2 * ldx) {
        tn_v16 a0 = load16(kind, x, at), a1 = load16(kind, x, at + 16);
        tn_v16 b0 = load16(kind, x, at + ldx), b1 = load16(kind, x, at + ldx + 16);
        if (squares) {
            e0 = v16_mul_add(e0, a0, a0), e1 = v16_mul_add(e1, a1, a1);
            o0 = v16_mul_add(o0, b0, b0), o1 = v16_mul_add(o1, b1, b1);
        } else {
            e0 = v16_add(e0, a0), e1 = v16_add(e1, a1), o0 = v16_add(o0, b0), o1 = v16_add(o1, b1);
        }
    }
    if (r < rows) {
        tn_v16 a0 = load16(kind, x, at), a1 = load16(kind, x, at + 16);
        e0 = squares ? v16_mul_add(e0, a0, a0) : v16_add(e0, a0);
        e1 = squares ? v16_mul_add(e1, a1, a1) : v16_add(e1, a1);
    }
    v16_store(acc, v16_add(v16_load(acc), v16_add(e0, o0)));
    v16_store(acc + 16, v16_add(v16_load(acc + 16), v16_add(e1, o1)));
}

/* Sums (of squares) of `rows` bfloat16 or float16 rows into float accumulators, widened in
 * registers: the chunked path widened four rows at a time into L1 and folded them from there
 * (x.sum(0) of 1000 x 1000 bf16 took 1.5x the CPU's time). Returns 0 for other ops. */
static int fold_rows_half(tn_dtype t, tn_fold_op op, int64_t n, int64_t rows, const uint16_t *x, int64_t ldx,
                          float *restrict acc) {
    if (op != TN_FOLD_SUM && op != TN_FOLD_SUM_SQUARES) return 0;
    int bf16 = t == TN_DTYPE_BF16, squares = op == TN_FOLD_SUM_SQUARES;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) fold_sums_32(t, squares, rows, x + i, ldx, acc + i);
    for (; i < n; i++) {
        float sum = 0.0f;
        for (int64_t r = 0; r < rows; r++) {
            uint16_t h = x[r * ldx + i];
            float v = bf16 ? tn_bf16_to_f32_inline(h) : tn_f16_to_f32_inline(h);
            sum += squares ? v * v : v;
        }
        acc[i] += sum;
    }
    return 1;
}

/* acc[i] = op(acc[i], x[r*ldx + i]) for each of `rows` rows. */
static void fold_rows_f32(tn_fold_op op, int64_t n, int64_t rows, const float *x, int64_t ldx, float *restrict acc) {
    int64_t r = 0;
    if (op == TN_FOLD_SUM || op == TN_FOLD_SUM_SQUARES) {
        int64_t i = 0;
        for (; i + 32 <= n; i += 32) fold_sums_32(TN_DTYPE_F32, op == TN_FOLD_SUM_SQUARES, rows, x + i, ldx, acc + i);
        if (i == n) return;
        x += i, acc += i, n -= i; /* the last columns: four rows per pass over acc */
        for (; r + 4 <= rows; r += 4) {
            const float *restrict r0 = x + r * ldx, *restrict r1 = r0 + ldx, *restrict r2 = r1 + ldx,
                                  *restrict r3 = r2 + ldx;
            if (op == TN_FOLD_SUM)
                for (int64_t j = 0; j < n; j++) acc[j] += (r0[j] + r1[j]) + (r2[j] + r3[j]);
            else
                for (int64_t j = 0; j < n; j++) acc[j] += (r0[j] * r0[j] + r1[j] * r1[j]) + (r2[j] * r2[j] + r3[j] * r3[j]);
        }
    }
    for (; r < rows; r++) {
        const float *restrict row = x + r * ldx;
        switch (op) {
        case TN_FOLD_SUM:
            for (int64_t i = 0; i < n; i++) acc[i] += row[i];
            break;
        case TN_FOLD_SUM_SQUARES:
            for (int64_t i = 0; i < n; i++) acc[i] += row[i] * row[i];
            break;
        case TN_FOLD_PROD:
            for (int64_t i = 0; i < n; i++) acc[i] *= row[i];
            break;
        case TN_FOLD_MAX: /* NaN stays, and a NaN in the row wins */
            for (int64_t i = 0; i < n; i++) acc[i] = row[i] > acc[i] || row[i] != row[i] ? row[i] : acc[i];
            break;
        case TN_FOLD_MIN:
            for (int64_t i = 0; i < n; i++) acc[i] = row[i] < acc[i] || row[i] != row[i] ? row[i] : acc[i];
            break;
        }
    }
}

void TN_CONCAT(tn_reduce_install_, TN_ROWS_ISA)(tn_kernel_table *t) {
    t->sq_dev_f32 = sq_dev_f32;
    t->prod_f32 = prod_f32;
    t->extreme_f32 = extreme_f32;
    t->extreme_i64 = extreme_i64;
    t->sum_i64 = sum_i64;
    t->fold_rows_f32 = fold_rows_f32;
    t->fold_rows_half = fold_rows_half;
}
