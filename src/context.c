/* A context: one device, an in-order queue and every kernel built for it. */
#include "context.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device.h"
#include "gemm.h"
#include "program.h"
#include "tune.h"

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

const char *clcnn_version(void) {
    return CLCNN_VERSION_STRING;
}

clcnn_status clcnn_cl_fail(clcnn_context *ctx, cl_int rc, const char *what) {
    return clcnn_fail(&ctx->err, (clcnn_status)rc, "%s failed: %s", what, clcnn_cl_error_name(rc));
}

/* Creates every kernel of every program and records its name and work-group limit. */
static clcnn_status make_kernels(clcnn_context *ctx) {
    int cap = 0;
    for (int p = 0; p < ctx->n_progs; p++) {
        cl_uint n = 0;
        cl_int rc = clCreateKernelsInProgram(ctx->progs[p], 0, NULL, &n);
        if (rc != CL_SUCCESS) return clcnn_cl_fail(ctx, rc, "clCreateKernelsInProgram");
        cap += (int)n;
    }
    ctx->kerns = calloc((size_t)cap + 1, sizeof *ctx->kerns);
    cl_kernel *tmp = calloc((size_t)cap + 1, sizeof *tmp);
    size_t names_cap = (size_t)cap * 128 + 1, names_used = 0;
    ctx->names = malloc(names_cap);
    if (!ctx->kerns || !tmp || !ctx->names) {
        free(tmp);
        return clcnn_fail(&ctx->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    for (int p = 0; p < ctx->n_progs; p++) {
        cl_uint n = 0;
        cl_int rc = clCreateKernelsInProgram(ctx->progs[p], (cl_uint)(cap - ctx->n_kerns), tmp, &n);
        if (rc != CL_SUCCESS) {
            free(tmp);
            return clcnn_cl_fail(ctx, rc, "clCreateKernelsInProgram");
        }
        for (cl_uint i = 0; i < n; i++) {
            clcnn_kern *k = &ctx->kerns[ctx->n_kerns++];
            size_t len = 0;
            k->k = tmp[i];
            clGetKernelInfo(k->k, CL_KERNEL_FUNCTION_NAME, names_cap - names_used,
                            ctx->names + names_used, &len);
            k->name = ctx->names + names_used;
            names_used += len ? len : 1;
            ctx->names[names_used - 1] = '\0';
            if (clGetKernelWorkGroupInfo(k->k, ctx->device, CL_KERNEL_WORK_GROUP_SIZE,
                                         sizeof k->max_wg, &k->max_wg, NULL) != CL_SUCCESS ||
                k->max_wg == 0)
                k->max_wg = 1;
        }
    }
    free(tmp);
    return CLCNN_SUCCESS;
}

/* Every kernel the library launches. A context checks them all when it is created, so sources
 * read from CLCNN_KERNEL_DIR that lack one fail there with the kernel's name rather than in an
 * assertion mid-step. test_program checks that this list and the embedded sources agree. */
/* clang-format off */
static const char *const required_kernels[] = {
    /* conv.cl */ "im2col", "rows_to_nchw_bias", "nchw_to_rows", "col2im", "bias_grad",
    "bias_add", "flip_weights", "pad_input", "conv_direct_s1", "conv_direct_s1_w8",
    "conv_wgrad_s1", "gy_to_rows_pad", "conv_wgrad_rows", "pool2_grad_to_rows",
    /* gemm.cl */ "gemm_nn", "gemm_nt", "gemm_tn", "gemm_tt", "gemm_tiled_nn", "gemm_tiled_nt",
    "gemm_tiled_tn", "gemm_tiled_tt",
    /* gemm_cpu.cl */ "gemm_cpu_nn", "gemm_cpu_tn", "gemm_reduce", "transpose_f32",
    /* layers.cl */ "maxpool_forward", "maxpool2_forward", "maxpool_backward",
    "maxpool2_backward", "maxpool_backward_scatter", "relu_forward", "relu_backward",
    "cross_entropy", "loss_reduce", "gather_batch",
    /* optim.cl */ "sgd_step", "adam_step",
    /* util.cl */ "fill_f32", "axpy_f32", "peak_fma1", "peak_fma4", "peak_fma8", "peak_fma16"};
/* clang-format on */

const char *const *clcnn_required_kernels(int *n) {
    *n = (int)(sizeof required_kernels / sizeof required_kernels[0]);
    return required_kernels;
}

static clcnn_status check_kernels(clcnn_context *ctx) {
    const char *kdir = getenv("CLCNN_KERNEL_DIR");
    int n;
    const char *const *names = clcnn_required_kernels(&n);
    for (int i = 0; i < n; i++)
        if (!clcnn_ctx_kernel(ctx, names[i]))
            return clcnn_fail(
                &ctx->err, CLCNN_ERR_BUILD, "kernel '%s' is missing from the kernel sources%s%s",
                names[i], kdir && *kdir ? " in CLCNN_KERNEL_DIR=" : "", kdir && *kdir ? kdir : "");
    return CLCNN_SUCCESS;
}

clcnn_kern *clcnn_ctx_kernel(clcnn_context *ctx, const char *name) {
    for (int i = 0; i < ctx->n_kerns; i++)
        if (strcmp(ctx->kerns[i].name, name) == 0) return &ctx->kerns[i];
    return NULL;
}

clcnn_kern *clcnn_kernel_must(clcnn_context *ctx, const char *name) {
    clcnn_kern *k = clcnn_ctx_kernel(ctx, name);
    CLCNN_ASSERT(k != NULL);
    return k;
}

void clcnn_arg(clcnn_args *a, size_t size, const void *value) {
    cl_int rc = clSetKernelArg(a->k, a->i++, size, value);
    if (rc != CL_SUCCESS && a->rc == CL_SUCCESS) a->rc = rc;
}

clcnn_status clcnn_launch1d(clcnn_context *ctx, const clcnn_kern *k, const clcnn_args *a,
                            size_t n) {
    size_t local = ctx->local1d < k->max_wg ? ctx->local1d : k->max_wg;
    size_t global = (n + local - 1) / local * local;
    cl_int rc;
    if (a->rc != CL_SUCCESS) return clcnn_cl_fail(ctx, a->rc, k->name);
    if (n == 0) return CLCNN_SUCCESS;
    rc = clEnqueueNDRangeKernel(ctx->queue, k->k, 1, NULL, &global, &local, 0, NULL,
                                clcnn_prof_slot(ctx, k->name));
    if (rc != CL_SUCCESS) return clcnn_cl_fail(ctx, rc, k->name);
    return CLCNN_SUCCESS;
}

clcnn_status clcnn_launch_items(clcnn_context *ctx, const clcnn_kern *k, const clcnn_args *a,
                                size_t n) {
    size_t one = 1;
    cl_int rc;
    if (a->rc != CL_SUCCESS) return clcnn_cl_fail(ctx, a->rc, k->name);
    if (n == 0) return CLCNN_SUCCESS;
    rc = clEnqueueNDRangeKernel(ctx->queue, k->k, 1, NULL, &n,
                                ctx->info.type == CLCNN_DEVICE_GPU ? NULL : &one, 0, NULL,
                                clcnn_prof_slot(ctx, k->name));
    if (rc != CL_SUCCESS) return clcnn_cl_fail(ctx, rc, k->name);
    return CLCNN_SUCCESS;
}

clcnn_status clcnn_launch_single(clcnn_context *ctx, const clcnn_kern *k, const clcnn_args *a,
                                 cl_uint dims, const size_t *global) {
    static const size_t ones[3] = {1, 1, 1};
    cl_int rc;
    if (a->rc != CL_SUCCESS) return clcnn_cl_fail(ctx, a->rc, k->name);
    for (cl_uint d = 0; d < dims; d++)
        if (global[d] == 0) return CLCNN_SUCCESS;
    rc = clEnqueueNDRangeKernel(ctx->queue, k->k, dims, NULL, global, ones, 0, NULL,
                                clcnn_prof_slot(ctx, k->name));
    if (rc != CL_SUCCESS) return clcnn_cl_fail(ctx, rc, k->name);
    return CLCNN_SUCCESS;
}

clcnn_status clcnn_launch_nd(clcnn_context *ctx, const clcnn_kern *k, const clcnn_args *a,
                             cl_uint dims, const size_t *global) {
    cl_int rc;
    if (a->rc != CL_SUCCESS) return clcnn_cl_fail(ctx, a->rc, k->name);
    for (cl_uint d = 0; d < dims; d++)
        if (global[d] == 0) return CLCNN_SUCCESS;
    rc = clEnqueueNDRangeKernel(ctx->queue, k->k, dims, NULL, global, NULL, 0, NULL,
                                clcnn_prof_slot(ctx, k->name));
    if (rc != CL_SUCCESS) return clcnn_cl_fail(ctx, rc, k->name);
    return CLCNN_SUCCESS;
}

/* CLCNN_PROFILE=kernels splits each profiled section into its kernels. */
static int prof_by_kernel(void) {
    const char *e = getenv("CLCNN_PROFILE");
    return e && strcmp(e, "kernels") == 0;
}

/* The context's own copy of a section label (the last slot collects any overflow). */
static const char *intern_label(clcnn_context *ctx, const char *label) {
    for (int i = 0; i < ctx->prof_nstrings; i++)
        if (!strcmp(ctx->prof_strings[i], label)) return ctx->prof_strings[i];
    if (ctx->prof_nstrings == 128) return ctx->prof_strings[127];
    char *dst = ctx->prof_strings[ctx->prof_nstrings++];
    snprintf(dst, sizeof ctx->prof_strings[0], "%s",
             ctx->prof_nstrings == 128 ? "other sections" : label);
    return dst;
}

void clcnn_prof_section(clcnn_context *ctx, const char *label, double flops) {
    if (!ctx->profiling) return;
    ctx->prof_label = label = label ? intern_label(ctx, label) : NULL;
    if (!label || flops <= 0) return;
    int k = 0;
    while (k < ctx->prof_nflop && strcmp(ctx->prof_flop_names[k], label) != 0)
        k++;
    if (k == ctx->prof_nflop) {
        if (k == 64) return;
        ctx->prof_flop_names[k] = label, ctx->prof_flops[k] = 0, ctx->prof_nflop++;
    }
    ctx->prof_flops[k] += flops;
}

cl_event *clcnn_prof_slot(clcnn_context *ctx, const char *name) {
    if (!ctx->profiling) return NULL;
    if (ctx->prof_label && ctx->prof_by_kernel) {
        char both[64];
        snprintf(both, sizeof both, "%.24s: %s", ctx->prof_label, name);
        name = intern_label(ctx, both);
    } else if (ctx->prof_label) {
        name = ctx->prof_label;
    }
    if (ctx->prof_n == ctx->prof_cap) {
        int cap = ctx->prof_cap ? ctx->prof_cap * 2 : 256;
        cl_event *ev = realloc(ctx->prof_events, (size_t)cap * sizeof *ev);
        if (ev) ctx->prof_events = ev;
        const char **nm = realloc(ctx->prof_names, (size_t)cap * sizeof *nm);
        if (nm) ctx->prof_names = nm;
        if (!ev || !nm) return NULL; /* profiling is best effort */
        ctx->prof_cap = cap;
    }
    ctx->prof_names[ctx->prof_n] = name;
    return &ctx->prof_events[ctx->prof_n++];
}

static void prof_clear(clcnn_context *ctx) {
    for (int i = 0; i < ctx->prof_n; i++)
        if (ctx->prof_events[i]) clReleaseEvent(ctx->prof_events[i]);
    ctx->prof_n = 0;
    ctx->prof_nflop = 0;
}

size_t clcnn_context_profile_report(clcnn_context *ctx, char *buf, size_t size) {
    enum { MAXK = 128 };
    const char *names[MAXK];
    double ms[MAXK], total = 0;
    int calls[MAXK], nk = 0;
    size_t used = 0;
    if (buf && size) buf[0] = '\0';
    if (!ctx || !ctx->profiling) return 0;
    clFinish(ctx->queue);
    for (int i = 0; i < ctx->prof_n; i++) {
        cl_ulong t0 = 0, t1 = 0;
        if (!ctx->prof_events[i]) continue;
        clGetEventProfilingInfo(ctx->prof_events[i], CL_PROFILING_COMMAND_START, sizeof t0, &t0,
                                NULL);
        clGetEventProfilingInfo(ctx->prof_events[i], CL_PROFILING_COMMAND_END, sizeof t1, &t1,
                                NULL);
        int k = 0;
        while (k < nk && strcmp(names[k], ctx->prof_names[i]) != 0)
            k++;
        if (k == nk) {
            if (nk == MAXK) continue;
            names[nk] = ctx->prof_names[i], ms[nk] = 0, calls[nk] = 0, nk++;
        }
        ms[k] += (double)(t1 - t0) * 1e-6;
        calls[k]++;
        total += (double)(t1 - t0) * 1e-6;
    }
    for (int k = 0; k < nk; k++) {
        double flops = 0;
        char rate[32] = "";
        for (int f = 0; f < ctx->prof_nflop; f++)
            if (!strcmp(ctx->prof_flop_names[f], names[k])) flops = ctx->prof_flops[f];
        if (flops > 0 && ms[k] > 0)
            snprintf(rate, sizeof rate, "%8.1f GFLOP/s", flops / ms[k] * 1e-6);
        int n = snprintf(used < size ? buf + used : NULL, used < size ? size - used : 0,
                         "%-*s %6d launches %10.3f ms %5.1f%% %s\n", ctx->prof_by_kernel ? 48 : 26,
                         names[k], calls[k], ms[k], total > 0 ? 100.0 * ms[k] / total : 0.0, rate);
        if (n > 0) used += (size_t)n;
    }
    prof_clear(ctx);
    return used;
}

/* Shared tail of both constructors: work-group defaults and every kernel, built or cached. */
static clcnn_status finish_context(clcnn_context *ctx, const clcnn_context_options *opts,
                                   double t0) {
    clcnn_status st;
    const char *cache_env = getenv("CLCNN_CACHE");
    int use_cache = !(opts && opts->disable_cache) && !(cache_env && strcmp(cache_env, "0") == 0);
    char options[256];
    /* Element-wise kernels: GPUs like a few warps per group; on CPUs each group is a loop. */
    ctx->local1d = ctx->info.type == CLCNN_DEVICE_GPU ? 256 : 64;
    if (ctx->info.max_work_group_size && ctx->local1d > ctx->info.max_work_group_size)
        ctx->local1d = ctx->info.max_work_group_size;
    snprintf(options, sizeof options, "-cl-std=CL1.2 -DCLCNN_DEVICE_%s=1",
             ctx->info.type == CLCNN_DEVICE_GPU   ? "GPU"
             : ctx->info.type == CLCNN_DEVICE_CPU ? "CPU"
                                                  : "OTHER");
    ctx->n_progs = clcnn_kernel_source_count;
    ctx->progs = calloc((size_t)ctx->n_progs + 1, sizeof *ctx->progs);
    if (!ctx->progs)
        return clcnn_fail(&ctx->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    st = clcnn_programs_build(ctx->context, ctx->device, &ctx->info, options, use_cache, ctx->progs,
                              &ctx->cache_hit, &ctx->err);
    if (st != CLCNN_SUCCESS) return st;
    if ((st = make_kernels(ctx)) != CLCNN_SUCCESS) return st;
    if ((st = check_kernels(ctx)) != CLCNN_SUCCESS) return st;
    if ((st = clcnn_gemm_init(ctx)) != CLCNN_SUCCESS) return st;
    ctx->autotune = opts && opts->autotune;
    if ((st = clcnn_tune_init(ctx, use_cache)) != CLCNN_SUCCESS) return st;
    ctx->build_seconds = now_seconds() - t0;
    return CLCNN_SUCCESS;
}

clcnn_status clcnn_context_create(clcnn_context **out, const clcnn_devices *devs, int index,
                                  const clcnn_context_options *opts) {
    clcnn_context *ctx;
    cl_int rc;
    double t0 = now_seconds();
    if (!out) return CLCNN_ERR_INVALID_ARGUMENT;
    *out = ctx = calloc(1, sizeof *ctx);
    if (!ctx) return CLCNN_ERR_OUT_OF_HOST_MEMORY;
    if (!devs || clcnn_devices_cl_ids(devs, index, &ctx->platform, &ctx->device) != 0)
        return clcnn_fail(&ctx->err, CLCNN_ERR_DEVICE_INDEX,
                          "device index %d is not in the visible list (%d device%s)", index,
                          clcnn_devices_count(devs), clcnn_devices_count(devs) == 1 ? "" : "s");
    clcnn_devices_get(devs, index, &ctx->info);
    ctx->profiling = opts && opts->enable_profiling;
    ctx->prof_by_kernel = prof_by_kernel();
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)ctx->platform, 0};
    ctx->context = clCreateContext(props, 1, &ctx->device, NULL, NULL, &rc);
    if (rc != CL_SUCCESS) return clcnn_cl_fail(ctx, rc, "clCreateContext");
    ctx->queue = clCreateCommandQueue(ctx->context, ctx->device,
                                      ctx->profiling ? CL_QUEUE_PROFILING_ENABLE : 0, &rc);
    if (rc != CL_SUCCESS) return clcnn_cl_fail(ctx, rc, "clCreateCommandQueue");
    return finish_context(ctx, opts, t0);
}

clcnn_status clcnn_context_create_from_cl(clcnn_context **out, void *cl_ctx, void *cl_queue,
                                          const clcnn_context_options *opts) {
    clcnn_context *ctx;
    cl_command_queue_properties qprops = 0;
    cl_context qctx = NULL;
    cl_int rc;
    double t0 = now_seconds();
    if (!out) return CLCNN_ERR_INVALID_ARGUMENT;
    *out = ctx = calloc(1, sizeof *ctx);
    if (!ctx) return CLCNN_ERR_OUT_OF_HOST_MEMORY;
    if (!cl_ctx || !cl_queue)
        return clcnn_fail(&ctx->err, CLCNN_ERR_INVALID_ARGUMENT, "NULL cl_context or queue");
    cl_command_queue q = (cl_command_queue)cl_queue;
    rc = clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof qctx, &qctx, NULL);
    if (rc == CL_SUCCESS)
        rc = clGetCommandQueueInfo(q, CL_QUEUE_DEVICE, sizeof ctx->device, &ctx->device, NULL);
    if (rc == CL_SUCCESS)
        rc = clGetCommandQueueInfo(q, CL_QUEUE_PROPERTIES, sizeof qprops, &qprops, NULL);
    if (rc == CL_SUCCESS)
        rc = clGetDeviceInfo(ctx->device, CL_DEVICE_PLATFORM, sizeof ctx->platform, &ctx->platform,
                             NULL);
    if (rc != CL_SUCCESS) return clcnn_cl_fail(ctx, rc, "querying the adopted queue");
    if (qctx != (cl_context)cl_ctx)
        return clcnn_fail(&ctx->err, CLCNN_ERR_INVALID_ARGUMENT,
                          "the command queue does not belong to the given context");
    /* clcnn relies on in-order execution between its launches. */
    if (qprops & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)
        return clcnn_fail(&ctx->err, CLCNN_ERR_UNSUPPORTED,
                          "the adopted command queue is out-of-order; clcnn needs an in-order "
                          "queue");
    clRetainContext((cl_context)cl_ctx);
    ctx->context = (cl_context)cl_ctx;
    clRetainCommandQueue(q);
    ctx->queue = q;
    clcnn_device_query(ctx->platform, ctx->device, &ctx->info);
    ctx->info.global_index = ctx->info.platform_index = ctx->info.device_index = -1;
    ctx->profiling = (qprops & CL_QUEUE_PROFILING_ENABLE) != 0;
    ctx->prof_by_kernel = prof_by_kernel();
    return finish_context(ctx, opts, t0);
}

