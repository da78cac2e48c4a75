/* Singular value decompositions by one-sided Jacobi rotations (Hestenes), in double (see
 * tn/linalg.h). Threads take whole matrices of the batch.
 *
 * The kernel works on the tall orientation T (r x c, r >= c): A itself, or A^T when A is
 * wide. A taller-than-wide T is first factored T = Q R (Householder), so that the rotations
 * run on R's c rows. Rotating pairs of R's columns until every pair is orthogonal gives
 * R V = W, whose column norms are the singular values and whose normalised columns, mapped
 * back by Q, are the left singular vectors P; V holds the right ones. Columns of a zero singular value, and the extra columns
 * of full_matrices, complete P to an orthonormal basis (by Householder reflections of the
 * known columns). For a wide A the roles swap: A = V S P^T. An empty side (k = 0) leaves
 * the other factor the identity, as PyTorch's CPU path gives it. */
#include <math.h>
#include <string.h>

#include "elem.h"
#include "strided.h"
#include "tn/linalg.h"

enum { MAX_SWEEPS = 100 };

static double dot(const double *x, const double *y, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += x[i] * y[i];
    return s;
}

/* alpha = x.x, beta = y.y, gamma = x.y in one pass, four partial sums each so the loop
 * vectorizes. */
static void dots3(const double *x, const double *y, int64_t n, double *alpha, double *beta, double *gamma) {
    double a4[4] = {0}, b4[4] = {0}, g4[4] = {0};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int l = 0; l < 4; l++) {
            a4[l] += x[i + l] * x[i + l];
            b4[l] += y[i + l] * y[i + l];
            g4[l] += x[i + l] * y[i + l];
        }
    double a = (a4[0] + a4[1]) + (a4[2] + a4[3]), b = (b4[0] + b4[1]) + (b4[2] + b4[3]);
    double g = (g4[0] + g4[1]) + (g4[2] + g4[3]);
    for (; i < n; i++) a += x[i] * x[i], b += y[i] * y[i], g += x[i] * y[i];
    *alpha = a, *beta = b, *gamma = g;
}

static void rotate(double *restrict x, double *restrict y, int64_t n, double cs, double sn) {
    for (int64_t i = 0; i < n; i++) {
        double a = x[i], b = y[i];
        x[i] = cs * a - sn * b;
        y[i] = sn * a + cs * b;
    }
}

/* Rotates columns w (r x c, column-major) and v (c x c, or NULL) until w's are pairwise
 * orthogonal. */
static void jacobi(double *w, double *v, int64_t r, int64_t c) {
    for (int sweep = 0; sweep < MAX_SWEEPS; sweep++) {
        int rotated = 0;
        for (int64_t p = 0; p + 1 < c; p++)
            for (int64_t q = p + 1; q < c; q++) {
                double *wp = w + p * r, *wq = w + q * r, alpha, beta, gamma;
                dots3(wp, wq, r, &alpha, &beta, &gamma);
                if (!(fabs(gamma) > 1e-15 * sqrt(alpha * beta)) || gamma == 0) continue;
                double zeta = (beta - alpha) / (2 * gamma);
                double t = (zeta >= 0 ? 1.0 : -1.0) / (fabs(zeta) + sqrt(1 + zeta * zeta));
                double cs = 1 / sqrt(1 + t * t), sn = cs * t;
                rotate(wp, wq, r, cs, sn);
                if (v) rotate(v + p * c, v + q * c, c, cs, sn);
                rotated = 1;
            }
        if (!rotated) return;
    }
}

/* Columns q .. upto - 1 of p (r rows, column-major) become orthonormal and orthogonal to
 * columns 0 .. q - 1 (orthonormal): Householder reflections H_0 .. H_{q-1} that triangularise
 * those columns (built in h, r x q) make Q = H_0 ... H_{q-1}, whose first q columns span
 * theirs, so Q e_j for j >= q are the columns wanted. */
