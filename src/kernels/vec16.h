/* Sixteen floats as one vector (an AVX-512 register; two or four on the other ISAs), and a
 * load of one from any float address, for the per-ISA files whose loops the compiler does not
 * vectorize well by itself. Helpers take vectors by pointer: passing them by value would
 * depend on the ISA's calling convention. */
#ifndef TN_KERNELS_VEC16_H
#define TN_KERNELS_VEC16_H

typedef float tn_v16 __attribute__((vector_size(64)));
typedef float tn_v16u __attribute__((vector_size(64), aligned(4), may_alias));
typedef float tn_v8 __attribute__((vector_size(32)));
typedef float tn_v4 __attribute__((vector_size(16)));
#define LOAD16(p) (*(const tn_v16u *)(const void *)(p))

#endif
