/* The kernel table: the row functions that have ISA variants. Internal to src/kernels. */
#ifndef TN_KERNELS_TABLE_H
#define TN_KERNELS_TABLE_H

#include <stdint.h>

#include "tn/elementwise.h"
#include "tn/isa.h"

struct tn_attention;

/* The constants of a float32 Adam/AdamW step (see optim.c); scale 1 when the gradients are
 * not scaled, sign -1 with maximize. */
/* The element type of the rows gemm_pack_a reads. */
typedef enum tn_pack_dtype { TN_PACK_F32, TN_PACK_BF16, TN_PACK_F16 } tn_pack_dtype;

typedef struct tn_adam_f32_step {
    float lr, wd, b1, b2, eps, step_size, bc2, inv_scale, sign;
    int scaled, decoupled;
} tn_adam_f32_step;

/* How fold_rows_f32 combines a row into its accumulators. */
typedef enum tn_fold_op { TN_FOLD_SUM, TN_FOLD_SUM_SQUARES, TN_FOLD_PROD, TN_FOLD_MAX, TN_FOLD_MIN } tn_fold_op;

typedef struct tn_kernel_table {
    /* o[i*os] = op(a[i*as], b[i*bs]) for i < n, all float32 (strides in elements, may be 0);
     * returns 0 if the op has no float32 row (the caller then takes the generic path) */
    int (*binary_f32)(tn_binary_op op, int64_t n, float *o, int64_t os, const float *a,
                       int64_t as, const float *b, int64_t bs, float alpha);
    /* o[i*os] = op(x[i*xs]) for i < n, all float32; returns 0 as above */
    int (*unary_f32)(tn_unary_op op, int64_t n, float *o, int64_t os, const float *x,
                      int64_t xs);
    /* the same over bfloat16 rows, widened and rounded in the loop (rows_f32.h); 0 for the ops
     * the caller computes in float32 chunks instead */
    int (*binary_bf16)(tn_binary_op op, int64_t n, uint16_t *o, int64_t os, const uint16_t *a, int64_t as,
                       const uint16_t *b, int64_t bs, float alpha);
    int (*unary_bf16)(tn_unary_op op, int64_t n, uint16_t *o, int64_t os, const uint16_t *x, int64_t xs);
    /* the same over float16 rows with the F16C conversions (contiguous output, operands
     * contiguous or single values); 0 without F16C or for other layouts and ops */
    int (*binary_f16)(tn_binary_op op, int64_t n, uint16_t *o, int64_t os, const uint16_t *a, int64_t as,
                      const uint16_t *b, int64_t bs, float alpha);
    int (*unary_f16)(tn_unary_op op, int64_t n, uint16_t *o, int64_t os, const uint16_t *x, int64_t xs);
    /* addcmul, addcdiv or lerp over contiguous float32 rows: o[i] = op(a[i], b[i], c[i]) with
     * the value s (lerp: c NULL takes s as the weight); o may be a */
    void (*ternary_f32)(tn_ternary_op op, int64_t n, float *o, const float *a, const float *b, const float *c,
                        float s);
    /* an Adam/AdamW step over n contiguous float32 elements of p, g (unscaled in place when
     * scaled), m, v and vmax (NULL without amsgrad) */
    void (*adam_f32)(const tn_adam_f32_step *c, int64_t n, float *p, float *g, float *m, float *v, float *vmax);
    /* GEMM micro-kernel (see gemm_ukernel.c) and its tile: gemm_mr <= TN_GEMM_MAX_MR rows of
     * packed A by gemm_nr <= TN_GEMM_MAX_NR columns of packed B */
    int32_t gemm_mr;
    int32_t gemm_nr;
    /* add: c += the product; else c = the product (C is not read) */
    void (*gemm_ukernel)(int64_t kc, const float *ap, const float *bp, float *c, int64_t ldc, int add);
    /* the same for panels of gemm_short_mr < gemm_mr rows, which the last rows of a block
     * take when a last full panel would be mostly padding; 0 and NULL where there is none */
    int32_t gemm_short_mr;
    /* non-zero: while the micro-kernel walks a pre-packed B panel, the next one is fetched by
     * software (the AVX2 machines measured it faster; on AVX-512, Sapphire Rapids' hardware
     * prefetcher does it, and the software fetch cost 4% at M = 128) */
    int32_t gemm_prefetch_b;
    /* the order of the micro-tiles of a block (gemm.c): non-zero, each A panel runs across
     * the whole B block (the A panel stays in L1, B's block comes from L2); zero, each B panel
     * runs down the A block (the B panel stays in L1). AVX-512's B panel (KC x 32 floats,
     * 32 KB) fills two thirds of Sapphire Rapids' L1 and A panels outer measured 2-9% faster
     * there; AVX2's 16 KB panel stays in L1, and the other order measured 1-14% faster */
    int32_t gemm_a_panel_outer;
    void (*gemm_ukernel_short)(int64_t kc, const float *ap, const float *bp, float *c, int64_t ldc, int add);
    /* a panel of h rows of packed A: dst[p*h + r] = alpha * A[r, p] for p < kc, row r < rows
     * contiguous at a + r*lda elements (of the tn_pack_dtype `half`), zero for r >= rows */
    void (*gemm_pack_a)(int64_t kc, int32_t h, int32_t rows, const void *a, int64_t lda, int half, float alpha,
                        float *dst);
    /* `iters` steps of independent FMA chains in the widest vectors (the FMA peak probe);
     * returns the floating-point operations done; *sink gets a value of the chains */
    double (*fma_burst)(int64_t iters, float *sink);
    /* sum of x[i] * y[i] for i < n, contiguous float32 */
    float (*dot_f32)(int64_t n, const float *x, const float *y);
    /* the same over bfloat16 inputs, accumulated in float32 */
    float (*dot_bf16)(int64_t n, const uint16_t *x, const uint16_t *y);
    /* bfloat16 x bfloat16 micro-kernel over rows of A (in place or packed) and a panel of B
     * packed as pairs along k, and its tile (see gemm_bf16.c); NULL where the CPU has no
     * AVX512-BF16 (bf16 then goes through gemm_ukernel) */
    int32_t gemm_bf16_mr;
    int32_t gemm_bf16_nr;
    void (*gemm_bf16_ukernel)(int64_t kp, const uint16_t *a, int64_t lda, const uint16_t *bp,
                              float *c, int64_t ldc, int add);
    /* non-zero: A's rows are copied into the block even when they could be read in place
     * (AMX loads 16 rows per tile: rows 4 KB apart share one set of the L1 cache) */
    int32_t gemm_bf16_copy_a;
    /* NULL, or called on the thread before a run of gemm_bf16_ukernel calls (AMX: loads the
     * tile configuration); nothing else runs on the thread until the run ends */
    void (*gemm_bf16_prepare)(void);
    /* d[2c + t] = r_t[c] for c < n: two contiguous rows of B into one k pair of a panel */
    void (*gemm_bf16_pack_b_rows)(int64_t n, const uint16_t *r0, const uint16_t *r1, uint16_t *d);
    /* d[(q*nr + c)*2 + t] = col[c*cs + 2q + t] for c < n, q < kp: columns of B contiguous
     * along k into a panel */
    void (*gemm_bf16_pack_b_cols)(int64_t kp, int64_t n, const uint16_t *col, int64_t cs,
                                  uint16_t *d, int32_t nr);
    /* y[i] += sum over r < rows of a[r] * x[r*ldx + i], for i < n; x bfloat16, y float32 */
    void (*axpy_rows_bf16)(int64_t n, int64_t rows, const float *a, const uint16_t *x, int64_t ldx, float *y);
    /* d[i*ds] = float32(s[i*ss]) for i < n, t bfloat16 or float16 */
    /* typed_rows.h's rows of the integer, boolean and comparison ops; 0 where they do not apply */
    int (*typed_unary_row)(tn_unary_op op, tn_dtype compute, tn_dtype in_dtype, tn_dtype out_dtype, int64_t n, char *o,
                           int64_t os, const char *x, int64_t xs);
    int (*typed_binary_row)(tn_binary_op op, tn_dtype compute, tn_dtype out_dtype, int64_t n, char *o, int64_t os,
                            const char *pa, int64_t as, const char *pb, int64_t bs, int64_t alpha, int *zero_div);
    /* a row converted between bool, int32, int64 and float32 (d[i*ds] = s[i*ss] as the CPU
     * casts); 0 for any other pair of dtypes */
    int (*convert_row)(tn_dtype dt, char *d, int64_t ds, tn_dtype st, const char *s, int64_t ss, int64_t n);
    void (*widen_half)(tn_dtype t, int64_t n, float *d, int64_t ds, const uint16_t *s, int64_t ss);
    /* d[i*ds] = t(s[i*ss]), rounded to nearest even, NaN kept */
    void (*narrow_half)(tn_dtype t, int64_t n, uint16_t *d, int64_t ds, const float *s, int64_t ss);
    /* sum of a contiguous float32 row (float partial sums, then double) */
    double (*sum_f32)(int64_t n, const float *x);
    /* reduce_rows.c, over contiguous float32 rows: the sum of (x[i] - mu)^2 (mu 0: of the
     * squares); the product, returned in double (float32 lanes, exact double ones for rows
     * under 1024 and blocks that leave float's range); the largest (want_max) or smallest
     * element, NaN if any is (n >= 1); and acc[i] = op(acc[i], x[r*ldx + i]) for each of
     * `rows` rows (max and min keep a NaN of either side) */
    double (*sq_dev_f32)(int64_t n, const float *x, float mu);
    /* channel_norm_rows.c, over one contiguous plane of s elements of dtype t (f32, f64, bf16,
     * f16), in double: with g NULL, out = {mean, sum of (x - mean)^2} (two passes); else out =
     * {sum of g, sum of g * (x - mean)}. And y = k0 * g + k1 * (x - k3) + k2 (k0 * (x - k3) + k1
     * with g NULL), k3 a pivot near the mean. */
    void (*plane_moments)(tn_dtype t, int64_t s, const void *x, const void *g, double mean, double out[2]);
    void (*plane_affine)(tn_dtype t, int64_t s, const void *x, const void *g, const double k[4], void *y);
    double (*prod_f32)(int64_t n, const float *x);
    float (*extreme_f32)(int64_t n, const float *x, int want_max);
    /* the largest (want_max) or smallest element of a contiguous int64 row (n >= 1) */
    int64_t (*extreme_i64)(int64_t n, const int64_t *x, int want_max);
    /* the wrapping sum of a contiguous int64 row */
    uint64_t (*sum_i64)(int64_t n, const int64_t *x);
    void (*fold_rows_f32)(tn_fold_op op, int64_t n, int64_t rows, const float *x, int64_t ldx, float *acc);
    /* the sums (of squares) of fold_rows_f32 over bfloat16 or float16 rows (t), widened in
     * registers; 0 (nothing done) for the other ops */
    int (*fold_rows_half)(tn_dtype t, tn_fold_op op, int64_t n, int64_t rows, const uint16_t *x, int64_t ldx,
                          float *acc);
    /* random_rows.c: the 64 float values of Philox blocks base / 4 .. base / 4 + 16 of a
     * uniform draw in [a, b) or a normal one (mean a, std b), in element order */
    void (*draw_floats)(uint64_t seed, uint64_t offset, int64_t base, int normal, double a, double b, float *v);
    /* dropout of elements first .. first + n of contiguous float32 (bf16: bfloat16) rows: out,
     * and mask 1 where kept (see tn_kernel_dropout) */
    void (*dropout_rows)(uint64_t seed, uint64_t offset, int64_t first, int64_t n, uint64_t keep_from, float scale,
                         int bf16, const void *in, void *out, uint8_t *mask);
    /* softmax (log_softmax when `log`) of a contiguous float32 row */
    void (*softmax_f32)(int64_t n, const float *x, float *y, int log);
    /* its backward from the gradient g and the forward output y (contiguous float32 rows) */
    void (*softmax_backward_f32)(int64_t n, const float *g, const float *y, float *out, int log);
    /* layer norm (RMS norm when `rms`: mean 0) of a contiguous float32 row (w, b: NULL or n
     * floats); stats: mean, rstd */
    void (*layer_norm_f32)(int64_t n, const float *x, float *y, const float *w, const float *b,
                           double eps, int rms, double stats[2]);
    /* its input gradient from the gradient g and the forward's mean and rstd (w: NULL or n) */
    void (*layer_norm_backward_f32)(int64_t n, const float *x, const float *g, const float *w,
                                    float mean, float rstd, int rms, float *dx);
    /* axpy_rows_bf16 with x float32 */
    void (*axpy_rows_f32)(int64_t n, int64_t rows, const float *a, const float *x, int64_t ldx, float *y);
    /* fused attention (see attention.c and tn/attention.h) */
    int64_t (*attention_scratch_floats)(const struct tn_attention *a);
    void (*attention_forward)(const struct tn_kernel_table *k, const struct tn_attention *a,
                              float *scratch, int32_t ith, int32_t nth);
    void (*attention_backward)(const struct tn_kernel_table *k, const struct tn_attention *a,
                               float *scratch, int32_t ith, int32_t nth);
} tn_kernel_table;

