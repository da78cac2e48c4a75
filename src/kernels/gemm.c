/* Blocked, packed GEMM (see tn/gemm.h).
 *
 * Loop nest (BLIS order): columns of C in blocks of NC, the k dimension in blocks of about KC
 * (B's block packed into NR-wide panels), rows in blocks of MC (A's block packed, scaled by alpha,
 * into MR-tall panels), then MR x NR tiles by the ISA's micro-kernel, in the order the ISA
 * table asks (gemm_a_panel_outer): each B panel down the A block (the B panel stays in L1, the
 * A block in L2), or each A panel across the B block (the A panel in L1, the B block in L2).
 * Edge tiles go through a small buffer. A B packed already (a weight, see
 * tn_gemm_packed_b_bytes) needs no column blocks of its own: k blocks go outside, then blocks
 * of A's rows, each packed once and run across all of B's columns. Threads split the batch
 * when it is large enough, else the larger of m and n.
 * Small m uses no packing (it would cost more than it saves): gemm_vector.c.
 *
 * bfloat16 x bfloat16 on a CPU with AVX512-BF16 packs the operands as bfloat16 pairs along k
 * (no conversion) and runs the bf16 micro-kernel, which does twice the work per instruction;
 * elsewhere bf16 is widened to float32 while packing. */
#include <string.h>

#include "elem.h"
#include "strided.h"
#include "table.h"
#include "tn/gemm.h"
#include "gemm_impl.h"
#include "half.h"
#include "tn/kernels.h"

/* An A block (MC x KC floats, 144 KB) stays in a core's L2 while the micro-kernel walks the
 * B panels; NC bounds the B block packed into scratch (a B already packed is not blocked).
 * A k block may stretch to KC_MAX (see k_block). */
enum { KC = 256, KC_MAX = KC + KC / 4, MC = 144, NC = 1024 };

/* The k block of a product of depth k: KC, unless the last block would be less than half of
 * one and one block fewer, of equal size, stays within KC_MAX. K = 576 is two blocks of 288,
 * not 256 + 256 + 64: a short block pays the micro-kernel's start and the C tile's load and
 * store for few steps (bf16 on AMX: 5-12% of a product at K = 576). Always even, so that a
 * bf16 block starts on a pair. */
static int64_t k_block(int64_t k) {
    int64_t blocks = (k + KC - 1) / KC, rest = k % KC;
    if (blocks > 1 && rest != 0 && rest < KC / 2) {
        int64_t even = ((k + blocks - 2) / (blocks - 1) + 1) / 2 * 2;
        if (even <= KC_MAX) return even;
    }
    return KC;
}

int64_t tn_gemm_scratch_floats(void) {
    /* A block, B block, an edge tile, and the float32 block of a half-precision C */
    return (int64_t)MC * KC_MAX + (int64_t)KC_MAX * NC + TN_GEMM_MAX_MR * TN_GEMM_MAX_NR + (int64_t)MC * NC;
}

static int is_half_dtype(tn_dtype t) { return t == TN_DTYPE_BF16 || t == TN_DTYPE_F16; }

/* The last rows of a block of mc rows that go in panels of the short micro-kernel's rows: a
 * short panel takes about gemm_short_mr / gemm_mr of a full one's time, so a block whose
 * last full panel would be mostly padding ends in short panels instead. With 6 and 4, 128
 * rows are 20 panels of 6 and two of 4 (21.3 panels' time) instead of 22 of 6, the last of
 * them holding 2 rows; 16 rows are 6 + 6 + 4 instead of three panels of 6. */
static int64_t short_rows(const tn_kernel_table *k, int64_t mc) {
    int64_t mr = k->gemm_mr, s = k->gemm_short_mr, q = mc % mr;
    if (!k->gemm_ukernel_short || q == 0) return 0;
    if (mr + q <= 2 * s && mc >= mr + q) return mr + q; /* two short panels for the last full one and q */
    return q <= s ? q : 0;
}

/* Panel height at row r of a block whose first `full` rows go in full panels. */
static int32_t panel_rows(const tn_kernel_table *k, int64_t r, int64_t full) {
    return r < full ? k->gemm_mr : k->gemm_short_mr;
}

/* Panels of a block of mc rows whose first `full` rows go in full panels. */
static int64_t block_panels(const tn_kernel_table *k, int64_t mc, int64_t full) {
    int64_t n = (full + k->gemm_mr - 1) / k->gemm_mr;
    return full < mc ? n + (mc - full + k->gemm_short_mr - 1) / k->gemm_short_mr : n;
}

/* Rows i0 .. i0+mc of A, columns p0 .. p0+kc, scaled by alpha, in panels: the panel of h rows
 * starting at row r of the block is ap[r * kc + p * h + i] = alpha * A[i0 + r + i, p0 + p],
 * zero past the edge; rows before `full` go in panels of gemm_mr rows, the rest of
 * gemm_short_mr. */
