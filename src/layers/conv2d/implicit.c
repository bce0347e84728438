/* The implicit-GEMM convolutions, shaped for GPUs (conv_implicit* and conv_wgrad_implicit* in
 * cl/conv2d.cl): the image gathered into local memory, any stride and padding, in one of four
 * sizes chosen per device class (or CLCNN_IMPLICIT_SIZE). Its rows: `implicit`,
 * `wgrad-implicit` (split over the batch's pixels), `flip-implicit` (the input gradient as the
 * flipped convolution) and, for each pass, `gemm-tuned` (its implicit GEMM in every size the
 * device runs, or its im2col way, whichever the autotuner times faster). */
#include "conv2d.h"

#include <stdio.h>
#include <string.h>

#include "tune.h"

/* The implicit-GEMM kernels' depth step (IG_K in cl/conv2d.cl). */
enum { IMPLICIT_K = 16 };

/* The implicit-GEMM kernels' sizes (cl/conv2d.cl): GX x GY work-groups (pixels by channels) of
 * RX x RY outputs each, tiles of TC = GY*RY output channels by TP = GX*RX pixels (or taps), a
 * 16 x (TC + 1) and a 16 x (TP + 1) panel of local memory; `name` is the size's candidate in the
 * autotune file, `size` its CLCNN_IMPLICIT_SIZE value. */
typedef struct implicit_size {
    clcnn_kernel_id fwd, wgrad;
    int gx, gy, rx, ry;
    const char *name, *size;
} implicit_size;
static const implicit_size implicit_sizes[] = {
    {CLCNN_K_conv_implicit, CLCNN_K_conv_wgrad_implicit, 16, 16, 4, 4, "implicit", "64"},
    {CLCNN_K_conv_implicit_32, CLCNN_K_conv_wgrad_implicit_32, 8, 8, 4, 4, "implicit-32", "32"},
    {CLCNN_K_conv_implicit_128, CLCNN_K_conv_wgrad_implicit_128, 16, 16, 8, 4, "implicit-64x128",
     "64x128"},
    {CLCNN_K_conv_implicit_w8, CLCNN_K_conv_wgrad_implicit_w8, 8, 8, 8, 8, "implicit-64w8", "64w8"},
};
enum { IMPLICIT_SIZES = (int)(sizeof implicit_sizes / sizeof implicit_sizes[0]) };

/* Per device class, the sizes in order of preference: the implicit algorithms take the first
 * the device runs, unless CLCNN_IMPLICIT_SIZE names one (the autotuner times every size the
 * device runs, whatever the order). The first match of type and vendor substring counts. The
 * GPU rows are starting points, not measurements: CLBlast's tuning database's SGEMM defaults for
 * the class mapped onto these sizes (NVIDIA: tiles of 64 x 64 to 128 x 64 from 16 x 16 or
 * 16 x 8 work-items; AMD and Intel GPUs: 64 x 64 from 8 x 8 work-items of 8 x 8); clcnn has
 * not yet been measured on any of them. */
typedef struct implicit_class {
    clcnn_device_type type; /* CLCNN_DEVICE_OTHER: any type */
    const char *vendor;     /* a substring of CL_DEVICE_VENDOR; NULL: any vendor */
    int order[IMPLICIT_SIZES];
} implicit_class;
static const implicit_class implicit_classes[] = {
    {CLCNN_DEVICE_GPU, "NVIDIA", {2, 0, 3, 1}},
    {CLCNN_DEVICE_GPU, "AMD", {3, 0, 2, 1}},
    {CLCNN_DEVICE_GPU, "Advanced Micro Devices", {3, 0, 2, 1}},
    {CLCNN_DEVICE_GPU, "Intel", {3, 0, 2, 1}},
    {CLCNN_DEVICE_OTHER, NULL, {0, 1, 2, 3}},
};

/* The bytes of local memory of size z's two panels, 16 x (TC + 1) and 16 x (TP + 1) floats. */
static size_t implicit_panel_a(int z) {
    return (size_t)IMPLICIT_K * ((size_t)implicit_sizes[z].gy * implicit_sizes[z].ry + 1) *
           sizeof(float);
}
static size_t implicit_panel_b(int z) {
    return (size_t)IMPLICIT_K * ((size_t)implicit_sizes[z].gx * implicit_sizes[z].rx + 1) *
           sizeof(float);
}
static size_t implicit_local_bytes(int z) {
    return implicit_panel_a(z) + implicit_panel_b(z);
}

