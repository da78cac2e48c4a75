/* See ptrmap.h. */
#include "ptrmap.h"

#include <stdint.h>
#include <stdlib.h>

static size_t slot_of(const tn_ptrmap *m, const void *key) {
    uint64_t h = (uint64_t)(uintptr_t)key;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return (size_t)h & (m->capacity - 1);
}

static int grow(tn_ptrmap *m) {
    size_t cap = m->capacity ? m->capacity * 2 : 64;
    tn_ptrmap bigger = {calloc(cap, sizeof(void *)), calloc(cap, sizeof(void *)), cap, 0};
    if (!bigger.keys || !bigger.values) {
        free(bigger.keys);
        free(bigger.values);
        return -1;
    }
    for (size_t i = 0; i < m->capacity; i++)
        if (m->keys[i]) tn_ptrmap_put(&bigger, m->keys[i], m->values[i]);
    free(m->keys);
    free(m->values);
    *m = bigger;
    return 0;
}

int tn_ptrmap_put(tn_ptrmap *m, void *key, void *value) {
    if ((m->count + 1) * 2 > m->capacity && grow(m) != 0) return -1;
    size_t i = slot_of(m, key);
    while (m->keys[i] && m->keys[i] != key) i = (i + 1) & (m->capacity - 1);
    if (!m->keys[i]) m->count++;
    m->keys[i] = key;
    m->values[i] = value;
    return 0;
}

void *tn_ptrmap_get(const tn_ptrmap *m, const void *key) {
    if (!m->capacity || !key) return NULL;
    for (size_t i = slot_of(m, key); m->keys[i]; i = (i + 1) & (m->capacity - 1))
        if (m->keys[i] == key) return m->values[i];
    return NULL;
}

void *tn_ptrmap_remove(tn_ptrmap *m, const void *key) {
    if (!m->capacity || !key) return NULL;
    size_t mask = m->capacity - 1, i = slot_of(m, key);
    while (m->keys[i] && m->keys[i] != key) i = (i + 1) & mask;
    if (!m->keys[i]) return NULL;
    void *value = m->values[i];
    /* Backward shift: pull later members of the probe run into the hole when their home
     * slot does not lie strictly between the hole and their current slot. */
    size_t hole = i;
    for (size_t j = (i + 1) & mask; m->keys[j]; j = (j + 1) & mask) {
        size_t home = slot_of(m, m->keys[j]);
        int between = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
        if (!between) {
            m->keys[hole] = m->keys[j];
            m->values[hole] = m->values[j];
            hole = j;
        }
    }
    m->keys[hole] = NULL;
    m->values[hole] = NULL;
    m->count--;
    return value;
}
