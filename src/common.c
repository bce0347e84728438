/* Error text, status names and the assert hook shared by the whole library. */
#include "common.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *clcnn_version(void) {
    return CLCNN_VERSION_STRING;
}

clcnn_status clcnn_sized_in(clcnn_error *e, const char *type, void *dst, const void *src,
                            size_t current) {
    size_t size;
    memcpy(&size, src, sizeof size);
    if (size != current)
        return clcnn_fail(e, CLCNN_ERR_INVALID_ARGUMENT,
                          "%s.struct_size is %zu but clcnn %s knows only %zu: fill the struct with "
                          "%s_init",
                          type, size, CLCNN_VERSION_STRING, current, type);
    memcpy(dst, src, size);
    return CLCNN_SUCCESS;
}

clcnn_status clcnn_fail(clcnn_error *e, clcnn_status st, const char *fmt, ...) {
    if (e) {
        va_list ap;
        e->code = st;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
    }
    return st;
}

const char *clcnn_shown(const char *s, size_t max, char *buf) {
    size_t i = 0;
    for (; s[i] && i < max; i++) {
        unsigned char c = (unsigned char)s[i];
        /* U+0080..U+009F, the C1 controls (CSI among them), are 0xC2 0x80..0x9F in UTF-8 */
        int c1 = c == 0xC2 && (unsigned char)s[i + 1] >= 0x80 && (unsigned char)s[i + 1] <= 0x9F;
        buf[i] = (char)(c < 0x20 || c == 0x7F || c1 ? '?' : c);
        if (c1 && i + 1 < max) buf[++i] = '?';
    }
    if (s[i]) {
        memcpy(buf + i, "...", 3);
        i += 3;
    }
    buf[i] = '\0';
    return buf;
}

double clcnn_now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void clcnn_assert_fail(const char *expr, const char *file, int line) {
    /* Programmer error: the one place the library may write to stderr, right before abort. */
    fprintf(stderr, "clcnn: assertion failed: %s (%s:%d)\n", expr, file, line);
    abort();
}

const char *clcnn_cl_error_name(int code) {
    switch (code) {
#define N(c, s)                                                                                    \
    case c: return s
        N(0, "CL_SUCCESS");
        N(-1, "CL_DEVICE_NOT_FOUND");
        N(-2, "CL_DEVICE_NOT_AVAILABLE");
        N(-3, "CL_COMPILER_NOT_AVAILABLE");
        N(-4, "CL_MEM_OBJECT_ALLOCATION_FAILURE");
        N(-5, "CL_OUT_OF_RESOURCES");
        N(-6, "CL_OUT_OF_HOST_MEMORY");
        N(-7, "CL_PROFILING_INFO_NOT_AVAILABLE");
        N(-8, "CL_MEM_COPY_OVERLAP");
        N(-9, "CL_IMAGE_FORMAT_MISMATCH");
        N(-10, "CL_IMAGE_FORMAT_NOT_SUPPORTED");
        N(-11, "CL_BUILD_PROGRAM_FAILURE");
        N(-12, "CL_MAP_FAILURE");
        N(-13, "CL_MISALIGNED_SUB_BUFFER_OFFSET");
        N(-14, "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST");
        N(-15, "CL_COMPILE_PROGRAM_FAILURE");
        N(-16, "CL_LINKER_NOT_AVAILABLE");
        N(-17, "CL_LINK_PROGRAM_FAILURE");
        N(-18, "CL_DEVICE_PARTITION_FAILED");
        N(-19, "CL_KERNEL_ARG_INFO_NOT_AVAILABLE");
        N(-30, "CL_INVALID_VALUE");
        N(-31, "CL_INVALID_DEVICE_TYPE");
        N(-32, "CL_INVALID_PLATFORM");
        N(-33, "CL_INVALID_DEVICE");
        N(-34, "CL_INVALID_CONTEXT");
        N(-35, "CL_INVALID_QUEUE_PROPERTIES");
        N(-36, "CL_INVALID_COMMAND_QUEUE");
        N(-37, "CL_INVALID_HOST_PTR");
        N(-38, "CL_INVALID_MEM_OBJECT");
        N(-39, "CL_INVALID_IMAGE_FORMAT_DESCRIPTOR");
        N(-40, "CL_INVALID_IMAGE_SIZE");
        N(-41, "CL_INVALID_SAMPLER");
        N(-42, "CL_INVALID_BINARY");
        N(-43, "CL_INVALID_BUILD_OPTIONS");
        N(-44, "CL_INVALID_PROGRAM");
        N(-45, "CL_INVALID_PROGRAM_EXECUTABLE");
        N(-46, "CL_INVALID_KERNEL_NAME");
        N(-47, "CL_INVALID_KERNEL_DEFINITION");
        N(-48, "CL_INVALID_KERNEL");
        N(-49, "CL_INVALID_ARG_INDEX");
        N(-50, "CL_INVALID_ARG_VALUE");
        N(-51, "CL_INVALID_ARG_SIZE");
        N(-52, "CL_INVALID_KERNEL_ARGS");
        N(-53, "CL_INVALID_WORK_DIMENSION");
        N(-54, "CL_INVALID_WORK_GROUP_SIZE");
        N(-55, "CL_INVALID_WORK_ITEM_SIZE");
        N(-56, "CL_INVALID_GLOBAL_OFFSET");
        N(-57, "CL_INVALID_EVENT_WAIT_LIST");
        N(-58, "CL_INVALID_EVENT");
        N(-59, "CL_INVALID_OPERATION");
        N(-60, "CL_INVALID_GL_OBJECT");
        N(-61, "CL_INVALID_BUFFER_SIZE");
        N(-62, "CL_INVALID_MIP_LEVEL");
        N(-63, "CL_INVALID_GLOBAL_WORK_SIZE");
        N(-64, "CL_INVALID_PROPERTY");
        N(-65, "CL_INVALID_IMAGE_DESCRIPTOR");
        N(-66, "CL_INVALID_COMPILER_OPTIONS");
        N(-67, "CL_INVALID_LINKER_OPTIONS");
        N(-68, "CL_INVALID_DEVICE_PARTITION_COUNT");
        N(-69, "CL_INVALID_PIPE_SIZE");
        N(-70, "CL_INVALID_DEVICE_QUEUE");
        N(-1001, "CL_PLATFORM_NOT_FOUND_KHR");
#undef N
    default: return "CL_UNKNOWN_ERROR";
    }
}