/* Appends size z's two panels of local memory (the kernels' last arguments). */
static void implicit_panels(clcnn_args *a, int z) {
    clcnn_arg(a, implicit_panel_a(z), NULL);
    clcnn_arg(a, implicit_panel_b(z), NULL);
}

/* The limits size z meets: the largest work-group both its kernels allow (each kernel's own
 * CL_KERNEL_WORK_GROUP_SIZE) and the device's local memory, asked, not assumed. */
static void implicit_limits(const clcnn_context *ctx, int z, size_t *wg, cl_ulong *local) {
    const implicit_size *q = &implicit_sizes[z];
    clcnn_kern *f = clcnn_kernel((clcnn_context *)ctx, q->fwd);
    clcnn_kern *w = clcnn_kernel((clcnn_context *)ctx, q->wgrad);
    *wg = f->max_wg < w->max_wg ? f->max_wg : w->max_wg;
    if (clGetDeviceInfo(ctx->device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof *local, local, NULL) !=
        CL_SUCCESS)
        *local = 0;
}

/* Whether the device runs size z: its work-groups and its panels of local memory. */
static int implicit_runs(const clcnn_context *ctx, int z) {
    size_t wg;
    cl_ulong local;
    implicit_limits(ctx, z, &wg, &local);
    return wg >= (size_t)implicit_sizes[z].gx * implicit_sizes[z].gy &&
           local >= implicit_local_bytes(z);
}

/* The device's class in implicit_classes (the last row matches every device). */
static const implicit_class *implicit_class_of(const clcnn_context *ctx) {
    const implicit_class *c = implicit_classes;
    for (; c->vendor; c++)
        if ((c->type == CLCNN_DEVICE_OTHER || c->type == ctx->info.type) &&
            strstr(ctx->info.vendor, c->vendor))
            break;
    return c;
}

/* The size the implicit algorithms take: ctx->implicit_size's (CLCNN_IMPLICIT_SIZE, or a test's)
 * where one is set, else the first of the device class's order that the device runs; -1 when
 * it runs none. */
static int implicit_size_of(const clcnn_context *ctx) {
    if (ctx->implicit_size)
        return implicit_runs(ctx, ctx->implicit_size - 1) ? ctx->implicit_size - 1 : -1;
    const implicit_class *c = implicit_class_of(ctx);
    for (int i = 0; i < IMPLICIT_SIZES; i++)
        if (implicit_runs(ctx, c->order[i])) return c->order[i];
    return -1;
}

clcnn_status clcnn_conv_implicit_size(clcnn_context *ctx, const char *size) {
    char shown[40 + 4];
    ctx->implicit_size = 0;
    if (!size || !*size || !strcmp(size, "auto")) return CLCNN_SUCCESS;
    for (int z = 0; z < IMPLICIT_SIZES; z++) {
        const implicit_size *q = &implicit_sizes[z];
        if (strcmp(size, q->size) != 0) continue;
        size_t wg;
        cl_ulong local;
        implicit_limits(ctx, z, &wg, &local);
        if (!implicit_runs(ctx, z))
            return clcnn_fail(&ctx->err, CLCNN_ERR_INVALID_ARGUMENT,
                              "CLCNN_IMPLICIT_SIZE=%s does not run on %s: it needs work-groups of "
                              "%d (its kernels allow %zu) and %zu bytes of local memory (the "
                              "device has %llu)",
                              q->size, ctx->info.name, q->gx * q->gy, wg, implicit_local_bytes(z),
                              (unsigned long long)local);
        ctx->implicit_size = z + 1;
        return CLCNN_SUCCESS;
    }
    return clcnn_fail(&ctx->err, CLCNN_ERR_INVALID_ARGUMENT,
                      "CLCNN_IMPLICIT_SIZE='%s' is not a size of the implicit-GEMM convolutions "
                      "(auto, 64, 32, 64x128, 64w8)",
                      clcnn_shown(size, 40, shown));
}

int clcnn_conv_implicit_ok(const clcnn_context *ctx) {
    return implicit_size_of(ctx) >= 0;
}

/* The shape arguments both implicit-GEMM kernels take: N, C, H, W, OC, K, stride, pad, OH, OW. */
static void implicit_shape_args(clcnn_args *a, const clcnn_conv2d_shape *s, int N) {
    CLCNN_ARG(a, N);
    CLCNN_ARG(a, s->C);
    CLCNN_ARG(a, s->H);
    CLCNN_ARG(a, s->W);
    CLCNN_ARG(a, s->OC);
    CLCNN_ARG(a, s->K);
    CLCNN_ARG(a, s->stride);
    CLCNN_ARG(a, s->pad);
    CLCNN_ARG(a, s->OH);
    CLCNN_ARG(a, s->OW);
}