static void pack_a(const tn_kernel_table *k, float *ap, const tn_matrix *a, const char *base, int64_t i0,
                   int64_t mc, int64_t full, int64_t p0, int64_t kc, float alpha) {
    const int32_t es = tn_dtype_size(a->dtype);
    for (int64_t r0 = 0, h; r0 < mc; r0 += h) {
        h = panel_rows(k, r0, full);
        float *dst = ap + r0 * kc;
        int32_t rows = (int32_t)(mc - r0 < h ? mc - r0 : h);
        const char *src = base + ((i0 + r0) * a->row_stride + p0 * a->col_stride) * es;
        if ((a->dtype == TN_DTYPE_F32 || is_half_dtype(a->dtype)) && a->col_stride == 1) {
            /* rows contiguous along k (x in x @ W.T): the ISA's transposing copy. Each row is
             * a stream of reads (from L3 or memory): the next panel's rows are fetched while
             * this one is copied, which hides their first misses */
            if (r0 + h < mc)
                for (int64_t r = 0; r < h && r0 + h + r < mc; r++)
                    for (int64_t p = 0; p < kc * es; p += 64)
                        __builtin_prefetch(src + (h + r) * a->row_stride * es + p, 0, 3);
            int half = a->dtype == TN_DTYPE_F32 ? TN_PACK_F32 : a->dtype == TN_DTYPE_BF16 ? TN_PACK_BF16 : TN_PACK_F16;
            k->gemm_pack_a(kc, (int32_t)h, rows, src, a->row_stride, half, alpha, dst);
        } else if (a->dtype == TN_DTYPE_F32 && a->row_stride == 1 && rows == h) {
            /* A transposed (a gradient's A^T in a weight gradient): a panel's rows are
             * contiguous at every k, so copy h floats per k */
            const float *col = (const float *)src;
            for (int64_t p = 0; p < kc; p++)
                for (int64_t r = 0; r < h; r++) dst[p * h + r] = alpha * col[p * a->col_stride + r];
        } else {
            for (int64_t r = 0; r < h; r++)
                for (int64_t p = 0; p < kc; p++)
                    dst[p * h + r] = r < rows ? alpha * load_f32(src, r * a->row_stride + p * a->col_stride, a->dtype)
                                              : 0.0f;
        }
    }
}

/* bp[(panel * kc + p) * nr + c] = B[p0 + p, j0 + panel*nr + c], zero past the edge. */
static void pack_b(const tn_kernel_table *k, float *bp, const tn_matrix *b, const char *base, int64_t p0, int64_t kc,
                   int64_t j0, int64_t nc, int32_t nr) {
    if ((b->dtype == TN_DTYPE_F32 || is_half_dtype(b->dtype)) && b->col_stride == 1) {
        /* row by row: each row of the block is one sequential run of reads, which the
         * hardware prefetcher follows (panel by panel, each row gave one line to each panel:
         * 7-17% of a whole product slower at M = 128, 5-8% at M = 512) */
        int32_t es = tn_dtype_size(b->dtype);
        for (int64_t p = 0; p < kc; p++) {
            const char *row = base + ((p0 + p) * b->row_stride + j0) * es;
            for (int64_t panel = 0; panel * nr < nc; panel++) {
                float *dst = bp + (panel * kc + p) * nr;
                int64_t width = nc - panel * nr < nr ? nc - panel * nr : nr;
                if (es == 4)
                    memcpy(dst, row + panel * nr * es, (size_t)width * sizeof(float));
                else /* the ISA's half rows (float16 on F16C where the variant has it) */
                    k->widen_half(b->dtype, width, dst, 1, (const uint16_t *)row + panel * nr, 1);
                for (int64_t c = width; c < nr; c++) dst[c] = 0.0f;
            }
        }
        return;
    }
    for (int64_t panel = 0; panel * nr < nc; panel++) {
        float *dst = bp + panel * kc * nr;
        int64_t width = nc - panel * nr < nr ? nc - panel * nr : nr;
        int64_t col0 = j0 + panel * nr;
        for (int64_t c = 0; c < nr; c++) {
            if (c >= width) {
                for (int64_t p = 0; p < kc; p++) dst[p * nr + c] = 0.0f;
                continue;
            }
            int64_t col = (col0 + c) * b->col_stride + p0 * b->row_stride;
            if (b->row_stride == 1 && is_half_dtype(b->dtype)) { /* W.T of a half weight */
                k->widen_half(b->dtype, kc, dst + c, nr, (const uint16_t *)base + col, 1);
            } else if (b->row_stride == 1 && b->dtype == TN_DTYPE_F32) {
                const float *src = (const float *)base + col;
                for (int64_t p = 0; p < kc; p++) dst[p * nr + c] = src[p];
            } else {
                for (int64_t p = 0; p < kc; p++)
                    dst[p * nr + c] = load_f32(base, col + p * b->row_stride, b->dtype);
            }
        }
    }
}

/* C[i0:i1, j0:j1] *= beta (beta == 0: set to zero without reading). */
static void scale_c(const tn_matrix *c, float *base, int64_t i0, int64_t i1, int64_t j0,
                    int64_t j1, float beta) {
    for (int64_t i = i0; i < i1; i++)
        for (int64_t j = j0; j < j1; j++) {
            float *x = base + i * c->row_stride + j * c->col_stride;
            *x = beta == 0.0f ? 0.0f : beta * *x;
        }
}

