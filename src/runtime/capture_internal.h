/* A capture's record (capture.c), shared with its plans (capture_plan.c). Not public. */
#ifndef TN_CAPTURE_INTERNAL_H
#define TN_CAPTURE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include "tn/capture.h"

typedef struct recorded {
    const char *op;
    tn_task_fn fn;
    size_t offset; /* of the argument bytes in `args` */
    size_t size;
} recorded;

/* A word of the argument bytes that points into relocated range `range`, `delta` bytes past
 * its start. */
typedef struct relocation {
    size_t at; /* offset of the word in `args` */
    int32_t range;
    uint64_t delta;
} relocation;

/* An address range [start, end) and what it is (a relocated range's index, ...), in lists
 * sorted by start. */
typedef struct span {
    uintptr_t start, end;
    int64_t index;
} span;

/* qsort order of spans by start; the span of the sorted list holding w, or NULL. */
int tn_span_order(const void *a, const void *b);
const span *tn_span_find(const span *sorted, size_t n, uintptr_t w);

struct tn_capture {
    tn_capture_pool pool; /* first: allocator.c sees the capture through it */
    recorded *launches;
    size_t count, capacity;
    unsigned char *args;
    size_t args_used, args_capacity, largest;
    void *scratch; /* `largest` bytes, for the replayed task's copy of its argument */
    relocation *relocations; /* in order of `at` */
    size_t relocated;
    int32_t ranges; /* what tn_capture_relocate named; a replay passes as many addresses */
    span *spans; /* the `ranges` ranges as recorded, by start; index: the range */
    /* A capture loaded from a plan (capture_plan.c) has no pool: its intermediates live in
     * `arena` (one device allocation) and its launches' names in `names`. */
    void *arena;
    char *names;
    /* dlopen handles of the objects a loaded plan calls into, so that none is unloaded while
     * the capture may replay (another graph's copy of a kernel with the same build ID, from
     * another cache folder, was unloaded under a replay) */
    void **pinned;
    size_t npinned;
    int refused;
    char reason[256];
};

/* Allocates the scratch a replay copies each launch's arguments into (the capture's `largest`
 * launch); refuses the capture when out of host memory. */
void tn_capture_make_scratch(struct tn_capture *c);
/* Lets go of the objects a loaded plan kept loaded (capture_plan.c). */
void tn_capture_unpin(struct tn_capture *c);

#endif