/* y = conv(x, w) + b by the implicit forward of size z (any stride and padding, no scratch), one
 * launch. */
static clcnn_status conv_implicit(clcnn_context *ctx, const clcnn_conv2d_shape *s, cl_mem y,
                                  cl_mem x, cl_mem params, int woff, int boff, int N, int z) {
    const implicit_size *q = &implicit_sizes[z];
    size_t gx = (size_t)q->gx, gy = (size_t)q->gy, tp = gx * q->rx, tc = gy * q->ry;
    clcnn_kern *k = clcnn_kernel(ctx, q->fwd);
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, y);
    CLCNN_ARG(&a, x);
    CLCNN_ARG(&a, params);
    CLCNN_ARG(&a, woff);
    CLCNN_ARG(&a, boff);
    CLCNN_ARG(&a, s->bias);
    implicit_shape_args(&a, s, N);
    implicit_panels(&a, z);
    size_t pixels = (size_t)N * (size_t)s->OH * (size_t)s->OW;
    size_t global[2] = {(pixels + tp - 1) / tp * gx, ((size_t)s->OC + tc - 1) / tc * gy};
    size_t local[2] = {gx, gy};
    return clcnn_launch(ctx, k, &a, 2, global, local);
}

/* The split of conv_wgrad_implicit's pixel sum (size z) for a batch of N: about eight
 * work-groups per compute unit, slices of at least 256 pixels (a multiple of 16), and partial
 * sums within the im2col scratch budget. Returns the number of slices S (1: no partials) and
 * sets *per. */
static int implicit_slices(const clcnn_context *ctx, const clcnn_conv2d_shape *s, int N, int z,
                           long *per) {
    long np = (long)N * s->OH * s->OW, ckk = (long)s->C * s->K * s->K;
    const implicit_size *q = &implicit_sizes[z];
    long tc = (long)q->gy * q->ry, tk = (long)q->gx * q->rx, want = 8L * ctx->info.compute_units;
    long tiles = ((s->OC + tc - 1) / tc) * ((ckk + tk - 1) / tk);
    long S = (want + tiles - 1) / tiles, most = (np + 255) / 256;
    long budget = WORKSPACE_FLOATS / ((long)s->OC * ckk > 0 ? (long)s->OC * ckk : 1);
    if (S > most) S = most;
    if (S > budget) S = budget;
    if (S < 1) S = 1;
    *per = ((np + S - 1) / S + 15) / 16 * 16;
    return (int)((np + *per - 1) / *per);
}

/* gw by the implicit weight gradient of size z (any stride and padding), its slices reduced into
 * the gradient buffer through the im2col scratch. */
static clcnn_status wgrad_implicit(const clcnn_io *io, const clcnn_conv2d_shape *s, int z) {
    clcnn_context *ctx = io->ctx;
    const implicit_size *q = &implicit_sizes[z];
    size_t gx = (size_t)q->gx, gy = (size_t)q->gy, tk = gx * q->rx, tc = gy * q->ry;
    clcnn_kern *k = clcnn_kernel(ctx, q->wgrad);
    long per;
    int S = implicit_slices(ctx, s, io->N, z, &per), ckk = s->C * s->K * s->K, peri = (int)per;
    cl_mem out = S > 1 ? io->col : io->grads;
    int outoff = S > 1 ? 0 : io->woff, ostride = s->OC * ckk;
    clcnn_status st;
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, out);
    CLCNN_ARG(&a, outoff);
    CLCNN_ARG(&a, ostride);
    CLCNN_ARG(&a, io->gy.buf);
    CLCNN_ARG(&a, io->x[0].buf);
    implicit_shape_args(&a, s, io->N);
    CLCNN_ARG(&a, peri);
    implicit_panels(&a, z);
    size_t global[3] = {((size_t)ckk + tk - 1) / tk * gx, ((size_t)s->OC + tc - 1) / tc * gy,
                        (size_t)S};
    size_t local[3] = {gx, gy, 1};
    if ((st = clcnn_launch(ctx, k, &a, 3, global, local))) return st;
    return S > 1 ? clcnn_conv_reduce_slices(ctx, io->grads, io->woff, io->col, s->OC * ckk, S)
                 : CLCNN_SUCCESS;
}

/* y = conv(x, w) + b by the implicit forward of the device's size. */
static clcnn_status implicit_run(const clcnn_node *n, const clcnn_io *io) {
    return conv_implicit(io->ctx, &n->conv, io->y.buf, io->x[0].buf, io->params, io->woff,
                         io->boff < 0 ? 0 : io->boff, io->N, implicit_size_of(io->ctx));
}

