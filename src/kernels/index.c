/* index_select and where (see tn/index.h). */
#include <math.h>
#include <string.h>

#include "elem.h"
#include "strided.h"
#include "tn/elementwise.h"
#include "tn/index.h"
#include "tn/kernels.h"

/* The view without dimension `dim`, starting at slice `i` of it. */
static tn_tensor drop_dim(const tn_tensor *t, int32_t dim, int64_t i) {
    tn_tensor v = *t;
    v.data = (char *)t->data + i * t->strides[dim] * tn_dtype_size(t->dtype);
    for (int32_t d = dim; d + 1 < t->ndim; d++) {
        v.sizes[d] = t->sizes[d + 1];
        v.strides[d] = t->strides[d + 1];
    }
    v.ndim = t->ndim - 1;
    return v;
}

/* The elements of a slice along `dim` when they lie one after the other in row-major order
 * (an embedding table's rows); 0 otherwise. */
static int64_t dense_slice(const tn_tensor *t, int32_t dim) {
    int64_t expect = 1;
    for (int32_t d = t->ndim - 1; d >= 0; d--) {
        if (d == dim) continue;
        if (d < dim && t->sizes[d] != 1) return 0;
        if (t->sizes[d] != 1 && t->strides[d] != expect) return 0;
        expect *= t->sizes[d];
    }
    return expect;
}

static inline int64_t index_at(const tn_tensor *index, int64_t i, int64_t istride) {
    return index->dtype == TN_DTYPE_I32 ? ((const int32_t *)index->data)[i * istride]
                                        : ((const int64_t *)index->data)[i * istride];
}

tn_status tn_kernel_index_select(const tn_tensor *out, const tn_tensor *in, int32_t dim,
                                 const tn_tensor *index, int32_t ith, int32_t nth) {
    int64_t count = index->ndim ? index->sizes[0] : 1, first, last;
    int64_t istride = index->ndim ? index->strides[0] : 0, size = in->sizes[dim];
    tn_status st = TN_STATUS_OK;
    tn_slice(count, ith, nth, &first, &last);
    int64_t row = dense_slice(in, dim);
    if (row > 0 && row == dense_slice(out, dim) && in->dtype == out->dtype) {
        /* dense rows of the same dtype (embedding lookups): one memcpy a row, the next
         * source row's first lines fetched while this one copies */
        int32_t es = tn_dtype_size(in->dtype);
        size_t bytes = (size_t)(row * es);
        for (int64_t i = first; i < last; i++) {
            int64_t k = index_at(index, i, istride);
            if (k < 0 || k >= size) {
                st = TN_STATUS_INVALID_ARGUMENT;
                continue;
            }
            if (i + 1 < last) {
                int64_t next = index_at(index, i + 1, istride);
                if (next >= 0 && next < size)
                    for (size_t b = 0; b < bytes && b < 512; b += 64)
                        __builtin_prefetch((const char *)in->data + next * in->strides[dim] * es + b);
            }
            memcpy((char *)out->data + i * out->strides[dim] * es, (const char *)in->data + k * in->strides[dim] * es,
                   bytes);
        }
        return st;
    }
    for (int64_t i = first; i < last; i++) {
        int64_t k = index_at(index, i, istride);
        if (k < 0 || k >= size) {
            st = TN_STATUS_INVALID_ARGUMENT;
            continue;
        }
        tn_tensor dst = drop_dim(out, dim, i), src = drop_dim(in, dim, k);
        tn_kernel_copy(&dst, &src, 0, 1);
    }
    return st;
}

