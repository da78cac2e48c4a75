/* The bfloat16 GEMM micro-kernel on AMX (Intel's tile unit: tdpbf16ps multiplies a 16 x 32
 * bf16 tile of A by a 32 x 16 tile of B held as pairs along k, into a 16 x 16 float32 tile).
 *
 * Built once, with -mamx-tile -mamx-bf16 (and AVX512-BF16 for the k tail); installed over
 * gemm_bf16.c's micro-kernel only when CPUID reports AMX and Linux grants this process the
 * tile state (arch_prctl ARCH_REQ_XCOMP_PERM, done by isa.c). Same contract as gemm_bf16.c:
 * over kp pairs of k, c[i*ldc + j] (+)= sum_p A(i, p) * B(p, j) for i < MR, j < NR, A's rows
 * at a + i*lda, B packed as pairs: bp[(q*NR + j)*2 + t] = B(2q + t, j). B's panel is exactly
 * AMX's pair layout: rows of 16 pairs of a 32-column panel are 128 bytes apart.
 *
 * The tile: 32 x 32 floats in four accumulator tiles (tmm0..3), two tiles of A (tmm4, 5) and
 * two of B (tmm6, 7) per 16 pairs of k. Pairs past the last multiple of 16 go through
 * vdpbf16ps on the tile after it is stored. */
#include <immintrin.h>
#include <stdint.h>

#include "table.h"

enum { MR = 32, NR = 32, KT = 16 /* pairs per tile */ };

/* Every tile register: 16 rows of 64 bytes. Loaded by gemm.c (gemm_bf16_prepare) before each
 * block's micro-tiles, not once per thread: other code on a thread (PyTorch's own AMX kernels
 * on the host thread) may configure the tiles differently, and loading it at every micro-tile
 * cost 15-30% (it is microcoded). */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

/* In read-only data: built on the stack of a leaf function, the configuration sat in the red
 * zone and ldtilecfg faulted (SIGSEGV) in the Python build. */
static const tile_config config = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

static void configure(void) { _tile_loadconfig(&config); }

static inline __m512bh as_bh(__m512i v) { return (__m512bh)v; }

/* acc (MR x NR floats, row stride NR) += the pairs q0 .. kp of A and B, on AVX512-BF16. */
static void tail(int64_t q0, int64_t kp, const uint16_t *a, int64_t lda, const uint16_t *bp, float *acc) {
    for (int i = 0; i < MR; i++) {
        __m512 c0 = _mm512_loadu_ps(acc + i * NR), c1 = _mm512_loadu_ps(acc + i * NR + 16);
        for (int64_t q = q0; q < kp; q++) {
            __m512bh x = as_bh(_mm512_broadcastd_epi32(_mm_loadu_si32(a + i * lda + 2 * q)));
            c0 = _mm512_dpbf16_ps(c0, x, as_bh(_mm512_loadu_si512(bp + q * NR * 2)));
            c1 = _mm512_dpbf16_ps(c1, x, as_bh(_mm512_loadu_si512(bp + q * NR * 2 + 32)));
        }
        _mm512_storeu_ps(acc + i * NR, c0);
        _mm512_storeu_ps(acc + i * NR + 16, c1);
    }
}

/* The accumulator tiles to and from the 32 x 32 floats at c (row stride ldc floats). */
static inline __attribute__((always_inline)) void load_acc(const float *c, int64_t ldc) {
    _tile_loadd(0, c, ldc * 4);
    _tile_loadd(1, c + 16, ldc * 4);
    _tile_loadd(2, c + 16 * ldc, ldc * 4);
    _tile_loadd(3, c + 16 * ldc + 16, ldc * 4);
}

static inline __attribute__((always_inline)) void store_acc(float *c, int64_t ldc) {
    _tile_stored(0, c, ldc * 4);
    _tile_stored(1, c + 16, ldc * 4);
    _tile_stored(2, c + 16 * ldc, ldc * 4);
    _tile_stored(3, c + 16 * ldc + 16, ldc * 4);
}

static void ukernel(int64_t kp, const uint16_t *a, int64_t lda, const uint16_t *bp, float *c, int64_t ldc,
                    int add) {
    const int64_t whole = kp / KT * KT, astride = lda * 2;
    /* with no k tail the tiles go to C directly; else through acc, where the tail adds */
    const int direct = whole == kp;
    if (direct && add) {
        load_acc(c, ldc);
    } else {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
    }
    for (int64_t q = 0; q < whole; q += KT) {
        _tile_loadd(4, a + 2 * q, astride);
        _tile_loadd(5, a + 16 * lda + 2 * q, astride);
        _tile_loadd(6, bp + q * NR * 2, NR * 4);
        _tile_loadd(7, bp + q * NR * 2 + 32, NR * 4);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    if (direct) {
        store_acc(c, ldc);
        return;
    }
    float acc[MR * NR] __attribute__((aligned(64)));
    store_acc(acc, NR);
    tail(whole, kp, a, lda, bp, acc);
    for (int i = 0; i < MR; i++)
        for (int h = 0; h < 2; h++) {
            __m512 v = _mm512_load_ps(acc + i * NR + 16 * h);
            float *row = c + i * ldc + 16 * h;
            _mm512_storeu_ps(row, add ? _mm512_add_ps(_mm512_loadu_ps(row), v) : v);
        }
}

/* Over gemm_bf16.c's install (its packing routines stay). */
void tn_gemm_install_amx(tn_kernel_table *t) {
    t->gemm_bf16_mr = MR;
    t->gemm_bf16_nr = NR;
    t->gemm_bf16_ukernel = ukernel;
    t->gemm_bf16_prepare = configure;
    t->gemm_bf16_copy_a = 1;
}