/* The rows x cols corner of a micro-tile (computed into `tile`, nr floats per row) added to C
 * at `c` (or stored, when !add), scaled by alpha: edge tiles, strided C, and bf16's alpha. */
static void add_tile(const tn_matrix *cm, float *c, const float *tile, int64_t rows, int64_t cols,
                     int64_t nr, float alpha, int add) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t q = 0; q < cols; q++) {
            float *x = c + r * cm->row_stride + q * cm->col_stride;
            *x = add ? *x + alpha * tile[r * nr + q] : alpha * tile[r * nr + q];
        }
}

static int64_t panels(int64_t n, int32_t nr) { return (n + nr - 1) / nr; }

/* Part `part` of `parts` of the `bytes` at p, fetched towards the cache: a pre-packed B
 * panel comes from memory, so the next one is fetched while the micro-kernel works on this
 * one (a panel packed on the fly is already in cache). */
static void prefetch_part(const void *p, int64_t bytes, int64_t part, int64_t parts) {
    int64_t lines = (bytes + 63) / 64, per = (lines + parts - 1) / parts;
    for (int64_t l = part * per; l < (part + 1) * per && l < lines; l++)
        __builtin_prefetch((const char *)p + l * 64, 0, 2);
}

/* One micro-tile: the panel of h rows at a_panel by the B panel at b_panel, into C at c (rows x
 * cols of it inside the matrix). Edge tiles and a strided C go through `tile`. */
static inline void micro_tile(const tn_gemm *g, const tn_kernel_table *k, const float *a_panel,
                              const float *b_panel, float *tile, float *c, int32_t h, int64_t rows,
                              int64_t cols, int64_t kc, int add) {
    void (*ukernel)(int64_t, const float *, const float *, float *, int64_t, int) =
        h == k->gemm_mr ? k->gemm_ukernel : k->gemm_ukernel_short;
    if (rows == h && cols == k->gemm_nr && g->c.col_stride == 1) {
        ukernel(kc, a_panel, b_panel, c, g->c.row_stride, add);
        return;
    }
    ukernel(kc, a_panel, b_panel, tile, k->gemm_nr, 0);
    add_tile(&g->c, c, tile, rows, cols, k->gemm_nr, 1.0f, add); /* alpha is in ap */
}

/* The tiles of an A block (mc rows packed at ap, the first `full` in full panels) by a B block
 * (nc columns packed at bblock), over a k block of kc, into C at cblock. */
static void block_tiles(const tn_gemm *g, const tn_kernel_table *k, const float *ap, const float *bblock,
                        float *tile, float *cblock, int64_t mc, int64_t full, int64_t nc, int64_t kc, int add) {
    const int32_t nr = k->gemm_nr;
    if (k->gemm_a_panel_outer) {
        for (int64_t ir = 0, h; ir < mc; ir += h) {
            h = panel_rows(k, ir, full);
            int64_t rows = mc - ir < h ? mc - ir : h;
            for (int64_t jr = 0; jr < nc; jr += nr)
                micro_tile(g, k, ap + ir * kc, bblock + (jr / nr) * kc * nr, tile,
                           cblock + ir * g->c.row_stride + jr * g->c.col_stride, (int32_t)h, rows,
                           nc - jr < nr ? nc - jr : nr, kc, add);
        }
        return;
    }
    const int64_t n_panels = block_panels(k, mc, full);
    for (int64_t jr = 0; jr < nc; jr += nr) {
        const float *b_panel = bblock + (jr / nr) * kc * nr;
        int64_t panel = 0;
        for (int64_t ir = 0, h; ir < mc; ir += h, panel++) {
            h = panel_rows(k, ir, full);
            if (k->gemm_prefetch_b && g->b_packed && jr + nr < nc)
                prefetch_part(b_panel + kc * nr, kc * nr * 4, panel, n_panels);
            micro_tile(g, k, ap + ir * kc, b_panel, tile, cblock + ir * g->c.row_stride + jr * g->c.col_stride,
                       (int32_t)h, mc - ir < h ? mc - ir : h, nc - jr < nr ? nc - jr : nr, kc, add);
        }
    }
}

/* Rows of A in one block when B is packed already (its scratch is then free for A): a
 * thread's share of M = 512 is one block, so A is packed once per k block rather than once
 * per column block and k block. */
enum { MC_PACKED = 288 };
_Static_assert(MC_PACKED <= MC + NC, "an A block of MC_PACKED rows fits in the A and B blocks' scratch");