tn_status tn_kernel_index_add_rows(const tn_tensor *out, const tn_tensor *index,
                                   const tn_tensor *src, int64_t skip, int32_t ith, int32_t nth) {
    int64_t count = index->sizes[0], rows = out->sizes[0], d = out->sizes[1], c0, c1;
    int32_t es = tn_dtype_size(out->dtype);
    tn_status st = TN_STATUS_OK;
    tn_slice(d, ith, nth, &c0, &c1);
    for (int64_t i = 0; i < count; i++) {
        int64_t k = index->dtype == TN_DTYPE_I32 ? ((const int32_t *)index->data)[i * index->strides[0]]
                                                 : ((const int64_t *)index->data)[i * index->strides[0]];
        if (k == skip) continue;
        if (k < 0 || k >= rows) {
            st = TN_STATUS_INVALID_ARGUMENT;
            continue;
        }
        char *o = (char *)out->data + k * out->strides[0] * es;
        const char *x = (const char *)src->data + i * src->strides[0] * es;
        for (int64_t j = c0; j < c1; j++) {
            char *po = o + j * out->strides[1] * es;
            tn_value v = tn_load(po, out->dtype);
            v.re += tn_load(x + j * src->strides[1] * es, src->dtype).re;
            tn_store(po, out->dtype, v);
        }
    }
    return st;
}

/* Offsets of index position p (row-major over index's sizes) in index, in `same` (laid out
 * like index) and in `other` without dimension `dim`, the one the index values select. */
static void along_index(const tn_tensor *index, const tn_tensor *same, const tn_tensor *other, int32_t dim,
                        int64_t p, int64_t *io, int64_t *so, int64_t *oo) {
    *io = *so = *oo = 0;
    for (int32_t d = index->ndim - 1; d >= 0; d--) {
        int64_t c = p % index->sizes[d];
        p /= index->sizes[d];
        *io += c * index->strides[d];
        *so += c * same->strides[d];
        if (d != dim) *oo += c * other->strides[d];
    }
}

tn_status tn_kernel_scatter(const tn_tensor *out, int32_t dim, const tn_tensor *index,
                            const tn_tensor *src, tn_scatter_reduce reduce) {
    int64_t total = tn_tensor_numel(index);
    int32_t es = tn_dtype_size(out->dtype), ses = tn_dtype_size(src->dtype);
    tn_status st = TN_STATUS_OK;
    for (int64_t p = 0; p < total; p++) {
        int64_t io, so, oo;
        along_index(index, src, out, dim, p, &io, &so, &oo);
        int64_t k = ((const int64_t *)index->data)[io];
        if (k < 0 || k >= out->sizes[dim]) {
            st = TN_STATUS_INVALID_ARGUMENT;
            continue;
        }
        char *po = (char *)out->data + (oo + k * out->strides[dim]) * es;
        tn_value v = tn_load((const char *)src->data + so * ses, src->dtype);
        if (reduce != TN_SCATTER_ASSIGN) {
            tn_value o = tn_load(po, out->dtype);
            if (reduce == TN_SCATTER_MAX || reduce == TN_SCATTER_MIN) {
                int take_new = o.is_int && v.is_int ? (reduce == TN_SCATTER_MAX ? v.i > o.i : v.i < o.i)
                                                    : !isnan(o.re) && (isnan(v.re) || (reduce == TN_SCATTER_MAX
                                                                                         ? v.re > o.re
                                                                                         : v.re < o.re));
                if (!take_new) v = o;
            } else if (o.is_int && v.is_int) {
                uint64_t a = (uint64_t)o.i, b = (uint64_t)v.i;
                v.i = (int64_t)(reduce == TN_SCATTER_ADD ? a + b : a * b);
                if (out->dtype == TN_DTYPE_BOOL) v.i = reduce == TN_SCATTER_ADD ? (o.i || v.i) : (o.i && v.i);
                v.re = (double)v.i;
            } else {
                /* halves and floats add in float, as PyTorch's CPU kernel does */
                double r = reduce == TN_SCATTER_ADD ? o.re + v.re : o.re * v.re;
                v.re = out->dtype == TN_DTYPE_F64 ? r : (double)(float)r;
                v.is_int = 0;
            }
        }
        tn_store(po, out->dtype, v);
    }
    return st;
}

tn_status tn_kernel_gather(const tn_tensor *out, const tn_tensor *in, int32_t dim,
                           const tn_tensor *index, int32_t ith, int32_t nth) {
    int64_t total = tn_tensor_numel(index), first, last;
    int32_t es = tn_dtype_size(out->dtype);
    tn_status st = TN_STATUS_OK;
    tn_slice(total, ith, nth, &first, &last);
    for (int64_t p = first; p < last; p++) {
        int64_t io, oo, so;
        along_index(index, out, in, dim, p, &io, &oo, &so);
        int64_t k = ((const int64_t *)index->data)[io];
        if (k < 0 || k >= in->sizes[dim]) {
            st = TN_STATUS_INVALID_ARGUMENT;
            continue;
        }
        memcpy((char *)out->data + oo * es, (const char *)in->data + (so + k * in->strides[dim]) * es, (size_t)es);
    }
    return st;
}

