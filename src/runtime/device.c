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
    tn_device_state devices[TN_MAX_DEVICES];
} rt = {.once = PTHREAD_ONCE_INIT};

static volatile int32_t forked_child;
static _Thread_local int32_t current_device;

/* A child forked before any stream thread existed has a complete runtime (the parent had done
 * no device work); after that, the child's streams have no workers and must not be used. */
static void on_fork_child(void) {
    if (__atomic_load_n(&tn_stream_threads_started, __ATOMIC_ACQUIRE)) forked_child = 1;
    tn_usage_forget(); /* the registry file is the parent's */
}

static tn_status read_devices(int32_t *cores, int32_t *count) {
    const char *visible = getenv("NEURON_RT_VISIBLE_CORES");
    const char *num = getenv("NEURON_RT_NUM_CORES");
    const char *local_rank = getenv("LOCAL_RANK");
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
    } else if (num && *num) {
        char *end;
        long n = strtol(num, &end, 10);
        if (*end || n < 1 || n > TN_MAX_DEVICES)
            return tn_error(TN_STATUS_INVALID_ARGUMENT,
                            "NEURON_RT_NUM_CORES='%s' must be a whole number from 1 to %d",
                            num, TN_MAX_DEVICES);
        *count = (int32_t)n;
        for (int32_t i = 0; i < *count; i++) cores[i] = i;
    } else if (local_rank && *local_rank) {
        char *end;
        long r = strtol(local_rank, &end, 10);
        if (*end || r < 0 || r > 4095)
            return tn_error(TN_STATUS_INVALID_ARGUMENT, "LOCAL_RANK='%s' is not a rank",
                            local_rank);
        *count = 1;
        cores[0] = (int32_t)r;
    } else {
        *count = TN_DEFAULT_NUM_CORES;
        for (int32_t i = 0; i < *count; i++) cores[i] = i;
    }
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
        d->physical_core = cores[i];
        d->capacity = capacity;
        pthread_mutex_init(&d->streams_lock, NULL);
        d->allocator = tn_allocator_create(i);
    }
    rt.count = count;
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
    props->total_memory = d->capacity;
    return TN_STATUS_OK;
}

int32_t tn_device_current(void) { return current_device; }

tn_status tn_device_set_current(int32_t device) {
    tn_status st = tn_device_check(device);
    if (st == TN_STATUS_OK) current_device = device;
    return st;
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
