/* The profiler: one OpenCL event per launch, each labelled with the section open at the time (a
 * layer's forward or backward, clcnn_prof_section) or else the kernel's name, plus the
 * floating-point work of each section; a report sums device time per label. A context with
 * profiling on owns one (ctx->prof); without profiling there is none and launches carry no
 * event. */
#ifndef CLCNN_PROF_H
#define CLCNN_PROF_H

#include <CL/cl.h>

#include "common.h"

typedef struct clcnn_prof clcnn_prof;

/* A new profiler; by_kernel splits each section's row per kernel. NULL when out of memory. */
clcnn_prof *clcnn_prof_create(int by_kernel);
/* Releases the recorded events and the profiler. NULL is a no-op. */
void clcnn_prof_free(clcnn_prof *p);

/* Opens section `label` (copied; NULL closes it) that performs `flops` operations. */
void clcnn_prof_begin(clcnn_prof *p, const char *label, double flops);
/* A fresh event slot for a launch of kernel `name` (which must outlive the report, as kernel
 * names do); NULL when it cannot grow (profiling is best effort). */
cl_event *clcnn_prof_event(clcnn_prof *p, const char *name);
/* Writes one line per label (launches, device ms, share, GFLOP/s) for the events recorded since
 * the previous report, then releases them. Every event must be complete (the caller waits for
 * the queue). snprintf-style return value. */
size_t clcnn_prof_report(clcnn_prof *p, char *buf, size_t size);

#endif
