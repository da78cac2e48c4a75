/* The device interface: what a NeuronCore driver provides to the runtime.
 *
 * The runtime above it (caching allocator, streams, events, copies) is the same for every
 * driver. This build ships the host driver, which keeps device memory in this process and
 * runs kernels on the host CPU; a hardware driver would fill the same table. The table is
 * versioned: a driver sets `version` to the TN_DEVICE_INTERFACE_VERSION it was built against,
 * and the runtime refuses a version it does not know. */
#ifndef TN_DEVICE_INTERFACE_H
#define TN_DEVICE_INTERFACE_H

#include <stdint.h>

#include "tn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TN_DEVICE_INTERFACE_VERSION 1

typedef struct tn_device_interface {
    uint32_t version;  /* TN_DEVICE_INTERFACE_VERSION */
    const char *name;  /* driver name, e.g. "host" */
    void *ctx;         /* passed back to every slot */

    /* required: device memory of `size` bytes on a physical core, aligned to at least 64
     * bytes; NULL when the driver has none left (the runtime then reports out of memory). */
    void *(*mem_alloc)(void *ctx, int32_t physical_core, uint64_t size);
    /* required: returns memory from mem_alloc. */
    void (*mem_free)(void *ctx, int32_t physical_core, void *ptr, uint64_t size);
    /* required: copies bytes between any two of host memory and device memory; called from
     * stream workers, in stream order. */
    tn_status (*memcpy)(void *ctx, void *dst, const void *src, uint64_t size);
    /* optional (default: aligned host allocation): page-locked host memory. */
    void *(*host_alloc)(void *ctx, uint64_t size);
    /* optional (default: free): returns memory from host_alloc. */
    void (*host_free)(void *ctx, void *ptr);
    /* required: the device name shown to users, e.g. "NeuronCore-v2". */
    const char *(*core_name)(void *ctx, int32_t physical_core);
} tn_device_interface;

/* The driver in use (the host driver unless another was installed). */
const tn_device_interface *tn_device_interface_get(void);
/* Installs a driver; only before the runtime starts. */
tn_status tn_device_interface_set(const tn_device_interface *iface);
/* The host driver of this build. */
const tn_device_interface *tn_device_interface_host(void);

#ifdef __cplusplus
}
#endif
#endif