void clcnn_context_free(clcnn_context *ctx) {
    if (!ctx) return;
    if (ctx->queue) clFinish(ctx->queue);
    if (ctx->gemm_scratch) clReleaseMemObject(ctx->gemm_scratch);
    if (ctx->gemm_partial) clReleaseMemObject(ctx->gemm_partial);
    prof_clear(ctx);
    clcnn_tune_free(ctx);
    free(ctx->prof_events);
    free(ctx->prof_names);
    for (int i = 0; i < ctx->n_kerns; i++)
        clReleaseKernel(ctx->kerns[i].k);
    for (int i = 0; ctx->progs && i < ctx->n_progs; i++)
        if (ctx->progs[i]) clReleaseProgram(ctx->progs[i]);
    /* Created or retained (when adopted): either way this reference is ours to drop. */
    if (ctx->queue) clReleaseCommandQueue(ctx->queue);
    if (ctx->context) clReleaseContext(ctx->context);
    free(ctx->kerns);
    free(ctx->names);
    free(ctx->progs);
    free(ctx);
}

const char *clcnn_context_errmsg(const clcnn_context *ctx) {
    return ctx ? ctx->err.msg : "NULL context";
}

clcnn_status clcnn_context_device(const clcnn_context *ctx, clcnn_device_info *info) {
    if (!ctx || !info) return CLCNN_ERR_INVALID_ARGUMENT;
    *info = ctx->info;
    return CLCNN_SUCCESS;
}

