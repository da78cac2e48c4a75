/* A hash map from pointers to pointers (open addressing, linear probing, backward-shift
 * deletion). Not thread-safe: callers hold their own lock. */
#ifndef TN_PTRMAP_H
#define TN_PTRMAP_H

#include <stddef.h>

typedef struct tn_ptrmap {
    void **keys;
    void **values;
    size_t capacity; /* power of two, or 0 before the first insert */
    size_t count;
} tn_ptrmap;

/* 0 on success, -1 when out of host memory. key must not be NULL. */
int tn_ptrmap_put(tn_ptrmap *m, void *key, void *value);
void *tn_ptrmap_get(const tn_ptrmap *m, const void *key);
/* Removes key and returns its value, or NULL if absent. */
void *tn_ptrmap_remove(tn_ptrmap *m, const void *key);

#endif
