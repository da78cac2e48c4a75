/* The end of an AVX-512 micro-kernel whose tile rows are two zmm registers (32 floats):
 * c[i*ldc + 0..31] = acc[i] (+ c when add). Shared by the float32 and bf16 micro-kernels. */
#ifndef TN_KERNELS_TILE_512_H
#define TN_KERNELS_TILE_512_H

#include <immintrin.h>
#include <stdint.h>

static inline void tn_store_tile_512(float *c, int64_t ldc, __m512 (*acc)[2], int rows, int add) {
    for (int i = 0; i < rows; i++) {
        float *row = c + i * ldc;
        if (add) {
            acc[i][0] = _mm512_add_ps(_mm512_loadu_ps(row), acc[i][0]);
            acc[i][1] = _mm512_add_ps(_mm512_loadu_ps(row + 16), acc[i][1]);
        }
        _mm512_storeu_ps(row, acc[i][0]);
        _mm512_storeu_ps(row + 16, acc[i][1]);
    }
}

#endif
