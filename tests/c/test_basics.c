/* Status strings, environment parsing, the pointer map and float conversions. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "runtime/internal.h"
#include "runtime/ptrmap.h"
#include "tn/tn.h"

void test_status_strings(void) {
    for (int s = 0; s < TN_STATUS_COUNT_; s++) CHECK(strlen(tn_status_string((tn_status)s)) > 0);
    CHECK(strcmp(tn_status_string(TN_STATUS_OUT_OF_MEMORY), "out of device memory") == 0);
    CHECK(strcmp(tn_status_string((tn_status)999), "unknown status") == 0);
}

void test_parse_core_list(void) {
    int32_t c[8];
    CHECK(tn_parse_core_list("0", c, 8) == 1 && c[0] == 0);
    CHECK(tn_parse_core_list("0-3", c, 8) == 4 && c[3] == 3);
    CHECK(tn_parse_core_list("1,3", c, 8) == 2 && c[0] == 1 && c[1] == 3);
    CHECK(tn_parse_core_list("0-1,4", c, 8) == 3 && c[2] == 4);
    CHECK(tn_parse_core_list("", c, 8) == -1);
    CHECK(tn_parse_core_list("3-1", c, 8) == -1);
    CHECK(tn_parse_core_list("1,1", c, 8) == -1);
    CHECK(tn_parse_core_list("a", c, 8) == -1);
    CHECK(tn_parse_core_list("1,", c, 8) == -1);
    CHECK(tn_parse_core_list("0-9", c, 8) == -1);
}

void test_parse_bytes(void) {
    uint64_t b = 0;
    CHECK(tn_parse_bytes("16GiB", &b) == 0 && b == (16ull << 30));
    CHECK(tn_parse_bytes("512MiB", &b) == 0 && b == (512ull << 20));
    CHECK(tn_parse_bytes("1048576", &b) == 0 && b == 1048576);
    CHECK(tn_parse_bytes("1.5GiB", &b) == 0 && b == (3ull << 29));
    CHECK(tn_parse_bytes("2GB", &b) == 0 && b == 2000000000ull);
    CHECK(tn_parse_bytes("lots", &b) != 0);
    CHECK(tn_parse_bytes("-1GiB", &b) != 0);
    CHECK(tn_parse_bytes("1 parsec", &b) != 0);
}

void test_ptrmap(void) {
    tn_ptrmap m = {0};
    enum { N = 5000 };
    static char keys[N];
    for (int i = 0; i < N; i++) CHECK(tn_ptrmap_put(&m, &keys[i], &keys[(i + 1) % N]) == 0);
    CHECK(m.count == N);
    for (int i = 0; i < N; i += 2) CHECK(tn_ptrmap_remove(&m, &keys[i]) == &keys[(i + 1) % N]);
    for (int i = 0; i < N; i++) {
        void *v = tn_ptrmap_get(&m, &keys[i]);
        CHECK(i % 2 ? v == &keys[(i + 1) % N] : v == NULL);
    }
    CHECK(tn_ptrmap_remove(&m, &keys[0]) == NULL);
    CHECK(m.count == N / 2);
    free(m.keys);
    free(m.values);
}

/* float32 bits to bfloat16 as the definition reads: a NaN keeps its sign and upper payload
 * and gets the quiet bit; anything else rounds to nearest, ties to the even neighbour. */
static uint16_t bf16_by_definition(uint32_t u) {
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    uint32_t hi = u >> 16, lo = u & 0xffffu;
    if (lo > 0x8000u || (lo == 0x8000u && (hi & 1u))) hi++;
    return (uint16_t)hi;
}

void test_bf16_rounding(void) {
    /* Around every bfloat16 boundary (both halves of every upper half, the tie, one off it),
     * and a stride through all 2^32 patterns: NaNs (signalling too), infinities, the largest
     * finite values that round to inf, subnormals. */
    static const uint32_t lows[] = {0, 1, 0x7fff, 0x8000, 0x8001, 0xffff};
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++)
        for (size_t k = 0; k < sizeof lows / sizeof lows[0]; k++) {
            uint32_t u = h << 16 | lows[k];
            float f;
            memcpy(&f, &u, 4);
            bad += tn_f32_to_bf16(f) != bf16_by_definition(u);
        }
    for (uint64_t u = 0; u < (1ull << 32); u += 40009) {
        float f;
        uint32_t w = (uint32_t)u;
        memcpy(&f, &w, 4);
        bad += tn_f32_to_bf16(f) != bf16_by_definition(w);
    }
    CHECK(bad == 0);
}

void test_half_conversions(void) {
    /* Every f16 and bf16 bit pattern survives the round trip through f32 (NaNs stay NaN). */
    for (uint32_t h = 0; h < 65536; h++) {
        float f = tn_f16_to_f32((uint16_t)h);
        if (isnan(f))
            CHECK(isnan(tn_f16_to_f32(tn_f32_to_f16(f))));
        else
            CHECK(tn_f32_to_f16(f) == h);
        float g = tn_bf16_to_f32((uint16_t)h);
        if (isnan(g))
            CHECK(isnan(tn_bf16_to_f32(tn_f32_to_bf16(g))));
        else
            CHECK(tn_f32_to_bf16(g) == h);
    }
    CHECK(tn_f16_to_f32(0x3c00) == 1.0f);
    CHECK(tn_f32_to_f16(65520.0f) == 0x7c00);           /* overflows to inf */
    CHECK(tn_f32_to_f16(65519.0f) == 0x7bff);           /* largest finite */
    CHECK(tn_f32_to_f16(1.0f + 1.0f / 2048) == 0x3c00); /* tie rounds to even */
    CHECK(tn_f32_to_f16(5.9604644775390625e-8f) == 1);  /* smallest subnormal */
    CHECK(tn_f32_to_f16(2.9802322387695312e-8f) == 0);  /* half of it: tie to even (0) */
    CHECK(tn_f32_to_bf16(1.00390625f) == 0x3f80);       /* tie to even */
    CHECK(tn_bf16_to_f32(0x3f81) == 1.0078125f);
}
