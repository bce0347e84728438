/* The device context: one device, an in-order queue, every kernel built for it, the launch
 * functions and the profiler's hooks. The public context (runtime.c) adds the parts above
 * this file: the GEMM backends, the tuner and the layers' settings. */
#include "context.h"

#include <pthread.h>
#include <stdio.h>

#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "env.h"
#include "program.h"

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

/* Every kernel the library launches, by name in clcnn_kernel_id order. test_program checks that
 * this list and the embedded sources agree. */
static const char *const required_kernels[CLCNN_K_COUNT] = {
#define CLCNN_KERNEL_NAME_(name) #name,
    CLCNN_KERNEL_LIST(CLCNN_KERNEL_NAME_)
#undef CLCNN_KERNEL_NAME_
};

const char *const *clcnn_required_kernels(int *n) {
    *n = CLCNN_K_COUNT;
    return required_kernels;
}

/* Fills the typed table. A context checks every kernel when it is created, so sources read
 * from CLCNN_KERNEL_DIR that lack one fail here with the kernel's name rather than in an
 * assertion mid-step. */
static clcnn_status resolve_kernels(clcnn_context *ctx, const char *kdir) {
    for (int i = 0; i < CLCNN_K_COUNT; i++)
        if (!(ctx->kern[i] = clcnn_ctx_kernel(ctx, required_kernels[i])))
            return clcnn_fail(&ctx->err, CLCNN_ERR_BUILD,
                              "kernel '%s' is missing from the kernel sources%s%s",
                              required_kernels[i], kdir[0] ? " in CLCNN_KERNEL_DIR=" : "", kdir);
    return CLCNN_SUCCESS;
}

clcnn_kern *clcnn_kernel(clcnn_context *ctx, clcnn_kernel_id id) {
    CLCNN_ASSERT((unsigned)id < CLCNN_K_COUNT);
    return ctx->kern[id];
}

clcnn_kern *clcnn_ctx_kernel(clcnn_context *ctx, const char *name) {
    for (int i = 0; i < ctx->n_kerns; i++)
        if (strcmp(ctx->kerns[i].name, name) == 0) return &ctx->kerns[i];
    return NULL;
}

void clcnn_arg(clcnn_args *a, size_t size, const void *value) {
    cl_int rc = clSetKernelArg(a->k, a->i++, size, value);
    if (rc != CL_SUCCESS && a->rc == CL_SUCCESS) a->rc = rc;
}

clcnn_status clcnn_launch(clcnn_context *ctx, const clcnn_kern *k, const clcnn_args *a,
                          cl_uint dims, const size_t *global, const size_t *local) {
    cl_int rc;
    if (a->rc != CL_SUCCESS) return clcnn_cl_fail(ctx, a->rc, k->name);
    for (cl_uint d = 0; d < dims; d++)
        if (global[d] == 0) return CLCNN_SUCCESS;
    rc = clEnqueueNDRangeKernel(ctx->queue, k->k, dims, NULL, global, local, 0, NULL,
                                clcnn_prof_slot(ctx, k->name));
    if (rc != CL_SUCCESS) return clcnn_cl_fail(ctx, rc, k->name);
    return CLCNN_SUCCESS;
}

clcnn_status clcnn_launch1d(clcnn_context *ctx, const clcnn_kern *k, const clcnn_args *a,
                            size_t n) {
    size_t local = ctx->local1d < k->max_wg ? ctx->local1d : k->max_wg;
    size_t global = (n + local - 1) / local * local;
    return clcnn_launch(ctx, k, a, 1, &global, &local);
}

clcnn_status clcnn_launch_items(clcnn_context *ctx, const clcnn_kern *k, const clcnn_args *a,
                                size_t n) {
    static const size_t one = 1;
    return clcnn_launch(ctx, k, a, 1, &n, ctx->info.type == CLCNN_DEVICE_GPU ? NULL : &one);
}

clcnn_status clcnn_launch_single(clcnn_context *ctx, const clcnn_kern *k, const clcnn_args *a,
                                 cl_uint dims, const size_t *global) {
    static const size_t ones[3] = {1, 1, 1};
    return clcnn_launch(ctx, k, a, dims, global, ones);
}

clcnn_status clcnn_launch_nd(clcnn_context *ctx, const clcnn_kern *k, const clcnn_args *a,
                             cl_uint dims, const size_t *global) {
    return clcnn_launch(ctx, k, a, dims, global, NULL);
}

void clcnn_prof_section(clcnn_context *ctx, const char *label, double flops) {
    if (ctx->prof) clcnn_prof_begin(ctx->prof, label, flops);
}

