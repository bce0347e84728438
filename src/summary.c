/* Public face of the TensorBoard event writer (tblog.c): a handle with its own error text and
 * wall-clock timestamps. */
#include <stdlib.h>
#include <time.h>

#include "common.h"
#include "tblog.h"

struct clcnn_summary_writer {
    clcnn_error err;
    clcnn_tblog *tb;
};

clcnn_status clcnn_summary_writer_open(clcnn_summary_writer **out, const char *logdir) {
    clcnn_summary_writer *w;
    if (!out) return CLCNN_ERR_INVALID_ARGUMENT;
    *out = w = calloc(1, sizeof *w);
    if (!w) return CLCNN_ERR_OUT_OF_HOST_MEMORY;
    if (!logdir) return clcnn_fail(&w->err, CLCNN_ERR_INVALID_ARGUMENT, "NULL log folder");
    return clcnn_tblog_open(&w->tb, logdir, &w->err);
}

clcnn_status clcnn_summary_writer_add_scalar(clcnn_summary_writer *w, const char *tag, float value,
                                             int64_t step) {
    struct timespec ts;
    if (!w) return CLCNN_ERR_INVALID_ARGUMENT;
    if (!w->tb) return clcnn_fail(&w->err, CLCNN_ERR_STATE, "the event file is not open");
    clock_gettime(CLOCK_REALTIME, &ts);
    return clcnn_tblog_scalar(w->tb, tag, value, step, (double)ts.tv_sec + ts.tv_nsec * 1e-9,
                              &w->err);
}

const char *clcnn_summary_writer_path(const clcnn_summary_writer *w) {
    return w && w->tb ? clcnn_tblog_path(w->tb) : "";
}

const char *clcnn_summary_writer_errmsg(const clcnn_summary_writer *w) {
    return w ? w->err.msg : "NULL writer";
}

clcnn_status clcnn_summary_writer_errcode(const clcnn_summary_writer *w) {
    return w ? w->err.code : CLCNN_ERR_INVALID_ARGUMENT;
}

clcnn_status clcnn_summary_writer_close(clcnn_summary_writer *w) {
    clcnn_status st = CLCNN_SUCCESS;
    if (!w) return CLCNN_SUCCESS;
    if (w->tb) st = clcnn_tblog_close(w->tb, &w->err);
    free(w);
    return st;
}