#define TN_GEMM_MAX_MR 32 /* AMX's bf16 tile */
#define TN_GEMM_MAX_NR 32

/* The table of the active ISA. */
const tn_kernel_table *tn_kernels(void);
/* The table of a given ISA (reference entries where it has no variant), or NULL if the CPU
 * cannot run it. For tests that compare variants. */
const tn_kernel_table *tn_kernels_for(tn_isa isa);

/* tn_kernel_gemm with a given table (tests run every ISA through it). */
struct tn_gemm;
/* tn_gemm_packed_b_bytes and tn_kernel_gemm_pack_b for the variant k */
int64_t tn_gemm_packed_b_bytes_with(const tn_kernel_table *k, const struct tn_gemm *g);
void tn_gemm_pack_b_with(const tn_kernel_table *k, const struct tn_gemm *g, void *dst, int32_t ith,
                         int32_t nth);
void tn_gemm_with(const tn_kernel_table *k, const struct tn_gemm *g, float *scratch, int32_t ith,
                  int32_t nth);
int tn_gemm_half_c_with(const tn_kernel_table *k, const struct tn_gemm *g);

/* Each ISA's file fills the entries it implements. */
void tn_kernels_install_ref(tn_kernel_table *t);
void tn_kernels_install_avx2(tn_kernel_table *t);
void tn_kernels_install_avx512(tn_kernel_table *t);
void tn_random_install_ref(tn_kernel_table *t);
void tn_random_install_avx2(tn_kernel_table *t);
void tn_random_install_avx512(tn_kernel_table *t);
void tn_reduce_install_ref(tn_kernel_table *t);
void tn_reduce_install_avx2(tn_kernel_table *t);
void tn_reduce_install_avx512(tn_kernel_table *t);
void tn_gemm_install_ref(tn_kernel_table *t);
void tn_gemm_install_avx2(tn_kernel_table *t);
void tn_gemm_install_avx512(tn_kernel_table *t);
void tn_gemm_install_avx512bf16(tn_kernel_table *t);
void tn_gemm_install_amx(tn_kernel_table *t);
void tn_channel_norm_install_ref(tn_kernel_table *t);
void tn_channel_norm_install_avx2(tn_kernel_table *t);
void tn_channel_norm_install_avx512(tn_kernel_table *t);
void tn_attention_install_ref(tn_kernel_table *t);
void tn_attention_install_avx2(tn_kernel_table *t);
void tn_attention_install_avx512(tn_kernel_table *t);

#endif
