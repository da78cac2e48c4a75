/* Plans: a relocated capture saved as bytes, and loaded in another process (see tn/capture.h).
 *
 * A plan is a header, then the objects it names, the launches, their argument bytes, the range
 * relocations (as the capture keeps them), the fixups, and the launches' names. A fixup is a
 * word that a load rewrites once: an address in the capture's pool becomes one in the loaded
 * plan's arena, an address in a loaded object's code or data becomes the same offset from that
 * object's base in this process. Objects are found by their GNU build ID, which the linker
 * derives from their contents, so a plan never calls into a different build. A checksum over
 * everything after the header catches a damaged file, and every count, index and offset is
 * checked before anything is used. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture_internal.h"
#include "loaded_objects.h"

#define PLAN_MAGIC "TNPLAN1"

typedef struct plan_header {
    char magic[8];
    uint64_t checksum; /* FNV-1a of the bytes after the header */
    uint64_t launches, args_bytes, relocations, fixups, objects, names_bytes, arena_bytes;
    int64_t ranges;
} plan_header;

typedef struct plan_object {
    uint8_t build_id[MAX_BUILD_ID];
    uint64_t id_bytes;
    char name[184]; /* for messages */
} plan_object;

typedef struct plan_launch {
    uint64_t name;         /* offset in the names */
    uint64_t object, fn;   /* the function: its object, and its offset from the object's base */
    uint64_t offset, size; /* of its argument bytes */
} plan_launch;

typedef struct plan_relocation {
    uint64_t at, delta;
    int64_t range;
} plan_relocation;

typedef struct plan_fixup {
    uint64_t at, offset;
    int64_t object; /* -1: the arena */
} plan_fixup;