static void block(const tn_gemm *g, const tn_kernel_table *k, float *scratch, int64_t batch,
                  int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    const char *abase = (const char *)g->a.data + batch * g->a.batch_stride * tn_dtype_size(g->a.dtype);
    const char *bbase = (const char *)g->b.data + batch * g->b.batch_stride * tn_dtype_size(g->b.dtype);
    float *cbase = (float *)g->c.data + batch * g->c.batch_stride;
    const int32_t nr = k->gemm_nr;
    float *ap = scratch, *bp = scratch + MC * KC_MAX, *tile = bp + (int64_t)KC_MAX * NC;
    /* beta == 0: the first k block stores its tiles, so C is neither cleared nor read first */
    int overwrite = g->beta == 0.0f && g->k > 0;
    if (!overwrite) scale_c(&g->c, cbase, i0, i1, j0, j1, g->beta);
    if (g->k == 0) return;
    if (g->b_packed) {
        /* each block of A packed once and run across all of B's columns: B panels outer
         * take B's columns in one block (the A block stays in L2), A panels outer in blocks of
         * NC (each B block stays in L2) */
        const int64_t ncmax = k->gemm_a_panel_outer ? NC : j1 - j0;
        const int64_t mcmax = k->gemm_a_panel_outer ? MC_PACKED : MC;
        for (int64_t pc = 0, kb = k_block(g->k); pc < g->k; pc += kb) {
            int64_t kc = g->k - pc < kb ? g->k - pc : kb;
            const float *bk = (const float *)g->b_packed + pc * panels(g->n, nr) * nr;
            for (int64_t ic = i0; ic < i1; ic += mcmax) {
                int64_t mc = i1 - ic < mcmax ? i1 - ic : mcmax;
                int64_t full = mc - short_rows(k, mc);
                pack_a(k, ap, &g->a, abase, ic, mc, full, pc, kc, g->alpha);
                for (int64_t jc = j0; jc < j1; jc += ncmax)
                    block_tiles(g, k, ap, bk + (jc / nr) * kc * nr, tile,
                                cbase + ic * g->c.row_stride + jc * g->c.col_stride, mc, full,
                                j1 - jc < ncmax ? j1 - jc : ncmax, kc, !overwrite || pc > 0);
            }
        }
        return;
    }
    for (int64_t jc = j0; jc < j1; jc += NC) {
        int64_t nc = j1 - jc < NC ? j1 - jc : NC;
        for (int64_t pc = 0, kb = k_block(g->k); pc < g->k; pc += kb) {
            int64_t kc = g->k - pc < kb ? g->k - pc : kb;
            pack_b(k, bp, &g->b, bbase, pc, kc, jc, nc, nr);
            for (int64_t ic = i0; ic < i1; ic += MC) {
                int64_t mc = i1 - ic < MC ? i1 - ic : MC;
                int64_t full = mc - short_rows(k, mc);
                pack_a(k, ap, &g->a, abase, ic, mc, full, pc, kc, g->alpha);
                block_tiles(g, k, ap, bp, tile, cbase + ic * g->c.row_stride + jc * g->c.col_stride, mc, full,
                            nc, kc, !overwrite || pc > 0);
            }
        }
    }
}

/* bfloat16 operands on the bf16 micro-kernel (see gemm_bf16.c). B is packed as pairs along k;
 * A's rows are read in place when they are contiguous along k, else copied.
 *
 * A copy of rows i0 .. i0+mc of A, columns p0 .. p0+kc, into mr-row panels of 2*kp columns
 * (row-major, zero past the edges): panel r, row i at ap + (r*mr + i) * 2*kp. */
static void pack_a_rows(uint16_t *ap, const tn_matrix *a, const uint16_t *base, int64_t i0,
                        int64_t mc, int64_t p0, int64_t kc, int32_t mr) {
    int64_t width = 2 * ((kc + 1) / 2), rows = (mc + mr - 1) / mr * mr;
    if (a->row_stride == 1 && a->col_stride != 1) {
        /* A transposed (a convolution's im2col columns): each column's rows are contiguous, so
         * walk the columns and scatter into the panels' rows, which stay in cache; reading each
         * row along k instead touched one cache line per element and made a bf16 product with
         * such an A 3x slower than with a contiguous one */
        for (int64_t p = 0; p < kc; p++) {
            const uint16_t *col = base + i0 + (p0 + p) * a->col_stride;
            for (int64_t i = 0; i < mc; i++) ap[i * width + p] = col[i];
        }
        for (int64_t i = 0; i < rows; i++) {
            if (i >= mc) memset(ap + i * width, 0, sizeof(uint16_t) * (size_t)width);
            else if (kc < width) ap[i * width + kc] = 0;
        }
        return;
    }
    for (int64_t i = 0; i < rows; i++) {
        uint16_t *dst = ap + i * width;
        if (i >= mc) {
            memset(dst, 0, sizeof(uint16_t) * (size_t)width);
            continue;
        }
        const uint16_t *src = base + (i0 + i) * a->row_stride + p0 * a->col_stride;
        if (a->col_stride == 1)
            memcpy(dst, src, sizeof(uint16_t) * (size_t)kc);
        else
            for (int64_t p = 0; p < kc; p++) dst[p] = src[p * a->col_stride];
        if (kc < width) dst[kc] = 0;
    }
}

/* bp[((panel * kp + q) * nr + c) * 2 + t] = B[p0 + 2q + t, j0 + panel*nr + c], zero past the
 * edges. */
