/* The public float16 / bfloat16 conversions (tn/kernels.h); the work is in half.h. */
#include "half.h"
#include "tn/kernels.h"

float tn_bf16_to_f32(uint16_t b) { return tn_bf16_to_f32_inline(b); }
uint16_t tn_f32_to_bf16(float f) { return tn_f32_to_bf16_inline(f); }
float tn_f16_to_f32(uint16_t h) { return tn_f16_to_f32_inline(h); }
uint16_t tn_f32_to_f16(float f) { return tn_f32_to_f16_inline(f); }