static uint64_t fnv1a(const unsigned char *p, uint64_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (uint64_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* What a save collects before writing. */
typedef struct saving {
    span *blocks; /* pool blocks outside every relocated range; index: offset in the arena */
    size_t nblocks;
    uint64_t arena_bytes;
    objects all;
    span *maps;
    size_t nmaps;
    int64_t *named;   /* loaded object -> index in the plan's objects, or -1 */
    size_t nnamed;    /* objects the plan names */
    plan_fixup *fixups;
    size_t nfixups, fixups_capacity;
} saving;

static void free_saving(saving *s) {
    free(s->blocks);
    tn_free_objects(&s->all);
    free(s->maps);
    free(s->named);
    free(s->fixups);
}

/* The plan's index of loaded object o, naming it if needed; -1 if it has no build ID. */
static int64_t name_object(saving *s, int64_t o) {
    if (!s->all.list[o].id_bytes) return -1;
    if (s->named[o] < 0) s->named[o] = (int64_t)s->nnamed++;
    return s->named[o];
}

static tn_status collect_blocks(const struct tn_capture *c, saving *s) {
    size_t n = tn_memory_pool_blocks(&c->pool, NULL, NULL, 0);
    uintptr_t *start = malloc(sizeof *start * (n ? n : 1));
    uint64_t *bytes = malloc(sizeof *bytes * (n ? n : 1));
    s->blocks = malloc(sizeof *s->blocks * (n ? n : 1));
    if (!start || !bytes || !s->blocks) {
        free(start);
        free(bytes);
        return tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory to save a plan");
    }
    n = tn_memory_pool_blocks(&c->pool, start, bytes, n);
    const span *ranges = c->spans;
    for (size_t i = 0; i < n; i++) {
        if (tn_span_find(ranges, (size_t)c->ranges, start[i])) continue; /* an output: relocated */
        s->blocks[s->nblocks++] = (span){start[i], start[i] + bytes[i], 0};
    }
    free(start);
    free(bytes);
    qsort(s->blocks, s->nblocks, sizeof *s->blocks, tn_span_order);
    return TN_STATUS_OK;
}

/* A pool block as the arena plan sees it: the launches that use it, first to last. */
typedef struct lifetime {
    size_t block; /* in s->blocks */
    size_t first, last;
    uint64_t bytes;
    int used;
} lifetime;

static int larger_first(const void *a, const void *b) {
    const lifetime *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
    return x->first < y->first ? -1 : x->first > y->first;
}

/* Plans the arena by lifetimes: a block is live from the first launch whose arguments point
 * into it to the last, and blocks whose lifetimes do not meet may share memory (a replay runs
 * its launches one after another). Each block, largest first, goes to the lowest offset that
 * overlaps no block already placed and live at the same time. s->blocks[i].index receives
 * the offset, s->arena_bytes the arena's size. */
static tn_status plan_arena(const struct tn_capture *c, saving *s) {
    size_t n = s->nblocks;
    lifetime *life = calloc(n ? n : 1, sizeof *life);
    span *busy = malloc(sizeof *busy * (n ? n : 1));
    if (!life || !busy) {
        free(life);
        free(busy);
        return tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory to plan a capture's arena");
    }
    for (size_t i = 0; i < n; i++)
        life[i] = (lifetime){i, 0, 0, (s->blocks[i].end - s->blocks[i].start + TN_BLOCK_ROUND - 1) / TN_BLOCK_ROUND * TN_BLOCK_ROUND, 0};
    for (size_t l = 0; l < c->count; l++) {
        const recorded *r = &c->launches[l];
        for (size_t at = r->offset; at + sizeof(uintptr_t) <= r->offset + r->size; at += sizeof(uintptr_t)) {
            uintptr_t w;
            memcpy(&w, c->args + at, sizeof w);
            const span *b = tn_span_find(s->blocks, n, w);
            if (!b) continue;
            lifetime *x = &life[b - s->blocks];
            if (!x->used) x->first = l;
            x->last = l;
            x->used = 1;
        }
    }
    qsort(life, n, sizeof *life, larger_first);
    s->arena_bytes = 0;
    for (size_t i = 0; i < n; i++) {
        if (!life[i].used) continue; /* no launch points into it: nothing to place */
        size_t nbusy = 0;
        for (size_t j = 0; j < i; j++)
            if (life[j].used && life[j].first <= life[i].last && life[i].first <= life[j].last) {
                uint64_t at = (uint64_t)s->blocks[life[j].block].index;
                busy[nbusy++] = (span){(uintptr_t)at, (uintptr_t)(at + life[j].bytes), 0};
            }
        qsort(busy, nbusy, sizeof *busy, tn_span_order);
        uint64_t offset = 0;
        for (size_t j = 0; j < nbusy && busy[j].start < offset + life[i].bytes; j++)
            if (busy[j].end > offset) offset = busy[j].end;
        s->blocks[life[i].block].index = (int64_t)offset;
        if (offset + life[i].bytes > s->arena_bytes) s->arena_bytes = offset + life[i].bytes;
    }
    free(life);
    free(busy);
    return TN_STATUS_OK;
}

static tn_status add_fixup(saving *s, uint64_t at, uint64_t offset, int64_t object) {
    if (tn_grow_array((void **)&s->fixups, &s->fixups_capacity, s->nfixups + 1, sizeof *s->fixups) != 0)
        return tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory to save a plan");
    s->fixups[s->nfixups++] = (plan_fixup){at, offset, object};
    return TN_STATUS_OK;
}

/* Names every address in launch l's arguments (see tn/capture.h). */
static tn_status name_words(const struct tn_capture *c, saving *s, size_t l) {
    const recorded *r = &c->launches[l];
    const span *ranges = c->spans;
    for (size_t at = r->offset; at + sizeof(uintptr_t) <= r->offset + r->size; at += sizeof(uintptr_t)) {
        uintptr_t w;
        memcpy(&w, c->args + at, sizeof w);
        if (tn_span_find(ranges, (size_t)c->ranges, w)) continue; /* a relocation */
        const span *b = tn_span_find(s->blocks, s->nblocks, w);
        if (b) {
            tn_status st = add_fixup(s, at, (uint64_t)b->index + (w - b->start), -1);
            if (st != TN_STATUS_OK) return st;
            continue;
        }
        const span *seg = tn_span_find(s->all.segments, s->all.nsegments, w);
        int64_t object = seg ? name_object(s, seg->index) : -1;
        if (object >= 0) {
            tn_status st = add_fixup(s, at, w - s->all.list[seg->index].base, object);
            if (st != TN_STATUS_OK) return st;
            continue;
        }
        if (seg || tn_span_find(s->maps, s->nmaps, w))
            return tn_error(TN_STATUS_UNSUPPORTED,
                            "launch %zu (%s): the argument word at byte %zu points at memory a plan "
                            "cannot name (not a relocated range, the capture's pool, or an object "
                            "with a build ID)",
                            l + 1, r->op, at - r->offset);
    }
    return TN_STATUS_OK;
}

static tn_status write_plan(const struct tn_capture *c, saving *s, const uint64_t *fn_offset,
                            const int64_t *fn_object, void **bytes, uint64_t *size) {
    uint64_t names_bytes = 0;
    for (size_t l = 0; l < c->count; l++) names_bytes += strlen(c->launches[l].op) + 1;
    plan_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, PLAN_MAGIC, sizeof h.magic);
    h.launches = c->count;
    h.args_bytes = c->args_used;
    h.relocations = c->relocated;
    h.fixups = s->nfixups;
    h.objects = s->nnamed;
    h.names_bytes = names_bytes;
    h.arena_bytes = s->arena_bytes;
    h.ranges = c->ranges;
    uint64_t total = sizeof h + h.objects * sizeof(plan_object) + h.launches * sizeof(plan_launch) + h.args_bytes +
                     h.relocations * sizeof(plan_relocation) + h.fixups * sizeof(plan_fixup) + names_bytes;
    unsigned char *out = calloc(1, total), *p = out + sizeof h;
    if (!out) return tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory to save a plan");
    for (size_t o = 0; o < s->all.count; o++) {
        if (s->named[o] < 0) continue;
        plan_object *po = (plan_object *)(void *)(p + (size_t)s->named[o] * sizeof *po);
        memcpy(po->build_id, s->all.list[o].build_id, sizeof po->build_id);
        po->id_bytes = s->all.list[o].id_bytes;
        memcpy(po->name, s->all.list[o].name, sizeof po->name);
    }
    p += h.objects * sizeof(plan_object);
    uint64_t name_at = 0;
    for (size_t l = 0; l < c->count; l++, p += sizeof(plan_launch)) {
        const recorded *r = &c->launches[l];
        plan_launch pl = {name_at, (uint64_t)fn_object[l], fn_offset[l], r->offset, r->size};
        memcpy(p, &pl, sizeof pl);
        name_at += strlen(r->op) + 1;
    }
    if (h.args_bytes) memcpy(p, c->args, h.args_bytes);
    p += h.args_bytes;
    for (size_t i = 0; i < c->relocated; i++, p += sizeof(plan_relocation)) {
        plan_relocation pr = {c->relocations[i].at, c->relocations[i].delta, c->relocations[i].range};
        memcpy(p, &pr, sizeof pr);
    }
    if (h.fixups) memcpy(p, s->fixups, h.fixups * sizeof(plan_fixup));
    p += h.fixups * sizeof(plan_fixup);
    for (size_t l = 0; l < c->count; l++) {
        size_t n = strlen(c->launches[l].op) + 1;
        memcpy(p, c->launches[l].op, n);
        p += n;
    }
    h.checksum = fnv1a(out + sizeof h, total - sizeof h);
    memcpy(out, &h, sizeof h);
    *bytes = out;
    *size = total;
    return TN_STATUS_OK;
}

tn_status tn_capture_save(tn_capture_t c, void **bytes, uint64_t *size) {
    if (bytes) *bytes = NULL;
    if (size) *size = 0;
    if (!c || !bytes || !size || c->pool.recording || c->refused)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "capture plan: no capture, still recording, or not replayable");
    if (!c->spans)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "capture plan: relocate the capture before saving it");
    if (c->arena) return tn_error(TN_STATUS_INVALID_ARGUMENT, "capture plan: this capture was loaded from a plan");
    saving s;
    memset(&s, 0, sizeof s);
    uint64_t *fn_offset = calloc(c->count ? c->count : 1, sizeof *fn_offset);
    int64_t *fn_object = calloc(c->count ? c->count : 1, sizeof *fn_object);
    tn_status st = fn_offset && fn_object ? TN_STATUS_OK
                                          : tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory to save a plan");
    if (st == TN_STATUS_OK) st = collect_blocks(c, &s);
    if (st == TN_STATUS_OK) st = plan_arena(c, &s);
    if (st == TN_STATUS_OK) st = tn_list_objects(&s.all);
    if (st == TN_STATUS_OK) st = tn_list_mappings(&s.maps, &s.nmaps);
    if (st == TN_STATUS_OK) {
        s.named = malloc(sizeof *s.named * (s.all.count ? s.all.count : 1));
        if (!s.named) st = tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory to save a plan");
        for (size_t o = 0; s.named && o < s.all.count; o++) s.named[o] = -1;
    }
    for (size_t l = 0; l < c->count && st == TN_STATUS_OK; l++) {
        uintptr_t fn;
        memcpy(&fn, &c->launches[l].fn, sizeof fn);
        const span *seg = tn_span_find(s.all.segments, s.all.nsegments, fn);
        fn_object[l] = seg ? name_object(&s, seg->index) : -1;
        if (fn_object[l] < 0) {
            st = tn_error(TN_STATUS_UNSUPPORTED, "launch %zu (%s): its task function is not in an object with a build ID",
                          l + 1, c->launches[l].op);
            break;
        }
        fn_offset[l] = fn - s.all.list[seg->index].base;
        st = name_words(c, &s, l);
    }
    if (st == TN_STATUS_OK) st = write_plan(c, &s, fn_offset, fn_object, bytes, size);
    free(fn_offset);
    free(fn_object);
    free_saving(&s);
    return st;
}

