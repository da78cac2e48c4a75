/* Copy with conversion between any two strided views of the same shape.
 * Same dtype: a memcpy per row when both rows are contiguous, else an element move by size.
 * float32 <-> bfloat16 / float16: the ISA variant's conversion rows (see rows.c).
 * bool, int32, int64 and float32 between them: the ISA variant's typed rows (rows.c).
 * Other conversions: element by element through tn_load/tn_store.
 * A large output with contiguous rows is written with non-temporal stores (nontemporal.h). */
#include <string.h>

#include "elem.h"
#include "half.h"
#include "nontemporal.h"
#include "strided.h"
#include "table.h"
#include "tn/kernels.h"

static void move_row(char *d, int64_t ds, const char *s, int64_t ss, int64_t n, int32_t es) {
    if (ds == 1 && ss == 1) {
        memmove(d, s, (size_t)(n * es));
        return;
    }
    for (int64_t i = 0; i < n; i++) memcpy(d + i * ds * es, s + i * ss * es, (size_t)es);
}

static int overlap(const char *a, const char *b, int64_t bytes) {
    return a < b + bytes && b < a + bytes;
}

/* A contiguous row of dst (de bytes an element) converted from src through a buffer in L1,
 * written non-temporally. */
static void convert_row_nontemporal(const tn_kernel_table *k, tn_dtype dt, char *d, int32_t de,
                                    tn_dtype st, const char *s, int64_t ss, int32_t se, int64_t n) {
    _Alignas(64) char buf[TN_NT_CHUNK_BYTES];
    for (int64_t i = 0; i < n;) {
        int64_t m = tn_nontemporal_chunk(d + i * de, de, n - i);
        const char *from = s + i * ss * se;
        if (dt == TN_DTYPE_F32)
            k->widen_half(st, m, (float *)buf, 1, (const uint16_t *)from, ss);
        else
            k->narrow_half(dt, m, (uint16_t *)buf, 1, (const float *)from, ss);
        tn_copy_nontemporal(d + i * de, buf, m * de);
        i += m;
    }
}

/* ---- transposes: x.t().contiguous(), a permute that swaps the last two dimensions ----
 * Copying row by row reads a column of the source per output row (a cache line and often a
 * page per element): 2-3.4x the CPU's time on a 1024 x 1024 matrix. Square tiles are read
 * and written whole instead. A full tile goes through two buffers in L1: its source rows
 * copied in, transposed between the buffers, its output rows copied out. Each row of the
 * tile is then touched once, as a whole run of lines: the rows of a matrix whose rows are a
 * power of two bytes long fall in one or two sets of the L1 cache, and read and written in
 * place element by element they evicted each other (float32 1024 x 1024 took 3x the time of
 * 1000 x 1000, and 1.7x the CPU's). Bytes stay in place: a tile's rows are half lines, and
 * the buffered bytes ran at half the speed. */
enum { TILE = 32 };

/* The bytes from a view's first element to just past its last; -1 for a negative stride. */
static int64_t span_bytes(const tn_tensor *t) {
    int64_t last = 0;
    for (int32_t d = 0; d < t->ndim; d++) {
        if (t->strides[d] < 0) return -1;
        last += (t->sizes[d] - 1) * t->strides[d];
    }
    return (last + 1) * tn_dtype_size(t->dtype);
}

/* Output rows i0 .. i1, columns j0 .. j1 of a tile: output element (i, j) at d + (i drs + j) es
 * is source element (i, j) at s + (i + j scs) es. */
#define TRANSPOSE_TILE(T)                                                                    \
    static void tile_##T(char *d, int64_t drs, const char *s, int64_t scs, int64_t i0, int64_t i1,    \
                         int64_t j0, int64_t j1) {                                           \
        const int32_t es = (int32_t)sizeof(T);                                               \
        if (es > 1 && i1 - i0 == TILE && j1 - j0 == TILE) {                                  \
            T in[TILE * TILE], out[TILE * TILE];                                             \
            for (int64_t j = 0; j < TILE; j++)                                               \
                memcpy(in + j * TILE, s + (i0 + (j0 + j) * scs) * es, sizeof(T) * TILE);     \
            for (int64_t i = 0; i < TILE; i++)                                               \
                for (int64_t j = 0; j < TILE; j++) out[i * TILE + j] = in[j * TILE + i];     \
            for (int64_t i = 0; i < TILE; i++)                                               \
                memcpy(d + ((i0 + i) * drs + j0) * es, out + i * TILE, sizeof(T) * TILE);    \
            return;                                                                          \
        }                                                                                    \
        for (int64_t i = i0; i < i1; i++) {                                                  \
            T *o = (T *)(void *)(d + i * drs * es);                                          \
            const T *v = (const T *)(const void *)(s + i * es);                              \
            for (int64_t j = j0; j < j1; j++) o[j] = v[j * scs];                             \
        }                                                                                    \
    }
TRANSPOSE_TILE(uint8_t)
TRANSPOSE_TILE(uint16_t)
TRANSPOSE_TILE(uint32_t)
TRANSPOSE_TILE(uint64_t)

