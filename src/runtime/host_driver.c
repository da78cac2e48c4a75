/* The host driver: device memory is ordinary memory of this process and kernels run on the
 * host CPU. Capacity is enforced by the allocator above it, not here.
 *
 * Blocks of 2 MiB and more are mapped on their own, aligned to 2 MiB and advised to use
 * transparent huge pages (MADV_HUGEPAGE), like a device's large pages: a kernel streaming
 * through a large tensor then misses the TLB once per 2 MiB instead of once per 4 KiB. In a
 * virtual machine a miss walks two page tables, and reading 256 MB ran at half the memory
 * bandwidth with 4 KiB pages. Where the kernel does not offer huge pages the advice is
 * ignored; TN_HUGE_PAGES=0 turns it off. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"

#define HUGE_PAGE ((uint64_t)2 << 20)
#define SMALL_PAGE ((uint64_t)4096)

static uint64_t round_up(uint64_t n, uint64_t m) { return (n + m - 1) / m * m; }

static int huge_pages(void) {
    static int on = -1; /* read once; devices may allocate from several threads */
    int v = __atomic_load_n(&on, __ATOMIC_RELAXED);
    if (v < 0) {
        const char *env = getenv("TN_HUGE_PAGES");
        v = !(env && strcmp(env, "0") == 0);
        __atomic_store_n(&on, v, __ATOMIC_RELAXED);
    }
    return v;
}

/* A mapping of `size` bytes starting on a huge-page boundary: map one huge page more, then
 * unmap what lies before the boundary and after the end. */
static void *map_huge(uint64_t size) {
    uint64_t len = round_up(size, SMALL_PAGE);
    char *p = mmap(NULL, (size_t)(len + HUGE_PAGE), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    char *start = (char *)round_up((uint64_t)(uintptr_t)p, HUGE_PAGE);
    if (start > p) munmap(p, (size_t)(start - p));
    uint64_t after = (uint64_t)(p + len + HUGE_PAGE - (start + len));
    if (after) munmap(start + len, (size_t)after);
#ifdef MADV_HUGEPAGE
    if (huge_pages()) madvise(start, (size_t)len, MADV_HUGEPAGE);
#endif
    return start;
}

static void *host_mem_alloc(void *ctx, int32_t core, uint64_t size) {
    (void)ctx;
    (void)core;
    if (size >= HUGE_PAGE) return map_huge(size);
    void *p = NULL;
    /* 64-byte alignment: whole cache lines and aligned AVX-512 loads for every block. */
    return posix_memalign(&p, 64, (size_t)size) == 0 ? p : NULL;
}

static void host_mem_free(void *ctx, int32_t core, void *ptr, uint64_t size) {
    (void)ctx;
    (void)core;
    if (size >= HUGE_PAGE)
        munmap(ptr, (size_t)round_up(size, SMALL_PAGE));
    else
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