/* Reads the plan's sections after checking that they fit in `size` bytes. */
typedef struct reading {
    plan_header h;
    const plan_object *objects;
    const plan_launch *launches;
    const unsigned char *args;
    const plan_relocation *relocations;
    const plan_fixup *fixups;
    const char *names;
} reading;

static tn_status damaged(const char *what) {
    return tn_error(TN_STATUS_UNSUPPORTED, "not an intact capture plan: %s", what);
}

static tn_status read_sections(const unsigned char *bytes, uint64_t size, reading *r) {
    if (size < sizeof r->h) return damaged("too short");
    memcpy(&r->h, bytes, sizeof r->h);
    const plan_header *h = &r->h;
    if (memcmp(h->magic, PLAN_MAGIC, sizeof h->magic) != 0) return damaged("wrong magic or version");
    uint64_t counts[] = {h->objects, h->launches, h->args_bytes, h->relocations, h->fixups, h->names_bytes};
    for (size_t i = 0; i < sizeof counts / sizeof *counts; i++)
        if (counts[i] > size) return damaged("a count larger than the plan");
    if (h->ranges < 0 || h->ranges > INT32_MAX) return damaged("bad range count");
    uint64_t total = sizeof *h + h->objects * sizeof(plan_object) + h->launches * sizeof(plan_launch) +
                     h->args_bytes + h->relocations * sizeof(plan_relocation) + h->fixups * sizeof(plan_fixup) +
                     h->names_bytes;
    if (total != size) return damaged("its size does not match its header (truncated?)");
    if (fnv1a(bytes + sizeof *h, size - sizeof *h) != h->checksum) return damaged("checksum mismatch");
    const unsigned char *p = bytes + sizeof *h;
    r->objects = (const plan_object *)(const void *)p;
    p += h->objects * sizeof(plan_object);
    r->launches = (const plan_launch *)(const void *)p;
    p += h->launches * sizeof(plan_launch);
    r->args = p;
    p += h->args_bytes;
    r->relocations = (const plan_relocation *)(const void *)p;
    p += h->relocations * sizeof(plan_relocation);
    r->fixups = (const plan_fixup *)(const void *)p;
    p += h->fixups * sizeof(plan_fixup);
    r->names = (const char *)p;
    if (h->names_bytes && r->names[h->names_bytes - 1] != '\0') return damaged("unterminated names");
    return TN_STATUS_OK;
}

