/* Runtime start-up and logical NeuronCores.
 *
 * A logical device is one NeuronCore visible to this process. Which ones are visible comes
 * from the environment, read once by the first runtime call:
 *   NEURON_RT_VISIBLE_CORES  "0", "0-3" or "1,3": physical cores this process owns;
 *   NEURON_RT_NUM_CORES      take that many cores, 0..N-1, when no list is given;
 *   otherwise                the host's cores: TN_DEFAULT_NUM_CORES physical ones (the two of a
 *                            trn1.2xlarge); under torchrun (LOCAL_RANK set) at least
 *                            LOCAL_WORLD_SIZE and LOCAL_RANK + 1 logical cores, so that every
 *                            process sees every core by its global index;
 *   LOCAL_RANK               a thread's current device until it sets one (else 0);
 *   NEURON_LOGICAL_NC_CONFIG "1" (default) or "2": physical cores per logical core; with 2,
 *                            logical core i is physical cores 2i and 2i+1 with twice the memory
 *                            (as on trn2), and the lists above name logical cores.
 *   NEURON_RT_DEVICE_MEMORY  capacity of each core, e.g. "16GiB", "512MiB", "1073741824";
 *                            default TN_DEFAULT_DEVICE_MEMORY.
 *   NEURON_LAUNCH_BLOCKING   "1": every launch waits for its work to finish.
 * A zero field of tn_runtime_desc means "take it from the environment or the default". */
#ifndef TN_RUNTIME_H
#define TN_RUNTIME_H

#include <stdint.h>

#include "tn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TN_MAX_DEVICES 64
#define TN_DEFAULT_NUM_CORES 2
#define TN_DEFAULT_DEVICE_MEMORY (16ull << 30)

typedef struct tn_runtime_desc {
    int32_t num_cores;         /* 0: from the environment */
    uint64_t memory_per_core;  /* bytes; 0: from the environment */
    int32_t launch_blocking;   /* 0: from the environment, 1: on, -1: off */
} tn_runtime_desc;

/* Starts the runtime once; later calls return the first call's result. NULL = all defaults.
 * Every other function starts the runtime with defaults when needed. */
tn_status tn_runtime_init(const tn_runtime_desc *desc);

/* Non-zero when this process is a fork() child of a process that had done device work: the
 * runtime's stream threads did not survive the fork, so every call fails with
 * TN_STATUS_FORKED. */
int32_t tn_runtime_forked(void);

int32_t tn_runtime_launch_blocking(void);

/* Number of logical devices (0 if the environment is invalid; tn_last_error() says why). */
int32_t tn_device_count(void);

typedef struct tn_device_props {
    char name[32];          /* "NeuronCore-v2" */
    int32_t index;          /* logical index in this process */
    int32_t physical_core;  /* the core's (first) physical id on the machine */
    int32_t physical_cores; /* physical cores joined in it (NEURON_LOGICAL_NC_CONFIG) */
    uint64_t total_memory;  /* capacity in bytes */
} tn_device_props;

tn_status tn_device_get_props(int32_t device, tn_device_props *props);

/* The calling thread's current device (0 until set). */
int32_t tn_device_current(void);
tn_status tn_device_set_current(int32_t device);

/* Distributed processes use one device: once bound (a process group was created on it), making
 * another device current or allocating on it fails with "Attempted to have more than one device
 * per process in distributed setup". Binding a second, different device fails the same way. */
tn_status tn_device_bind(int32_t device);
void tn_device_unbind(void);
/* The bound device, or -1. */
int32_t tn_device_bound(void);
/* tn_device_check, plus the refusal above. */
tn_status tn_device_check_bound(int32_t device);
int32_t tn_device_logical_nc_config(void);

/* Waits for all streams of the device; returns the first pending kernel error. */
tn_status tn_device_synchronize(int32_t device);

/* TN_STATUS_INVALID_DEVICE with a message naming the valid range, or TN_STATUS_OK. */
tn_status tn_device_check(int32_t device);

#ifdef __cplusplus
}
#endif
#endif
