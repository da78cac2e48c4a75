/* The copy, fill, random and fused-optimizer kernels on small views. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "kernels/table.h"
#include "tn/tn.h"

static tn_tensor view2(void *data, tn_dtype dt, int64_t s0, int64_t s1, int64_t st0, int64_t st1) {
    tn_tensor t = {.data = data, .dtype = dt, .ndim = 2};
    t.sizes[0] = s0;
    t.sizes[1] = s1;
    t.strides[0] = st0;
    t.strides[1] = st1;
    return t;
}

/* Transposes (the source's last two dimensions swapped) go by tiles: every element size, sizes
 * that are not whole tiles, a batch, a source inside a larger buffer, split over threads. */
void test_copy_transposed(void) {
    enum { B = 3, R = 45, C = 70, PITCH = 50 };
    static uint64_t src[B * C * PITCH], dst[B * R * C];
    for (int i = 0; i < B * C * PITCH; i++) src[i] = 0x0102030405060708ull * (uint64_t)(i + 1);
    const tn_dtype types[] = {TN_DTYPE_U8, TN_DTYPE_BF16, TN_DTYPE_F32, TN_DTYPE_I64};
    for (int t = 0; t < 4; t++) {
        int32_t es = tn_dtype_size(types[t]);
        /* source element (b, i, j) at b*C*PITCH + j*PITCH + i, in elements of es bytes */
        tn_tensor s = {.data = src, .dtype = types[t], .ndim = 3, .sizes = {B, R, C}, .strides = {C * PITCH, 1, PITCH}};
        tn_tensor d = {.data = dst, .dtype = types[t], .ndim = 3, .sizes = {B, R, C}, .strides = {R * C, 1 * C, 1}};
        memset(dst, 0, sizeof dst);
        for (int k = 0; k < 3; k++) tn_kernel_copy(&d, &s, k, 3);
        int bad = 0;
        for (int b = 0; b < B; b++)
            for (int i = 0; i < R; i++)
                for (int j = 0; j < C; j++)
                    bad += memcmp((const char *)dst + ((b * R + i) * C + j) * es,
                                  (const char *)src + (b * C * PITCH + j * PITCH + i) * es, (size_t)es) != 0;
        CHECK(bad == 0);
    }
}

