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

/* Runs candidate `c` of a decision; it must be safe to run any number of times. */
typedef clcnn_status (*clcnn_tune_run)(clcnn_context *ctx, int c, void *arg);

/* Turns autotuning on from CLCNN_AUTOTUNE (0 or 1; anything else is an error) unless the
 * options already did, and reads the device's tuning file (a missing file, unreadable or
 * malformed lines are ignored: they only cost a new timing). */
clcnn_status clcnn_tune_init(clcnn_context *ctx, int use_cache);
void clcnn_tune_free(clcnn_context *ctx);

/* The candidate (index into names[0..n-1]) for decision `key`: the recorded one, else the
 * fastest of a timing (each run once to warm up, then timed three times, waiting for the
 * queue). Returns -1 when autotuning is off or n < 2; *st receives a failure of a run. */
int clcnn_tune_choose(clcnn_context *ctx, const char *key, const char *const *names, int n,
                      clcnn_tune_run run, void *arg, clcnn_status *st);

#endif