static void pack_b_pairs(const tn_kernel_table *k, uint16_t *bp, const tn_matrix *b,
                         const uint16_t *base, int64_t p0, int64_t kc, int64_t j0, int64_t nc,
                         int32_t nr) {
    int64_t kp = (kc + 1) / 2, rs = b->row_stride, cs = b->col_stride;
    for (int64_t panel = 0; panel * nr < nc; panel++) {
        uint16_t *dst = bp + panel * kp * nr * 2;
        int64_t width = nc - panel * nr < nr ? nc - panel * nr : nr;
        const uint16_t *src = base + p0 * rs + (j0 + panel * nr) * cs;
        if (width < nr || (kc & 1)) memset(dst, 0, sizeof(uint16_t) * (size_t)(kp * nr * 2));
        if (cs == 1 && rs != 1) { /* rows contiguous: interleave them two at a time */
            for (int64_t q = 0; q < kc / 2; q++)
                k->gemm_bf16_pack_b_rows(width, src + 2 * q * rs, src + (2 * q + 1) * rs,
                                         dst + q * nr * 2);
            if (kc & 1) {
                const uint16_t *last = src + (kc - 1) * rs;
                for (int64_t c = 0; c < width; c++) dst[((kp - 1) * nr + c) * 2] = last[c];
            }
        } else if (rs == 1) { /* columns contiguous (W.T of a row-major weight) */
            k->gemm_bf16_pack_b_cols(kc / 2, width, src, cs, dst, nr);
            if (kc & 1)
                for (int64_t c = 0; c < width; c++) dst[((kp - 1) * nr + c) * 2] = src[c * cs + kc - 1];
        } else {
            for (int64_t p = 0; p < kc; p++)
                for (int64_t c = 0; c < width; c++)
                    dst[((p >> 1) * nr + c) * 2 + (p & 1)] = src[p * rs + c * cs];
        }
    }
}

static int bf16_path(const tn_gemm *g, const tn_kernel_table *k) {
    return k->gemm_bf16_ukernel && g->a.dtype == TN_DTYPE_BF16 && g->b.dtype == TN_DTYPE_BF16;
}

/* One matrix of a batch on the bf16 micro-kernel: its operands and the thread's scratch (A
 * block, B block, an edge tile). */
typedef struct bf16_operands {
    const uint16_t *a, *b;
    uint16_t *ap, *bp;
    float *tile;
    int32_t mr, nr;
    int64_t mc; /* rows per block: MC in whole panels (AMX's 32-row panels: 128) */
} bf16_operands;

static bf16_operands bf16_operands_of(const tn_gemm *g, const tn_kernel_table *k, float *scratch, int64_t batch) {
    bf16_operands o = {(const uint16_t *)g->a.data + batch * g->a.batch_stride,
                       (const uint16_t *)g->b.data + batch * g->b.batch_stride,
                       (uint16_t *)scratch, (uint16_t *)(scratch + MC * KC_MAX),
                       scratch + MC * KC_MAX + (int64_t)KC_MAX * NC, k->gemm_bf16_mr, k->gemm_bf16_nr,
                       MC / k->gemm_bf16_mr * k->gemm_bf16_mr};
    return o;
}

/* B's k block pc (kc rows) over columns jc .. jc+nc in bf16 pair panels: the pre-packed copy,
 * or packed into bp. */
static const uint16_t *b_block_bf16(const tn_gemm *g, const tn_kernel_table *k, uint16_t *bp, const uint16_t *bbase,
                                    int64_t pc, int64_t kc, int64_t jc, int64_t nc, int32_t nr) {
    int64_t kp = (kc + 1) / 2;
    if (g->b_packed)
        return (const uint16_t *)g->b_packed + pc / 2 * panels(g->n, nr) * nr * 2 + (jc / nr) * kp * nr * 2;
    pack_b_pairs(k, bp, &g->b, bbase, pc, kc, jc, nc, nr);
    return bp;
}

/* Rows ic .. ic+mc of A's k block pc: read in place when contiguous along k in whole pairs
 * (unless the kernel wants a copy), only a ragged last panel copied into ap (the micro-kernel
 * always reads mr rows). Returns the rows read in place; a_panel_bf16 then finds each panel. */
static int64_t a_block_bf16(const tn_gemm *g, const tn_kernel_table *k, uint16_t *ap, const uint16_t *abase, int64_t ic,
                            int64_t mc, int64_t pc, int64_t kc, int32_t mr) {
    int64_t full = g->a.col_stride == 1 && kc % 2 == 0 && !k->gemm_bf16_copy_a ? mc / mr * mr : 0;
    if (full < mc) pack_a_rows(ap, &g->a, abase, ic + full, mc - full, pc, kc, mr);
    return full;
}

static const uint16_t *a_panel_bf16(const tn_gemm *g, const uint16_t *ap, const uint16_t *abase, int64_t ic,
                                    int64_t ir, int64_t full, int64_t pc, int64_t kp, int64_t *lda) {
    *lda = ir < full ? g->a.row_stride : 2 * kp;
    return ir < full ? abase + (ic + ir) * g->a.row_stride + pc : ap + (ir - full) * 2 * kp;
}

