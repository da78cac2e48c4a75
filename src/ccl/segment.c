/* The shared-memory transport: each rank's segment, its name, and what dead processes left.
 *
 * A segment is a POSIX shared-memory object /dev/shm/tn_ccl_<pid>_<n>, created by its owner and
 * mapped by its peers. Its name exists only during bootstrap: tn_comm_unlink removes it once all
 * ranks have mapped it, and the memory lives on in the mappings. A process killed during bootstrap
 * leaves its name behind; the next tn_comm_segment_create on the host removes names whose pid is
 * no longer running. Pages are touched only when used (tmpfs), so the mailboxes of a large group
 * cost nothing until a message goes through them. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../runtime/internal.h"
#include "ccl_internal.h"

/* Removes /dev/shm/tn_ccl_<pid>_* of processes that are not running. */
static void remove_stale_segments(void) {
    DIR *d = opendir("/dev/shm");
    if (!d) return;
    struct dirent *e;
    size_t plen = strlen(TN_COMM_SHM_PREFIX);
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, TN_COMM_SHM_PREFIX, plen) != 0) continue;
        char *end;
        long pid = strtol(e->d_name + plen, &end, 10);
        if (end == e->d_name + plen || *end != '_' || pid <= 0) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        char name[300];
        snprintf(name, sizeof name, "/%s", e->d_name);
        shm_unlink(name);
    }
    closedir(d);
}

tn_status tn_comm_segment_create(int32_t size, tn_comm_segment_t *segment, char *name) {
    if (size < 1 || size > TN_COMM_MAX_RANKS)
        return tn_error(TN_STATUS_INVALID_ARGUMENT,
                        "a communicator within one host has 1 to %d ranks, not %d",
                        TN_COMM_MAX_RANKS, (int)size);
    remove_stale_segments();
    static uint32_t counter;
    struct tn_comm_segment *s = calloc(1, sizeof *s);
    if (!s) return tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory for a communicator");
    snprintf(s->name, sizeof s->name, "/%s%d_%u", TN_COMM_SHM_PREFIX, (int)getpid(),
             __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
    s->bytes = tn_comm_segment_bytes(size);
    int fd = shm_open(s->name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
        int err = errno;
        free(s);
        return tn_error(TN_STATUS_COMM_FAILED, "could not create shared memory for a communicator: %s",
                        strerror(err));
    }
    if (ftruncate(fd, (off_t)s->bytes) != 0) {
        int err = errno;
        close(fd);
        shm_unlink(s->name);
        free(s);
        return tn_error(TN_STATUS_COMM_FAILED, "could not size %zu bytes of shared memory: %s",
                        tn_comm_segment_bytes(size), strerror(err));
    }
    s->base = mmap(NULL, s->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (s->base == MAP_FAILED) {
        int err = errno;
        shm_unlink(s->name);
        free(s);
        return tn_error(TN_STATUS_COMM_FAILED, "could not map shared memory: %s", strerror(err));
    }
    s->linked = 1;
    tn_seg_header *h = s->base;
    h->size = size;
    h->rank = -1;
    h->pid = (int32_t)getpid();
    h->version = TN_COMM_VERSION;
    __atomic_store_n(&h->magic, TN_COMM_MAGIC, __ATOMIC_RELEASE);
    snprintf(name, TN_COMM_NAME_MAX, "%s", s->name);
    *segment = s;
    return TN_STATUS_OK;
}

/* Maps a peer's segment; NULL with tn_last_error() set when it is not one of ours. */
static tn_seg_header *map_peer(const char *name, int32_t size, int32_t peer) {
    int fd = shm_open(name, O_RDWR, 0);
    if (fd < 0) {
        tn_error(TN_STATUS_COMM_FAILED,
                 "rank %d's shared memory %s could not be opened (%s): every rank of a group must "
                 "run on this host, or the rank exited during set-up",
                 (int)peer, name, strerror(errno));
        return NULL;
    }
    struct stat st;
    size_t bytes = tn_comm_segment_bytes(size);
    if (fstat(fd, &st) != 0 || (size_t)st.st_size != bytes) {
        close(fd);
        tn_error(TN_STATUS_COMM_FAILED, "rank %d's shared memory %s has the wrong size for a group of %d",
                 (int)peer, name, (int)size);
        return NULL;
    }
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        tn_error(TN_STATUS_COMM_FAILED, "could not map rank %d's shared memory: %s", (int)peer,
                 strerror(errno));
        return NULL;
    }
    tn_seg_header *h = p;
    if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != TN_COMM_MAGIC ||
        h->version != TN_COMM_VERSION || h->size != size) {
        munmap(p, bytes);
        tn_error(TN_STATUS_COMM_FAILED,
                 "rank %d's shared memory %s was made by another version or for another group",
                 (int)peer, name);
        return NULL;
    }
    return h;
}