/* Offset in self of index position p (a flat position in the common index shape) for the
 * k index views; 0 if an index is out of range. Negative indices count from the end. */
static int nd_offsets(const tn_tensor *self, int32_t k, const tn_tensor *indices, int64_t p,
                      int64_t *off_self, int64_t *coord) {
    int32_t nb = indices[0].ndim;
    for (int32_t d = nb - 1; d >= 0; d--) {
        coord[d] = p % indices[0].sizes[d];
        p /= indices[0].sizes[d];
    }
    int ok = 1;
    *off_self = 0;
    for (int32_t j = 0; j < k; j++) {
        int64_t io = 0;
        for (int32_t d = 0; d < nb; d++) io += coord[d] * indices[j].strides[d];
        int64_t v = ((const int64_t *)indices[j].data)[io];
        if (v < 0) v += self->sizes[j];
        if (v < 0 || v >= self->sizes[j]) ok = 0;
        *off_self += v * self->strides[j];
    }
    return ok;
}

/* The slice of `t` past its first `lead` dimensions, as a view of `rest` dimensions. */
static tn_tensor trailing(const tn_tensor *t, int32_t lead) {
    tn_tensor r = *t;
    r.ndim = t->ndim - lead;
    for (int32_t d = 0; d < r.ndim; d++) {
        r.sizes[d] = t->sizes[lead + d];
        r.strides[d] = t->strides[lead + d];
    }
    return r;
}

static int64_t lead_offset(const tn_tensor *t, const int64_t *coord, int32_t nb) {
    int64_t off = 0;
    for (int32_t d = 0; d < nb; d++) off += coord[d] * t->strides[d];
    return off;
}

tn_status tn_kernel_gather_nd(const tn_tensor *out, const tn_tensor *self, int32_t k,
                              const tn_tensor *indices, int32_t ith, int32_t nth) {
    int32_t nb = indices[0].ndim;
    int64_t count = tn_tensor_numel(&indices[0]), first, last;
    int32_t es = tn_dtype_size(self->dtype);
    tn_status st = TN_STATUS_OK;
    /* the slices copied per index position: self's and out's trailing dimensions */
    tn_tensor src = trailing(self, k), dst = trailing(out, nb);
    tn_slice(count, ith, nth, &first, &last);
    /* dense slices of one dtype (x[mask] picks single elements): a memcpy each, not a copy
     * kernel over a view */
    int64_t row = out->dtype == self->dtype && tn_row_major(&src) && tn_row_major(&dst) ? tn_tensor_numel(&src) : -1;
    for (int64_t p = first; p < last; p++) {
        int64_t off_self, coord[TN_MAX_DIMS];
        if (!nd_offsets(self, k, indices, p, &off_self, coord)) {
            st = TN_STATUS_INVALID_ARGUMENT;
            continue;
        }
        src.data = (char *)self->data + off_self * es;
        dst.data = (char *)out->data + lead_offset(out, coord, nb) * es;
        if (row >= 0)
            memcpy(dst.data, src.data, (size_t)(row * es));
        else
            tn_kernel_copy(&dst, &src, 0, 1);
    }
    return st;
}

