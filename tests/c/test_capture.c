/* Stream capture and replay (tn/capture.h): recorded launches replay on the same memory, the
 * recording's pool reuses its own freed blocks and keeps them from everyone else, and work
 * that cannot replay is refused with a reason. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tn/tn.h"

static tn_tensor vec(void *data, int64_t n) {
    return (tn_tensor){.data = data, .dtype = TN_DTYPE_F32, .ndim = 1, .sizes = {n}, .strides = {1}};
}

static float first_value(tn_stream_t s, void *dev) {
    float host[16];
    tn_tensor h = vec(host, 16), d = vec(dev, 16);
    CHECK_OK(tn_copy_async(s, &h, &d, TN_COPY_FLAGS_BLOCKING));
    CHECK_OK(tn_stream_synchronize(s));
    for (int i = 1; i < 16; i++) CHECK(host[i] == host[0]);
    return host[0];
}

static tn_status fill(tn_stream_t s, void *dev, double value) {
    tn_tensor d = vec(dev, 16);
    tn_scalar v = {.kind = TN_SCALAR_KIND_FLOAT, .f = value};
    return tn_fill_async(s, &d, &v);
}

static int counted;
static tn_status count(void *p) {
    counted += *(int *)p;
    *(int *)p = 1000; /* a task may scribble on its own argument copy */
    return TN_STATUS_OK;
}

void test_capture_replay(void) {
    tn_stream_t s;
    CHECK_OK(tn_stream_get(2, 3, &s));
    const uint64_t bytes = 16 * sizeof(float);
    void *x, *t, *out, *u;
    CHECK_OK(tn_memory_alloc(2, s, bytes, &x)); /* the "input", allocated before recording */
    CHECK_OK(fill(s, x, 2.0));

    tn_capture_t c;
    CHECK_OK(tn_capture_begin(s, &c));
    CHECK(tn_capture_active());
    tn_capture_t nested;
    CHECK(tn_capture_begin(s, &nested) == TN_STATUS_INVALID_ARGUMENT);
    CHECK_OK(tn_memory_alloc(2, s, bytes, &t));
    tn_tensor dt = vec(t, 16), dx = vec(x, 16);
    CHECK_OK(tn_copy_async(s, &dt, &dx, TN_COPY_FLAGS_NONE)); /* t <- x */
    CHECK_OK(tn_memory_alloc(2, s, bytes, &out));
    tn_tensor dout = vec(out, 16);
    CHECK_OK(tn_copy_async(s, &dout, &dt, TN_COPY_FLAGS_NONE)); /* out <- t */
    CHECK_OK(tn_memory_free(t));
    CHECK_OK(tn_memory_alloc(2, s, bytes, &u));
    CHECK(u == t); /* the recording reuses its own freed block */
    CHECK_OK(fill(s, u, -1.0));
    CHECK_OK(tn_memory_free(u));
    int add = 1;
    CHECK_OK(tn_stream_launch(s, "count", count, &add, sizeof add));
    CHECK_OK(tn_capture_end(c));
    CHECK(!tn_capture_active());

    CHECK(tn_capture_replayable(c));
    CHECK(strcmp(tn_capture_reason(c), "") == 0);
    CHECK(tn_capture_launches(c) == 4);
    CHECK(tn_capture_block_bytes(c, out) >= bytes && tn_capture_block_bytes(c, t) >= bytes);
    CHECK(tn_capture_block_bytes(c, x) == 0 && tn_capture_block_bytes(c, (char *)out + 4) == 0);
    CHECK(first_value(s, out) == 2.0f);
    CHECK(counted == 1);

    /* new input values, same address: the replay computes with them */
    CHECK_OK(fill(s, x, 7.0));
    CHECK_OK(tn_capture_replay(c));
    CHECK(first_value(s, out) == 7.0f);
    CHECK_OK(tn_capture_replay(c));
    CHECK_OK(tn_stream_synchronize(s));
    CHECK(counted == 3); /* each replay starts from the recorded argument */

    /* pool blocks are not handed to anyone else while the capture lives, even freed */
    CHECK_OK(tn_memory_free(out));
    void *other[3];
    for (int i = 0; i < 3; i++) {
        CHECK_OK(tn_memory_alloc(2, s, bytes, &other[i]));
        CHECK(other[i] != out && other[i] != t);
    }
    for (int i = 0; i < 3; i++) CHECK_OK(tn_memory_free(other[i]));
    tn_memory_stats before, after;
    CHECK_OK(tn_memory_get_stats(2, &before));
    tn_capture_destroy(c);
    CHECK_OK(tn_memory_get_stats(2, &after));
    /* destroyed: its two blocks go back to the cache, still reserved but no longer active */
    CHECK(after.reserved_bytes[TN_POOL_ALL].current == before.reserved_bytes[TN_POOL_ALL].current);
    CHECK(after.active[TN_POOL_ALL].current == before.active[TN_POOL_ALL].current - 2);
    CHECK_OK(tn_memory_free(x));
}

