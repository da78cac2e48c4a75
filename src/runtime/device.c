/* Runtime start-up, the logical devices of this process, and fork detection. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static struct {
    pthread_once_t once;
    tn_status init_status;
    char init_error[512];
    tn_runtime_desc requested;
    int32_t count;
    int32_t launch_blocking;
    int32_t lnc;            /* physical cores per logical core (NEURON_LOGICAL_NC_CONFIG) */
    int32_t default_device; /* a thread's current device until it sets one */
    int32_t bound_device;   /* the only device a distributed process may use (-1: any) */
    tn_device_state devices[TN_MAX_DEVICES];
} rt = {.once = PTHREAD_ONCE_INIT};

static volatile int32_t forked_child;
static _Thread_local int32_t current_device = -1; /* -1: rt.default_device */

/* A child forked before any stream thread existed has a complete runtime (the parent had done
 * no device work); after that, the child's streams have no workers and must not be used. */
static void on_fork_child(void) {
    if (__atomic_load_n(&tn_stream_threads_started, __ATOMIC_ACQUIRE)) forked_child = 1;
    tn_usage_forget(); /* the registry file is the parent's */
}

/* A non-negative whole number from the environment, or -1 when unset; -2 when malformed. */
static long env_count(const char *name, long max) {
    const char *v = getenv(name);
    if (!v || !*v) return -1;
    char *end;
    long n = strtol(v, &end, 10);
    return *end || n < 0 || n > max ? -2 : n;
}

/* The logical cores this process sees, as indices into the host's logical cores. Under torchrun
 * (LOCAL_RANK set) every process sees all the host's cores, at least one per local process, and
 * starts on core LOCAL_RANK; explicit lists and counts win. */
static tn_status read_devices(int32_t *cores, int32_t *count) {
    const char *visible = getenv("NEURON_RT_VISIBLE_CORES");
    long num = env_count("NEURON_RT_NUM_CORES", TN_MAX_DEVICES);
    long local_rank = env_count("LOCAL_RANK", 4095);
    long local_world = env_count("LOCAL_WORLD_SIZE", TN_MAX_DEVICES);
    long lnc = env_count("NEURON_LOGICAL_NC_CONFIG", 2);
    if (lnc == -2 || lnc == 0)
        return tn_error(TN_STATUS_INVALID_ARGUMENT,
                        "NEURON_LOGICAL_NC_CONFIG='%s' must be 1 (one physical core per logical core) "
                        "or 2 (two)", getenv("NEURON_LOGICAL_NC_CONFIG"));
    rt.lnc = lnc > 0 ? (int32_t)lnc : 1;
    if (num == -2 || num == 0)
        return tn_error(TN_STATUS_INVALID_ARGUMENT,
                        "NEURON_RT_NUM_CORES='%s' must be a whole number from 1 to %d",
                        getenv("NEURON_RT_NUM_CORES"), TN_MAX_DEVICES);
    if (local_rank == -2)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "LOCAL_RANK='%s' is not a rank", getenv("LOCAL_RANK"));
    if (local_world == -2 || local_world == 0)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "LOCAL_WORLD_SIZE='%s' is not a number of processes",
                        getenv("LOCAL_WORLD_SIZE"));
    if (rt.requested.num_cores > 0) {
        *count = rt.requested.num_cores;
        for (int32_t i = 0; i < *count; i++) cores[i] = i;
    } else if (visible && *visible) {
        *count = tn_parse_core_list(visible, cores, TN_MAX_DEVICES);
        if (*count < 0)
            return tn_error(TN_STATUS_INVALID_ARGUMENT,
                            "NEURON_RT_VISIBLE_CORES='%s' is not a core list such as '0', "
                            "'0-3' or '1,3' (at most %d distinct cores)",
                            visible, TN_MAX_DEVICES);
    } else {
        long n = num > 0 ? num : TN_DEFAULT_NUM_CORES / rt.lnc;
        if (n < 1) n = 1;
        if (num <= 0 && local_rank >= 0) {
            if (local_world > n) n = local_world;
            if (local_rank + 1 > n) n = local_rank + 1;
        }
        if (n > TN_MAX_DEVICES)
            return tn_error(TN_STATUS_INVALID_ARGUMENT, "LOCAL_RANK=%ld needs more than %d NeuronCores",
                            local_rank, TN_MAX_DEVICES);
        *count = (int32_t)n;
        for (int32_t i = 0; i < *count; i++) cores[i] = i;
    }
    rt.default_device = local_rank >= 0 && local_rank < *count ? (int32_t)local_rank : 0;
    return TN_STATUS_OK;
}

static void init_once(void) {
    int32_t cores[TN_MAX_DEVICES];
    int32_t count = 0;
    uint64_t capacity = rt.requested.memory_per_core;
    tn_status st = read_devices(cores, &count);
    const char *mem = getenv("NEURON_RT_DEVICE_MEMORY");
    if (st == TN_STATUS_OK && !capacity) {
        capacity = TN_DEFAULT_DEVICE_MEMORY;
        if (mem && *mem && tn_parse_bytes(mem, &capacity) != 0)
            st = tn_error(TN_STATUS_INVALID_ARGUMENT,
                          "NEURON_RT_DEVICE_MEMORY='%s' is not a size such as '16GiB', "
                          "'512MiB' or a number of bytes",
                          mem);
    }
    const char *blocking = getenv("NEURON_LAUNCH_BLOCKING");
    rt.launch_blocking = rt.requested.launch_blocking
                             ? rt.requested.launch_blocking > 0
                             : (blocking && strcmp(blocking, "1") == 0);
    if (st != TN_STATUS_OK) {
        rt.init_status = st;
        snprintf(rt.init_error, sizeof rt.init_error, "%s", tn_last_error());
        return;
    }
    for (int32_t i = 0; i < count; i++) {
        tn_device_state *d = &rt.devices[i];
        d->physical_core = cores[i] * rt.lnc;
        d->capacity = capacity * (uint64_t)rt.lnc;
        pthread_mutex_init(&d->streams_lock, NULL);
        d->allocator = tn_allocator_create(i);
    }
    rt.count = count;
    rt.bound_device = -1;
    pthread_atfork(NULL, NULL, on_fork_child);
    tn_usage_start(count);
    rt.init_status = TN_STATUS_OK;
}