tn_status tn_kernel_index_put(const tn_tensor *self, int32_t k, const tn_tensor *indices,
                              const tn_tensor *values, int accumulate, int32_t ith, int32_t nth) {
    int32_t nb = indices[0].ndim;
    int64_t count = tn_tensor_numel(&indices[0]), first, last;
    int32_t es = tn_dtype_size(self->dtype);
    tn_status st = TN_STATUS_OK;
    tn_tensor dst = trailing(self, k), src = trailing(values, nb);
    tn_dtype compute = self->dtype == TN_DTYPE_F16 || self->dtype == TN_DTYPE_BF16 ? TN_DTYPE_F32 : self->dtype;
    tn_scalar one = {TN_SCALAR_KIND_INT, 1, 1.0, 0.0};
    tn_slice(count, ith, nth, &first, &last);
    for (int64_t p = first; p < last; p++) {
        int64_t off_self, coord[TN_MAX_DIMS];
        if (!nd_offsets(self, k, indices, p, &off_self, coord)) {
            st = TN_STATUS_INVALID_ARGUMENT;
            continue;
        }
        dst.data = (char *)self->data + off_self * es;
        src.data = (char *)values->data + lead_offset(values, coord, nb) * es;
        if (accumulate)
            tn_kernel_binary(TN_BINARY_ADD, &dst, &dst, &src, &one, compute, 0, 1);
        else
            tn_kernel_copy(&dst, &src, 0, 1);
    }
    return st;
}

/* Nonzero bytes among n, in 32-bit counts of chunks (the loop vectorizes). */
static int64_t count_bytes(const uint8_t *b, int64_t n) {
    int64_t count = 0;
    for (int64_t c = 0; c < n; c += (int64_t)1 << 24) {
        int64_t e = n - c < ((int64_t)1 << 24) ? n : c + ((int64_t)1 << 24);
        uint32_t part = 0;
        for (int64_t j = c; j < e; j++) part += b[j] != 0;
        count += part;
    }
    return count;
}

int64_t tn_kernel_count_nonzero(const tn_tensor *in) {
    if (in->dtype == TN_DTYPE_BOOL && tn_row_major(in)) return count_bytes(in->data, tn_tensor_numel(in));
    const tn_tensor *views[1] = {in};
    tn_walk w;
    tn_walk_init(&w, views, 1);
    int32_t es = tn_dtype_size(in->dtype);
    int64_t n = w.sizes[w.ndim - 1], s = w.strides[0][w.ndim - 1], count = 0, rows = tn_walk_rows(&w);
    for (int64_t r = 0; r < rows; r++) {
        const char *x = (const char *)in->data + tn_walk_row_offset(&w, 0, r) * es;
        for (int64_t i = 0; i < n; i++) count += tn_is_nonzero(x + i * s * es, in->dtype);
    }
    return count;
}

/* The next row-major coordinate of a tensor of nd dimensions. */
static inline void next_coord(int64_t *coord, const int64_t *sizes, int32_t nd) {
    for (int32_t d = nd - 1; d >= 0; d--) {
        if (++coord[d] < sizes[d]) return;
        coord[d] = 0;
    }
}

/* nonzero of a dense bool tensor: zero words of eight bytes are skipped whole; in other words,
 * while eight more rows fit, every position's coordinates are written and kept when its byte
 * is set (no branch on the data: a random mask mispredicts half of them). */
static tn_status nonzero_dense_bool(const tn_tensor *out, const tn_tensor *in, int64_t numel) {
    const uint8_t *b = in->data;
    int64_t rows = out->sizes[0], found = 0, os0 = out->strides[0], os1 = out->ndim > 1 ? out->strides[1] : 0;
    int32_t nd = in->ndim;
    int64_t coord[TN_MAX_DIMS] = {0};
    int64_t *o = (int64_t *)out->data;
    for (int64_t p = 0; p < numel;) {
        if ((p & 7) == 0 && p + 8 <= numel) {
            uint64_t word;
            memcpy(&word, b + p, 8);
            if (word == 0) { /* the last coordinate moves on by eight, carrying rarely */
                if (coord[nd - 1] + 8 < in->sizes[nd - 1])
                    coord[nd - 1] += 8;
                else
                    for (int j = 0; j < 8; j++) next_coord(coord, in->sizes, nd);
                p += 8;
                continue;
            }
            if (nd == 1 && found + 8 <= rows) {
                for (int j = 0; j < 8; j++, p++) {
                    o[found * os0] = p;
                    found += b[p] != 0;
                }
                coord[0] = p;
                continue;
            }
            if (found + 8 <= rows) {
                for (int j = 0; j < 8; j++, p++) {
                    for (int32_t d = 0; d < nd; d++) o[found * os0 + d * os1] = coord[d];
                    found += b[p] != 0;
                    next_coord(coord, in->sizes, nd);
                }
                continue;
            }
        }
        if (b[p]) {
            if (found == rows) return TN_STATUS_INVALID_ARGUMENT;
            for (int32_t d = 0; d < nd; d++) o[found * os0 + d * os1] = coord[d];
            found++;
        }
        next_coord(coord, in->sizes, nd);
        p++;
    }
    return found == rows ? TN_STATUS_OK : TN_STATUS_INVALID_ARGUMENT;
}

