/* Per-thread scratch for kernels (packing buffers, row copies): one 64-byte-aligned block per
 * thread, grown on demand and kept for the life of the thread, so steady-state launches do not
 * allocate. A kernel slice uses it only while it runs and never calls another parallel op. */
#include <stdlib.h>

#include "internal.h"

static _Thread_local void *block;
static _Thread_local size_t block_size;

void *tn_thread_scratch(size_t bytes) {
    if (bytes <= block_size) return block;
    void *grown = NULL;
    if (posix_memalign(&grown, 64, bytes) != 0) return NULL;
    free(block);
    block = grown;
    block_size = bytes;
    return block;
}
