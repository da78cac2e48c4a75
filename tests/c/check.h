/* A minimal test harness: CHECK records a failure and continues; each test is a function
 * listed in main.c. */
#ifndef TN_TEST_CHECK_H
#define TN_TEST_CHECK_H

#include <stdio.h>

extern int tn_test_failures;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            tn_test_failures++;                                                      \
        }                                                                            \
    } while (0)

#define CHECK_OK(expr)                                                                  \
    do {                                                                                \
        tn_status st_ = (expr);                                                         \
        if (st_ != TN_STATUS_OK) {                                                      \
            fprintf(stderr, "%s:%d: %s returned %s: %s\n", __FILE__, __LINE__, #expr,    \
                    tn_status_string(st_), tn_last_error());                            \
            tn_test_failures++;                                                         \
        }                                                                               \
    } while (0)

#endif
