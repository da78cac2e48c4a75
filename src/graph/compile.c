/* Building, caching and launching fused kernels (see tn/graph.h).
 *
 * The cache key hashes the generated source, the compiler's identity (`$CC --version`) and the
 * flags; `<cache_dir>/<key>.so` is the artifact. A build writes the source beside it and
 * compiles into a temporary name that is renamed into place, so concurrent processes compiling
 * the same region never load half a file, and a second process finds the first one's build. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "graph_internal.h"
#include "tn/parallel.h"

/* a build ID names the kernel in saved replay plans (tn/capture.h) */
#define FLAGS "-O3 -march=native -std=gnu11 -fPIC -shared -fno-math-errno -fno-trapping-math -Wl,--build-id=sha1"

typedef void (*fused_fn)(int32_t ith, int32_t nth, void *const *ptr);

struct tn_fused_kernel {
    void *handle;
    fused_fn fn;
    int32_t operands;
    int64_t work; /* elements: sizes the launch's split across threads */
    char key[17];
};

static const char *compiler(void) {
    const char *cc = getenv("CC");
    return cc && *cc ? cc : "cc";
}

static uint64_t fnv1a(uint64_t h, const char *s) {
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

static char identity[256];
static pthread_once_t identity_once = PTHREAD_ONCE_INIT;

static void read_identity(void) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s --version 2>/dev/null", compiler());
    FILE *p = popen(cmd, "r");
    if (!p || !fgets(identity, sizeof identity, p)) snprintf(identity, sizeof identity, "%s", compiler());
    if (p) pclose(p);
}

/* mkdir -p */
static int make_dirs(const char *path) {
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return -1;
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
            *p = '/';
        }
    return mkdir(buf, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

static int write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    size_t n = strlen(text);
    int ok = fwrite(text, 1, n, f) == n;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* A number unique to this call in the process: with the process id it names the temporary
 * files of a build, so that threads building kernels at the same time (or the same kernel)
 * never share one. */
static unsigned long next_build(void) {
    static unsigned long seq;
    return __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED);
}

/* Runs the compiler on src into so_path (through a temporary name); the compiler's messages
 * land in `log`. */
static tn_status build(const char *src, const char *so_path, const char *log, unsigned long id) {
    char tmp[4200], cmd[13000];
    if (snprintf(tmp, sizeof tmp, "%s.%ld-%lu.tmp", so_path, (long)getpid(), id) >= (int)sizeof tmp ||
        snprintf(cmd, sizeof cmd, "%s " FLAGS " -o '%s' '%s' -lm > '%s' 2>&1", compiler(), tmp, src,
                 log) >= (int)sizeof cmd)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "kernel cache path too long: %s", so_path);
    int rc = system(cmd);
    if (rc != 0) {
        char first[600] = "";
        FILE *f = fopen(log, "r");
        if (f) {
            size_t n = fread(first, 1, sizeof first - 1, f);
            first[n] = 0;
            fclose(f);
        }
        unlink(tmp);
        return tn_error(TN_STATUS_INTERNAL, "the C compiler (%s) failed on %s (exit %d): %s",
                        compiler(), src, rc, first[0] ? first : "no output");
    }
    if (rename(tmp, so_path) != 0) {
        unlink(tmp);
        return tn_error(TN_STATUS_INTERNAL, "could not move the built kernel to %s: %s", so_path,
                        strerror(errno));
    }
    return TN_STATUS_OK;
}

