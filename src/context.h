/* The context's internals, shared by the library files that launch kernels. */
#ifndef CLCNN_CONTEXT_H
#define CLCNN_CONTEXT_H

#include <CL/cl.h>

#include "common.h"
#include "env.h"
#include "kernels.h"
#include "prof.h"

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
    cl_program *progs;
    int n_progs;
    clcnn_kern *kerns; /* every kernel the programs define */
    int n_kerns;
    char *names;                     /* storage for kernel names */
    clcnn_kern *kern[CLCNN_K_COUNT]; /* the typed table (kernels.h), into kerns */
    size_t local1d;                  /* work-group size for 1-D element-wise kernels */
    int cache_hit;
    char cache_note[4600]; /* clcnn_context_cache_note */
    double build_seconds;
    /* This context's programs' tag on PoCL before 6.0 (context.c); -1: untagged. */
    int tag;
    /* The convolution algorithm asked for (clcnn_context_options.conv_algo, CLCNN_CONV_ALGO):
     * 0 = the rules per device decide, 1 = direct, 2 = im2col. The model's planner reads it. */
    int conv_algo;
    /* The implicit-GEMM convolutions' size, 1 + its index in src/layers/conv2d/implicit.c's table
     * (CLCNN_IMPLICIT_SIZE; tests set each in turn); 0: the device class's choice. */
    int implicit_size;
    /* The row-GEMM weight gradient's slices, in floats of pixel rows each; 0, as every context
     * starts: WGRAD_SLICE_FLOATS (src/layers/conv2d/im2col.c). Tests set 1 (a slice per image). */
    size_t wgrad_slice;
    /* A fused convolution + pool's weight gradient: 0, as every context starts, the rule
     * (src/layers/conv2d/pool.c); 1 one kernel per slice (conv_wgrad_pool_rows); 2 two passes. */
    int pool_wgrad;
    /* The hand-offs into views (plan.c): a producer writing a direct convolution's padded input
     * or padded output gradient, or a channel slice of a concatenation's output: 0, as every
     * context starts, where the layers allow them; 1 never. Models read it when built. */
    int no_pad_handoff;
    struct clcnn_gemm_set *gemm; /* the GEMM backends (gemm.h) */
    struct clcnn_tuner *tuner;   /* autotuning (tune.h); NULL when it is off */
    struct clcnn_prof *prof;     /* profiling (prof.h); NULL when it is off */
};

/* The device part of clcnn_context_create and clcnn_context_create_from_cl (runtime.c, which
 * then attaches the GEMM backends, the tuner and the layers' settings): the OpenCL context and
 * queue (made, or adopted and retained), the profiler when asked, every program and the typed
 * kernel table; *s receives the settings resolved from opts and the environment, for the parts
 * attached after. On failure *out is as the public functions describe it. */
clcnn_status clcnn_context_open(clcnn_context **out, const clcnn_devices *devs, int index,
                                const clcnn_context_options *opts, clcnn_settings *s);
clcnn_status clcnn_context_open_cl(clcnn_context **out, void *cl_context, void *cl_queue,
                                   const clcnn_context_options *opts, clcnn_settings *s);
/* Waits for the queue and releases what clcnn_context_open made, and the context itself; the
 * attached parts must be freed first. NULL is a no-op. */
void clcnn_context_close(clcnn_context *ctx);

/* The names of every kernel the library launches (*n of them, CLCNN_K_COUNT), in
 * clcnn_kernel_id order; a context fails to be created when its programs lack one. */
const char *const *clcnn_required_kernels(int *n);

/* The context's kernel `id`: a table read, for any path. Every id is resolved when the context
 * is created. */
clcnn_kern *clcnn_kernel(clcnn_context *ctx, clcnn_kernel_id id);

/* Looks a kernel up by name; NULL when absent. A linear search over every kernel, for
 * building the table at creation and for probes that pick a kernel by name. */
clcnn_kern *clcnn_ctx_kernel(clcnn_context *ctx, const char *name);

/* Argument setter that remembers the first failure, so a launch site reads as a list. */
typedef struct clcnn_args {
    cl_kernel k;
    cl_uint i;
    cl_int rc;
} clcnn_args;
void clcnn_arg(clcnn_args *a, size_t size, const void *value);
#define CLCNN_ARG(a, v) clcnn_arg((a), sizeof(v), &(v))

/* Enqueues k over `dims` dimensions of `global` work-items in groups of `local` (NULL: the
 * driver's choice), with an event when profiling. Reports a failure of the argument setter a
 * first; a range with a zero dimension enqueues nothing. Records failures in ctx->err. The
 * helpers below compute the sizes for common shapes of launch and call it. */
clcnn_status clcnn_launch(clcnn_context *ctx, const clcnn_kern *k, const clcnn_args *a,
                          cl_uint dims, const size_t *global, const size_t *local);
/* Enqueues k over n work-items in 1-D (rounded up to the work-group size: kernels guard
 * against i >= n). */
clcnn_status clcnn_launch1d(clcnn_context *ctx, const clcnn_kern *k, const clcnn_args *a, size_t n);
/* Launches n work-items that each run a long loop: one per work-group on CPU devices, so the
 * items spread over the cores (a 64-item group would keep a short range on one core); the
 * driver's choice on GPUs. */
clcnn_status clcnn_launch_items(clcnn_context *ctx, const clcnn_kern *k, const clcnn_args *a,
                                size_t n);
/* Enqueues a kernel declared reqd_work_group_size(1, 1, 1) over `global` (dims values): one
 * work-item per work-group. */
clcnn_status clcnn_launch_single(clcnn_context *ctx, const clcnn_kern *k, const clcnn_args *a,
                                 cl_uint dims, const size_t *global);
/* Enqueues k over a 2-D or 3-D range exactly as given, letting the driver choose the local
 * size; used for kernels whose work-items are heavy enough that the group shape is moot. */
clcnn_status clcnn_launch_nd(clcnn_context *ctx, const clcnn_kern *k, const clcnn_args *a,
                             cl_uint dims, const size_t *global);

/* Starts a profiling section (the label is copied; NULL ends it) that performs `flops`
 * floating-point operations. A no-op when profiling is off. */
void clcnn_prof_section(clcnn_context *ctx, const char *label, double flops);

/* Where a launch stores its event: a fresh slot when profiling, else NULL. */
cl_event *clcnn_prof_slot(clcnn_context *ctx, const char *name);

/* Wraps an OpenCL failure into ctx->err with the call's name. */
clcnn_status clcnn_cl_fail(clcnn_context *ctx, cl_int rc, const char *what);

#endif
