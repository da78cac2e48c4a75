/* The objects loaded in this process and its readable mappings (see loaded_objects.h). */
#define _GNU_SOURCE
#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loaded_objects.h"

static int add_span(span **s, size_t *n, size_t *capacity, uintptr_t start, uintptr_t end, int64_t index) {
    if (tn_grow_array((void **)s, capacity, *n + 1, sizeof **s) != 0) return -1;
    (*s)[(*n)++] = (span){start, end, index};
    return 0;
}

static void read_build_id(const struct dl_phdr_info *info, loaded *o) {
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE) continue;
        size_t align = ph->p_align == 8 ? 8 : 4;
        const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
        const unsigned char *end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)(const void *)p;
            const unsigned char *name = p + sizeof *n;
            const unsigned char *desc = name + (n->n_namesz + align - 1) / align * align;
            const unsigned char *next = desc + (n->n_descsz + align - 1) / align * align;
            if (next > end) break;
            if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && memcmp(name, "GNU", 4) == 0 &&
                n->n_descsz > 0 && n->n_descsz <= MAX_BUILD_ID) {
                memcpy(o->build_id, desc, n->n_descsz);
                o->id_bytes = n->n_descsz;
                return;
            }
            p = next;
        }
    }
}

static int add_object(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    objects *all = arg;
    if (tn_grow_array((void **)&all->list, &all->capacity, all->count + 1, sizeof *all->list) != 0) {
        all->failed = 1;
        return 1;
    }
    loaded *o = &all->list[all->count];
    memset(o, 0, sizeof *o);
    o->base = info->dlpi_addr;
    snprintf(o->name, sizeof o->name, "%s", info->dlpi_name && info->dlpi_name[0] ? info->dlpi_name : "the program");
    read_build_id(info, o);
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD &&
            add_span(&all->segments, &all->nsegments, &all->segments_capacity, start, start + ph->p_memsz,
                     (int64_t)all->count) != 0) {
            all->failed = 1;
            return 1;
        }
    }
    all->count++;
    return 0;
}

void tn_free_objects(objects *all) {
    free(all->list);
    free(all->segments);
}

tn_status tn_list_objects(objects *all) {
    memset(all, 0, sizeof *all);
    dl_iterate_phdr(add_object, all);
    if (all->failed) {
        tn_free_objects(all);
        memset(all, 0, sizeof *all);
        return tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory to list the loaded objects");
    }
    qsort(all->segments, all->nsegments, sizeof *all->segments, tn_span_order);
    return TN_STATUS_OK;
}

tn_status tn_list_mappings(span **maps, size_t *n) {
    *maps = NULL;
    *n = 0;
    size_t capacity = 0;
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return tn_error(TN_STATUS_UNSUPPORTED, "a plan needs /proc/self/maps, which cannot be read");
    char line[4096];
    tn_status st = TN_STATUS_OK;
    while (st == TN_STATUS_OK && fgets(line, sizeof line, f)) {
        unsigned long long start, end;
        char readable = '-';
        if (sscanf(line, "%llx-%llx %c", &start, &end, &readable) == 3 && readable == 'r' &&
            add_span(maps, n, &capacity, (uintptr_t)start, (uintptr_t)end, 0) != 0)
            st = tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory to list the process's mappings");
    }
    fclose(f);
    if (st == TN_STATUS_OK) qsort(*maps, *n, sizeof **maps, tn_span_order);
    return st;
}