static clcnn_status wgrad_implicit_run(const clcnn_node *n, const clcnn_io *io) {
    return wgrad_implicit(io, &n->conv, implicit_size_of(io->ctx));
}

/* gx by the flipped convolution of gy through the implicit forward of size z (z < 0: the
 * device's). */
static clcnn_status flip_implicit(const clcnn_node *n, const clcnn_io *io, int z) {
    clcnn_conv2d_shape g;
    clcnn_status st;
    CLCNN_ASSERT(clcnn_conv_grad_shape(&n->conv, &g));
    if ((st = clcnn_conv_flip_weights(io, &n->conv))) return st;
    return conv_implicit(io->ctx, &g, io->gx[0].buf, io->gy.buf, io->wflip, 0, 0, io->N,
                         z < 0 ? implicit_size_of(io->ctx) : z);
}

static clcnn_status flip_implicit_run(const clcnn_node *n, const clcnn_io *io) {
    return flip_implicit(n, io, -1);
}

/* The split-K partial sums of the weight gradient in the im2col scratch, for any size (tuning
 * and tests run them all). */
static void wgrad_implicit_ws(const clcnn_context *ctx, const clcnn_node *n, int N,
                              clcnn_node_ws *ws) {
    const clcnn_conv2d_shape *s = &n->conv;
    for (int z = 0; z < IMPLICIT_SIZES; z++) {
        long per;
        int S = implicit_slices(ctx, s, N, z, &per);
        if (S > 1) clcnn_conv_grow(&ws->col, (size_t)S * s->OC * s->C * s->K * s->K);
    }
}

/* gemm-tuned: pass `pass` of node n by an implicit GEMM of size zs[c] (candidates c < nz) or
 * by its im2col way (candidate nz). */
typedef struct gemm_tuned_args {
    const clcnn_node *n;
    const clcnn_io *io;
    int pass, nz, zs[IMPLICIT_SIZES];
} gemm_tuned_args;

static clcnn_status gemm_tuned_run(clcnn_context *ctx, int c, void *arg) {
    const gemm_tuned_args *t = arg;
    const clcnn_io *io = t->io;
    const clcnn_conv2d_shape *s = &t->n->conv;
    int boff = io->boff < 0 ? 0 : io->boff, z = c < t->nz ? t->zs[c] : -1;
    if (t->pass == CLCNN_PASS_FORWARD)
        return z >= 0 ? conv_implicit(ctx, s, io->y.buf, io->x[0].buf, io->params, io->woff, boff,
                                      io->N, z)
                      : clcnn_conv_forward_im2col(io, s, io->y.buf, io->x[0].buf, io->params,
                                                  io->woff, boff, NULL);
    if (t->pass == CLCNN_PASS_WGRAD)
        return z >= 0 ? wgrad_implicit(io, s, z) : clcnn_conv_backward_im2col(t->n, io, 1, 0);
    return z >= 0 ? flip_implicit(t->n, io, z) : clcnn_conv_flip_im2col_run(t->n, io);
}

/* Runs pass `pass` of n by the candidate the autotuner keeps for its shape and batch (timing
 * each size of implicit GEMM the device runs and the im2col way the first time); im2col, the
 * untuned rule's way, when tuning is off (a forced plan). */
static clcnn_status gemm_tuned(const clcnn_node *n, const clcnn_io *io, int pass) {
    static const char *const passes[3] = {"fwd", "wgrad", "dgrad"};
    const char *names[IMPLICIT_SIZES + 1];
    const clcnn_conv2d_shape *s = &n->conv;
    gemm_tuned_args t = {n, io, pass, 0, {0}};
    clcnn_status st = CLCNN_SUCCESS;
    for (int z = 0; z < IMPLICIT_SIZES; z++)
        if (implicit_runs(io->ctx, z)) names[t.nz] = implicit_sizes[z].name, t.zs[t.nz++] = z;
    names[t.nz] = "im2col";
    char key[96];
    snprintf(key, sizeof key, "conv-%s-%d-%d-%d-%d-%d-%d-%d-%d", passes[pass], s->C, s->H, s->W,
             s->OC, s->K, s->stride, s->pad, io->N);
    int c = clcnn_tune_choose(io->ctx, key, names, t.nz + 1, gemm_tuned_run, &t, &st);
    if (st) return st;
    return gemm_tuned_run(io->ctx, c < 0 ? t.nz : c, &t);
}

