/* Timing-based choice among interchangeable kernels, opt in like PyTorch's
 * torch.backends.cudnn.benchmark (CLCNN_AUTOTUNE=1, or clcnn_context_options.autotune = 1).
 * The first time a decision is met for a shape, every candidate runs a few times and the
 * fastest is kept: in the context, and in a file beside the program binaries
 * (autotune-<device key>.txt, one "<decision> <candidate>" line each) that later processes on
 * the same device and driver read instead of timing again. Off by default: fixed rules by
 * device type decide, so a run repeats bit for bit whatever the machine's load. */
#ifndef CLCNN_TUNE_H
#define CLCNN_TUNE_H

#include "context.h"

/* A context's tuner: whether tuning is on, the decisions known, and the file that keeps them.
 * A context with autotuning on owns one (ctx->tuner); with it off there is none. */
typedef struct clcnn_tuner clcnn_tuner;

/* Runs candidate `c` of a decision; it must be safe to run any number of times. */
typedef clcnn_status (*clcnn_tune_run)(clcnn_context *ctx, int c, void *arg);

/* A tuner for device `info` that keeps its file in cache_dir ("" = memory only) and reads the
 * decisions already there (a missing file, unreadable or malformed lines are ignored: they only
 * cost a new timing). */
clcnn_status clcnn_tuner_create(clcnn_tuner **out, const clcnn_device_info *info,
                                const char *cache_dir, clcnn_error *e);
/* NULL is a no-op. */
void clcnn_tuner_free(clcnn_tuner *t);

/* 1 when the context times its choices (clcnn_context_options.autotune or CLCNN_AUTOTUNE=1). */
int clcnn_tune_enabled(const clcnn_context *ctx);

/* The candidate recorded for decision `key`, NULL when none (or tuning is off). */
const char *clcnn_tune_lookup(const clcnn_context *ctx, const char *key);

/* The candidate (index into names[0..n-1]) for decision `key`: the recorded one, else the
 * fastest of a timing (each run once to warm up, then timed three times, waiting for the
 * queue). Returns -1 when autotuning is off or n < 2; *st receives a failure of a run. */
int clcnn_tune_choose(clcnn_context *ctx, const char *key, const char *const *names, int n,
                      clcnn_tune_run run, void *arg, clcnn_status *st);

#endif
