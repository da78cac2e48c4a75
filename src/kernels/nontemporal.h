/* Non-temporal stores: writing an output that is too large to stay in the cache with stores
 * that bypass it. A normal store first reads the line it writes (read for ownership), so a
 * large copy moves three bytes over the memory bus per byte copied; a non-temporal store
 * sends whole lines straight to memory, two bytes per byte copied. Below the threshold the
 * output would still be in the cache for the next op, and normal stores win.
 *
 * Kernels compute a chunk into a small buffer in L1, then tn_copy_nontemporal() it to the
 * output, and call tn_nontemporal_fence() once when their slice is done. */
#ifndef TN_KERNELS_NONTEMPORAL_H
#define TN_KERNELS_NONTEMPORAL_H

#include <stdint.h>

#include "tn/kernels.h"

/* Bytes of a chunk buffer: a multiple of the 64-byte line. */
#define TN_NT_CHUNK_BYTES 512

/* Non-zero if an output of `bytes` bytes in total should be written non-temporally. */
static inline int tn_nontemporal(int64_t bytes) { return bytes >= tn_nontemporal_min_bytes(); }

/* Copies `bytes` bytes; the whole 64-byte lines of dst with non-temporal stores, the partial
 * lines at either end with normal ones. The ranges must not overlap. */
void tn_copy_nontemporal(void *dst, const void *src, int64_t bytes);

/* Orders the non-temporal stores made so far before later stores (the slice's completion). */
void tn_nontemporal_fence(void);

/* Elements (of es bytes) of the next chunk written at p when `left` remain: a buffer's worth,
 * less what lies before p in its line, so that the following chunks start on a line. */
static inline int64_t tn_nontemporal_chunk(const void *p, int32_t es, int64_t left) {
    int64_t m = (TN_NT_CHUNK_BYTES - (int64_t)((uintptr_t)p & 63)) / es;
    return m < left ? m : left;
}

#endif
