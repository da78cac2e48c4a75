/* The shared-memory usage registry (see tn/usage.h).
 *
 * File layout: a header {magic, pid, count} and `count` records {core, capacity, allocated,
 * reserved}. A process writes only its own file; readers tolerate torn figures (they are
 * advisory) and skip files whose process is gone. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"
#include "tn/usage.h"

#define USAGE_MAGIC 0x314e5455u /* "UTN1" */
#define USAGE_PREFIX "torchneuron-"

typedef struct usage_record {
    int32_t physical_core;
    int32_t pad;
    uint64_t capacity;
    volatile uint64_t allocated;
    volatile uint64_t reserved;
} usage_record;

typedef struct usage_file {
    uint32_t magic;
    int32_t pid;
    int32_t count;
    int32_t pad;
    usage_record records[TN_MAX_DEVICES];
} usage_file;

static usage_file *mine;
static char my_path[512];

static const char *usage_dir(void) {
    const char *d = getenv("NEURON_RT_USAGE_DIR");
    return d && *d ? d : "/dev/shm";
}

static pid_t owner;

static void remove_mine(void) {
    if (my_path[0] && getpid() == owner) unlink(my_path);
}

void tn_usage_start(int32_t n) {
    snprintf(my_path, sizeof my_path, "%s/" USAGE_PREFIX "%d", usage_dir(), (int)getpid());
    int fd = open(my_path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return; /* the registry is advisory: without it, tools just see nothing */
    if (ftruncate(fd, sizeof(usage_file)) != 0) {
        close(fd);
        unlink(my_path);
        return;
    }
    void *p = mmap(NULL, sizeof(usage_file), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        unlink(my_path);
        return;
    }
    mine = p;
    for (int32_t i = 0; i < n; i++) {
        mine->records[i].physical_core = tn_device_state_get(i)->physical_core;
        mine->records[i].capacity = tn_device_state_get(i)->capacity;
    }
    owner = getpid();
    mine->pid = (int32_t)owner;
    mine->count = n;
    __atomic_store_n(&mine->magic, USAGE_MAGIC, __ATOMIC_RELEASE);
    atexit(remove_mine);
}

void tn_usage_forget(void) { mine = NULL; }

void tn_usage_publish(int32_t device, uint64_t allocated, uint64_t reserved) {
    if (!mine || device < 0 || device >= TN_MAX_DEVICES) return;
    mine->records[device].allocated = allocated;
    mine->records[device].reserved = reserved;
}

tn_status tn_usage_snapshot(tn_core_usage *out, int32_t max, int32_t *count) {
    *count = 0;
    DIR *dir = opendir(usage_dir());
    if (!dir) return TN_STATUS_OK;
    struct dirent *ent;
    while ((ent = readdir(dir))) {
        if (strncmp(ent->d_name, USAGE_PREFIX, strlen(USAGE_PREFIX)) != 0) continue;
        char path[768];
        snprintf(path, sizeof path, "%s/%s", usage_dir(), ent->d_name);
        int fd = open(path, O_RDONLY);
        if (fd < 0) continue;
        usage_file f;
        ssize_t got = read(fd, &f, sizeof f);
        close(fd);
        if (got != (ssize_t)sizeof f || f.magic != USAGE_MAGIC) continue;
        if (kill(f.pid, 0) != 0 && errno == ESRCH) {
            unlink(path); /* its process died without cleaning up */
            continue;
        }
        for (int32_t i = 0; i < f.count && i < TN_MAX_DEVICES; i++) {
            if (*count < max) {
                tn_core_usage *u = &out[*count];
                u->pid = f.pid;
                u->physical_core = f.records[i].physical_core;
                u->capacity = f.records[i].capacity;
                u->allocated = f.records[i].allocated;
                u->reserved = f.records[i].reserved;
            }
            (*count)++;
        }
    }
    closedir(dir);
    if (*count > max) *count = max;
    return TN_STATUS_OK;
}