static clcnn_status gemm_tuned_fwd_run(const clcnn_node *n, const clcnn_io *io) {
    return gemm_tuned(n, io, CLCNN_PASS_FORWARD);
}

static clcnn_status gemm_tuned_wgrad_run(const clcnn_node *n, const clcnn_io *io) {
    return gemm_tuned(n, io, CLCNN_PASS_WGRAD);
}

static clcnn_status gemm_tuned_dgrad_run(const clcnn_node *n, const clcnn_io *io) {
    return gemm_tuned(n, io, CLCNN_PASS_DGRAD);
}

/* Each pass's im2col way may run: its scratch (the input gradient's, of the flipped shape). */
static void gemm_tuned_fwd_ws(const clcnn_context *ctx, const clcnn_node *n, int N,
                              clcnn_node_ws *ws) {
    (void)ctx;
    clcnn_conv_grow_im2col(&n->conv, clcnn_conv_plan_chunk(&n->conv, N), ws);
}

static void gemm_tuned_wgrad_ws(const clcnn_context *ctx, const clcnn_node *n, int N,
                                clcnn_node_ws *ws) {
    wgrad_implicit_ws(ctx, n, N, ws);
    clcnn_conv_grow_im2col(&n->conv, clcnn_conv_plan_chunk(&n->conv, N), ws);
}

/* Where the rows apply: a device that runs one of the sizes (and, for gemm-tuned, autotuning
 * to time them); the input gradient where it is the flipped convolution. */
static int implicit_applies(const clcnn_context *ctx, const clcnn_node *n) {
    return clcnn_conv_single(ctx, n) && clcnn_conv_implicit_ok(ctx);
}

static int tuned_applies(const clcnn_context *ctx, const clcnn_node *n) {
    return implicit_applies(ctx, n) && clcnn_tune_enabled(ctx);
}

static int flip_implicit_applies(const clcnn_context *ctx, const clcnn_node *n) {
    return clcnn_conv_flips(ctx, n) && clcnn_conv_implicit_ok(ctx);
}

static int flip_tuned_applies(const clcnn_context *ctx, const clcnn_node *n) {
    return flip_implicit_applies(ctx, n) && clcnn_tune_enabled(ctx);
}

const clcnn_algo clcnn_conv_implicit = {
    .name = "implicit",
    .pass = CLCNN_PASS_FORWARD,
    .flags = CLCNN_ALGO_IMPLICIT_GEMM,
    .path = CONV_PATH_IMPLICIT,
    .applies = implicit_applies,
    .run = implicit_run,
};

const clcnn_algo clcnn_conv_wgrad_implicit = {
    .name = "wgrad-implicit",
    .pass = CLCNN_PASS_WGRAD,
    .flags = CLCNN_ALGO_IMPLICIT_GEMM,
    .path = CONV_PATH_IMPLICIT,
    .applies = implicit_applies,
    .workspace = wgrad_implicit_ws,
    .run = wgrad_implicit_run,
};

const clcnn_algo clcnn_conv_flip_implicit = {
    .name = "flip-implicit",
    .pass = CLCNN_PASS_DGRAD,
    .flags = CLCNN_ALGO_IMPLICIT_GEMM | CLCNN_ALGO_FLIPPED_W,
    .path = CONV_PATH_IMPLICIT,
    .applies = flip_implicit_applies,
    .run = flip_implicit_run,
};

const clcnn_algo clcnn_conv_gemm_tuned_fwd = {
    .name = "gemm-tuned",
    .pass = CLCNN_PASS_FORWARD,
    .path = CONV_PATH_TUNED,
    .applies = tuned_applies,
    .workspace = gemm_tuned_fwd_ws,
    .run = gemm_tuned_fwd_run,
};

const clcnn_algo clcnn_conv_gemm_tuned_wgrad = {
    .name = "gemm-tuned",
    .pass = CLCNN_PASS_WGRAD,
    .path = CONV_PATH_TUNED,
    .applies = tuned_applies,
    .workspace = gemm_tuned_wgrad_ws,
    .run = gemm_tuned_wgrad_run,
};

const clcnn_algo clcnn_conv_gemm_tuned_dgrad = {
    .name = "gemm-tuned",
    .pass = CLCNN_PASS_DGRAD,
    .flags = CLCNN_ALGO_FLIPPED_W,
    .path = CONV_PATH_TUNED,
    .applies = flip_tuned_applies,
    .workspace = clcnn_conv_flip_im2col_ws,
    .run = gemm_tuned_dgrad_run,
};
