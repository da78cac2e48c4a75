/* Singular value decompositions by one-sided Jacobi rotations (Hestenes), in double (see
 * tn/linalg.h). Threads take whole matrices of the batch.
 *
 * The kernel works on the tall orientation T (r x c, r >= c): A itself, or A^T when A is
 * wide. Rotating pairs of T's columns until every pair is orthogonal gives T V = W, whose
 * column norms are the singular values and whose normalised columns are the left singular
 * vectors P; V holds the right ones. Columns of a zero singular value, and the extra columns
 * of full_matrices, complete P to an orthonormal basis (by Householder reflections of the
 * known columns). For a wide A the roles swap: A = V S P^T. An empty side (k = 0) leaves
 * the other factor the identity, as PyTorch's CPU path gives it. */
#include <math.h>
#include <string.h>

#include "elem.h"
#include "strided.h"
#include "tn/linalg.h"

enum { MAX_SWEEPS = 100 };

static inline double at3(const tn_tensor *t, int64_t b, int64_t i, int64_t j) {
    int64_t off = b * t->strides[0] + i * t->strides[1] + j * t->strides[2];
    return tn_load((const char *)t->data + off * tn_dtype_size(t->dtype), t->dtype).re;
}

static inline void set3(const tn_tensor *t, int64_t b, int64_t i, int64_t j, double x) {
    int64_t off = b * t->strides[0] + i * t->strides[1] + j * t->strides[2];
    tn_value v = {x, 0, 0, 0};
    tn_store((char *)t->data + off * tn_dtype_size(t->dtype), t->dtype, v);
}

static double dot(const double *x, const double *y, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += x[i] * y[i];
    return s;
}

/* Rotates columns w (r x c, column-major) and v (c x c) until they are pairwise orthogonal. */
static void jacobi(double *w, double *v, int64_t r, int64_t c) {
    for (int sweep = 0; sweep < MAX_SWEEPS; sweep++) {
        int rotated = 0;
        for (int64_t p = 0; p + 1 < c; p++)
            for (int64_t q = p + 1; q < c; q++) {
                double *wp = w + p * r, *wq = w + q * r;
                double alpha = dot(wp, wp, r), beta = dot(wq, wq, r), gamma = dot(wp, wq, r);
                if (!(fabs(gamma) > 1e-15 * sqrt(alpha * beta)) || gamma == 0) continue;
                double zeta = (beta - alpha) / (2 * gamma);
                double t = (zeta >= 0 ? 1.0 : -1.0) / (fabs(zeta) + sqrt(1 + zeta * zeta));
                double cs = 1 / sqrt(1 + t * t), sn = cs * t;
                for (int64_t i = 0; i < r; i++) {
                    double x = wp[i], y = wq[i];
                    wp[i] = cs * x - sn * y;
                    wq[i] = sn * x + cs * y;
                }
                double *vp = v + p * c, *vq = v + q * c;
                for (int64_t i = 0; i < c; i++) {
                    double x = vp[i], y = vq[i];
                    vp[i] = cs * x - sn * y;
                    vq[i] = sn * x + cs * y;
                }
                rotated = 1;
            }
        if (!rotated) return;
    }
}

/* Columns q .. r - 1 of p (r x r, column-major) become an orthonormal basis of what columns
 * 0 .. q - 1 (orthonormal) leave: Householder reflections H_0 .. H_{q-1} that triangularise
 * those columns (built in h, r x q) make Q = H_0 ... H_{q-1}, whose first q columns span
 * theirs, so Q e_j for j >= q are the columns wanted. */
static void complete_basis(double *p, double *h, int64_t r, int64_t q) {
    memcpy(h, p, sizeof(double) * (size_t)(r * q));
    for (int64_t i = 0; i < q; i++) {
        double *x = h + i * r; /* column i after H_0 .. H_{i-1}: rows i .. r - 1 become v_i */
        double norm = sqrt(dot(x + i, x + i, r - i));
        x[i] += x[i] >= 0 ? norm : -norm;
        double vv = dot(x + i, x + i, r - i);
        for (int64_t j = i + 1; j < q; j++) {
            double *y = h + j * r, f = 2 * dot(x + i, y + i, r - i) / vv;
            for (int64_t e = i; e < r; e++) y[e] -= f * x[e];
        }
    }
    for (int64_t j = q; j < r; j++) {
        double *y = p + j * r;
        memset(y, 0, sizeof(double) * (size_t)r);
        y[j] = 1;
        for (int64_t i = q - 1; i >= 0; i--) {
            const double *x = h + i * r;
            double vv = dot(x + i, x + i, r - i), f = 2 * dot(x + i, y + i, r - i) / vv;
            for (int64_t e = i; e < r; e++) y[e] -= f * x[e];
        }
    }
}