cl_event *clcnn_prof_slot(clcnn_context *ctx, const char *name) {
    return ctx->prof ? clcnn_prof_event(ctx->prof, name) : NULL;
}

size_t clcnn_context_profile_report(clcnn_context *ctx, char *buf, size_t size) {
    if (buf && size) buf[0] = '\0';
    if (!ctx || !ctx->prof) return 0;
    clFinish(ctx->queue);
    return clcnn_prof_report(ctx->prof, buf, size);
}

/* ---- PoCL's shared kernel-handle cache ------------------------------------------------------
 * PoCL before 6.0 keeps one process-wide cache of compiled work-group functions, keyed by the
 * kernel's build hash, and releases an entry by searching for the first one with the same hash
 * and local size: when two devices (two threads) run the same kernel at once with different
 * grids it releases the other's entry and aborts (`pocl_release_dlhandle_cache: Assertion
 * found->ref_count > 0`; fixed by pocl's "fix dlhandle cache", 2024). Contexts alive at the same
 * time on the same PoCL device therefore build their programs with distinct tags
 * (-DCLCNN_CONTEXT_TAG=n, n > 0 from the second one on), so they share no entry. The first
 * context keeps the plain build, and a tag is reused once its context is freed. */

enum { TAG_DEVICES = 32 };
static pthread_mutex_t tag_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char key[300]; /* platform and device name */
    uint64_t used; /* bit n: tag n is taken */
} tag_table[TAG_DEVICES];

/* Whether the platform is PoCL before 6.0 ("OpenCL 3.0 PoCL 3.1+debian ..."). */
static int pocl_shared_cache(const clcnn_device_info *in) {
    const char *p = strstr(in->platform_version, "PoCL ");
    return p && atoi(p + 5) < 6;
}

/* Takes the lowest free tag for the context's device; -1 when none is needed. */
static int take_tag(const clcnn_device_info *in) {
    char key[300];
    int tag = -1;
    if (!pocl_shared_cache(in)) return -1;
    snprintf(key, sizeof key, "%s|%s", in->platform_name, in->name);
    pthread_mutex_lock(&tag_lock);
    for (int i = 0; i < TAG_DEVICES && tag < 0; i++) {
        if (tag_table[i].used && strcmp(tag_table[i].key, key) != 0) continue;
        if (!tag_table[i].used) snprintf(tag_table[i].key, sizeof tag_table[i].key, "%s", key);
        for (int t = 0; t < 64 && tag < 0; t++)
            if (!(tag_table[i].used & (1ull << t))) tag = t;
        if (tag >= 0) tag_table[i].used |= 1ull << tag;
    }
    pthread_mutex_unlock(&tag_lock);
    return tag < 0 ? 0 : tag; /* a full table: no tag rather than no context */
}

static void give_tag(const clcnn_device_info *in, int tag) {
    char key[300];
    if (tag < 0) return;
    snprintf(key, sizeof key, "%s|%s", in->platform_name, in->name);
    pthread_mutex_lock(&tag_lock);
    for (int i = 0; i < TAG_DEVICES; i++)
        if (tag_table[i].used && strcmp(tag_table[i].key, key) == 0)
            tag_table[i].used &= ~(1ull << tag);
    pthread_mutex_unlock(&tag_lock);
}

/* Shared tail of both constructors: profiler, work-group defaults, every kernel (built or
 * cached). */