/* The micro-tiles of one block: rows ic .. ic+mc of A's k block pc (the first `full` of them
 * read in place) by B's block (kp pairs, nc columns), into C at c with cm's strides, scaled by
 * alpha, added to C or stored. Edge tiles, a strided C and alpha go through the edge tile. */
static void tiles_bf16(const tn_gemm *g, const tn_kernel_table *k, const bf16_operands *o, const uint16_t *bblock,
                       int64_t ic, int64_t mc, int64_t full, int64_t pc, int64_t kp, int64_t nc, const tn_matrix *cm,
                       float *c, float alpha, int add) {
    const int32_t mr = o->mr, nr = o->nr;
    int64_t lda;
    if (k->gemm_bf16_prepare) k->gemm_bf16_prepare();
    for (int64_t jr = 0; jr < nc; jr += nr)
        for (int64_t ir = 0; ir < mc; ir += mr) {
            const uint16_t *a_panel = a_panel_bf16(g, o->ap, o->a, ic, ir, full, pc, kp, &lda);
            const uint16_t *b_panel = bblock + (jr / nr) * kp * nr * 2;
            /* as in block(): only where the table asks (AVX-512's hardware prefetcher follows
             * the panels; on AMX, the software fetch stalled on full fill buffers, 17% of a
             * product at 512 x 576 x 2048, and dropping it gained up to 6%) */
            if (k->gemm_prefetch_b && g->b_packed && jr + nr < nc)
                prefetch_part(b_panel + kp * nr * 2, kp * nr * 4, ir / mr, (mc + mr - 1) / mr);
            float *ct = c + ir * cm->row_stride + jr * cm->col_stride;
            int64_t rows = mc - ir < mr ? mc - ir : mr, cols = nc - jr < nr ? nc - jr : nr;
            if (rows == mr && cols == nr && cm->col_stride == 1 && alpha == 1.0f) {
                k->gemm_bf16_ukernel(kp, a_panel, lda, b_panel, ct, cm->row_stride, add);
                continue;
            }
            k->gemm_bf16_ukernel(kp, a_panel, lda, b_panel, o->tile, nr, 0);
            add_tile(cm, ct, o->tile, rows, cols, nr, alpha, add);
        }
}

/* block() for bfloat16 operands on the bf16 micro-kernel; alpha scales the result tile. */
static void block_bf16(const tn_gemm *g, const tn_kernel_table *k, float *scratch, int64_t batch,
                       int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    bf16_operands o = bf16_operands_of(g, k, scratch, batch);
    float *cbase = (float *)g->c.data + batch * g->c.batch_stride;
    int overwrite = g->beta == 0.0f && g->k > 0; /* as in block() */
    if (!overwrite) scale_c(&g->c, cbase, i0, i1, j0, j1, g->beta);
    if (g->k == 0) return;
    for (int64_t jc = j0; jc < j1; jc += NC) {
        int64_t nc = j1 - jc < NC ? j1 - jc : NC;
        for (int64_t pc = 0, kb = k_block(g->k); pc < g->k; pc += kb) {
            int64_t kc = g->k - pc < kb ? g->k - pc : kb, kp = (kc + 1) / 2;
            const uint16_t *bblock = b_block_bf16(g, k, o.bp, o.b, pc, kc, jc, nc, o.nr);
            for (int64_t ic = i0; ic < i1; ic += o.mc) {
                int64_t mc = i1 - ic < o.mc ? i1 - ic : o.mc;
                int64_t full = a_block_bf16(g, k, o.ap, o.a, ic, mc, pc, kc, o.mr);
                float *c = cbase + ic * g->c.row_stride + jc * g->c.col_stride;
                tiles_bf16(g, k, &o, bblock, ic, mc, full, pc, kp, nc, &g->c, c, g->alpha, !overwrite || pc > 0);
            }
        }
    }
}

/* block_bf16 for a bfloat16/float16 C: each MC x NC block of C is accumulated over all of k
 * in a float32 block of the scratch, which stays in cache, then rounded into C once (no
 * float32 copy of C goes through memory). Rows go outside the k loop, so B's block is packed
 * again for every MC rows when it is not packed already. */