/* Every index and offset in range (the checksum only says the bytes are the ones saved). */
static tn_status check_sections(const reading *r) {
    const plan_header *h = &r->h;
    uint64_t end = 0; /* of the previous launch's arguments */
    for (uint64_t l = 0; l < h->launches; l++) {
        plan_launch pl;
        memcpy(&pl, &r->launches[l], sizeof pl);
        if (pl.name >= h->names_bytes || pl.object >= h->objects || pl.offset > h->args_bytes ||
            pl.size > h->args_bytes - pl.offset || pl.offset % alignof(max_align_t) || pl.offset < end)
            return damaged("a launch out of range or order");
        end = pl.offset + pl.size;
    }
    /* a replay rewrites relocations in the copy of their launch's arguments: each must lie
     * inside one, in order */
    uint64_t l = 0, last = 0;
    for (uint64_t i = 0; i < h->relocations; i++) {
        plan_relocation x;
        plan_launch pl = {0};
        memcpy(&x, &r->relocations[i], sizeof x);
        for (; l < h->launches; l++) {
            memcpy(&pl, &r->launches[l], sizeof pl);
            if (x.at < pl.offset + pl.size) break;
        }
        if (l == h->launches || x.at < pl.offset || pl.offset + pl.size - x.at < sizeof(uintptr_t) ||
            x.at % sizeof(uintptr_t) || x.range < 0 || x.range >= h->ranges || (i && x.at <= last))
            return damaged("a relocation out of range or order");
        last = x.at;
    }
    for (uint64_t i = 0; i < h->fixups; i++) {
        plan_fixup x;
        memcpy(&x, &r->fixups[i], sizeof x);
        if (x.at % sizeof(uintptr_t) || h->args_bytes < sizeof(uintptr_t) || h->args_bytes - sizeof(uintptr_t) < x.at ||
            x.object < -1 || x.object >= (int64_t)h->objects || (x.object == -1 && x.offset >= h->arena_bytes))
            return damaged("a fixup out of range");
    }
    return TN_STATUS_OK;
}

