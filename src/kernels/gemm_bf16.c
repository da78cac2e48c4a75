/* The bfloat16 GEMM micro-kernel and dot product on AVX512-BF16 (vdpbf16ps: per float32 lane,
 * acc += x[2j]*y[2j] + x[2j+1]*y[2j+1], products exact, sums rounded to float32).
 *
 * Built once, with -mavx512bf16; installed only when CPUID reports the extension.
 * Micro-kernel contract (see gemm.c): over kp pairs of k,
 *   c[i*ldc + j] += sum_p A(i, p) * B(p, j)   for i < MR, j < NR, p < 2*kp
 * where A(i, p) = a[i*lda + p] (rows of A read in place, or a packed copy when they are not
 * contiguous) and B is packed as pairs along k: bp[(q*NR + j)*2 + t] = B(2q + t, j). */
#include <immintrin.h>
#include <stdint.h>

#include "table.h"
#include "tile_512.h"

enum { MR = 8, NR = 32 };

static inline __m512bh as_bh(__m512i v) { return (__m512bh)v; }

static void ukernel(int64_t kp, const uint16_t *a, int64_t lda, const uint16_t *bp, float *c,
                    int64_t ldc, int add) {
    __m512 acc[MR][2];
    for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (int64_t q = 0; q < kp; q++) {
        __m512bh b0 = as_bh(_mm512_loadu_si512(bp + q * NR * 2));
        __m512bh b1 = as_bh(_mm512_loadu_si512(bp + q * NR * 2 + 32));
        for (int i = 0; i < MR; i++) {
            __m512bh x = as_bh(_mm512_broadcastd_epi32(_mm_loadu_si32(a + i * lda + 2 * q)));
            acc[i][0] = _mm512_dpbf16_ps(acc[i][0], x, b0);
            acc[i][1] = _mm512_dpbf16_ps(acc[i][1], x, b1);
        }
    }
    tn_store_tile_512(c, ldc, acc, MR, add);
}

/* Two rows of B (r0 = B(2q, .), r1 = B(2q+1, .), contiguous) into one k pair of a panel:
 * d[2c + t] = r_t[c] for c < n. */
static void pack_b_rows(int64_t n, const uint16_t *r0, const uint16_t *r1, uint16_t *d) {
    int64_t c = 0;
    for (; c + 16 <= n; c += 16) {
        __m512i lo = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(r0 + c)));
        __m512i hi = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(r1 + c)));
        _mm512_storeu_si512(d + 2 * c, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
    }
    for (; c < n; c++) {
        d[2 * c] = r0[c];
        d[2 * c + 1] = r1[c];
    }
}

/* out[j] = lane j of every row: a 16 x 16 transpose of 32-bit elements. */
static void transpose16(__m512i r[16]) {
    __m512i t[16], u[16];
    for (int k = 0; k < 8; k++) {
        t[2 * k] = _mm512_unpacklo_epi32(r[2 * k], r[2 * k + 1]);
        t[2 * k + 1] = _mm512_unpackhi_epi32(r[2 * k], r[2 * k + 1]);
    }
    for (int k = 0; k < 4; k++) { /* u[4k + m], lane L: rows 4k..4k+3 of column 4L + m */
        u[4 * k] = _mm512_unpacklo_epi64(t[4 * k], t[4 * k + 2]);
        u[4 * k + 1] = _mm512_unpackhi_epi64(t[4 * k], t[4 * k + 2]);
        u[4 * k + 2] = _mm512_unpacklo_epi64(t[4 * k + 1], t[4 * k + 3]);
        u[4 * k + 3] = _mm512_unpackhi_epi64(t[4 * k + 1], t[4 * k + 3]);
    }
    for (int m = 0; m < 4; m++) {
        __m512i v0 = _mm512_shuffle_i32x4(u[m], u[4 + m], 0x88);
        __m512i w0 = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0x88);
        __m512i v1 = _mm512_shuffle_i32x4(u[m], u[4 + m], 0xdd);
        __m512i w1 = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0xdd);
        r[m] = _mm512_shuffle_i32x4(v0, w0, 0x88);
        r[8 + m] = _mm512_shuffle_i32x4(v0, w0, 0xdd);
        r[4 + m] = _mm512_shuffle_i32x4(v1, w1, 0x88);
        r[12 + m] = _mm512_shuffle_i32x4(v1, w1, 0xdd);
    }
}

/* Columns of B that are contiguous along k (column c at col + c*cs) into a panel of nr pairs
 * per k pair: d[(q*nr + c)*2 + t] = col[c*cs + 2q + t] for c < n, q < kp (2*kp <= k length).
 * Sixteen columns by sixteen pairs at a time go through a register transpose. */
static void pack_b_cols(int64_t kp, int64_t n, const uint16_t *col, int64_t cs, uint16_t *d,
                        int32_t nr) {
    int64_t c = 0;
    for (; c + 16 <= n; c += 16) {
        int64_t q = 0;
        for (; q + 16 <= kp; q += 16) {
            __m512i r[16];
            for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_si512(col + (c + i) * cs + 2 * q);
            transpose16(r);
            for (int j = 0; j < 16; j++) _mm512_storeu_si512(d + ((q + j) * nr + c) * 2, r[j]);
        }
        for (; q < kp; q++)
            for (int64_t i = c; i < c + 16; i++) {
                d[(q * nr + i) * 2] = col[i * cs + 2 * q];
                d[(q * nr + i) * 2 + 1] = col[i * cs + 2 * q + 1];
            }
    }
    for (; c < n; c++)
        for (int64_t q = 0; q < kp; q++) {
            d[(q * nr + c) * 2] = col[c * cs + 2 * q];
            d[(q * nr + c) * 2 + 1] = col[c * cs + 2 * q + 1];
        }
}

static float dot(int64_t n, const uint16_t *x, const uint16_t *y) {
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        s0 = _mm512_dpbf16_ps(s0, as_bh(_mm512_loadu_si512(x + i)), as_bh(_mm512_loadu_si512(y + i)));
        s1 = _mm512_dpbf16_ps(s1, as_bh(_mm512_loadu_si512(x + i + 32)),
                              as_bh(_mm512_loadu_si512(y + i + 32)));
    }
    for (; i < n; i += 32) { /* the tail, masked: lanes past n read as zero */
        __mmask32 m = n - i >= 32 ? ~(__mmask32)0 : (__mmask32)((1u << (n - i)) - 1);
        s0 = _mm512_dpbf16_ps(s0, as_bh(_mm512_maskz_loadu_epi16(m, x + i)),
                              as_bh(_mm512_maskz_loadu_epi16(m, y + i)));
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

void tn_gemm_install_avx512bf16(tn_kernel_table *t) {
    t->gemm_bf16_mr = MR;
    t->gemm_bf16_nr = NR;
    t->gemm_bf16_ukernel = ukernel;
    t->gemm_bf16_copy_a = 0;
    t->gemm_bf16_prepare = NULL;
    t->gemm_bf16_pack_b_rows = pack_b_rows;
    t->gemm_bf16_pack_b_cols = pack_b_cols;
    t->dot_bf16 = dot;
}
