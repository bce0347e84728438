/* Tiny test harness: CHECK records a failure and goes on, so one run reports every broken
 * case; tests exit non-zero when any check failed and 77 when no OpenCL device is present. */
#ifndef CLCNN_TESTUTIL_H
#define CLCNN_TESTUTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clcnn.h"

static int test_failures;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);               \
            test_failures++;                                                                       \
        }                                                                                          \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            test_failures++;                                                                       \
        }                                                                                          \
    } while (0)

static inline int test_finish(const char *name) {
    if (test_failures)
        fprintf(stderr, "%s: %d check(s) failed\n", name, test_failures);
    else
        printf("%s: all checks passed\n", name);
    return test_failures ? 1 : 0;
}

/* Creates a context on the first visible device (the default selection), or exits 77 when
 * there is none. The caller frees both. */
static inline clcnn_context *test_context(clcnn_devices **devs_out) {
    clcnn_devices *devs = NULL;
    clcnn_context *ctx = NULL;
    int idx = -1;
    if (clcnn_devices_create(&devs, NULL) != CLCNN_SUCCESS || clcnn_devices_count(devs) == 0) {
        fprintf(stderr, "no OpenCL device: skipping (%s)\n", clcnn_devices_errmsg(devs));
        clcnn_devices_free(devs);
        exit(77);
    }
    if (clcnn_devices_select(devs, -1, -1, &idx) != CLCNN_SUCCESS ||
        clcnn_context_create(&ctx, devs, idx, NULL) != CLCNN_SUCCESS) {
        fprintf(stderr, "context creation failed: %s\n", clcnn_context_errmsg(ctx));
        exit(1);
    }
    *devs_out = devs;
    return ctx;
}

#endif