/* Same dtype, the output's last dimension contiguous, the source's second-to-last: returns 0
 * when the views are not such a transpose (or overlap), else copies this thread's tiles. */
static int copy_transposed(const tn_walk *w, const tn_tensor *dst, const tn_tensor *src, int32_t ith, int32_t nth) {
    int32_t nd = w->ndim, es = tn_dtype_size(dst->dtype);
    if (nd < 2 || dst->dtype != src->dtype || w->strides[0][nd - 1] != 1 || w->strides[1][nd - 2] != 1 ||
        w->strides[1][nd - 1] == 1 || (es != 1 && es != 2 && es != 4 && es != 8))
        return 0;
    int64_t rows = w->sizes[nd - 2], cols = w->sizes[nd - 1], drs = w->strides[0][nd - 2], scs = w->strides[1][nd - 1];
    int64_t mats = tn_walk_rows(w) / rows, rt = (rows + TILE - 1) / TILE, ct = (cols + TILE - 1) / TILE;
    const char *d0 = (const char *)dst->data, *s0 = (const char *)src->data;
    int64_t dspan = span_bytes(dst), sspan = span_bytes(src);
    if (rows < TILE || cols < TILE || dspan < 0 || sspan < 0 || (d0 < s0 + sspan && s0 < d0 + dspan)) return 0;
    int64_t first, last;
    tn_slice(mats * rt * ct, ith, nth, &first, &last);
    for (int64_t t = first; t < last; t++) {
        int64_t m = t / (rt * ct), i0 = (t / ct % rt) * TILE, j0 = t % ct * TILE;
        int64_t i1 = i0 + TILE < rows ? i0 + TILE : rows, j1 = j0 + TILE < cols ? j0 + TILE : cols;
        char *d = (char *)dst->data + tn_walk_row_offset(w, 0, m * rows) * es;
        const char *s = (const char *)src->data + tn_walk_row_offset(w, 1, m * rows) * es;
        switch (es) {
        case 1: tile_uint8_t(d, drs, s, scs, i0, i1, j0, j1); break;
        case 2: tile_uint16_t(d, drs, s, scs, i0, i1, j0, j1); break;
        case 4: tile_uint32_t(d, drs, s, scs, i0, i1, j0, j1); break;
        default: tile_uint64_t(d, drs, s, scs, i0, i1, j0, j1); break;
        }
    }
    return 1;
}

void tn_kernel_copy(const tn_tensor *dst, const tn_tensor *src, int32_t ith, int32_t nth) {
    const tn_tensor *views[2] = {dst, src};
    tn_walk w;
    tn_walk_init(&w, views, 2);
    if (copy_transposed(&w, dst, src, ith, nth)) return;
    int32_t des = tn_dtype_size(dst->dtype), ses = tn_dtype_size(src->dtype);
    int64_t first, last, e0, e1;
    int64_t dstep = w.strides[0][w.ndim - 1], sstep = w.strides[1][w.ndim - 1];
    tn_walk_slice(&w, ith, nth, &first, &last, &e0, &e1);
    int64_t n = e1 - e0;
    const tn_kernel_table *k = tn_kernels();
    int widen = dst->dtype == TN_DTYPE_F32 && (src->dtype == TN_DTYPE_BF16 || src->dtype == TN_DTYPE_F16);
    int narrow = src->dtype == TN_DTYPE_F32 && (dst->dtype == TN_DTYPE_BF16 || dst->dtype == TN_DTYPE_F16);
    int nt = dstep == 1 && tn_nontemporal(tn_tensor_numel(dst) * des);
    for (int64_t r = first; r < last; r++) {
        char *d = (char *)dst->data + (tn_walk_row_offset(&w, 0, r) + e0 * dstep) * des;
        const char *s = (const char *)src->data + (tn_walk_row_offset(&w, 1, r) + e0 * sstep) * ses;
        if (nt && dst->dtype == src->dtype && sstep == 1 && !overlap(d, s, n * des)) {
            tn_copy_nontemporal(d, s, n * des);
            continue;
        }
        if (nt && (widen || narrow)) {
            convert_row_nontemporal(k, dst->dtype, d, des, src->dtype, s, sstep, ses, n);
            continue;
        }
        if (dst->dtype == src->dtype) {
            move_row(d, dstep, s, sstep, n, des);
            continue;
        }
        if (widen) {
            k->widen_half(src->dtype, n, (float *)d, dstep, (const uint16_t *)s, sstep);
            continue;
        }
        if (narrow) {
            k->narrow_half(dst->dtype, n, (uint16_t *)d, dstep, (const float *)s, sstep);
            continue;
        }
        if (k->convert_row(dst->dtype, d, dstep, src->dtype, s, sstep, n)) continue;
        for (int64_t i = 0; i < n; i++)
            tn_store(d + i * dstep * des, dst->dtype, tn_load(s + i * sstep * ses, src->dtype));
    }
    if (nt) tn_nontemporal_fence();
}