int clcnn_context_cache_hit(const clcnn_context *ctx) {
    return ctx ? ctx->cache_hit : 0;
}

double clcnn_context_build_seconds(const clcnn_context *ctx) {
    return ctx ? ctx->build_seconds : 0.0;
}

/* The probe launches the peak_fma kernel of the device's preferred float vector width: on a CPU
 * device with explicit vectors (PoCL), one work-item per group and eight per compute unit; else
 * (GPUs; CPU runtimes that vectorise across work-items, preferring width 1) full work-groups.
 * A warm-up run (PoCL compiles each new local size on first launch), then the work grows until a
 * run lasts 20 ms, then three runs of about 70 ms each, the fastest kept; every rate comes from
 * the iteration count of the run it times. */
clcnn_status clcnn_context_measure_peak(clcnn_context *ctx, double *gflops) {
    if (!ctx || !gflops) return CLCNN_ERR_INVALID_ARGUMENT;
    cl_uint pref = 1;
    if (clGetDeviceInfo(ctx->device, CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT, sizeof pref, &pref,
                        NULL) != CL_SUCCESS)
        pref = 1;
    int width = pref >= 16 ? 16 : pref >= 8 ? 8 : pref >= 4 ? 4 : 1;
    char name[16];
    snprintf(name, sizeof name, "peak_fma%d", width);
    clcnn_kern *k = clcnn_ctx_kernel(ctx, name);
    if (!k) return clcnn_fail(&ctx->err, CLCNN_ERR_UNSUPPORTED, "peak probe: no kernel %s", name);
    size_t cu = ctx->info.compute_units ? ctx->info.compute_units : 1, local = 1, items = cu * 8;
    if (width == 1 || ctx->info.type != CLCNN_DEVICE_CPU) {
        size_t mult = 1;
        clGetKernelWorkGroupInfo(k->k, ctx->device, CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE,
                                 sizeof mult, &mult, NULL);
        local = k->max_wg < 256 ? k->max_wg : 256;
        if (mult > 1 && mult <= local) local -= local % mult;
        items = (cu * 2048 + local - 1) / local * local;
    }
    cl_int rc;
    cl_mem out =
        clCreateBuffer(ctx->context, CL_MEM_READ_WRITE, items * width * sizeof(float), NULL, &rc);
    if (rc != CL_SUCCESS) return clcnn_cl_fail(ctx, rc, "allocating the peak probe");
    int iters = 16, calibrated = 0, timed = 0;
    float a = 0.5f;
    double best = 0;
    for (int run = 0; run < 40 && timed < 3 && rc == CL_SUCCESS; run++) {
        rc = clSetKernelArg(k->k, 0, sizeof out, &out);
        if (rc == CL_SUCCESS) rc = clSetKernelArg(k->k, 1, sizeof iters, &iters);
        if (rc == CL_SUCCESS) rc = clSetKernelArg(k->k, 2, sizeof a, &a);
        double t0 = now_seconds();
        if (rc == CL_SUCCESS)
            rc = clEnqueueNDRangeKernel(ctx->queue, k->k, 1, NULL, &items, &local, 0, NULL, NULL);
        if (rc == CL_SUCCESS) rc = clFinish(ctx->queue);
        double t = now_seconds() - t0, rate = (double)items * iters * width * 12 * 2 / t * 1e-9;
        if (run == 0 || rc != CL_SUCCESS) continue; /* warm-up */
        if (calibrated) {
            best = rate > best ? rate : best;
            timed++;
        } else if (t >= 0.02 || iters >= (1 << 28)) {
            double next = iters * (0.07 / t);
            iters = next > (1 << 29) ? (1 << 29) : next < 1 ? 1 : (int)next;
            calibrated = 1;
        } else {
            iters *= t < 0.0025 ? 8 : 2;
        }
    }
    clReleaseMemObject(out);
    if (rc != CL_SUCCESS) return clcnn_cl_fail(ctx, rc, "peak probe");
    if (timed < 3) return clcnn_fail(&ctx->err, CLCNN_ERR_UNSUPPORTED, "peak probe: no timed run");
    *gflops = best;
    return CLCNN_SUCCESS;
}