void test_copy_kernel(void) {
    float src[12];
    for (int i = 0; i < 12; i++) src[i] = (float)i - 5.5f;
    /* transpose a 3x4 float matrix into a 4x3 double matrix */
    double dst[12] = {0};
    tn_tensor d = view2(dst, TN_DTYPE_F64, 4, 3, 3, 1);
    tn_tensor s = view2(src, TN_DTYPE_F32, 4, 3, 1, 4);
    tn_kernel_copy(&d, &s, 0, 1);
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 3; c++) CHECK(dst[r * 3 + c] == (double)src[c * 4 + r]);
    /* float -> int32 truncates toward zero; -> bool is nonzero; -> bf16 rounds */
    int32_t ints[12];
    uint8_t bools[12];
    uint16_t bf[12];
    tn_tensor si = view2(src, TN_DTYPE_F32, 3, 4, 4, 1);
    tn_tensor di = view2(ints, TN_DTYPE_I32, 3, 4, 4, 1);
    tn_tensor db = view2(bools, TN_DTYPE_BOOL, 3, 4, 4, 1);
    tn_tensor dh = view2(bf, TN_DTYPE_BF16, 3, 4, 4, 1);
    /* split across three "threads" to cover the slicing */
    for (int k = 0; k < 3; k++) {
        tn_kernel_copy(&di, &si, k, 3);
        tn_kernel_copy(&db, &si, k, 3);
        tn_kernel_copy(&dh, &si, k, 3);
    }
    for (int i = 0; i < 12; i++) {
        CHECK(ints[i] == (int32_t)src[i]);
        CHECK(bools[i] == (src[i] != 0));
        CHECK(tn_bf16_to_f32(bf[i]) == src[i]);
    }
    /* broadcast (stride 0) source and a negative-stride source */
    int64_t one = 7, out[5], rev[5] = {1, 2, 3, 4, 5};
    tn_tensor b = {.data = &one, .dtype = TN_DTYPE_I64, .ndim = 1, .sizes = {5}, .strides = {0}};
    tn_tensor o = {.data = out, .dtype = TN_DTYPE_I64, .ndim = 1, .sizes = {5}, .strides = {1}};
    tn_kernel_copy(&o, &b, 0, 1);
    for (int i = 0; i < 5; i++) CHECK(out[i] == 7);
    tn_tensor rv = {.data = &rev[4], .dtype = TN_DTYPE_I64, .ndim = 1, .sizes = {5}, .strides = {-1}};
    tn_kernel_copy(&o, &rv, 0, 1);
    for (int i = 0; i < 5; i++) CHECK(out[i] == 5 - i);
    /* int64 -> int8 wraps like a two's complement cast */
    int64_t big[2] = {300, -129};
    int8_t small[2];
    tn_tensor sb = {.data = big, .dtype = TN_DTYPE_I64, .ndim = 1, .sizes = {2}, .strides = {1}};
    tn_tensor ds = {.data = small, .dtype = TN_DTYPE_I8, .ndim = 1, .sizes = {2}, .strides = {1}};
    tn_kernel_copy(&ds, &sb, 0, 1);
    CHECK(small[0] == 44 && small[1] == 127);
    /* one long row split across "threads" by elements, with a cast */
    static float longsrc[1001];
    static double longdst[1001];
    for (int i = 0; i < 1001; i++) longsrc[i] = (float)i;
    tn_tensor ls = {.data = longsrc, .dtype = TN_DTYPE_F32, .ndim = 1, .sizes = {1001}, .strides = {1}};
    tn_tensor ld = {.data = longdst, .dtype = TN_DTYPE_F64, .ndim = 1, .sizes = {1001}, .strides = {1}};
    for (int k = 0; k < 3; k++) tn_kernel_copy(&ld, &ls, k, 3);
    for (int i = 0; i < 1001; i++) CHECK(longdst[i] == (double)i);
    /* a 0-dim view */
    double x = 2.5, y = 0;
    tn_tensor sx = {.data = &x, .dtype = TN_DTYPE_F64, .ndim = 0};
    tn_tensor dy = {.data = &y, .dtype = TN_DTYPE_F64, .ndim = 0};
    tn_kernel_copy(&dy, &sx, 0, 1);
    CHECK(y == 2.5);
}

void test_fill_kernel(void) {
    uint16_t h[6];
    tn_tensor t = view2(h, TN_DTYPE_F16, 2, 3, 3, 1);
    tn_scalar v = {.kind = TN_SCALAR_KIND_FLOAT, .f = 1.5};
    tn_kernel_fill(&t, &v, 0, 1);
    for (int i = 0; i < 6; i++) CHECK(tn_f16_to_f32(h[i]) == 1.5f);
    int64_t q[6] = {0};
    tn_tensor col = view2(q, TN_DTYPE_I64, 3, 1, 2, 1); /* every other element */
    tn_scalar iv = {.kind = TN_SCALAR_KIND_INT, .i = -3};
    tn_kernel_fill(&col, &iv, 0, 1);
    for (int i = 0; i < 6; i++) CHECK(q[i] == (i % 2 ? 0 : -3));
}

void test_philox_known_answers(void) {
    /* Known answers of Philox-4x32-10 published with the algorithm. */
    uint32_t out[4];
    uint32_t z[4] = {0, 0, 0, 0}, zk[2] = {0, 0};
    tn_philox4x32_10(z, zk, out);
    CHECK(out[0] == 0x6627e8d5u && out[1] == 0xe169c58du && out[2] == 0xbc57ac4cu &&
          out[3] == 0x9b00dbd8u);
    uint32_t f[4] = {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu};
    uint32_t fk[2] = {0xffffffffu, 0xffffffffu};
    tn_philox4x32_10(f, fk, out);
    CHECK(out[0] == 0x408f276du && out[1] == 0x41c83b0eu && out[2] == 0xa20bc7c6u &&
          out[3] == 0x6d5451fdu);
}

