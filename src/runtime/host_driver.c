/* The host driver: device memory is ordinary memory of this process and kernels run on the
 * host CPU. Capacity is enforced by the allocator above it, not here. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static void *host_mem_alloc(void *ctx, int32_t core, uint64_t size) {
    (void)ctx;
    (void)core;
    void *p = NULL;
    /* 64-byte alignment: whole cache lines and aligned AVX-512 loads for every block. */
    return posix_memalign(&p, 64, (size_t)size) == 0 ? p : NULL;
}

static void host_mem_free(void *ctx, int32_t core, void *ptr, uint64_t size) {
    (void)ctx;
    (void)core;
    (void)size;
    free(ptr);
}

static tn_status host_memcpy(void *ctx, void *dst, const void *src, uint64_t size) {
    (void)ctx;
    if (size) memmove(dst, src, (size_t)size);
    return TN_STATUS_OK;
}

static const char *host_core_name(void *ctx, int32_t core) {
    (void)ctx;
    (void)core;
    return "NeuronCore-v2";
}

static const tn_device_interface host_driver = {
    .version = TN_DEVICE_INTERFACE_VERSION,
    .name = "host",
    .ctx = NULL,
    .mem_alloc = host_mem_alloc,
    .mem_free = host_mem_free,
    .memcpy = host_memcpy,
    .host_alloc = NULL,
    .host_free = NULL,
    .core_name = host_core_name,
};

static const tn_device_interface *driver = &host_driver;
static int driver_locked;

const tn_device_interface *tn_device_interface_host(void) { return &host_driver; }
const tn_device_interface *tn_device_interface_get(void) { return driver; }
const tn_device_interface *tn_driver(void) {
    driver_locked = 1;
    return driver;
}

tn_status tn_device_interface_set(const tn_device_interface *iface) {
    if (!iface || iface->version != TN_DEVICE_INTERFACE_VERSION)
        return tn_error(TN_STATUS_INVALID_ARGUMENT,
                        "device interface version %u is not the supported version %d",
                        iface ? iface->version : 0u, TN_DEVICE_INTERFACE_VERSION);
    if (!iface->mem_alloc || !iface->mem_free || !iface->memcpy || !iface->core_name)
        return tn_error(TN_STATUS_INVALID_ARGUMENT,
                        "device interface '%s' lacks a required slot",
                        iface->name ? iface->name : "?");
    if (driver_locked)
        return tn_error(TN_STATUS_UNSUPPORTED,
                        "a device interface can only be installed before the runtime starts");
    driver = iface;
    return TN_STATUS_OK;
}
