/* Parsing of the runtime's environment variables. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* "0", "0-3", "1,3", "0-1,4": fills cores in order; returns the count, or -1 if the text is
 * malformed, a range is reversed, a core repeats or there are more than `max`. */
int32_t tn_parse_core_list(const char *text, int32_t *cores, int32_t max) {
    int32_t n = 0;
    const char *p = text;
    while (*p) {
        while (*p == ' ') p++;
        if (!isdigit((unsigned char)*p)) return -1;
        char *end;
        long lo = strtol(p, &end, 10), hi = lo;
        p = end;
        if (*p == '-') {
            p++;
            if (!isdigit((unsigned char)*p)) return -1;
            hi = strtol(p, &end, 10);
            p = end;
        }
        while (*p == ' ') p++;
        if (*p == ',') {
            p++;
            if (!*p) return -1;
        } else if (*p) {
            return -1;
        }
        if (hi < lo || hi > 4095) return -1;
        for (long c = lo; c <= hi; c++) {
            if (n >= max) return -1;
            for (int32_t k = 0; k < n; k++)
                if (cores[k] == c) return -1;
            cores[n++] = (int32_t)c;
        }
    }
    return n > 0 ? n : -1;
}

/* "16GiB", "512MiB", "64KiB", "1GB", "1073741824": returns 0 on success. */
int tn_parse_bytes(const char *text, uint64_t *bytes) {
    errno = 0;
    char *end;
    double v = strtod(text, &end);
    if (end == text || errno || v <= 0) return -1;
    while (*end == ' ') end++;
    static const struct {
        const char *suffix;
        double scale;
    } units[] = {{"", 1},           {"B", 1},           {"KiB", 1024.0},
                 {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
                 {"KB", 1e3},       {"MB", 1e6},         {"GB", 1e9},
                 {"K", 1024.0},     {"M", 1048576.0},    {"G", 1073741824.0}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(end, units[i].suffix) == 0) {
            double b = v * units[i].scale;
            if (b < 1 || b > 1.8e19) return -1;
            *bytes = (uint64_t)b;
            return 0;
        }
    }
    return -1;
}
