/* Matrix multiplication: C = alpha * A @ B + beta * C over strided operands, batched.
 *
 * A is m x k, B is k x n, C is m x n; each with its own row and column strides (in elements,
 * so transposed operands need no copy) and dtype (f32, bf16, f16; bf16/f16 accumulate in
 * f32). beta == 0 means C is not read (NaNs in it do not propagate), as in BLAS. Blocked and
 * packed (BLIS-style) with an ISA-specific micro-kernel; a dot-product path serves small m
 * when B's columns are contiguous (the usual weight layout of nn.Linear). */
#ifndef TN_GEMM_H
#define TN_GEMM_H

#include <stdint.h>

#include "tn/dtype.h"
#include "tn/status.h"
#include "tn/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tn_matrix {
    void *data;
    tn_dtype dtype;
    int64_t row_stride;   /* elements between rows */
    int64_t col_stride;   /* elements between columns */
    int64_t batch_stride; /* elements between matrices of a batch (0: shared) */
} tn_matrix;

typedef struct tn_gemm {
    int64_t batch;
    int64_t m;
    int64_t n;
    int64_t k;
    tn_matrix a;
    tn_matrix b;
    tn_matrix c;
    float alpha;
    float beta;
    /* NULL, or B already packed by tn_gemm_pack_b_async for a GEMM with the same B, n, k and
     * operand dtypes: the blocked path then reads it instead of packing B itself. */
    const void *b_packed;
} tn_gemm;

tn_status tn_gemm_async(tn_stream_t stream, const char *name, const tn_gemm *g);

/* Integer products: A, B and C of g share one integer dtype (u8, i8, i16, i32, i64), C = alpha
 * * A @ B + beta * C with the wraparound of that dtype, as PyTorch computes them (the sums are
 * kept modulo 2^64 and truncated: the same result as summing in the dtype). g's float alpha,
 * beta and b_packed are not used; beta == 0: C is not read. A plain loop split over rows:
 * integer matrix products are rare in models. */
tn_status tn_gemm_int_async(tn_stream_t stream, const char *name, const tn_gemm *g, int64_t alpha,
                            int64_t beta);
void tn_kernel_gemm_int(const tn_gemm *g, int64_t alpha, int64_t beta, int32_t ith, int32_t nth);

/* Packing B once. A GEMM whose B is used again unchanged (a weight) can keep it packed for
 * this CPU's micro-kernel: the layout holds every k block's column panels in order, so each
 * thread finds its panels by offset. tn_gemm_packed_b_bytes is the size of that layout, or 0
 * when the GEMM cannot use one (a batch of different B matrices, an empty product). The
 * blocked path serves m > 4; smaller products ignore b_packed and read B itself. */
int64_t tn_gemm_packed_b_bytes(const tn_gemm *g);
tn_status tn_gemm_pack_b_async(tn_stream_t stream, const tn_gemm *g, void *dst);
void tn_kernel_gemm_pack_b(const tn_gemm *g, void *dst, int32_t ith, int32_t nth);

/* Whether a launch splits this product's k among threads instead of its columns: a
 * matrix-vector product (m <= 4) with B's rows contiguous and k >= n, B of 2 MB or more
 * (x @ W with W stored k x n: GPT-2's Conv1D in a decode step). Each thread then computes
 * alpha * A[:, k0:k1] @ B[k0:k1, :] whole, single-threaded, and the launch adds the partial
 * rows; a thread's block of B's rows stays in its cache between calls, where its share of
 * the columns (strided) did not: 1 x 1536 x 576 took 47 us, against 28 on the CPU. */
int tn_gemm_split_k(const tn_gemm *g);

/* Scratch (in floats) one thread of tn_kernel_gemm needs. */
int64_t tn_gemm_scratch_floats(void);
/* Whether tn_kernel_gemm writes this GEMM's bfloat16/float16 C itself (bfloat16 operands on
 * a CPU with AVX512-BF16, m > 4, C's rows contiguous): it then rounds each block of C once,
 * from a float32 block kept in cache. */
int tn_gemm_half_c(const tn_gemm *g);
/* One thread's share; `scratch` holds tn_gemm_scratch_floats() floats, 64-byte aligned.
 * C must be float32 here unless tn_gemm_half_c(g) (the launch converts other output dtypes). */
void tn_kernel_gemm(const tn_gemm *g, float *scratch, int32_t ith, int32_t nth);

/* The FMA peak this machine reaches: every kernel thread runs independent chains of the active
 * variant's widest fused multiply-add for about `seconds` (best of a few tries), with nothing
 * else in the loop. GFLOP/s, counting a multiply-add as two operations. It measures what the
 * cores give now (with their boost clock), which is the roof GEMM efficiency is read against.
 * Call it while no stream is running kernels (the pool would be busy: one thread's peak). */
double tn_fma_peak_gflops(double seconds);
/* One thread's share: runs `iters` steps of the chains, returns the operations done; *sink
 * receives a value of the chains (so that the work is used). */
double tn_kernel_fma_burst(int64_t iters, float *sink);

#ifdef __cplusplus
}
#endif
#endif