tn_status tn_graph_compile(const tn_graph *g, const char *cache_dir, const char *debug_dir,
                           tn_fused_kernel **kernel, int *cache_hit) {
    *kernel = NULL;
    *cache_hit = 0;
    if (!cache_dir || !*cache_dir) return tn_error(TN_STATUS_INVALID_ARGUMENT, "no kernel cache folder");
    char *source = NULL;
    tn_status st = tn_graph_codegen(g, &source);
    if (st != TN_STATUS_OK) return st;
    pthread_once(&identity_once, read_identity);
    uint64_t h = fnv1a(fnv1a(fnv1a(0xcbf29ce484222325ull, source), identity), FLAGS);
    char key[17], src[4096], so[4096], log[4096];
    unsigned long id = next_build();
    snprintf(key, sizeof key, "%016llx", (unsigned long long)h);
    if (snprintf(src, sizeof src, "%s/%s.c", cache_dir, key) >= (int)sizeof src ||
        snprintf(so, sizeof so, "%s/%s.so", cache_dir, key) >= (int)sizeof so ||
        snprintf(log, sizeof log, "%s/%s.%ld-%lu.log", cache_dir, key, (long)getpid(), id) >= (int)sizeof log) {
        free(source);
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "kernel cache path too long: %s", cache_dir);
    }
    if (debug_dir && *debug_dir) {
        char copy[4096];
        if (snprintf(copy, sizeof copy, "%s/%s.c", debug_dir, key) >= (int)sizeof copy ||
            make_dirs(debug_dir) != 0 || write_file(copy, source) != 0)
            fprintf(stderr, "torch_neuronx: could not keep the generated source in %s\n", debug_dir);
    }
    if (access(so, R_OK) == 0) {
        *cache_hit = 1;
    } else {
        if (make_dirs(cache_dir) != 0) {
            free(source);
            return tn_error(TN_STATUS_INTERNAL, "could not create the kernel cache folder %s: %s",
                            cache_dir, strerror(errno));
        }
        char src_tmp[4200];
        if (snprintf(src_tmp, sizeof src_tmp, "%s.%ld-%lu.tmp", src, (long)getpid(), id) >= (int)sizeof src_tmp ||
            write_file(src_tmp, source) != 0 || rename(src_tmp, src) != 0) {
            free(source);
            return tn_error(TN_STATUS_INTERNAL, "could not write %s: %s", src, strerror(errno));
        }
        st = build(src, so, log, id);
        unlink(log);
    }
    free(source);
    if (st != TN_STATUS_OK) return st;
    void *handle = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (!handle) return tn_error(TN_STATUS_INTERNAL, "could not load %s: %s", so, dlerror());
    fused_fn fn;
    *(void **)&fn = dlsym(handle, "tn_fused"); /* POSIX's way to read a function's address */
    tn_fused_kernel *k = calloc(1, sizeof *k);
    if (!fn || !k) {
        dlclose(handle);
        free(k);
        return tn_error(fn ? TN_STATUS_OUT_OF_MEMORY : TN_STATUS_INTERNAL,
                        fn ? "no host memory for a kernel" : "%s has no tn_fused", so);
    }
    k->handle = handle;
    k->fn = fn;
    k->operands = g->ninputs + g->noutputs;
    k->work = 1;
    for (int32_t d = 0; d < g->ndim; d++) k->work *= g->sizes[d];
    k->work *= g->nnodes > 0 ? g->nnodes : 1;
    memcpy(k->key, key, sizeof key);
    *kernel = k;
    return TN_STATUS_OK;
}

const char *tn_fused_kernel_key(const tn_fused_kernel *k) { return k->key; }
int32_t tn_fused_kernel_operands(const tn_fused_kernel *k) { return k->operands; }

void tn_fused_kernel_release(tn_fused_kernel *k) {
    if (!k) return;
    dlclose(k->handle);
    free(k);
}

typedef struct fused_task {
    fused_fn fn;
    int64_t work;
    void *ptr[];
} fused_task;

static void fused_slice(void *p, int32_t ith, int32_t nth) {
    fused_task *t = p;
    t->fn(ith, nth, t->ptr);
}

static tn_status run_fused(void *p) {
    fused_task *t = p;
    tn_parallel_run(fused_slice, t, t->work);
    return TN_STATUS_OK;
}

tn_status tn_fused_launch(tn_stream_t stream, const tn_fused_kernel *k, void *const *ptr) {
    if (!k) return tn_error(TN_STATUS_INVALID_ARGUMENT, "launching a NULL kernel");
    size_t size = sizeof(fused_task) + sizeof(void *) * (size_t)k->operands;
    fused_task *t = malloc(size);
    if (!t) return tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory to launch a fused kernel");
    t->fn = k->fn;
    t->work = k->work;
    memcpy(t->ptr, ptr, sizeof(void *) * (size_t)k->operands);
    tn_status st = tn_stream_launch(stream, "fused", run_fused, t, size);
    free(t);
    return st;
}
