/* Internal helpers shared by every library file: error text, status codes, small utilities.
 * Nothing here is public; the public API is include/clcnn.h. */
#ifndef CLCNN_COMMON_H
#define CLCNN_COMMON_H

#include <stddef.h>
#include <stdio.h>

#include "clcnn.h"

/* An error slot: the library writes one human-readable line and the status here and returns
 * the status. Handles own one (their `*_errmsg()` and `*_errcode()` read it); free functions
 * take a pointer to one. A zeroed slot means no failure (code CLCNN_SUCCESS, msg ""). */
typedef struct clcnn_error {
    char msg[1024];    /* first, so that `clcnn_error e = {{0}}` and `= {""}` initialise it */
    clcnn_status code; /* CLCNN_SUCCESS until a failure is recorded */
} clcnn_error;

/* Formats msg into e and records st as e->code (when e is not NULL), and returns st, so
 * callers can write `return clcnn_fail(e, CLCNN_ERR_FORMAT, "%s: truncated", path);`. */
clcnn_status clcnn_fail(clcnn_error *e, clcnn_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Takes in a struct of the public API that begins with `size_t struct_size` (the sizeof the caller
 * compiled with): a size this library does not know fails with one line naming the type and
 * its init function ("clcnn_train_options" and clcnn_train_options_init); otherwise the
 * caller's struct_size bytes are copied to dst, which holds the defaults of the library's own
 * layout. Today the only known size is `current`; a release that appends a field accepts the
 * older sizes too, and the bytes they lack keep dst's defaults. */
clcnn_status clcnn_sized_in(clcnn_error *e, const char *type, void *dst, const void *src,
                            size_t current);

/* A string from a file (a tensor name, a metadata value) made safe for a one-line message: at
 * most `max` bytes of it, control characters (C0, DEL, and C1 as UTF-8) shown as '?', and
 * "..." when it was cut. buf holds max + 4 bytes. Returns buf. */
const char *clcnn_shown(const char *s, size_t max, char *buf);
#define CLCNN_SHOWN_MAX 64 /* the usual max for names */

/* Seconds on CLOCK_MONOTONIC (unaffected by changes of the wall clock), for durations. */
/* snprintf at buf + *used (what is left of size), adding to *used the length the full text needs,
 * so a caller formats piece by piece and returns *used as snprintf would; buf may be NULL when
 * size is 0. */
void clcnn_appendf(char *buf, size_t size, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

double clcnn_now_seconds(void);

/* Name of an OpenCL error code ("CL_OUT_OF_RESOURCES"), or "CL_UNKNOWN_ERROR". */
const char *clcnn_cl_error_name(int code);

/* The most elements one device buffer may hold. Kernels index with 32-bit ints and 1-D launches
 * round the item count up to a work-group multiple, so the limit stays 2^16 below 2^31: no
 * index, including those of the rounded-up items that return early, can wrap negative. Every
 * per-batch buffer and workspace is checked against it before it is allocated. */
#define CLCNN_MAX_ELEMENTS (((long long)1 << 31) - ((long long)1 << 16))

/* Programmer errors only (never for bad input): abort with file and line. */
#define CLCNN_ASSERT(x)                                                                            \
    do {                                                                                           \
        if (!(x)) clcnn_assert_fail(#x, __FILE__, __LINE__);                                       \
    } while (0)
void clcnn_assert_fail(const char *expr, const char *file, int line);

#endif