void test_random_kernels(void) {
    enum { N = 20000 };
    static float a[N], b[N];
    tn_tensor ta = {.data = a, .dtype = TN_DTYPE_F32, .ndim = 1, .sizes = {N}, .strides = {1}};
    tn_tensor tb = ta;
    tb.data = b;
    tn_kernel_normal(&ta, 42, 7, 1.0, 2.0, 0, 1);
    /* the same draw split over threads is identical */
    for (int k = 0; k < 4; k++) tn_kernel_normal(&tb, 42, 7, 1.0, 2.0, k, 4);
    CHECK(memcmp(a, b, sizeof a) == 0);
    double sum = 0, sq = 0;
    for (int i = 0; i < N; i++) sum += a[i], sq += (double)a[i] * a[i];
    double mean = sum / N, var = sq / N - mean * mean;
    CHECK(fabs(mean - 1.0) < 0.05);
    CHECK(fabs(sqrt(var) - 2.0) < 0.05);
    /* three threads (their ranges start inside Philox blocks), a strided destination and a
     * bfloat16 one give the same values */
    for (int k = 0; k < 3; k++) tn_kernel_normal(&tb, 42, 7, 1.0, 2.0, k, 3);
    CHECK(memcmp(a, b, sizeof a) == 0);
    static float wide[2 * N];
    tn_tensor tw = {.data = wide, .dtype = TN_DTYPE_F32, .ndim = 1, .sizes = {N}, .strides = {2}};
    tn_kernel_normal(&tw, 42, 7, 1.0, 2.0, 0, 1);
    static uint16_t half[N];
    tn_tensor th = {.data = half, .dtype = TN_DTYPE_BF16, .ndim = 1, .sizes = {N}, .strides = {1}};
    tn_kernel_normal(&th, 42, 7, 1.0, 2.0, 0, 1);
    int same = 1;
    for (int i = 0; i < N; i++) {
        uint32_t bits;
        memcpy(&bits, &a[i], 4);
        uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16; /* to nearest even */
        same &= wide[2 * i] == a[i] && half[i] == (uint16_t)rounded;
    }
    CHECK(same);
    /* every ISA variant with FMA gives the same normal values, bit for bit; the reference
     * variant (a*b+c rounded twice) stays within rounding of them */
    float first[64], other[64];
    const tn_kernel_table *k2 = tn_kernels_for(TN_ISA_AVX2);
    if (k2) {
        k2->draw_floats(42, 7, 64, 1, 1.0, 2.0, first);
        for (int isa = 0; isa < TN_ISA_COUNT_; isa++) {
            const tn_kernel_table *kt = tn_kernels_for((tn_isa)isa);
            if (!kt) continue;
            kt->draw_floats(42, 7, 64, 1, 1.0, 2.0, other);
            int agree = 1;
            for (int i = 0; i < 64; i++)
                agree &= isa == TN_ISA_REF ? fabsf(other[i] - first[i]) <= 1e-5f * (1.0f + fabsf(first[i]))
                                           : other[i] == first[i];
            CHECK(agree);
        }
    }
    /* another offset gives another draw */
    tn_kernel_normal(&tb, 42, 8, 1.0, 2.0, 0, 1);
    CHECK(memcmp(a, b, sizeof a) != 0);
    tn_kernel_uniform(&ta, 1, 0, -2.0, 3.0, 0, 1);
    double lo = 1e9, hi = -1e9;
    sum = 0;
    for (int i = 0; i < N; i++) {
        lo = fmin(lo, a[i]);
        hi = fmax(hi, a[i]);
        sum += a[i];
    }
    CHECK(lo >= -2.0 && hi < 3.0 && lo < -1.9 && hi > 2.9);
    CHECK(fabs(sum / N - 0.5) < 0.05);
}

