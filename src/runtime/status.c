/* Status strings and the thread-local detail of the last failure. */
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

static _Thread_local char last_error[512];

const char *tn_status_string(tn_status status) {
    switch (status) {
#define TN_STATUS_CASE_(name, msg) \
    case TN_STATUS_##name:         \
        return msg;
        TN_STATUS_LIST(TN_STATUS_CASE_)
#undef TN_STATUS_CASE_
    default:
        return "unknown status";
    }
}

const char *tn_last_error(void) { return last_error; }

void tn_clear_error(void) { last_error[0] = '\0'; }

tn_status tn_error(tn_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}