/* A relocated replay reads its input and writes its output where the replay says: a
 * recording of out <- x + (x rotated by 4), with x (read through views into it) and out's
 * pool block relocated, computes from a new x into a new out, and leaves the recorded ones
 * alone; the intermediate stays in the pool. */
void test_capture_relocation(void) {
    tn_stream_t s;
    CHECK_OK(tn_stream_get(2, 4, &s));
    const uint64_t bytes = 16 * sizeof(float);
    void *x, *x2, *out, *out2, *mid;
    CHECK_OK(tn_memory_alloc(2, s, bytes, &x));
    CHECK_OK(tn_memory_alloc(2, s, bytes, &x2));
    CHECK_OK(fill(s, x, 1.0));
    tn_capture_t c;
    CHECK_OK(tn_capture_begin(s, &c));
    CHECK_OK(tn_memory_alloc(2, s, bytes, &mid)); /* an intermediate: stays in the pool */
    CHECK_OK(tn_memory_alloc(2, s, bytes, &out));
    /* mid[0:12] = x[0:12] + x[4:16], mid[12:16] = x[12:16] + x[0:4]; out <- mid */
    tn_tensor m0 = vec(mid, 12), m12 = vec((float *)mid + 12, 4), dmid = vec(mid, 16), dout = vec(out, 16);
    tn_input x0 = {.t = vec(x, 12)}, x4 = {.t = vec((float *)x + 4, 12)};
    tn_input x12 = {.t = vec((float *)x + 12, 4)}, xa = {.t = vec(x, 4)};
    tn_scalar one = {.kind = TN_SCALAR_KIND_FLOAT, .f = 1.0};
    CHECK_OK(tn_binary_async(s, NULL, TN_BINARY_ADD, &m0, &x0, &x4, &one, TN_DTYPE_F32));
    CHECK_OK(tn_binary_async(s, NULL, TN_BINARY_ADD, &m12, &x12, &xa, &one, TN_DTYPE_F32));
    CHECK_OK(tn_copy_async(s, &dout, &dmid, TN_COPY_FLAGS_NONE));
    CHECK_OK(tn_capture_end(c));
    CHECK(tn_capture_replayable(c));
    CHECK(first_value(s, out) == 2.0f);

    uint64_t out_bytes = tn_capture_block_bytes(c, out);
    CHECK(out_bytes >= bytes);
    uintptr_t start[2] = {(uintptr_t)x, (uintptr_t)out};
    uint64_t size[2] = {bytes, out_bytes};
    int64_t words = 0;
    uint64_t overlapping[2] = {bytes, (uintptr_t)out - (uintptr_t)x + 1};
    uintptr_t overlap_start[2] = {(uintptr_t)x, (uintptr_t)x + 4};
    CHECK(tn_capture_relocate(c, 2, overlap_start, overlapping, NULL) == TN_STATUS_INVALID_ARGUMENT);
    CHECK_OK(tn_capture_relocate(c, 2, start, size, &words));
    CHECK(words == 5); /* x, x + 4, x + 12 and x in the adds, out in the copy */
    CHECK(tn_capture_replay(c) == TN_STATUS_INVALID_ARGUMENT); /* the ranges' addresses are needed */
    CHECK(tn_capture_replay_at(c, 1, start) == TN_STATUS_INVALID_ARGUMENT);

    CHECK_OK(tn_memory_alloc(2, s, out_bytes, &out2));
    CHECK_OK(fill(s, x2, 5.0));
    CHECK_OK(fill(s, out, -3.0));
    uintptr_t moved[2] = {(uintptr_t)x2, (uintptr_t)out2};
    CHECK_OK(tn_capture_replay_at(c, 2, moved));
    CHECK(first_value(s, out2) == 10.0f); /* from x2, into out2 */
    CHECK(first_value(s, out) == -3.0f);  /* the recorded output is not written */
    CHECK(first_value(s, x) == 1.0f);
    CHECK_OK(tn_capture_replay_at(c, 2, start)); /* back at the recorded addresses */
    CHECK(first_value(s, out) == 2.0f);
    tn_capture_destroy(c);
    CHECK_OK(tn_memory_free(out2));
    CHECK_OK(tn_memory_free(x2));
    CHECK_OK(tn_memory_free(x));
}

