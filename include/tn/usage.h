/* Memory use of every process on this machine, per NeuronCore, for tools like neuron-ls.
 *
 * Each process whose runtime starts publishes, per logical device, its physical core, capacity,
 * allocated and reserved bytes in a small shared-memory file (/dev/shm/torchneuron-<pid>, or
 * under NEURON_RT_USAGE_DIR), updated by the allocator and removed at exit. Files of processes
 * that no longer exist are ignored and cleaned up. */
#ifndef TN_USAGE_H
#define TN_USAGE_H

#include <stdint.h>

#include "tn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tn_core_usage {
    int32_t pid;
    int32_t physical_core;
    uint64_t capacity;
    uint64_t allocated;
    uint64_t reserved;
} tn_core_usage;

/* Fills up to `max` entries, one per (live process, core); *count gets the number found. */
tn_status tn_usage_snapshot(tn_core_usage *out, int32_t max, int32_t *count);

#ifdef __cplusplus
}
#endif
#endif
