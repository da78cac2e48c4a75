/* ISA detection and the kernel tables (see tn/isa.h). */
#define _DEFAULT_SOURCE /* syscall() */
#include <cpuid.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "table.h"
#include "tn/attention.h"

static uint64_t xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

/* AVX512-BF16 (vdpbf16ps): CPUID leaf 7, sub-leaf 1, EAX bit 5. */
static int detect_bf16(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return 0;
    return (a >> 5) & 1;
}

/* AMX with bf16 (CPUID leaf 7: EDX bit 22 AMX-BF16, bit 24 AMX-TILE), the OS saving the tile
 * state (XCR0 bits 17 and 18), and Linux granting it to this process: until asked for, the
 * tile data is disabled per process (arch_prctl ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA).
 * TN_AMX=0 leaves it off. */
static int detect_amx(void) {
    unsigned a, b, c, d;
    const char *env = getenv("TN_AMX");
    if (env && strcmp(env, "0") == 0) return 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    if (!((d >> 22) & 1) || !((d >> 24) & 1)) return 0;
    if ((xgetbv0() & 0x60000) != 0x60000) return 0;
#if defined(__linux__)
    enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#else
    return 0;
#endif
}

static tn_isa detect(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return TN_ISA_REF;
    int osxsave = (c >> 27) & 1, fma = (c >> 12) & 1, avx = (c >> 28) & 1;
    if (!osxsave || !avx) return TN_ISA_REF;
    uint64_t xcr0 = xgetbv0();
    if ((xcr0 & 0x6) != 0x6) return TN_ISA_REF; /* OS saves SSE and AVX state */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return TN_ISA_REF;
    int avx2 = (b >> 5) & 1;
    int avx512f = (b >> 16) & 1, avx512bw = (b >> 30) & 1, avx512vl = (b >> 31) & 1;
    if (!(avx2 && fma)) return TN_ISA_REF;
    if (avx512f && avx512bw && avx512vl && (xcr0 & 0xe0) == 0xe0) return TN_ISA_AVX512;
    return TN_ISA_AVX2;
}

static struct {
    pthread_once_t once;
    tn_isa best;
    tn_isa active;
    int bf16, amx;
    char label[32]; /* the active variant with its extensions: "avx512+bf16+amx" */
    tn_kernel_table tables[TN_ISA_COUNT_];
} isa = {.once = PTHREAD_ONCE_INIT};

static void init(void) {
    isa.best = detect();
    isa.bf16 = isa.best == TN_ISA_AVX512 && detect_bf16();
    isa.amx = isa.bf16 && detect_amx();
    for (int i = 0; i <= (int)isa.best; i++) {
        tn_kernels_install_ref(&isa.tables[i]);
        tn_reduce_install_ref(&isa.tables[i]); tn_random_install_ref(&isa.tables[i]);
        tn_gemm_install_ref(&isa.tables[i]);
        tn_attention_install_ref(&isa.tables[i]);
        tn_channel_norm_install_ref(&isa.tables[i]);
        if (i >= TN_ISA_AVX2) {
            tn_kernels_install_avx2(&isa.tables[i]);
            tn_reduce_install_avx2(&isa.tables[i]); tn_random_install_avx2(&isa.tables[i]);
            tn_gemm_install_avx2(&isa.tables[i]);
            tn_attention_install_avx2(&isa.tables[i]);
            tn_channel_norm_install_avx2(&isa.tables[i]);
        }
        if (i >= TN_ISA_AVX512) {
            tn_kernels_install_avx512(&isa.tables[i]);
            tn_reduce_install_avx512(&isa.tables[i]); tn_random_install_avx512(&isa.tables[i]);
            tn_gemm_install_avx512(&isa.tables[i]);
            tn_attention_install_avx512(&isa.tables[i]);
            tn_channel_norm_install_avx512(&isa.tables[i]);
            if (isa.bf16) tn_gemm_install_avx512bf16(&isa.tables[i]);
            if (isa.amx) tn_gemm_install_amx(&isa.tables[i]);
        }
    }
    isa.active = isa.best;
    const char *want = getenv("TN_ISA");
    if (want && *want) {
        for (int i = 0; i < TN_ISA_COUNT_; i++)
            if (strcmp(want, tn_isa_name((tn_isa)i)) == 0 && i <= (int)isa.best)
                isa.active = (tn_isa)i;
    }
    int avx512 = isa.active == TN_ISA_AVX512;
    snprintf(isa.label, sizeof isa.label, "%s%s%s", tn_isa_name(isa.active), avx512 && isa.bf16 ? "+bf16" : "",
             avx512 && isa.amx ? "+amx" : "");
    const char *debug = getenv("TN_ISA_DEBUG");
    if (debug && strcmp(debug, "1") == 0)
        fprintf(stderr, "[torchneuron] kernels: %s (CPU supports up to %s%s%s)\n", isa.label,
                tn_isa_name(isa.best), want ? ", TN_ISA=" : "", want ? want : "");
}

tn_isa tn_isa_active(void) {
    pthread_once(&isa.once, init);
    return isa.active;
}

int tn_isa_supported(tn_isa which) {
    pthread_once(&isa.once, init);
    return which >= 0 && which <= isa.best;
}

int tn_isa_bf16(void) {
    pthread_once(&isa.once, init);
    return isa.bf16 && isa.active == TN_ISA_AVX512;
}

int tn_isa_amx(void) {
    pthread_once(&isa.once, init);
    return isa.amx && isa.active == TN_ISA_AVX512;
}

const char *tn_isa_label(void) {
    pthread_once(&isa.once, init);
    return isa.label;
}

const char *tn_isa_name(tn_isa which) {
    static const char *const names[TN_ISA_COUNT_] = {"ref", "avx2", "avx512"};
    return which >= 0 && which < TN_ISA_COUNT_ ? names[which] : "unknown";
}

const tn_kernel_table *tn_kernels(void) {
    pthread_once(&isa.once, init);
    return &isa.tables[isa.active];
}

const tn_kernel_table *tn_kernels_for(tn_isa which) {
    return tn_isa_supported(which) ? &isa.tables[which] : NULL;
}

/* The entry points of per-ISA kernels that live outside the table's users. */
int64_t tn_attention_scratch_floats(const tn_attention *a) {
    return tn_kernels()->attention_scratch_floats(a);
}

void tn_kernel_attention_forward(const tn_attention *a, float *scratch, int32_t ith, int32_t nth) {
    const tn_kernel_table *k = tn_kernels();
    k->attention_forward(k, a, scratch, ith, nth);
}

void tn_kernel_attention_backward(const tn_attention *a, float *scratch, int32_t ith, int32_t nth) {
    const tn_kernel_table *k = tn_kernels();
    k->attention_backward(k, a, scratch, ith, nth);
}