int64_t tn_svd_scratch_doubles(int64_t m, int64_t n) {
    int64_t r = m > n ? m : n, c = m < n ? m : n;
    return r * c + c * c + r * r + 2 * c;
}

int tn_kernel_svd(const tn_tensor *a, const tn_tensor *u, const tn_tensor *s, const tn_tensor *vh, double *work,
                  uint8_t *bad, int32_t ith, int32_t nth) {
    int64_t batch = a->sizes[0], m = a->sizes[1], n = a->sizes[2];
    int64_t r = m > n ? m : n, c = m < n ? m : n, first, last;
    int wide = m < n, failed = 0;
    double *w = work, *v = w + r * c, *p = v + c * c, *sv = p + r * r, *order = sv + c;
    tn_slice(batch, ith, nth, &first, &last);
    for (int64_t bi = first; bi < last; bi++) {
        int nan_in = 0, inf_in = 0;
        for (int64_t j = 0; j < c; j++)
            for (int64_t i = 0; i < r; i++) {
                double x = wide ? at3(a, bi, j, i) : at3(a, bi, i, j);
                nan_in |= x != x;
                inf_in |= x == INFINITY || x == -INFINITY;
                w[j * r + i] = x;
            }
        bad[bi] = (uint8_t)nan_in;
        failed |= nan_in;
        if (nan_in || inf_in) { /* NaN fails (the caller raises); inf gives NaN, as LAPACK does */
            for (int64_t j = 0; j < c; j++) sv[j] = NAN;
            for (int64_t i = 0; i < r * r; i++) p[i] = NAN;
            for (int64_t i = 0; i < c * c; i++) v[i] = NAN;
            for (int64_t j = 0; j < c; j++) order[j] = (double)j;
        } else {
            for (int64_t i = 0; i < c * c; i++) v[i] = i % (c + 1) == 0 ? 1.0 : 0.0;
            jacobi(w, v, r, c);
            for (int64_t j = 0; j < c; j++) sv[j] = sqrt(dot(w + j * r, w + j * r, r));
            /* descending order (insertion sort: c is a matrix side) */
            for (int64_t j = 0; j < c; j++) {
                int64_t at = j;
                while (at > 0 && sv[(int64_t)order[at - 1]] < sv[j]) {
                    order[at] = order[at - 1];
                    at--;
                }
                order[at] = (double)j;
            }
            double tiny = c > 0 ? sv[(int64_t)order[0]] * (double)r * 2.2e-16 : 0;
            int64_t q = 0; /* columns of a nonzero singular value (they come first) */
            for (; q < c && sv[(int64_t)order[q]] > tiny && sv[(int64_t)order[q]] > 0; q++) {
                int64_t from = (int64_t)order[q];
                for (int64_t i = 0; i < r; i++) p[q * r + i] = w[from * r + i] / sv[from];
            }
            complete_basis(p, w, r, q); /* w is free now */
        }
        for (int64_t j = 0; j < c; j++) set3(s, bi, 0, j, sv[(int64_t)order[j]]);
        if (!u) continue;
        /* the left factor L (rows x cols of u) and right factor R^T (vh) of A */
        for (int64_t j = 0; j < u->sizes[2]; j++)
            for (int64_t i = 0; i < m; i++)
                set3(u, bi, i, j, wide ? v[(int64_t)order[j] * c + i] : p[j * r + i]);
        for (int64_t i = 0; i < vh->sizes[1]; i++)
            for (int64_t j = 0; j < n; j++)
                set3(vh, bi, i, j, wide ? p[i * r + j] : v[(int64_t)order[i] * c + j]);
    }
    return failed;
}