static void block_bf16_half_c(const tn_gemm *g, const tn_kernel_table *k, float *scratch, int64_t batch,
                              int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    bf16_operands o = bf16_operands_of(g, k, scratch, batch);
    uint16_t *cbase = (uint16_t *)g->c.data + batch * g->c.batch_stride;
    float *cf = o.tile + TN_GEMM_MAX_MR * TN_GEMM_MAX_NR;
    const tn_matrix cm = {cf, TN_DTYPE_F32, NC, 1, 0}; /* the float32 block: MC x NC */
    for (int64_t jc = j0; jc < j1; jc += NC) {
        int64_t nc = j1 - jc < NC ? j1 - jc : NC;
        for (int64_t ic = i0; ic < i1; ic += o.mc) {
            int64_t mc = i1 - ic < o.mc ? i1 - ic : o.mc;
            for (int64_t pc = 0, kb = k_block(g->k); pc < g->k; pc += kb) {
                int64_t kc = g->k - pc < kb ? g->k - pc : kb, kp = (kc + 1) / 2;
                const uint16_t *bblock = b_block_bf16(g, k, o.bp, o.b, pc, kc, jc, nc, o.nr);
                int64_t full = a_block_bf16(g, k, o.ap, o.a, ic, mc, pc, kc, o.mr);
                tiles_bf16(g, k, &o, bblock, ic, mc, full, pc, kp, nc, &cm, cf, 1.0f, pc > 0);
            }
            for (int64_t r = 0; r < mc; r++) {
                float *src = cf + r * NC;
                uint16_t *dst = cbase + (ic + r) * g->c.row_stride + jc;
                if (g->alpha != 1.0f || g->beta != 0.0f)
                    for (int64_t q = 0; q < nc; q++) {
                        float old = g->beta == 0.0f ? 0.0f
                                    : g->c.dtype == TN_DTYPE_BF16 ? tn_bf16_to_f32_inline(dst[q])
                                                                  : tn_f16_to_f32_inline(dst[q]);
                        src[q] = g->alpha * src[q] + g->beta * old;
                    }
                k->narrow_half(g->c.dtype, nc, dst, 1, src, 1);
            }
        }
    }
}

int tn_gemm_half_c_with(const tn_kernel_table *k, const tn_gemm *g) {
    return k->gemm_bf16_ukernel && g->a.dtype == TN_DTYPE_BF16 && g->b.dtype == TN_DTYPE_BF16 &&
           (g->c.dtype == TN_DTYPE_BF16 || g->c.dtype == TN_DTYPE_F16) && g->c.col_stride == 1 && g->m > 4 &&
           g->k > 0;
}

/* ---- B packed once (see tn_gemm_packed_b_bytes) ----
 * Layout: the k blocks of k_block() in order; in each, the column panels of the block's kc
 * rows as pack_b (float32, kc * nr floats a panel) or pack_b_pairs (bf16, (kc+1)/2 * nr pairs
 * a panel) writes them. Blocks are even, so a bf16 block starts at pair pc / 2. After the panels,
 * SAMPLES elements of B spread over the matrix, as packed: a GEMM compares them with B before
 * trusting the packing, so a B rewritten behind the version counter's back (through
 * `.data`) is packed afresh rather than read stale. */
enum { SAMPLES = 64 };

static int packable(const tn_gemm *g) {
    return g->k > 0 && g->n > 0 && (g->batch == 1 || g->b.batch_stride == 0);
}

static int64_t panel_bytes(const tn_kernel_table *k, const tn_gemm *g) {
    if (bf16_path(g, k)) return (g->k + 1) / 2 * panels(g->n, k->gemm_bf16_nr) * k->gemm_bf16_nr * 2 * 2;
    return g->k * panels(g->n, k->gemm_nr) * k->gemm_nr * (int64_t)sizeof(float);
}

/* The bits of sample i of B. */
static uint32_t sample(const tn_gemm *g, int32_t i) {
    int64_t f = (g->k * g->n - 1) * i / (SAMPLES - 1), p = f / g->n, j = f % g->n;
    const char *x = (const char *)g->b.data + (p * g->b.row_stride + j * g->b.col_stride) * tn_dtype_size(g->b.dtype);
    uint32_t bits = 0;
    memcpy(&bits, x, (size_t)tn_dtype_size(g->b.dtype));
    return bits;
}

static int samples_match(const tn_kernel_table *k, const tn_gemm *g) {
    const uint32_t *kept = (const uint32_t *)((const char *)g->b_packed + panel_bytes(k, g));
    for (int32_t i = 0; i < SAMPLES; i++)
        if (kept[i] != sample(g, i)) return 0;
    return 1;
}

int64_t tn_gemm_packed_b_bytes_with(const tn_kernel_table *k, const tn_gemm *g) {
    return packable(g) ? panel_bytes(k, g) + SAMPLES * (int64_t)sizeof(uint32_t) : 0;
}

void tn_gemm_pack_b_with(const tn_kernel_table *k, const tn_gemm *g, void *dst, int32_t ith,
                         int32_t nth) {
    if (!packable(g)) return;
    int bf16 = bf16_path(g, k);
    int32_t nr = bf16 ? k->gemm_bf16_nr : k->gemm_nr;
    int64_t first, last, np = panels(g->n, nr);
    if (ith == 0) {
        uint32_t *kept = (uint32_t *)((char *)dst + panel_bytes(k, g));
        for (int32_t i = 0; i < SAMPLES; i++) kept[i] = sample(g, i);
    }
    tn_slice(np, ith, nth, &first, &last);
    if (first >= last) return;
    int64_t j0 = first * nr, nc = (last * nr < g->n ? last * nr : g->n) - j0;
    for (int64_t pc = 0, kb = k_block(g->k); pc < g->k; pc += kb) {
        int64_t kc = g->k - pc < kb ? g->k - pc : kb, kp = (kc + 1) / 2;
        if (bf16)
            pack_b_pairs(k, (uint16_t *)dst + pc / 2 * np * nr * 2 + first * kp * nr * 2, &g->b,
                         g->b.data, pc, kc, j0, nc, nr);
        else
            pack_b(k, (float *)dst + pc * np * nr + first * kc * nr, &g->b, g->b.data, pc, kc, j0, nc, nr);
    }
}