static uint64_t fnv1a(const unsigned char *p, uint64_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (uint64_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static tn_status read_int(void *p) {
    counted += **(int **)p;
    return TN_STATUS_OK;
}

/* A relocated capture saved as a plan and loaded again replays on its own memory: inputs and
 * outputs where a replay says, intermediates in the loaded plan's arena, task functions found
 * by build ID. Damaged plans and addresses a plan cannot name are refused. */
void test_capture_plan(void) {
    tn_stream_t s;
    CHECK_OK(tn_stream_get(2, 4, &s));
    const uint64_t bytes = 16 * sizeof(float);
    void *x, *out, *mid;
    CHECK_OK(tn_memory_alloc(2, s, bytes, &x));
    CHECK_OK(fill(s, x, 1.0));
    tn_capture_t c;
    CHECK_OK(tn_capture_begin(s, &c));
    CHECK_OK(tn_memory_alloc(2, s, bytes, &mid));
    CHECK_OK(tn_memory_alloc(2, s, bytes, &out));
    tn_tensor dmid = vec(mid, 16), dout = vec(out, 16);
    tn_input xin = {.t = vec(x, 16)}, min = {.t = vec(mid, 16)};
    tn_scalar one = {.kind = TN_SCALAR_KIND_FLOAT, .f = 1.0};
    CHECK_OK(tn_binary_async(s, NULL, TN_BINARY_ADD, &dmid, &xin, &xin, &one, TN_DTYPE_F32)); /* mid = 2x */
    CHECK_OK(tn_binary_async(s, NULL, TN_BINARY_MUL, &dout, &min, &xin, &one, TN_DTYPE_F32)); /* out = mid * x */
    CHECK_OK(tn_memory_free(mid));
    CHECK_OK(tn_capture_end(c));
    void *plan = NULL;
    uint64_t size = 0;
    CHECK(tn_capture_save(c, &plan, &size) == TN_STATUS_INVALID_ARGUMENT); /* not relocated yet */
    uint64_t out_bytes = tn_capture_block_bytes(c, out);
    uintptr_t start[2] = {(uintptr_t)x, (uintptr_t)out};
    uint64_t range_bytes[2] = {bytes, out_bytes};
    CHECK_OK(tn_capture_relocate(c, 2, start, range_bytes, NULL));
    CHECK_OK(tn_capture_save(c, &plan, &size));
    CHECK(plan != NULL && size > 0);
    tn_capture_destroy(c); /* the pool (mid) goes back to the allocator */
    CHECK_OK(tn_memory_free(out));

    tn_capture_t loaded;
    CHECK_OK(tn_capture_load(s, plan, size, &loaded));
    CHECK(tn_capture_launches(loaded) == 2);
    void *x2, *out2;
    CHECK_OK(tn_memory_alloc(2, s, bytes, &x2));
    CHECK_OK(tn_memory_alloc(2, s, out_bytes, &out2));
    CHECK_OK(fill(s, x2, 3.0));
    uintptr_t moved[2] = {(uintptr_t)x2, (uintptr_t)out2};
    CHECK_OK(tn_capture_replay_at(loaded, 2, moved));
    CHECK(first_value(s, out2) == 18.0f); /* (3 + 3) * 3 */
    CHECK(tn_capture_save(loaded, &(void *){NULL}, &(uint64_t){0}) == TN_STATUS_INVALID_ARGUMENT);
    tn_capture_destroy(loaded);

    /* damaged: a flipped byte, a truncated file, an object this process has not loaded */
    unsigned char *b = plan;
    b[size - 1] ^= 1;
    CHECK(tn_capture_load(s, plan, size, &loaded) == TN_STATUS_UNSUPPORTED);
    CHECK(strstr(tn_last_error(), "checksum") != NULL && loaded == NULL);
    b[size - 1] ^= 1;
    CHECK(tn_capture_load(s, plan, size - 8, &loaded) == TN_STATUS_UNSUPPORTED);
    CHECK(strstr(tn_last_error(), "size") != NULL);
    CHECK(tn_capture_load(s, plan, 12, &loaded) == TN_STATUS_UNSUPPORTED);
    const size_t header = 80; /* the first object's build ID follows the header */
    b[header] ^= 0xff;
    uint64_t sum = fnv1a(b + header, size - header);
    memcpy(b + 8, &sum, sizeof sum);
    CHECK(tn_capture_load(s, plan, size, &loaded) == TN_STATUS_UNSUPPORTED);
    CHECK(strstr(tn_last_error(), "not loaded") != NULL);
    free(plan);

    /* a launch whose argument points at host memory: the plan cannot name it */
    int *host = malloc(sizeof *host);
    *host = 1;
    CHECK_OK(tn_capture_begin(s, &c));
    CHECK_OK(tn_stream_launch(s, "read_int", read_int, &host, sizeof host));
    CHECK_OK(tn_capture_end(c));
    CHECK_OK(tn_capture_relocate(c, 1, start, range_bytes, NULL));
    CHECK(tn_capture_save(c, &plan, &size) == TN_STATUS_UNSUPPORTED);
    CHECK(strstr(tn_last_error(), "read_int") != NULL && strstr(tn_last_error(), "cannot name") != NULL);
    CHECK(plan == NULL);
    tn_capture_destroy(c);
    free(host);
    CHECK_OK(tn_memory_free(out2));
    CHECK_OK(tn_memory_free(x2));
    CHECK_OK(tn_memory_free(x));
}

/* A loaded plan's intermediates share its arena when their lifetimes (first to last launch
 * pointing into them) do not meet: two blocks of different sizes, one dead before the other
 * is born, take the larger one's bytes. */
void test_capture_plan_arena(void) {
    tn_stream_t s;
    CHECK_OK(tn_stream_get(2, 4, &s));
    const uint64_t small = 64 << 10, large = 256 << 10, bytes = 16 * sizeof(float);
    void *x, *out, *mid1, *mid2;
    CHECK_OK(tn_memory_alloc(2, s, bytes, &x));
    CHECK_OK(tn_memory_alloc(2, s, bytes, &out));
    CHECK_OK(fill(s, x, 3.0));
    tn_capture_t c;
    CHECK_OK(tn_capture_begin(s, &c));
    tn_tensor d_out = vec(out, 16);
    tn_input in_x = {.t = vec(x, 16)}, in_out = {.t = vec(out, 16)};
    tn_scalar one = {.kind = TN_SCALAR_KIND_FLOAT, .f = 1.0};
    CHECK_OK(tn_memory_alloc(2, s, small, &mid1));
    tn_tensor d1 = vec(mid1, 16);
    tn_input in1 = {.t = d1};
    CHECK_OK(tn_binary_async(s, NULL, TN_BINARY_ADD, &d1, &in_x, &in_x, &one, TN_DTYPE_F32));    /* 2x */
    CHECK_OK(tn_binary_async(s, NULL, TN_BINARY_MUL, &d_out, &in1, &in_x, &one, TN_DTYPE_F32));  /* 2x^2 */
    CHECK_OK(tn_memory_free(mid1));
    CHECK_OK(tn_memory_alloc(2, s, large, &mid2)); /* another size class: the pool cannot reuse mid1 */
    tn_tensor d2 = vec(mid2, 16);
    tn_input in2 = {.t = d2};
    CHECK_OK(tn_binary_async(s, NULL, TN_BINARY_ADD, &d2, &in_out, &in_x, &one, TN_DTYPE_F32));  /* 2x^2 + x */
    CHECK_OK(tn_binary_async(s, NULL, TN_BINARY_MUL, &d_out, &in2, &in_x, &one, TN_DTYPE_F32));  /* (2x^2 + x) x */
    CHECK_OK(tn_memory_free(mid2));
    CHECK_OK(tn_capture_end(c));
    CHECK(first_value(s, out) == 63.0f);
    uintptr_t start[2] = {(uintptr_t)x, (uintptr_t)out};
    uint64_t range_bytes[2] = {bytes, tn_capture_block_bytes(c, out) ? tn_capture_block_bytes(c, out) : bytes};
    CHECK_OK(tn_capture_relocate(c, 2, start, range_bytes, NULL));
    void *plan = NULL;
    uint64_t size = 0;
    CHECK_OK(tn_capture_save(c, &plan, &size));
    tn_capture_destroy(c);

    tn_memory_stats before, after;
    CHECK_OK(tn_memory_get_stats(2, &before));
    tn_capture_t loaded;
    CHECK_OK(tn_capture_load(s, plan, size, &loaded));
    CHECK_OK(tn_memory_get_stats(2, &after));
    CHECK(after.allocated_bytes[TN_POOL_ALL].current - before.allocated_bytes[TN_POOL_ALL].current == (int64_t)large);
    CHECK_OK(fill(s, out, 0.0));
    CHECK_OK(tn_capture_replay_at(loaded, 2, start));
    CHECK(first_value(s, out) == 63.0f);
    tn_capture_destroy(loaded);
    free(plan);
    CHECK_OK(tn_memory_free(out));
    CHECK_OK(tn_memory_free(x));
}

static tn_status failing(void *p) {
    int *calls = *(int **)p;
    return ++*calls > 1 ? TN_STATUS_KERNEL_FAILED : TN_STATUS_OK;
}

void test_capture_refusals(void) {
    tn_stream_t s, other;
    CHECK_OK(tn_stream_get(2, 4, &s));
    CHECK_OK(tn_stream_get(2, 5, &other));
    tn_capture_t c;

    /* a host synchronisation */
    CHECK_OK(tn_capture_begin(s, &c));
    CHECK_OK(tn_stream_synchronize(s));
    CHECK_OK(tn_capture_end(c));
    CHECK(!tn_capture_replayable(c));
    CHECK(strstr(tn_capture_reason(c), "synchronisation") != NULL);
    CHECK(tn_capture_replay(c) == TN_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(tn_last_error(), "cannot be replayed") != NULL);
    tn_capture_destroy(c);

    /* a launch on another stream */
    void *dev;
    CHECK_OK(tn_memory_alloc(2, other, 64, &dev));
    CHECK_OK(tn_capture_begin(s, &c));
    CHECK_OK(fill(other, dev, 1.0));
    CHECK_OK(tn_capture_end(c));
    CHECK(!tn_capture_replayable(c));
    CHECK(strstr(tn_capture_reason(c), "another stream") != NULL);
    tn_capture_destroy(c);

    /* random numbers */
    CHECK_OK(tn_capture_begin(s, &c));
    tn_tensor d = vec(dev, 16);
    CHECK_OK(tn_random_uniform_async(s, &d, 1, 0, 0.0, 1.0));
    CHECK_OK(tn_capture_end(c));
    CHECK(strstr(tn_capture_reason(c), "random") != NULL);
    tn_capture_destroy(c);
    CHECK_OK(tn_stream_synchronize(other));
    CHECK_OK(tn_stream_synchronize(s));
    CHECK_OK(tn_memory_free(dev));

    /* not the recording thread's capture */
    CHECK(tn_capture_end(NULL) == TN_STATUS_INVALID_ARGUMENT);

    /* a launch that fails on replay: the error names it and reaches the next synchronisation */
    int calls = 0, *pc = &calls;
    CHECK_OK(tn_capture_begin(s, &c));
    CHECK_OK(tn_stream_launch(s, "flaky", failing, &pc, sizeof pc));
    CHECK_OK(tn_capture_end(c));
    CHECK_OK(tn_stream_synchronize(s));
    CHECK_OK(tn_capture_replay(c));
    CHECK(tn_stream_synchronize(s) == TN_STATUS_KERNEL_FAILED);
    CHECK(strstr(tn_last_error(), "flaky") != NULL && strstr(tn_last_error(), "launch 1 of 1") != NULL);
    tn_capture_destroy(c);
}
