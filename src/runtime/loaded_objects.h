/* What a replay plan (capture_plan.c) names addresses by: the objects loaded in this process
 * (the executable, shared libraries, generated kernels), each with its GNU build ID, and the
 * readable mappings of the process. Not public. */
#ifndef TN_LOADED_OBJECTS_H
#define TN_LOADED_OBJECTS_H

#include <stddef.h>
#include <stdint.h>

#include "capture_internal.h"

#define MAX_BUILD_ID 64

typedef struct loaded {
    uintptr_t base;
    uint8_t build_id[MAX_BUILD_ID];
    uint64_t id_bytes; /* 0: it has none, and cannot be named */
    char name[184];
} loaded;

typedef struct objects {
    loaded *list;
    size_t count, capacity;
    span *segments; /* the objects' loaded segments, sorted; index: the object */
    size_t nsegments, segments_capacity;
    int failed;
} objects;

/* Fills `all` (free it with tn_free_objects; zeroed on failure). */
tn_status tn_list_objects(objects *all);
void tn_free_objects(objects *all);

/* Every readable mapping of this process (/proc/self/maps), sorted (free() *maps). Guard pages
 * and reserved gaps (no access) are left out: nothing is read through them, and a sanitizer's
 * reserved gap covers most small integers. */
tn_status tn_list_mappings(span **maps, size_t *n);

#endif
