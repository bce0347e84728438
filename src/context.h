/* The context's internals, shared by the library files that launch kernels. */
#ifndef CLCNN_CONTEXT_H
#define CLCNN_CONTEXT_H

#include <CL/cl.h>

#include "common.h"

typedef struct clcnn_kern {
    const char *name; /* points into the context's name storage */
    cl_kernel k;
    size_t max_wg; /* CL_KERNEL_WORK_GROUP_SIZE for the context's device */
} clcnn_kern;

struct clcnn_context {
    clcnn_error err;
    clcnn_device_info info;
    cl_platform_id platform;
    cl_device_id device;
    cl_context context;
    cl_command_queue queue;
    int profiling;
    cl_program *progs;
    int n_progs;
    clcnn_kern *kerns;
    int n_kerns;
    char *names;    /* storage for kernel names */
    size_t local1d; /* work-group size for 1-D element-wise kernels */
    int cache_hit;
    double build_seconds;
    int gemm_backend;          /* clcnn_gemm_backend, see gemm.h */
    clcnn_kern *gemm_kerns[4]; /* portable GEMM variants NN, NT, TN, TT */
    clcnn_kern *gemm_tiled[4]; /* GPU-shaped variants; NULL when the device cannot run them */
    clcnn_kern *gemm_cpu[2];   /* CPU-shaped NN, TN */
    clcnn_kern *transpose;
    /* Profiling (enable_profiling): one event per launch, labelled by the current section
     * (clcnn_prof_section: a layer's forward or backward) or else the kernel's name. */
    cl_event *prof_events;
    const char **prof_names;
    int prof_n, prof_cap;
    const char *prof_label;
    /* Section labels are copied here, so a report stays valid after the model that named the
     * sections is freed; interned for the context's lifetime. */
    char prof_strings[128][64];
    int prof_nstrings;
    int prof_by_kernel;              /* CLCNN_PROFILE=kernels: one row per (section, kernel) */
    const char *prof_flop_names[64]; /* floating-point work recorded per section */
    double prof_flops[64];
    int prof_nflop;
    int gemm_forced; /* CLCNN_BACKEND chose the GEMM backend: no autotuning of it */
    /* Autotuning (tune.h): on or off, the decisions known, and the file that keeps them. */
    int autotune;
    struct clcnn_tune_entry {
        char key[80];
        char choice[24];
    } * tune;
    int n_tune, tune_cap;
    char tune_path[4200];
    cl_mem gemm_scratch; /* transposed B for the CPU kernels */
    size_t gemm_scratch_cap;
    cl_mem gemm_partial; /* split-K partial products */
    size_t gemm_partial_cap;
    clcnn_kern *gemm_reduce;
};

/* The names of every kernel the library launches (*n of them); a context fails to be created
 * when its programs lack one. */
const char *const *clcnn_required_kernels(int *n);

/* Looks a kernel up by name; NULL when absent (a programmer error: kernels ship with the
 * library). Not for hot paths: layers look their kernels up once when they are set up. */
clcnn_kern *clcnn_ctx_kernel(clcnn_context *ctx, const char *name);

/* The same, for kernels that ship with the library: absence is a programmer error (assert). */
clcnn_kern *clcnn_kernel_must(clcnn_context *ctx, const char *name);

/* Argument setter that remembers the first failure, so a launch site reads as a list. */
typedef struct clcnn_args {
    cl_kernel k;
    cl_uint i;
    cl_int rc;
} clcnn_args;
void clcnn_arg(clcnn_args *a, size_t size, const void *value);
#define CLCNN_ARG(a, v) clcnn_arg((a), sizeof(v), &(v))

/* Enqueues k over n work-items in 1-D (rounded up to the work-group size: kernels guard
 * against i >= n). Records failures in ctx->err. */
clcnn_status clcnn_launch1d(clcnn_context *ctx, const clcnn_kern *k, const clcnn_args *a, size_t n);
/* Launches n work-items that each run a long loop: one per work-group on CPU devices, so the
 * items spread over the cores (a 64-item group would keep a short range on one core); the
 * driver's choice on GPUs. */
clcnn_status clcnn_launch_items(clcnn_context *ctx, const clcnn_kern *k, const clcnn_args *a,
                                size_t n);
/* Enqueues a kernel declared reqd_work_group_size(1, 1, 1) over `global` (dims values): one
 * work-item per work-group. Records failures in ctx->err. */
clcnn_status clcnn_launch_single(clcnn_context *ctx, const clcnn_kern *k, const clcnn_args *a,
                                 cl_uint dims, const size_t *global);
/* Enqueues k over a 2-D or 3-D range exactly as given, letting the driver choose the local
 * size; used for kernels whose work-items are heavy enough that the group shape is moot. */
clcnn_status clcnn_launch_nd(clcnn_context *ctx, const clcnn_kern *k, const clcnn_args *a,
                             cl_uint dims, const size_t *global);

/* Starts a profiling section (label must outlive the report; NULL ends it) that performs
 * `flops` floating-point operations. A no-op when profiling is off. */
void clcnn_prof_section(clcnn_context *ctx, const char *label, double flops);

/* Where a launch stores its event: a fresh slot when profiling, else NULL. */
cl_event *clcnn_prof_slot(clcnn_context *ctx, const char *name);

/* Wraps an OpenCL failure into ctx->err with the call's name. */
clcnn_status clcnn_cl_fail(clcnn_context *ctx, cl_int rc, const char *what);

#endif
