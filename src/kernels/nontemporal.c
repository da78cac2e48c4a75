/* Non-temporal stores (see nontemporal.h). SSE2's 16-byte streaming store is part of every
 * x86-64 CPU and fills a line's write-combining buffer as fast as a wider one, so one variant
 * serves every ISA. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "nontemporal.h"

static int64_t min_bytes = -1; /* -1: not decided yet */

/* The size of the level-3 cache CPU 0 shares, from sysfs ("32768K"); 0 if unknown. sysconf's
 * figure is not used first: in a virtual machine it can be the whole host's (ten times more). */
static int64_t sysfs_l3_bytes(void) {
    for (int i = 0; i < 8; i++) {
        char path[96], text[32];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        FILE *f = fopen(path, "r");
        if (!f) break;
        int level = fgets(text, sizeof text, f) ? atoi(text) : 0;
        fclose(f);
        if (level != 3) continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        f = fopen(path, "r");
        if (!f) return 0;
        int64_t bytes = 0;
        if (fgets(text, sizeof text, f)) {
            char *end;
            bytes = strtoll(text, &end, 10);
            bytes *= *end == 'K' ? 1024 : *end == 'M' ? 1 << 20 : 1;
        }
        fclose(f);
        return bytes;
    }
    return 0;
}

/* 3/4 of the last-level cache: past that, an output and the inputs it is made from no longer
 * fit, and what the stores would keep in the cache is evicted before it is read again. */
static int64_t default_min_bytes(void) {
    int64_t llc = sysfs_l3_bytes();
#ifdef _SC_LEVEL3_CACHE_SIZE
    if (llc <= 0) llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
    if (llc <= 0) llc = 32L << 20;
    return llc / 4 * 3;
}

int64_t tn_nontemporal_min_bytes(void) {
    int64_t v = __atomic_load_n(&min_bytes, __ATOMIC_RELAXED);
    if (v < 0) {
        v = default_min_bytes();
        __atomic_store_n(&min_bytes, v, __ATOMIC_RELAXED);
    }
    return v;
}

void tn_set_nontemporal_min_bytes(int64_t bytes) {
    __atomic_store_n(&min_bytes, bytes < 0 ? default_min_bytes() : bytes, __ATOMIC_RELAXED);
}

void tn_copy_nontemporal(void *dst, const void *src, int64_t bytes) {
    char *d = dst;
    const char *s = src;
#if defined(__SSE2__)
    int64_t head = (int64_t)((64 - ((uintptr_t)d & 63)) & 63);
    if (head > bytes) head = bytes;
    memcpy(d, s, (size_t)head);
    d += head;
    s += head;
    bytes -= head;
    int64_t lines = bytes & ~(int64_t)63;
    for (int64_t i = 0; i < lines; i += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)(s + i));
        __m128i b = _mm_loadu_si128((const __m128i *)(s + i + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(s + i + 32));
        __m128i e = _mm_loadu_si128((const __m128i *)(s + i + 48));
        _mm_stream_si128((__m128i *)(d + i), a);
        _mm_stream_si128((__m128i *)(d + i + 16), b);
        _mm_stream_si128((__m128i *)(d + i + 32), c);
        _mm_stream_si128((__m128i *)(d + i + 48), e);
    }
    d += lines;
    s += lines;
    bytes -= lines;
#endif
    memcpy(d, s, (size_t)bytes);
}

void tn_nontemporal_fence(void) {
#if defined(__SSE2__)
    _mm_sfence();
#endif
}