/* One Adam step on a float32 and a bfloat16 group, against the formula in double. */
void test_adam_kernel(void) {
    float p[3] = {1.0f, -2.0f, 0.5f}, g[3] = {0.1f, -0.3f, 2.0f}, m[3] = {0}, v[3] = {0};
    uint16_t bp[2], bg[2], bm[2] = {0, 0}, bv[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        bp[i] = tn_f32_to_bf16(p[i]);
        bg[i] = tn_f32_to_bf16(g[i]);
    }
    float step = 1.0f, scale = 2.0f;
    tn_adam_group groups[2] = {{p, g, m, v, NULL, &step, 3, TN_DTYPE_F32},
                               {bp, bg, bm, bv, NULL, &step, 2, TN_DTYPE_BF16}};
    tn_adam_config cfg = {0.1, 0.9, 0.999, 0.01, 1e-8, 0, 0, 1, &scale, NULL};
    for (int k = 0; k < 3; k++) tn_kernel_adam(&cfg, 2, groups, k, 3);
    /* first step: m = 0.1 g, v = 0.001 g^2, so the update is lr * sign(g) (up to eps) */
    double expect[3] = {1.0 * (1 - 0.001) - 0.1, -2.0 * (1 - 0.001) + 0.1, 0.5 * (1 - 0.001) - 0.1};
    for (int i = 0; i < 3; i++) CHECK(fabs(p[i] - expect[i]) < 1e-6);
    CHECK(g[2] == 1.0f);                                   /* unscaled in place */
    CHECK(fabs(tn_bf16_to_f32(bp[0]) - expect[0]) < 1e-2 && fabs(tn_bf16_to_f32(bp[1]) - expect[1]) < 2e-2);
    float inf_flag = 1.0f, before = p[0];
    cfg.found_inf = &inf_flag;
    tn_kernel_adam(&cfg, 2, groups, 0, 1);
    CHECK(p[0] == before);                                 /* skipped */
}

/* GradScaler's scale update: back off after an inf, count clean steps, grow at the interval,
 * and keep the scale when growing would overflow. */
void test_amp_update_scale(void) {
    float scale = 1024.0f, found = 0.0f;
    int32_t tracker = 0;
    tn_amp_scale u = {&scale, &tracker, &found, 2.0, 0.5, 3};
    tn_kernel_amp_update_scale(&u);
    tn_kernel_amp_update_scale(&u);
    CHECK(scale == 1024.0f && tracker == 2);
    tn_kernel_amp_update_scale(&u);
    CHECK(scale == 2048.0f && tracker == 0);
    found = 1.0f;
    tracker = 2;
    tn_kernel_amp_update_scale(&u);
    CHECK(scale == 1024.0f && tracker == 0);
    found = 0.0f;
    scale = 3e38f;
    tracker = 2;
    tn_kernel_amp_update_scale(&u);
    CHECK(scale == 3e38f && tracker == 0); /* 6e38 is inf as a float: kept */
    /* on a stream, with the arguments copied at launch */
    tn_stream_t s;
    CHECK_OK(tn_stream_get(0, 0, &s));
    scale = 8.0f;
    found = 1.0f;
    CHECK_OK(tn_amp_update_scale_async(s, &u));
    u.scale = NULL;
    CHECK(tn_amp_update_scale_async(s, &u) == TN_STATUS_INVALID_ARGUMENT);
    CHECK_OK(tn_stream_synchronize(s));
    CHECK(scale == 4.0f);
}

/* Two SGD steps (the first sets the momentum buffer) with nesterov, weight decay, maximize and a
 * grad scale, on float32 and bfloat16 groups split across three threads, against the formula
 * in double; then a step skipped by found_inf. */