tn_status tn_kernel_nonzero(const tn_tensor *out, const tn_tensor *in) {
    int64_t numel = tn_tensor_numel(in), rows = out->sizes[0], found = 0;
    int32_t es = tn_dtype_size(in->dtype), nd = in->ndim;
    if (in->dtype == TN_DTYPE_BOOL && tn_row_major(in) && nd > 0) return nonzero_dense_bool(out, in, numel);
    int64_t coord[TN_MAX_DIMS] = {0}, off = 0;
    for (int64_t p = 0; p < numel; p++) {
        if (tn_is_nonzero((const char *)in->data + off * es, in->dtype)) {
            if (found == rows) return TN_STATUS_INVALID_ARGUMENT;
            int64_t *row = (int64_t *)out->data + found * out->strides[0];
            for (int32_t d = 0; d < nd; d++) row[d * out->strides[1]] = coord[d];
            found++;
        }
        /* next coordinate, row-major */
        for (int32_t d = nd - 1; d >= 0; d--) {
            off += in->strides[d];
            if (++coord[d] < in->sizes[d]) break;
            off -= in->strides[d] * in->sizes[d];
            coord[d] = 0;
        }
    }
    return found == rows ? TN_STATUS_OK : TN_STATUS_INVALID_ARGUMENT;
}

#define WHERE_ROW(T)                                                                  \
    do {                                                                              \
        T *ot = (T *)(void *)o;                                                       \
        const T *at = (const T *)(const void *)pa, *bt = (const T *)(const void *)pb; \
        for (int64_t i = 0; i < n; i++) { /* a mask, not a branch: conditions are data */  \
            T pick = (T)0 - (T)(c[i * cs] != 0);                                     \
            ot[i * os] = (T)((at[i * as] & pick) | (bt[i * bs] & (T)~pick));          \
        }                                                                             \
    } while (0)

void tn_kernel_where(const tn_tensor *out, const tn_tensor *cond, const tn_tensor *a,
                     const tn_tensor *b, int32_t ith, int32_t nth) {
    /* same dtype for out, a, b: a select moves element bytes */
    const tn_tensor *views[4] = {out, cond, a, b};
    tn_walk w;
    tn_walk_init(&w, views, 4);
    int32_t es = tn_dtype_size(out->dtype);
    int64_t first, last, e0, e1;
    int64_t os = w.strides[0][w.ndim - 1], cs = w.strides[1][w.ndim - 1],
            as = w.strides[2][w.ndim - 1], bs = w.strides[3][w.ndim - 1];
    tn_walk_slice(&w, ith, nth, &first, &last, &e0, &e1);
    for (int64_t r = first; r < last; r++) {
        char *o = (char *)out->data + (tn_walk_row_offset(&w, 0, r) + e0 * os) * es;
        const uint8_t *c = (const uint8_t *)cond->data + tn_walk_row_offset(&w, 1, r) + e0 * cs;
        const char *pa = (const char *)a->data + (tn_walk_row_offset(&w, 2, r) + e0 * as) * es;
        const char *pb = (const char *)b->data + (tn_walk_row_offset(&w, 3, r) + e0 * bs) * es;
        int64_t n = e1 - e0;
        switch (es) { /* typed selects for the common sizes: no memcpy call per element */
        case 1: WHERE_ROW(uint8_t); break;
        case 2: WHERE_ROW(uint16_t); break;
        case 4: WHERE_ROW(uint32_t); break;
        case 8: WHERE_ROW(uint64_t); break;
        default:
            for (int64_t i = 0; i < n; i++)
                memcpy(o + i * os * es, c[i * cs] ? pa + i * as * es : pb + i * bs * es, (size_t)es);
        }
    }
}
