/* Internal helpers shared by every library file: error text, status codes, small utilities.
 * Nothing here is public; the public API is include/clcnn.h. */
#ifndef CLCNN_COMMON_H
#define CLCNN_COMMON_H

#include <stddef.h>
#include <stdio.h>

#include "clcnn.h"

/* An error slot: the library writes one human-readable line here and returns a status.
 * Handles own one; free functions take a pointer to one. */
typedef struct clcnn_error {
    char msg[1024];
} clcnn_error;

/* Formats msg into e (when e is not NULL) and returns st, so callers can write
 * `return clcnn_fail(e, CLCNN_ERR_FORMAT, "%s: truncated", path);`. */
clcnn_status clcnn_fail(clcnn_error *e, clcnn_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Name of an OpenCL error code ("CL_OUT_OF_RESOURCES"), or "CL_UNKNOWN_ERROR". */
const char *clcnn_cl_error_name(int code);

/* Programmer errors only (never for bad input): abort with file and line. */
#define CLCNN_ASSERT(x)                                                                            \
    do {                                                                                           \
        if (!(x)) clcnn_assert_fail(#x, __FILE__, __LINE__);                                       \
    } while (0)
void clcnn_assert_fail(const char *expr, const char *file, int line);

#endif