int64_t tn_gemm_packed_b_bytes(const tn_gemm *g) { return tn_gemm_packed_b_bytes_with(tn_kernels(), g); }

void tn_kernel_gemm_pack_b(const tn_gemm *g, void *dst, int32_t ith, int32_t nth) {
    tn_gemm_pack_b_with(tn_kernels(), g, dst, ith, nth);
}

int tn_gemm_half_c(const tn_gemm *g) { return tn_gemm_half_c_with(tn_kernels(), g); }

void tn_kernel_gemm(const tn_gemm *g, float *scratch, int32_t ith, int32_t nth) {
    tn_gemm_with(tn_kernels(), g, scratch, ith, nth);
}

void tn_gemm_with(const tn_kernel_table *k, const tn_gemm *g_in, float *scratch, int32_t ith,
                  int32_t nth) {
    tn_gemm checked = *g_in;
    if (checked.b_packed && !samples_match(k, &checked)) checked.b_packed = NULL;
    const tn_gemm *g = &checked;
    const int half_c = tn_gemm_half_c_with(k, g); /* else C is float32 */
    int64_t first, last;
    if (g->batch >= nth) { /* whole matrices per thread */
        tn_slice(g->batch, ith, nth, &first, &last);
        for (int64_t b = first; b < last; b++) {
            if (tn_gemm_dot_path(g))
                tn_gemm_dots(g, k, scratch, b, 0, g->n);
            else if (tn_gemm_axpy_path(g))
                tn_gemm_axpys(g, k, b, 0, g->n);
            else if (half_c)
                block_bf16_half_c(g, k, scratch, b, 0, g->m, 0, g->n);
            else if (bf16_path(g, k))
                block_bf16(g, k, scratch, b, 0, g->m, 0, g->n);
            else
                block(g, k, scratch, b, 0, g->m, 0, g->n);
        }
        return;
    }
    for (int64_t b = 0; b < g->batch; b++) {
        if (tn_gemm_dot_path(g)) {
            tn_slice(g->n, ith, nth, &first, &last);
            tn_gemm_dots(g, k, scratch, b, first, last);
        } else if (tn_gemm_axpy_path(g)) {
            tn_slice((g->n + 15) / 16, ith, nth, &first, &last); /* whole cache lines each */
            int64_t j1 = last * 16 < g->n ? last * 16 : g->n;
            if (first * 16 < j1) tn_gemm_axpys(g, k, b, first * 16, j1);
        } else {
            int bf16 = bf16_path(g, k);
            int64_t mr = bf16 ? k->gemm_bf16_mr : k->gemm_mr, nr = bf16 ? k->gemm_bf16_nr : k->gemm_nr;
            int64_t i0 = 0, i1 = g->m, j0 = 0, j1 = g->n;
            /* Threads split columns (in whole micro-tiles) when each would otherwise pack the
             * same B. With B packed already they split rows, so that no two pack the same A,
             * when each gets five panels of rows or more and B is at most 5 times wider than
             * A is tall (8 times from 8 panels a thread): past that, each thread reading only
             * its half of B wins (3-5% at M = 128 and N from 1024), below it packing only half
             * of A does (4-5% at M = 128 and N = 576; M = 512 up to N = 4096 stays on rows). */
            int64_t wide = g->m >= 8 * mr * nth ? 8 : 5;
            int split_rows = g->n < g->m || (g->b_packed && g->m >= 5 * mr * nth && g->n <= wide * g->m);
            if (!split_rows) {
                tn_slice((g->n + nr - 1) / nr, ith, nth, &first, &last);
                j0 = first * nr;
                j1 = last * nr < g->n ? last * nr : g->n;
            } else {
                /* in units of the short panel where there is one: each block ends in short
                 * panels as needed (short_rows), so whole 12-row panels would give the first
                 * thread 264 of 512 rows and the second 248, 3% of the product lost waiting */
                int64_t unit = !bf16 && k->gemm_ukernel_short ? k->gemm_short_mr : mr;
                tn_slice((g->m + unit - 1) / unit, ith, nth, &first, &last);
                i0 = first * unit;
                i1 = last * unit < g->m ? last * unit : g->m;
            }
            if (i0 < i1 && j0 < j1) {
                if (half_c)
                    block_bf16_half_c(g, k, scratch, b, i0, i1, j0, j1);
                else if (bf16)
                    block_bf16(g, k, scratch, b, i0, i1, j0, j1);
                else
                    block(g, k, scratch, b, i0, i1, j0, j1);
            }
        }
    }
}

double tn_kernel_fma_burst(int64_t iters, float *sink) { return tn_kernels()->fma_burst(iters, sink); }