/* base[i]: where the plan's object i is loaded in this process. Each object named by a path is
 * kept loaded for as long as the capture lives (c->pinned). */
static tn_status find_objects(const reading *r, uintptr_t *base, struct tn_capture *c) {
    objects all;
    tn_status st = tn_list_objects(&all);
    if (st == TN_STATUS_OK && r->h.objects) {
        c->pinned = calloc(r->h.objects, sizeof *c->pinned);
        if (!c->pinned) st = tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory to load a plan");
    }
    for (uint64_t i = 0; i < r->h.objects && st == TN_STATUS_OK; i++) {
        plan_object po;
        memcpy(&po, &r->objects[i], sizeof po);
        po.name[sizeof po.name - 1] = '\0';
        size_t o = 0;
        while (o < all.count && !(all.list[o].id_bytes == po.id_bytes && po.id_bytes <= MAX_BUILD_ID &&
                                  memcmp(all.list[o].build_id, po.build_id, po.id_bytes) == 0))
            o++;
        if (o == all.count) {
            st = tn_error(TN_STATUS_UNSUPPORTED,
                          "the plan calls into %s as it was built then, which this process has not loaded "
                          "(another build, or a kernel not loaded yet)",
                          po.name);
            break;
        }
        base[i] = all.list[o].base;
        const char *name = all.list[o].name;
        if (!strchr(name, '/')) continue; /* the program, the vDSO: never unloaded */
        void *handle = strlen(name) + 1 < sizeof all.list[o].name ? dlopen(name, RTLD_LAZY | RTLD_NOLOAD) : NULL;
        if (!handle)
            st = tn_error(TN_STATUS_UNSUPPORTED, "the plan calls into %s, which cannot be kept loaded", name);
        else
            c->pinned[c->npinned++] = handle;
    }
    tn_free_objects(&all);
    return st;
}