static clcnn_status finish_context(clcnn_context *ctx, const clcnn_settings *s, int profiling) {
    clcnn_status st;
    char options[256];
    if (profiling && !(ctx->prof = clcnn_prof_create(s->profile_by_kernel)))
        return clcnn_fail(&ctx->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    /* Element-wise kernels: GPUs like a few warps per group; on CPUs each group is a loop. */
    ctx->local1d = ctx->info.type == CLCNN_DEVICE_GPU ? 256 : 64;
    if (ctx->info.max_work_group_size && ctx->local1d > ctx->info.max_work_group_size)
        ctx->local1d = ctx->info.max_work_group_size;
    snprintf(options, sizeof options, "-cl-std=CL1.2 -DCLCNN_DEVICE_%s=1",
             ctx->info.type == CLCNN_DEVICE_GPU   ? "GPU"
             : ctx->info.type == CLCNN_DEVICE_CPU ? "CPU"
                                                  : "OTHER");
    ctx->tag = take_tag(&ctx->info);
    if (ctx->tag > 0)
        snprintf(options + strlen(options), sizeof options - strlen(options),
                 " -DCLCNN_CONTEXT_TAG=%d", ctx->tag);
    ctx->n_progs = clcnn_kernel_source_count;
    ctx->progs = calloc((size_t)ctx->n_progs + 1, sizeof *ctx->progs);
    if (!ctx->progs)
        return clcnn_fail(&ctx->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    st = clcnn_programs_build(ctx->context, ctx->device, &ctx->info, options, s->cache_dir,
                              s->kernel_dir, required_kernels, CLCNN_K_COUNT, ctx->progs,
                              &ctx->cache_hit, ctx->cache_note, sizeof ctx->cache_note, &ctx->err);
    if (st != CLCNN_SUCCESS) return st;
    if ((st = make_kernels(ctx)) != CLCNN_SUCCESS) return st;
    return resolve_kernels(ctx, s->kernel_dir);
}

clcnn_status clcnn_context_open(clcnn_context **out, const clcnn_devices *devs, int index,
                                const clcnn_context_options *opts, clcnn_settings *s) {
    clcnn_context *ctx;
    clcnn_status st;
    cl_int rc;
    if (!out) return CLCNN_ERR_INVALID_ARGUMENT;
    *out = ctx = calloc(1, sizeof *ctx);
    if (!ctx) return CLCNN_ERR_OUT_OF_HOST_MEMORY;
    ctx->tag = -1;
    if (!devs || clcnn_devices_cl_ids(devs, index, &ctx->platform, &ctx->device) != 0)
        return clcnn_fail(&ctx->err, CLCNN_ERR_DEVICE_INDEX,
                          "device index %d is not in the visible list (%d device%s)", index,
                          clcnn_devices_count(devs), clcnn_devices_count(devs) == 1 ? "" : "s");
    clcnn_devices_get(devs, index, &ctx->info);
    if ((st = clcnn_settings_resolve(s, opts, &ctx->err)) != CLCNN_SUCCESS) return st;
    int profiling = s->enable_profiling;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)ctx->platform, 0};
    ctx->context = clCreateContext(props, 1, &ctx->device, NULL, NULL, &rc);
    if (rc != CL_SUCCESS) return clcnn_cl_fail(ctx, rc, "clCreateContext");
    ctx->queue = clCreateCommandQueue(ctx->context, ctx->device,
                                      profiling ? CL_QUEUE_PROFILING_ENABLE : 0, &rc);
    if (rc != CL_SUCCESS) return clcnn_cl_fail(ctx, rc, "clCreateCommandQueue");
    return finish_context(ctx, s, profiling);
}

clcnn_status clcnn_context_open_cl(clcnn_context **out, void *cl_ctx, void *cl_queue,
                                   const clcnn_context_options *opts, clcnn_settings *s) {
    clcnn_context *ctx;
    cl_command_queue_properties qprops = 0;
    cl_context qctx = NULL;
    clcnn_status st;
    cl_int rc;
    if (!out) return CLCNN_ERR_INVALID_ARGUMENT;
    *out = ctx = calloc(1, sizeof *ctx);
    if (!ctx) return CLCNN_ERR_OUT_OF_HOST_MEMORY;
    ctx->tag = -1;
    if (!cl_ctx || !cl_queue)
        return clcnn_fail(&ctx->err, CLCNN_ERR_INVALID_ARGUMENT, "NULL cl_context or queue");
    if ((st = clcnn_settings_resolve(s, opts, &ctx->err)) != CLCNN_SUCCESS) return st;
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
    return finish_context(ctx, s, (qprops & CL_QUEUE_PROFILING_ENABLE) != 0);
}

void clcnn_context_close(clcnn_context *ctx) {
    if (!ctx) return;
    if (ctx->queue) clFinish(ctx->queue);
    give_tag(&ctx->info, ctx->tag);
    clcnn_prof_free(ctx->prof);
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

clcnn_status clcnn_context_errcode(const clcnn_context *ctx) {
    return ctx ? ctx->err.code : CLCNN_ERR_INVALID_ARGUMENT;
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

const char *clcnn_context_cache_note(const clcnn_context *ctx) {
    return ctx ? ctx->cache_note : "";
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
    clcnn_kern *k = clcnn_kernel(ctx, width == 16  ? CLCNN_K_peak_fma16
                                      : width == 8 ? CLCNN_K_peak_fma8
                                      : width == 4 ? CLCNN_K_peak_fma4
                                                   : CLCNN_K_peak_fma1);
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
        double t0 = clcnn_now_seconds();
        if (rc == CL_SUCCESS)
            rc = clEnqueueNDRangeKernel(ctx->queue, k->k, 1, NULL, &items, &local, 0, NULL, NULL);
        if (rc == CL_SUCCESS) rc = clFinish(ctx->queue);
        double t = clcnn_now_seconds() - t0,
               rate = (double)items * iters * width * 12 * 2 / t * 1e-9;
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