tn_status tn_comm_create(const tn_comm_desc *desc, tn_comm_t *out) {
    tn_status st = tn_runtime_ensure();
    if (st != TN_STATUS_OK) return st;
    int32_t size = desc->size, rank = desc->rank;
    if (size < 1 || size > TN_COMM_MAX_RANKS || rank < 0 || rank >= size || !desc->segment)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "rank %d of %d is not a valid communicator member",
                        (int)rank, (int)size);
    tn_comm_t c = calloc(1, sizeof *c);
    if (!c) return tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory for a communicator");
    if (desc->net && (desc->net->hosts < 2 || desc->net->host < 0 || desc->net->host >= desc->net->hosts ||
                      !desc->net->all_reduce || !desc->net->broadcast || !desc->net->all_gather ||
                      !desc->net->world || (int64_t)desc->net->hosts * size > TN_COMM_MAX_RANKS)) {
        free(c);
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "not a valid network for a communicator across hosts");
    }
    c->rank = rank;
    c->size = size;
    c->hosts = 1;
    if (desc->net) {
        c->net = *desc->net;
        c->hosts = desc->net->hosts;
        c->host = desc->net->host;
    }
    c->timeout_ms = desc->timeout_ms > 0 ? desc->timeout_ms : 30 * 60 * 1000;
    c->own = *desc->segment;
    c->seg_bytes = tn_comm_segment_bytes(size);
    pthread_mutex_init(&c->run_lock, NULL);
    pthread_mutex_init(&c->send_lock, NULL);
    pthread_mutex_init(&c->recv_lock, NULL);
    c->seg[rank] = c->own.base;
    c->seg[rank]->rank = rank;
    for (int32_t r = 0; r < size; r++) {
        if (r == rank) continue;
        c->seg[r] = map_peer(desc->names[r], size, r);
        if (!c->seg[r]) {
            st = TN_STATUS_COMM_FAILED;
            break;
        }
        c->pids[r] = c->seg[r]->pid;
    }
    c->pids[rank] = getpid();
    if (st != TN_STATUS_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", tn_last_error());
        for (int32_t r = 0; r < size; r++)
            if (r != rank && c->seg[r]) munmap(c->seg[r], c->seg_bytes);
        pthread_mutex_destroy(&c->run_lock);
        pthread_mutex_destroy(&c->send_lock);
        pthread_mutex_destroy(&c->recv_lock);
        free(c); /* the segment stays the caller's */
        return tn_error(st, "%s", msg);
    }
    free(desc->segment);
    *out = c;
    return TN_STATUS_OK;
}

tn_status tn_comm_unlink(tn_comm_t c) {
    if (c->own.linked) {
        shm_unlink(c->own.name);
        c->own.linked = 0;
    }
    return TN_STATUS_OK;
}

int32_t tn_comm_rank(tn_comm_t c) { return c->host * c->size + c->rank; }
int32_t tn_comm_size(tn_comm_t c) { return c->hosts * c->size; }
uint64_t tn_comm_sequence(tn_comm_t c) { return __atomic_load_n(&c->seq, __ATOMIC_RELAXED); }

void tn_comm_unmap(tn_comm_t c) {
    tn_comm_unlink(c);
    for (int32_t r = 0; r < c->size; r++)
        if (c->seg[r]) munmap(c->seg[r], c->seg_bytes);
}

void tn_comm_segment_destroy(tn_comm_segment_t s) {
    if (!s) return;
    if (s->linked) shm_unlink(s->name);
    munmap(s->base, s->bytes);
    free(s);
}