void test_sgd_kernel(void) {
    enum { N = 5 };
    float p[N], g[N], buf[N];
    double rp[N], rbuf[N];
    uint16_t bp[N], bg[N], bb[N];
    for (int i = 0; i < N; i++) {
        p[i] = 0.5f * (float)i - 1.0f;
        rp[i] = p[i];
        bp[i] = tn_f32_to_bf16(p[i]);
    }
    float scale = 4.0f;
    tn_sgd_config cfg = {0.1, 0.01, 0.9, 0.25, 1, 1, 1, &scale, NULL};
    tn_sgd_group groups[2] = {{p, g, buf, N, TN_DTYPE_F32}, {bp, bg, bb, N, TN_DTYPE_BF16}};
    for (int step = 0; step < 2; step++) {
        for (int i = 0; i < N; i++) {
            g[i] = (float)(i + 1) * (step ? -2.0f : 1.0f); /* scaled gradients */
            bg[i] = tn_f32_to_bf16(g[i]);
            double grad = -(double)g[i] / 4.0 + 0.01 * rp[i];
            rbuf[i] = step ? 0.9 * rbuf[i] + 0.75 * grad : grad;
            rp[i] -= 0.1 * (grad + 0.9 * rbuf[i]);
        }
        cfg.is_first_step = step == 0;
        for (int t = 0; t < 3; t++) tn_kernel_sgd(&cfg, 2, groups, t, 3);
        for (int i = 0; i < N; i++) {
            CHECK(fabs(p[i] - rp[i]) < 1e-5 && fabs(buf[i] - rbuf[i]) < 1e-5);
            CHECK(fabs(tn_bf16_to_f32(bp[i]) - rp[i]) < 3e-2);
        }
        CHECK(g[N - 1] == (float)N * (step ? -2.0f : 1.0f) / 4.0f); /* unscaled in place */
    }
    float found = 1.0f, before = p[0];
    cfg.found_inf = &found;
    tn_kernel_sgd(&cfg, 2, groups, 0, 1);
    CHECK(p[0] == before);
    /* through a stream; a group without its momentum buffer is refused */
    tn_stream_t s;
    CHECK_OK(tn_stream_get(0, 0, &s));
    found = 0.0f;
    CHECK_OK(tn_fused_sgd_async(s, NULL, &cfg, 2, groups));
    CHECK_OK(tn_stream_synchronize(s));
    CHECK(p[0] != before);
    groups[1].momentum_buffer = NULL;
    CHECK(tn_fused_sgd_async(s, NULL, &cfg, 2, groups) == TN_STATUS_INVALID_ARGUMENT);
}

/* Dropout of contiguous float32 and bfloat16 (the typed loops) gives what the per-element path
 * gives for the same elements in strided views, bit for bit, mask included: NaN and -0 among
 * the inputs, three thread slices of odd length. */
void test_dropout_typed_rows_match_the_element_path(void) {
    enum { R = 7, C = 61, N = R * C };
    static float x[N], xs[2 * N], o[N], os[2 * N];
    static uint16_t hx[N], hxs[2 * N], ho[N], hos[2 * N];
    static uint8_t m[N], ms[2 * N];
    for (int i = 0; i < N; i++) {
        x[i] = (float)((i * 37) % 101) / 7.0f - 7.0f;
        if (i % 50 == 3) x[i] = NAN;
        if (i % 50 == 4) x[i] = -0.0f;
        xs[2 * i] = x[i];
        hx[i] = hxs[2 * i] = tn_f32_to_bf16(x[i]);
    }
    for (int dt = 0; dt < 2; dt++) {
        tn_dtype t = dt ? TN_DTYPE_BF16 : TN_DTYPE_F32;
        void *in = dt ? (void *)hx : (void *)x, *ins = dt ? (void *)hxs : (void *)xs;
        void *out = dt ? (void *)ho : (void *)o, *outs = dt ? (void *)hos : (void *)os;
        tn_tensor a = view2(in, t, R, C, C, 1), b = view2(out, t, R, C, C, 1), mk = view2(m, TN_DTYPE_BOOL, R, C, C, 1);
        tn_tensor as = view2(ins, t, R, C, 2 * C, 2), bs = view2(outs, t, R, C, 2 * C, 2);
        tn_tensor mks = view2(ms, TN_DTYPE_BOOL, R, C, 2 * C, 2);
        for (int32_t ith = 0; ith < 3; ith++) {
            tn_kernel_dropout(&b, &mk, &a, 0.3, 1234, 56, ith, 3);
            tn_kernel_dropout(&bs, &mks, &as, 0.3, 1234, 56, ith, 3);
        }
        int bad = 0, kept = 0;
        for (int i = 0; i < N; i++) {
            bad += m[i] != ms[2 * i];
            kept += m[i];
            bad += dt ? ho[i] != hos[2 * i] : memcmp(&o[i], &os[2 * i], sizeof(float)) != 0;
        }
        CHECK(bad == 0);
        CHECK(kept > N / 2 && kept < N * 9 / 10); /* about 70% kept */
    }
}