const char *clcnn_status_str(clcnn_status status) {
    switch (status) {
    case CLCNN_SUCCESS: return "CLCNN_SUCCESS";
    case CLCNN_ERR_INVALID_ARGUMENT: return "CLCNN_ERR_INVALID_ARGUMENT";
    case CLCNN_ERR_OUT_OF_HOST_MEMORY: return "CLCNN_ERR_OUT_OF_HOST_MEMORY";
    case CLCNN_ERR_NO_DEVICE: return "CLCNN_ERR_NO_DEVICE";
    case CLCNN_ERR_DEVICE_FILTER: return "CLCNN_ERR_DEVICE_FILTER";
    case CLCNN_ERR_DEVICE_INDEX: return "CLCNN_ERR_DEVICE_INDEX";
    case CLCNN_ERR_BUILD: return "CLCNN_ERR_BUILD";
    case CLCNN_ERR_IO: return "CLCNN_ERR_IO";
    case CLCNN_ERR_FORMAT: return "CLCNN_ERR_FORMAT";
    case CLCNN_ERR_SPEC: return "CLCNN_ERR_SPEC";
    case CLCNN_ERR_SHAPE: return "CLCNN_ERR_SHAPE";
    case CLCNN_ERR_BLAS: return "CLCNN_ERR_BLAS";
    case CLCNN_ERR_NUMERIC: return "CLCNN_ERR_NUMERIC";
    case CLCNN_ERR_UNSUPPORTED: return "CLCNN_ERR_UNSUPPORTED";
    case CLCNN_ERR_STATE: return "CLCNN_ERR_STATE";
    case CLCNN_ERR_COMM: return "CLCNN_ERR_COMM";
    case CLCNN_ERR_PEER: return "CLCNN_ERR_PEER";
    }
    if ((int)status < 0 && (int)status > -2000) return clcnn_cl_error_name((int)status);
    return "CLCNN_UNKNOWN_STATUS";
}

void clcnn_appendf(char *buf, size_t size, size_t *used, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(*used < size ? buf + *used : NULL, *used < size ? size - *used : 0, fmt, ap);
    va_end(ap);
    if (n > 0) *used += (size_t)n;
}