tn_status tn_runtime_init(const tn_runtime_desc *desc) {
    if (forked_child)
        return tn_error(TN_STATUS_FORKED,
                        "the Neuron runtime was started before this process was forked; "
                        "use the 'spawn' start method for subprocesses that use the device");
    if (desc) rt.requested = *desc;
    pthread_once(&rt.once, init_once);
    if (rt.init_status != TN_STATUS_OK) return tn_error(rt.init_status, "%s", rt.init_error);
    return TN_STATUS_OK;
}

tn_status tn_runtime_ensure(void) { return tn_runtime_init(NULL); }

int32_t tn_runtime_forked(void) { return forked_child; }

int32_t tn_runtime_launch_blocking(void) {
    return tn_runtime_ensure() == TN_STATUS_OK ? rt.launch_blocking : 0;
}

int32_t tn_device_count(void) { return tn_runtime_ensure() == TN_STATUS_OK ? rt.count : 0; }

tn_status tn_device_check(int32_t device) {
    tn_status st = tn_runtime_ensure();
    if (st != TN_STATUS_OK) return st;
    if (device < 0 || device >= rt.count)
        return tn_error(TN_STATUS_INVALID_DEVICE,
                        "Invalid device id: %d. Valid range is 0 to %d", (int)device,
                        (int)rt.count - 1);
    return TN_STATUS_OK;
}

tn_device_state *tn_device_state_get(int32_t device) { return &rt.devices[device]; }

tn_status tn_device_get_props(int32_t device, tn_device_props *props) {
    tn_status st = tn_device_check(device);
    if (st != TN_STATUS_OK) return st;
    const tn_device_state *d = &rt.devices[device];
    memset(props, 0, sizeof *props);
    snprintf(props->name, sizeof props->name, "%s",
             tn_driver()->core_name(tn_driver()->ctx, d->physical_core));
    props->index = device;
    props->physical_core = d->physical_core;
    props->physical_cores = rt.lnc;
    props->total_memory = d->capacity;
    return TN_STATUS_OK;
}

int32_t tn_device_current(void) {
    if (current_device >= 0) return current_device;
    return tn_runtime_ensure() == TN_STATUS_OK ? rt.default_device : 0;
}

tn_status tn_device_set_current(int32_t device) {
    tn_status st = tn_device_check_bound(device);
    if (st == TN_STATUS_OK) current_device = device;
    return st;
}

tn_status tn_device_bind(int32_t device) {
    tn_status st = tn_device_check(device);
    if (st != TN_STATUS_OK) return st;
    int32_t expected = -1;
    if (!__atomic_compare_exchange_n(&rt.bound_device, &expected, device, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE) &&
        expected != device)
        return tn_device_check_bound(device);
    return TN_STATUS_OK;
}

void tn_device_unbind(void) { __atomic_store_n(&rt.bound_device, -1, __ATOMIC_RELEASE); }

int32_t tn_device_bound(void) {
    return tn_runtime_ensure() == TN_STATUS_OK ? __atomic_load_n(&rt.bound_device, __ATOMIC_ACQUIRE) : -1;
}

tn_status tn_device_check_bound(int32_t device) {
    tn_status st = tn_device_check(device);
    if (st != TN_STATUS_OK) return st;
    int32_t bound = __atomic_load_n(&rt.bound_device, __ATOMIC_ACQUIRE);
    if (bound >= 0 && device != bound)
        return tn_error(TN_STATUS_INVALID_DEVICE,
                        "Attempted to have more than one device per process in distributed setup: "
                        "this process's process group uses neuron:%d, so it cannot use neuron:%d "
                        "(bind each rank's core with torch.neuron.set_device(LOCAL_RANK) before "
                        "init_process_group)",
                        (int)bound, (int)device);
    return TN_STATUS_OK;
}

int32_t tn_device_logical_nc_config(void) {
    return tn_runtime_ensure() == TN_STATUS_OK ? rt.lnc : 1;
}

tn_status tn_device_synchronize(int32_t device) {
    tn_status st = tn_device_check(device);
    if (st != TN_STATUS_OK) return st;
    tn_status first = TN_STATUS_OK;
    char first_error[512] = "";
    for (int32_t i = 0; i < TN_STREAMS_PER_DEVICE; i++) {
        tn_device_state *d = &rt.devices[device];
        pthread_mutex_lock(&d->streams_lock);
        tn_stream_t s = d->streams[i];
        pthread_mutex_unlock(&d->streams_lock);
        if (!s) continue;
        st = tn_stream_synchronize(s);
        if (st != TN_STATUS_OK && first == TN_STATUS_OK) {
            first = st;
            snprintf(first_error, sizeof first_error, "%s", tn_last_error());
        }
    }
    return first == TN_STATUS_OK ? first : tn_error(first, "%s", first_error);
}

void tn_device_wait_idle(int32_t device) {
    tn_device_state *d = &rt.devices[device];
    for (int32_t i = 0; i < TN_STREAMS_PER_DEVICE; i++) {
        pthread_mutex_lock(&d->streams_lock);
        tn_stream_t s = d->streams[i];
        pthread_mutex_unlock(&d->streams_lock);
        if (s) tn_stream_wait_idle(s);
    }
}
