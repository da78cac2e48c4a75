/* Which instruction-set variant of the kernels runs.
 *
 * The kernel table starts with the reference kernels (plain C, baseline x86-64) and the best
 * variant the CPU supports (AVX2+FMA, AVX-512, with AVX512-BF16 when present) overrides what it implements. The choice is made
 * once from CPUID and XGETBV; TN_ISA=ref|avx2|avx512 asks for a lower one (a higher one than the
 * CPU has falls back to the best available), TN_ISA_DEBUG=1 logs the choice to stderr. */
#ifndef TN_ISA_H
#define TN_ISA_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tn_isa {
    TN_ISA_REF,
    TN_ISA_AVX2,
    TN_ISA_AVX512,
    TN_ISA_COUNT_
} tn_isa;

tn_isa tn_isa_active(void);
/* Non-zero if this CPU (and OS) can run the variant. */
int tn_isa_supported(tn_isa isa);
const char *tn_isa_name(tn_isa isa);
/* Non-zero if the active variant uses AVX512-BF16 (dot products in bfloat16, for bf16 GEMM). */
int tn_isa_bf16(void);
/* Non-zero if the active variant multiplies bf16 matrices on AMX tiles (TN_AMX=0 turns it off). */
int tn_isa_amx(void);
/* The active variant with the extensions it uses, e.g. "avx512+bf16+amx" (neuron-ls shows it). */
const char *tn_isa_label(void);

#ifdef __cplusplus
}
#endif
#endif