static void complete_basis(double *p, double *h, int64_t r, int64_t q, int64_t upto) {
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
    for (int64_t j = q; j < upto; j++) {
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

/* Householder QR of w (r x c, r > c, column-major) in place: column i keeps v_i in rows
 * i .. r - 1 (H_i = I - 2 v v^T / (v.v), vv[i] = v.v, 0 for no reflection); R (c x c,
 * column-major, upper triangular) goes to rr. */
static void householder_qr(double *w, double *vv, double *rr, int64_t r, int64_t c) {
    memset(rr, 0, sizeof(double) * (size_t)(c * c));
    for (int64_t i = 0; i < c; i++) {
        double *x = w + i * r;
        double norm = sqrt(dot(x + i, x + i, r - i)), alpha = x[i] >= 0 ? -norm : norm;
        x[i] -= alpha;
        vv[i] = norm == 0 ? 0 : dot(x + i, x + i, r - i);
        for (int64_t j = i + 1; j < c; j++) {
            double *y = w + j * r;
            if (vv[i] != 0) {
                double f = 2 * dot(x + i, y + i, r - i) / vv[i];
                for (int64_t e = i; e < r; e++) y[e] -= f * x[e];
            }
            rr[j * c + i] = y[i];
        }
        rr[i * c + i] = alpha;
    }
}

/* y (r rows, zero below row c) = Q y for the reflectors householder_qr left in w. */
static void apply_q(const double *w, const double *vv, double *y, int64_t r, int64_t c) {
    for (int64_t i = c - 1; i >= 0; i--) {
        if (vv[i] == 0) continue;
        const double *x = w + i * r;
        double f = 2 * dot(x + i, y + i, r - i) / vv[i];
        for (int64_t e = i; e < r; e++) y[e] -= f * x[e];
    }
}

int64_t tn_svd_scratch_doubles(int64_t m, int64_t n, int32_t full) {
    int64_t r = m > n ? m : n, c = m < n ? m : n;
    return 2 * r * c + 2 * c * c + r * (full ? r : c) + 3 * c;
}

int tn_kernel_svd(const tn_tensor *a, const tn_tensor *u, const tn_tensor *s, const tn_tensor *vh, double *work,
                  uint8_t *bad, int32_t ith, int32_t nth) {
    int64_t batch = a->sizes[0], m = a->sizes[1], n = a->sizes[2];
    int64_t r = m > n ? m : n, c = m < n ? m : n, first, last;
    int wide = m < n, failed = 0;
    /* columns of P wanted: u's (tall) or vh's rows (wide); none for the values alone */
    int64_t pc = !u ? 0 : wide ? vh->sizes[1] : u->sizes[2];
    double *w = work, *rr = w + r * c, *v = rr + c * c, *p = v + c * c, *h = p + r * pc, *sv = h + r * c;
    double *order = sv + c, *vv = order + c; /* order: column indices, exact as doubles in this scratch */
    tn_slice(batch, ith, nth, &first, &last);
    for (int64_t bi = first; bi < last; bi++) {
        int nan_in = 0, inf_in = 0;
        for (int64_t j = 0; j < c; j++)
            for (int64_t i = 0; i < r; i++) {
                double x = wide ? tn_get3(a, bi, j, i) : tn_get3(a, bi, i, j);
                nan_in |= x != x;
                inf_in |= x == INFINITY || x == -INFINITY;
                w[j * r + i] = x;
            }
        bad[bi] = (uint8_t)nan_in;
        failed |= nan_in;
        for (int64_t j = 0; j < c; j++) order[j] = (double)j;
        if (nan_in || inf_in) { /* NaN fails (the caller raises); inf gives NaN, as LAPACK does */
            for (int64_t j = 0; j < c; j++) sv[j] = NAN;
            for (int64_t i = 0; i < r * pc; i++) p[i] = NAN;
            for (int64_t i = 0; i < c * c; i++) v[i] = NAN;
        } else {
            /* T = Q R first when T is taller than wide: the rotations then run on c rows */
            int qr = r > c;
            if (qr)
                householder_qr(w, vv, rr, r, c);
            else
                memcpy(rr, w, sizeof(double) * (size_t)(c * c));
            for (int64_t i = 0; i < c * c; i++) v[i] = i % (c + 1) == 0 ? 1.0 : 0.0;
            jacobi(rr, u ? v : NULL, c, c);
            for (int64_t j = 0; j < c; j++) sv[j] = sqrt(dot(rr + j * c, rr + j * c, c));
            /* descending order (insertion sort: c is a matrix side) */
            for (int64_t j = 0; j < c; j++) {
                int64_t at = j;
                while (at > 0 && sv[(int64_t)order[at - 1]] < sv[j]) {
                    order[at] = order[at - 1];
                    at--;
                }
                order[at] = (double)j;
            }
            if (pc > 0) {
                double tiny = c > 0 ? sv[(int64_t)order[0]] * (double)r * 2.2e-16 : 0;
                int64_t q = 0; /* columns of a nonzero singular value (they come first) */
                for (; q < c && q < pc && sv[(int64_t)order[q]] > tiny && sv[(int64_t)order[q]] > 0; q++) {
                    int64_t from = (int64_t)order[q];
                    double *y = p + q * r;
                    for (int64_t i = 0; i < c; i++) y[i] = rr[from * c + i] / sv[from];
                    for (int64_t i = c; i < r; i++) y[i] = 0;
                    if (qr) apply_q(w, vv, y, r, c);
                }
                complete_basis(p, h, r, q, pc);
            }
        }
        for (int64_t j = 0; j < c; j++) tn_set3(s, bi, 0, j, sv[(int64_t)order[j]]);
        if (!u) continue;
        /* the left factor L (rows x cols of u) and right factor R^T (vh) of A */
        for (int64_t j = 0; j < u->sizes[2]; j++)
            for (int64_t i = 0; i < m; i++)
                tn_set3(u, bi, i, j, wide ? v[(int64_t)order[j] * c + i] : p[j * r + i]);
        for (int64_t i = 0; i < vh->sizes[1]; i++)
            for (int64_t j = 0; j < n; j++)
                tn_set3(vh, bi, i, j, wide ? p[i * r + j] : v[(int64_t)order[i] * c + j]);
    }
    return failed;
}