void tn_capture_unpin(struct tn_capture *c) {
    for (size_t i = 0; i < c->npinned; i++) dlclose(c->pinned[i]);
    free(c->pinned);
    c->pinned = NULL;
    c->npinned = 0;
}

tn_status tn_capture_load(tn_stream_t stream, const void *bytes, uint64_t size, tn_capture_t *capture) {
    if (capture) *capture = NULL;
    if (!stream || !bytes || !capture)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "capture plan: stream, bytes or result is NULL");
    if (tn_capture_active())
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "capture plan: cannot load a plan while recording");
    reading r;
    tn_status st = read_sections(bytes, size, &r);
    if (st == TN_STATUS_OK) st = check_sections(&r);
    if (st != TN_STATUS_OK) return st;
    const plan_header *h = &r.h;
    uintptr_t *base = malloc(sizeof *base * (h->objects ? h->objects : 1));
    struct tn_capture *c = calloc(1, sizeof *c);
    if (c) {
        c->launches = malloc(sizeof *c->launches * (h->launches ? h->launches : 1));
        c->args = malloc(h->args_bytes ? h->args_bytes : 1);
        c->names = malloc(h->names_bytes ? h->names_bytes : 1);
        c->relocations = malloc(sizeof *c->relocations * (h->relocations ? h->relocations : 1));
    }
    if (!base || !c || !c->launches || !c->args || !c->names || !c->relocations)
        st = tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory to load a plan");
    if (st == TN_STATUS_OK) st = find_objects(&r, base, c);
    if (st == TN_STATUS_OK && h->arena_bytes)
        st = tn_memory_alloc(tn_stream_device(stream), stream, h->arena_bytes, &c->arena);
    if (st != TN_STATUS_OK) {
        free(base);
        if (c) {
            free(c->launches), free(c->args), free(c->names), free(c->relocations);
            tn_memory_free(c->arena);
            tn_capture_unpin(c);
            free(c);
        }
        return st;
    }
    c->pool.device = tn_stream_device(stream);
    c->pool.stream = stream;
    c->count = c->capacity = h->launches;
    c->args_used = c->args_capacity = h->args_bytes;
    if (h->args_bytes) memcpy(c->args, r.args, h->args_bytes);
    if (h->names_bytes) memcpy(c->names, r.names, h->names_bytes);
    for (uint64_t l = 0; l < h->launches; l++) {
        plan_launch pl;
        memcpy(&pl, &r.launches[l], sizeof pl);
        uintptr_t fn = base[pl.object] + pl.fn;
        c->launches[l].op = c->names + pl.name;
        memcpy(&c->launches[l].fn, &fn, sizeof fn);
        c->launches[l].offset = pl.offset;
        c->launches[l].size = pl.size;
        if (pl.size > c->largest) c->largest = pl.size;
    }
    for (uint64_t i = 0; i < h->fixups; i++) {
        plan_fixup x;
        memcpy(&x, &r.fixups[i], sizeof x);
        uintptr_t w = (x.object < 0 ? (uintptr_t)c->arena : base[x.object]) + x.offset;
        memcpy(c->args + x.at, &w, sizeof w);
    }
    for (uint64_t i = 0; i < h->relocations; i++) {
        plan_relocation x;
        memcpy(&x, &r.relocations[i], sizeof x);
        c->relocations[i] = (relocation){x.at, (int32_t)x.range, x.delta};
    }
    c->relocated = h->relocations;
    c->ranges = (int32_t)h->ranges;
    free(base);
    tn_capture_make_scratch(c);
    if (c->refused) {
        tn_capture_destroy(c);
        return tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory for a replay's arguments");
    }
    *capture = c;
    return TN_STATUS_OK;
}
