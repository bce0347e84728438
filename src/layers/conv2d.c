/* Conv2d (nn.Conv2d, zero padding, no dilation or groups): weight (OC, C, K, K), bias (OC).
 * Its algorithms (cl/conv2d.cl), chosen by the plan:
 * - forward: `direct` (stride 1: a padded copy of the input, one launch for the batch; output
 *   columns in the vector lanes), `direct-lanes` (the same with output channels in the lanes),
 *   `direct+pool` (direct with a following MaxPool2d(2) in its store: a fused node),
 *   `winograd` / `winograd+pool` (Winograd F(2x2, 5x5) over the padded input, CPU-shaped; the
 *   same fused pool),
 *   `implicit` (an implicit GEMM shaped for GPUs, any stride: the image gathered into local
 *   memory, no scratch), or `im2col` (im2col + GEMM + scatter, in chunks of images);
 * - weight gradient: `wgrad-rows` (gy as pixel rows, an implicit GEMM against the padded
 *   input), `wgrad-lanes` (gy read in place, reduced across lanes), `wgrad-tuned` (either,
 *   timed once), `wgrad-implicit` (the GPU-shaped implicit GEMM, split over the batch's
 *   pixels) or `im2col` (gather + GEMM);
 * - input gradient: `flip-direct` / `flip-lanes` / `flip-winograd` / `flip-implicit` /
 *   `flip-im2col` (stride 1, pad <= K-1: a convolution of gy with the flipped weights, by a
 *   direct kind, Winograd, the implicit GEMM or im2col) or `col2im` (GEMM + col2im). */
#include "layer.h"

#include <string.h>

#include "gemm.h"
#include "tune.h"

/* Scratch budget for the im2col matrix: bigger batches run in chunks. A layer whose
 * whole-batch im2col fits KEEP_FLOATS keeps its own copy from the forward for the backward,
 * which saves building it twice per step. */
enum { WORKSPACE_FLOATS = 16 << 20, KEEP_FLOATS = 64 << 20 };

/* Spec syntax (docs/MODEL_SPEC.md) */

static clcnn_status conv2d_finish(const clcnn_spec_parser *p, const clcnn_layer_args *a,
                                  clcnn_layer_desc *d) {
    (void)p;
    d->out = a->val[CLCNN_SLOT_OUT];
    d->kernel = a->val[CLCNN_SLOT_KERNEL];
    d->stride = clcnn_layer_arg(a, CLCNN_SLOT_STRIDE, 1);
    d->pad = clcnn_layer_arg(a, CLCNN_SLOT_PAD, 0);
    d->bias = clcnn_layer_arg(a, CLCNN_SLOT_BIAS, 1);
    return CLCNN_SUCCESS;
}

static void conv2d_format(const clcnn_layer_desc *d, clcnn_spec_buf *b) {
    clcnn_spec_append(b, "conv(%d,%d,stride=%d,pad=%d%s)", d->out, d->kernel, d->stride, d->pad,
                      d->bias ? "" : ",bias=0");
}

const clcnn_layer_syntax clcnn_conv2d_syntax = {
    .name = "conv",
    .aliases = {"conv2d"},
    .torch_name = "Conv2d",
    .pos = {CLCNN_SLOT_OUT, CLCNN_SLOT_KERNEL, CLCNN_SLOT_STRIDE, CLCNN_SLOT_PAD},
    .npos = 4,
    .nreq = 2,
    .kw = CLCNN_SLOT_BIT(CLCNN_SLOT_STRIDE) | CLCNN_SLOT_BIT(CLCNN_SLOT_PAD) |
          CLCNN_SLOT_BIT(CLCNN_SLOT_BIAS),
    .finish = conv2d_finish,
    .format = conv2d_format,
};

static clcnn_status conv_shape(clcnn_node *n, clcnn_params *pl, clcnn_error *e, const char *where) {
    const clcnn_layer_desc *d = &n->d;
    clcnn_status st = clcnn_window_shape(n, e, where);
    if (st) return st;
    int64_t ws[4] = {d->out, n->x.c, d->kernel, d->kernel}, bs[1] = {d->out};
    if (clcnn_params_add(pl, n->path, "weight", CLCNN_PARAM_WEIGHT, 4, ws) < 0 ||
        (d->bias && clcnn_params_add(pl, n->path, "bias", CLCNN_PARAM_NO_DECAY, 1, bs) < 0))
        return clcnn_fail(e, CLCNN_ERR_SHAPE, "%s: too many parameter tensors", where);
    n->conv = (clcnn_conv2d_shape){n->x.c,    n->x.h, n->x.w, d->out, d->kernel,
                                   d->stride, d->pad, n->y.h, n->y.w, d->bias};
    n->y.c = d->out;
    n->flops = 2.0 * d->out * n->y.h * n->y.w * n->x.c * d->kernel * d->kernel;
    return CLCNN_SUCCESS;
}

/* The convolution whose forward pass computes this layer's input gradient, when the layer has
 * stride 1 and pad <= K-1: channels swapped, weights flipped, padding K-1-pad. */
static int grad_input_shape(const clcnn_conv2d_shape *s, clcnn_conv2d_shape *g) {
    if (s->stride != 1 || s->pad > s->K - 1) return 0;
    *g = (clcnn_conv2d_shape){s->OC, s->OH, s->OW, s->C, s->K, 1, s->K - 1 - s->pad, s->H, s->W, 0};
    return 1;
}

/* Floats past the padded input that the direct kernels read (in lanes they do not store): the
 * last tile's extra rows (up to 3) and lanes past the edge. */
static size_t pad_slack(size_t wp) {
    return 3 * wp + 32;
}

/* Floats of padded input the direct kernels need for N images of s. */
static size_t direct_scratch(const clcnn_conv2d_shape *s, int N) {
    size_t hp = (size_t)s->H + 2 * (size_t)s->pad, wp = (size_t)s->W + 2 * (size_t)s->pad;
    return (size_t)N * (size_t)s->C * hp * wp + pad_slack(wp);
}

/* Floats of im2col matrix and GEMM rows per image. */
static void per_image(const clcnn_conv2d_shape *s, size_t *col, size_t *rows) {
    size_t ohw = (size_t)s->OH * (size_t)s->OW;
    *col = ohw * (size_t)s->C * (size_t)s->K * (size_t)s->K;
    *rows = ohw * (size_t)s->OC;
}

/* Images per im2col chunk given the allocated scratch (not capped at the batch). */
static int chunk_of(const clcnn_conv2d_shape *s, const clcnn_io *io) {
    size_t per_col, per_rows;
    per_image(s, &per_col, &per_rows);
    size_t a = per_col ? io->ws.col / per_col : 1, b = per_rows ? io->ws.rows / per_rows : 1;
    size_t c = a < b ? a : b;
    return c > 1 << 20 ? 1 << 20 : (int)c;
}

/* The tiles of the convolutions with output channels in the vector lanes (conv_bcast_s1*):
 * 16*v channels x r rows x q columns. */
typedef struct bcast_tile {
    clcnn_kernel_id k;
    int v, r, q;
} bcast_tile;

static const bcast_tile bcast_tiles[] = {
    {CLCNN_K_conv_bcast_s1_w28, 1, 1, 28},
    {CLCNN_K_conv_bcast_s1_w14, 1, 2, 14},
    {CLCNN_K_conv_bcast_s1, 1, 4, 7},
    {CLCNN_K_conv_bcast_s1_3x3, 2, 3, 3},
};

/* BCAST_MIN_TAPS: below this many taps per output (C*K*K) the copy of each tile to NCHW
 * costs more than the broadcasts save (a 1-channel input, say). */
enum { BCAST_MIN_TAPS = 64, BCAST_NONE = -1 };

/* Output channels rounded up to a whole number of t's channel blocks. */
static int lanes_of(const bcast_tile *t, int oc) {
    return (oc + 16 * t->v - 1) / (16 * t->v) * (16 * t->v);
}

/* The tile of the lanes kernels for s that wastes least (an index into bcast_tiles); with
 * strict, BCAST_NONE unless it wastes at most a quarter of the work and s has at least
 * BCAST_MIN_TAPS taps per output (the rule for taking direct-lanes). */
static int pick_bcast(const clcnn_conv2d_shape *s, int strict) {
    int best = 0;
    double best_eff = 0, used = (double)s->OC * s->OH * s->OW;
    for (int i = 0; i < (int)(sizeof bcast_tiles / sizeof bcast_tiles[0]); i++) {
        const bcast_tile *t = &bcast_tiles[i];
        double done = (double)lanes_of(t, s->OC) * ((s->OH + t->r - 1) / t->r * t->r) *
                      ((s->OW + t->q - 1) / t->q * t->q);
        if (used / done > best_eff) best = i, best_eff = used / done;
    }
    if (strict && (best_eff < 0.75 || s->C * s->K * s->K < BCAST_MIN_TAPS)) return BCAST_NONE;
    return best;
}

/* Floats of weights in lanes layout the lanes kernels need for s. */
static size_t bcast_weights(const clcnn_conv2d_shape *s) {
    return (size_t)lanes_of(&bcast_tiles[pick_bcast(s, 0)], s->OC) * s->C * s->K * s->K;
}

/* The shape arguments of the kernels that read a padded input (the direct and lanes
 * convolutions, the direct weight gradients): C, Hp, Wp, OC, K, OH, OW. */
static void padded_shape_args(clcnn_args *a, const clcnn_conv2d_shape *s) {
    int hp = s->H + 2 * s->pad, wp = s->W + 2 * s->pad;
    CLCNN_ARG(a, s->C);
    CLCNN_ARG(a, hp);
    CLCNN_ARG(a, wp);
    CLCNN_ARG(a, s->OC);
    CLCNN_ARG(a, s->K);
    CLCNN_ARG(a, s->OH);
    CLCNN_ARG(a, s->OW);
}

/* y = conv(xp, w) by conv_bcast_s1: the weights (params at woff, as (OC, C, K, K); with flip,
 * those of the convolution whose input gradient this is, as (C, OC, K, K)) into lanes layout
 * in wl, then one launch for the batch. */
static clcnn_status conv_bcast(clcnn_context *ctx, cl_mem xp, const clcnn_conv2d_shape *s, cl_mem y,
                               cl_mem params, int woff, int boff, int flip, cl_mem wl, int N) {
    const bcast_tile *t = &bcast_tiles[pick_bcast(s, 0)];
    clcnn_kern *kl = clcnn_kernel(ctx, CLCNN_K_weights_to_lanes), *k = clcnn_kernel(ctx, t->k);
    int taps = s->K * s->K, op = lanes_of(t, s->OC);
    clcnn_status st;
    clcnn_args a = {kl->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, wl);
    CLCNN_ARG(&a, params);
    CLCNN_ARG(&a, woff);
    CLCNN_ARG(&a, s->OC);
    CLCNN_ARG(&a, s->C);
    CLCNN_ARG(&a, taps);
    CLCNN_ARG(&a, op);
    CLCNN_ARG(&a, flip);
    if ((st = clcnn_launch1d(ctx, kl, &a, (size_t)s->C * taps))) return st;
    clcnn_args b = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&b, y);
    CLCNN_ARG(&b, xp);
    CLCNN_ARG(&b, wl);
    CLCNN_ARG(&b, op);
    CLCNN_ARG(&b, params);
    CLCNN_ARG(&b, boff);
    CLCNN_ARG(&b, s->bias);
    padded_shape_args(&b, s);
    size_t global[3] = {(size_t)((s->OW + t->q - 1) / t->q) * (size_t)((s->OH + t->r - 1) / t->r),
                        (size_t)op / (16 * (size_t)t->v), (size_t)N};
    return clcnn_launch_single(ctx, k, &b, 3, global);
}

/* The Winograd F(2x2, 5x5) kernels' limit on output channels (WINO_OC in cl/conv2d.cl). */
enum { WINO_OC = 64 };

/* Where the rules take Winograd on CPU devices: at least WINO_MIN_C input and WINO_MIN_OC
 * output channels. Its input transform costs per input channel what the products save per
 * output channel, so it pays with many of both: on PoCL (batch 64, 5x5, against
 * conv_direct_s1, transforms included) 0.64x at 3 -> 32 channels (32x32 maps), 0.84x at
 * 6 -> 16, 0.99x at 8 -> 32, 1.05x at 16 -> 16, 1.23x at 16 -> 32, 1.3-1.5x at 32 -> 32
 * (16x16), 1.6-1.9x at 32 or 64 -> 64 or 32 (8x8). */
enum { WINO_MIN_C = 16, WINO_MIN_OC = 32 };

/* Whether the Winograd kernels take s: 5x5 taps, stride 1, at most WINO_OC outputs. */
static int wino_fits(const clcnn_conv2d_shape *s) {
    return s->K == 5 && s->stride == 1 && s->OC <= WINO_OC;
}

/* Whether the rules take Winograd for s: where they take the direct kernels (CPU devices, no
 * CLCNN_CONV_ALGO) and s has channels enough. */
static int wino_rule(const clcnn_context *ctx, const clcnn_conv2d_shape *s) {
    return ctx->conv_algo == CLCNN_CONV_ALGO_DEFAULT && clcnn_gemm_kind(ctx) == CLCNN_GEMM_CPU &&
           wino_fits(s) && s->C >= WINO_MIN_C && s->OC >= WINO_MIN_OC;
}

/* Floats of s's transformed weights (36 per filter, output channels rounded up to 16). */
static size_t wino_weights(const clcnn_conv2d_shape *s) {
    return 36 * (size_t)s->C * (size_t)((s->OC + 15) / 16 * 16);
}

/* y = conv(xp, w) by Winograd F(2x2, 5x5): the weights (params at woff, as (OC, C, 5, 5); with
 * flip, those of the convolution whose input gradient this is, as (C, OC, 5, 5)) transformed
 * into U, then one launch for the batch. With argmax, a MaxPool2d(2) rides in the store as in
 * conv_direct (y pooled, the hand-off into ypad when ypad_pad >= 0). */
static clcnn_status conv_wino(clcnn_context *ctx, cl_mem xp, const clcnn_conv2d_shape *s, cl_mem y,
                              cl_mem params, int woff, int boff, int flip, cl_mem U, int N,
                              cl_mem argmax, cl_mem ypad, int ypad_pad, int ypad_only) {
    clcnn_kern *kw = clcnn_kernel(ctx, CLCNN_K_wino5_weights);
    int ocp = (s->OC + 15) / 16 * 16, zero = 0, narrow = s->OW <= 8;
    clcnn_kern *k = clcnn_kernel(ctx, narrow ? CLCNN_K_conv_wino5_w4 : CLCNN_K_conv_wino5);
    clcnn_status st;
    clcnn_args a = {kw->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, U);
    CLCNN_ARG(&a, params);
    CLCNN_ARG(&a, woff);
    CLCNN_ARG(&a, s->OC);
    CLCNN_ARG(&a, s->C);
    CLCNN_ARG(&a, ocp);
    CLCNN_ARG(&a, flip);
    size_t wglobal[2] = {(size_t)s->C, (size_t)ocp / 16};
    if ((st = clcnn_launch_single(ctx, kw, &a, 2, wglobal))) return st;
    int pool = argmax != NULL, hand = pool && ypad ? ypad_pad : -1, only = hand >= 0 && ypad_only;
    cl_mem am = pool ? argmax : y, yp = hand >= 0 ? ypad : y; /* valid buffers left alone */
    clcnn_args b = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&b, y);
    CLCNN_ARG(&b, zero);
    CLCNN_ARG(&b, xp);
    CLCNN_ARG(&b, U);
    CLCNN_ARG(&b, ocp);
    CLCNN_ARG(&b, params);
    CLCNN_ARG(&b, boff);
    CLCNN_ARG(&b, s->bias);
    padded_shape_args(&b, s);
    CLCNN_ARG(&b, am);
    CLCNN_ARG(&b, pool);
    CLCNN_ARG(&b, yp);
    CLCNN_ARG(&b, hand);
    CLCNN_ARG(&b, only);
    size_t th = (size_t)(s->OH + 1) / 2, tw = (size_t)(s->OW + 1) / 2;
    size_t global[3] = {narrow ? 1 : (tw + 7) / 8, narrow ? (th + 3) / 4 : (th + 1) / 2, (size_t)N};
    return clcnn_launch_single(ctx, k, &b, 3, global);
}

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

static int implicit_ok(const clcnn_context *ctx) {
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

/* grads[woff ..] = the sum of S weight-gradient slices of n floats each, consecutive in part
 * (the split-K weight gradients' partial sums), by gemm_reduce as one n-wide row. */
static clcnn_status reduce_slices(clcnn_context *ctx, cl_mem grads, int woff, cl_mem part, int n,
                                  int S) {
    clcnn_kern *r = clcnn_kernel(ctx, CLCNN_K_gemm_reduce);
    float alpha = 1.0f, beta = 0.0f;
    int one = 1;
    clcnn_args b = {r->k, 0, CL_SUCCESS};
    CLCNN_ARG(&b, grads);
    CLCNN_ARG(&b, woff);
    CLCNN_ARG(&b, n);
    CLCNN_ARG(&b, part);
    CLCNN_ARG(&b, one);
    CLCNN_ARG(&b, n);
    CLCNN_ARG(&b, S);
    CLCNN_ARG(&b, alpha);
    CLCNN_ARG(&b, beta);
    return clcnn_launch1d(ctx, r, &b, (size_t)n);
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
    CLCNN_ARG(&a, io->gy);
    CLCNN_ARG(&a, io->x[0]);
    implicit_shape_args(&a, s, io->N);
    CLCNN_ARG(&a, peri);
    implicit_panels(&a, z);
    size_t global[3] = {((size_t)ckk + tk - 1) / tk * gx, ((size_t)s->OC + tc - 1) / tc * gy,
                        (size_t)S};
    size_t local[3] = {gx, gy, 1};
    if ((st = clcnn_launch(ctx, k, &a, 3, global, local))) return st;
    return S > 1 ? reduce_slices(ctx, io->grads, io->woff, io->col, s->OC * ckk, S) : CLCNN_SUCCESS;
}

/* pad_input's work per work-item, in padded floats: whole planes up to about this many. */
enum { PAD_ITEM_FLOATS = 256 };

/* conv_direct_s1's work per work-item, in vector fmas: a 16-column tile of a layer with few taps
 * (16 per tap) is too little for one work-group on PoCL, so a work-item takes this many tiles'
 * worth, in whole tiles. seed's first layer (75 taps: 3 tiles a work-item) 43-50 -> 36-40 ms
 * per 30 steps; its 800-tap layers keep one. */
enum { DIRECT_ITEM_FMAS = 4096 };

/* The direct stride-1 convolution: pad the input once, then one launch for the batch. */
static clcnn_status conv_direct(clcnn_context *ctx, cl_mem xp, int padded,
                                const clcnn_conv2d_shape *s, cl_mem y, cl_mem x, cl_mem params,
                                int woff, int boff, int N, cl_mem argmax, cl_mem ypad, int ypad_pad,
                                int ypad_only) {
    int hp = s->H + 2 * s->pad, wp = s->W + 2 * s->pad, nc = N * s->C, zero = 0;
    int slack = (int)pad_slack((size_t)wp);
    clcnn_kern *pad = clcnn_kernel(ctx, CLCNN_K_pad_input);
    clcnn_kern *k = clcnn_kernel(ctx, CLCNN_K_conv_direct_s1);
    clcnn_status st;
    if (padded) goto conv; /* xp already holds this x, padded (a kept forward input) */
    clcnn_args a = {pad->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, xp);
    CLCNN_ARG(&a, x);
    CLCNN_ARG(&a, zero);
    CLCNN_ARG(&a, nc);
    CLCNN_ARG(&a, s->H);
    CLCNN_ARG(&a, s->W);
    CLCNN_ARG(&a, s->pad);
    CLCNN_ARG(&a, hp);
    CLCNN_ARG(&a, wp);
    CLCNN_ARG(&a, slack);
    int per = 1 + PAD_ITEM_FLOATS / (hp * wp); /* planes per work-item */
    CLCNN_ARG(&a, per);
    size_t items = (size_t)(nc + per - 1) / (size_t)per;
    if ((st = clcnn_launch_single(ctx, pad, &a, 1, &items))) return st;
conv:
    if (!y) return CLCNN_SUCCESS; /* padding only (the weight gradient's input) */
    int pool = argmax != NULL, narrow = s->OW < 8 ? !pool : s->OW == 8;
    if (narrow) k = clcnn_kernel(ctx, CLCNN_K_conv_direct_s1_w8);
    clcnn_args b = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&b, y);
    CLCNN_ARG(&b, zero);
    CLCNN_ARG(&b, xp);
    CLCNN_ARG(&b, params);
    CLCNN_ARG(&b, woff);
    CLCNN_ARG(&b, boff);
    CLCNN_ARG(&b, s->bias);
    padded_shape_args(&b, s);
    cl_mem am = pool ? argmax : y; /* a valid buffer the kernel does not touch */
    CLCNN_ARG(&b, am);
    CLCNN_ARG(&b, pool);
    /* the pooled output also into the next convolution's padded input (-1: no hand-off) */
    cl_mem yp = pool && ypad ? ypad : y;
    int hand = pool && ypad ? ypad_pad : -1, only = hand >= 0 && ypad_only;
    CLCNN_ARG(&b, yp);
    CLCNN_ARG(&b, hand);
    CLCNN_ARG(&b, only);
    size_t tiles = (size_t)((s->OW + 15) / 16) * (size_t)((s->OH + 1) / 2);
    /* tiles per work-item: a tile of a layer with few taps is too little work for one */
    int tpw = DIRECT_ITEM_FMAS / (s->C * s->K * s->K * 16);
    tpw = tpw < 1 ? 1 : (size_t)tpw > tiles ? (int)tiles : tpw;
    if (!narrow) CLCNN_ARG(&b, tpw);
    size_t global[3] = {narrow ? (size_t)(s->OH + 3) / 4 : (tiles + tpw - 1) / tpw,
                        (size_t)(s->OC + 7) / 8, (size_t)N};
    return clcnn_launch_single(ctx, k, &b, 3, global);
}

static clcnn_status im2col(clcnn_context *ctx, const clcnn_conv2d_shape *s, cl_mem col, cl_mem x,
                           int xoff, int n0, int nimg) {
    clcnn_kern *k = clcnn_kernel(ctx, CLCNN_K_im2col);
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, col);
    CLCNN_ARG(&a, x);
    CLCNN_ARG(&a, xoff);
    CLCNN_ARG(&a, n0);
    CLCNN_ARG(&a, nimg);
    CLCNN_ARG(&a, s->C);
    CLCNN_ARG(&a, s->H);
    CLCNN_ARG(&a, s->W);
    CLCNN_ARG(&a, s->K);
    CLCNN_ARG(&a, s->stride);
    CLCNN_ARG(&a, s->pad);
    CLCNN_ARG(&a, s->OH);
    CLCNN_ARG(&a, s->OW);
    return clcnn_launch1d(ctx, k, &a, (size_t)nimg * s->OH * s->OW);
}

/* The direct weight gradient's split: gy as pixel rows of OCp channels, the batch cut into S
 * slices of nb images whose rows (about WGRAD_SLICE_FLOATS) stay in cache while every tap tile
 * passes over them. */
enum { WGRAD_SLICE_FLOATS = 1 << 17 };
/* The row GEMM pays for a transpose of gy, as many bytes as the kernel reads; with few taps
 * (the seed's first layer has 75) that is the larger cost, and conv_wgrad_s1, which reads gy
 * in place and reduces across lanes, wins (measured on PoCL: 2.3 ms against 3.2 ms per step
 * for the seed's conv0, 3.3 against 5.9 ms for its 800-tap conv2). */
enum { WGRAD_ROWS_MIN_TAPS = 128 };

/* Below this many output pixels per channel the direct kernels, which give each work-item a
 * row of pixels, run mostly empty: the resnet preset's 128-channel convolutions on 3x3 maps
 * ran at 26 GFLOP/s forward and 43 backward against im2col + the CPU GEMM's 83 and 104
 * (batch 256, 2-core EPYC guest); at 7x7 both took the same time. The rules take im2col
 * there. */
enum { DIRECT_MIN_PIXELS = 16 };
typedef struct wgrad_plan {
    int ocp, nb, S;
    size_t rows, part; /* floats of ws->rows and ws->col needed */
} wgrad_plan;

/* The row GEMM's split of a batch of N. */
static wgrad_plan plan_wgrad(const clcnn_context *ctx, const clcnn_conv2d_shape *s, int N) {
    wgrad_plan p = {0, 0, 0, 0, 0};
    size_t per = (size_t)s->OH * (size_t)s->OW * (size_t)((s->OC + 31) / 32 * 32);
    size_t nb = (ctx->wgrad_slice ? ctx->wgrad_slice : WGRAD_SLICE_FLOATS) / (per ? per : 1);
    p.ocp = (s->OC + 31) / 32 * 32;
    p.nb = nb < 1 ? 1 : nb > (size_t)N ? N : (int)nb;
    p.S = N > 0 ? (N + p.nb - 1) / p.nb : 1;
    p.rows = (size_t)N * per;
    p.part = p.S > 1 ? (size_t)p.S * (size_t)s->OC * (size_t)s->C * (size_t)s->K * (size_t)s->K : 0;
    return p;
}

/* The direct weight gradient's operands, for its two kernels and the autotuner. */
typedef struct wgrad_args {
    const clcnn_io *io; /* x, the gradient buffer and the weight's offset, the scratch, N */
    const clcnn_conv2d_shape *s;
    wgrad_plan plan;
    cl_mem gy;
    int gp;         /* gy's planes padded by gp (keep_gpad, handed over), 0: plain */
    int rows_ready; /* io->rows already holds gy as pixel rows (after a fused pool) */
    cl_mem xp;      /* the padded input: io->xpad, padded here, or the forward's kept copy */
    int padded;     /* xp already holds x padded */
} wgrad_args;

/* Pads x into w->xp unless the forward left it there. */
static clcnn_status wgrad_pad(clcnn_context *ctx, const wgrad_args *w) {
    const clcnn_io *io = w->io;
    return conv_direct(ctx, w->xp, w->padded, w->s, NULL, io->x[0], io->params, 0, 0, io->N, NULL,
                       NULL, 0, 0);
}

/* Pixel-row GEMM: gy to pixel rows, then an implicit GEMM against the padded input, per
 * slice of the batch, and the slices' sum. */
static clcnn_status wgrad_rows(clcnn_context *ctx, const wgrad_args *w) {
    const clcnn_io *ws = w->io;
    const clcnn_conv2d_shape *s = w->s;
    wgrad_plan plan = w->plan;
    cl_mem grads = ws->grads;
    int woff = ws->woff, N = ws->N;
    int ohw = s->OH * s->OW, ckk = s->C * s->K * s->K;
    clcnn_status st;
    clcnn_kern *tr = clcnn_kernel(ctx, CLCNN_K_gy_to_rows_pad);
    clcnn_kern *k = clcnn_kernel(ctx, CLCNN_K_conv_wgrad_rows);
    if ((st = wgrad_pad(ctx, w))) return st;
    clcnn_args t = {tr->k, 0, CL_SUCCESS};
    CLCNN_ARG(&t, ws->rows);
    CLCNN_ARG(&t, w->gy);
    CLCNN_ARG(&t, w->gp);
    CLCNN_ARG(&t, N);
    CLCNN_ARG(&t, s->OC);
    CLCNN_ARG(&t, s->OH);
    CLCNN_ARG(&t, s->OW);
    CLCNN_ARG(&t, plan.ocp);
    if (!w->rows_ready && (st = clcnn_launch1d(ctx, tr, &t, (size_t)N * ohw))) return st;
    cl_mem out = plan.S > 1 ? ws->col : grads;
    int outoff = plan.S > 1 ? 0 : woff, ostride = s->OC * ckk;
    if (plan.ocp % 64 == 0) k = clcnn_kernel(ctx, CLCNN_K_conv_wgrad_rows64);
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, out);
    CLCNN_ARG(&a, outoff);
    CLCNN_ARG(&a, ostride);
    CLCNN_ARG(&a, ws->rows);
    CLCNN_ARG(&a, plan.ocp);
    CLCNN_ARG(&a, w->xp);
    CLCNN_ARG(&a, N);
    CLCNN_ARG(&a, plan.nb);
    padded_shape_args(&a, s);
    size_t global[3] = {(size_t)(ckk + 7) / 8, (size_t)plan.ocp / 32, (size_t)plan.S};
    if (plan.ocp % 64 == 0) /* conv_wgrad_rows64's tile: 6 taps x 64 channels */
        global[0] = (size_t)(ckk + 5) / 6, global[1] = (size_t)plan.ocp / 64;
    if ((st = clcnn_launch_single(ctx, k, &a, 3, global))) return st;
    return plan.S > 1 ? reduce_slices(ctx, grads, woff, ws->col, s->OC * ckk, plan.S)
                      : CLCNN_SUCCESS;
}

/* Lane reduction: reads gy in place, sums along rows in float16 lanes (conv_wgrad_s1). */
static clcnn_status wgrad_lanes(clcnn_context *ctx, const wgrad_args *w) {
    const clcnn_conv2d_shape *s = w->s;
    const clcnn_io *io = w->io;
    int ckk = s->C * s->K * s->K, zero = 0;
    clcnn_status st;
    clcnn_kern *k = clcnn_kernel(ctx, CLCNN_K_conv_wgrad_s1);
    if ((st = wgrad_pad(ctx, w))) return st;
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, io->grads);
    CLCNN_ARG(&a, io->woff);
    CLCNN_ARG(&a, w->gy);
    CLCNN_ARG(&a, zero);
    CLCNN_ARG(&a, w->xp);
    CLCNN_ARG(&a, io->N);
    padded_shape_args(&a, s);
    size_t global[2] = {(size_t)(ckk + 3) / 4, (size_t)(s->OC + 3) / 4};
    return clcnn_launch_single(ctx, k, &a, 2, global);
}

static clcnn_status wgrad_run(clcnn_context *ctx, int c, void *arg) {
    return c == 1 ? wgrad_rows(ctx, arg) : wgrad_lanes(ctx, arg);
}

static int has(const clcnn_algo *list, int n, clcnn_algo a) {
    for (int i = 0; i < n; i++)
        if (list[i] == a) return 1;
    return 0;
}

/* Forward: direct or direct-lanes (stride 1), winograd (5x5, stride 1, at most WINO_OC
 * outputs), implicit (devices that run one of its sizes), or im2col. Weight gradient: rows,
 * lanes (stride 1), implicit or im2col. Input gradient: the flipped convolution (stride 1, pad
 * <= K-1) by direct, direct-lanes, im2col, winograd (where it fits the flipped shape) or
 * implicit, or col2im. With autotuning on, each pass that has an implicit GEMM also has
 * gemm-tuned (that or its im2col way, timed). A fused node: direct+pool or winograd+pool,
 * wgrad-rows, flip-direct or flip-winograd. */
static int conv_algos(const clcnn_context *ctx, const clcnn_node *n, int pass, clcnn_algo *out) {
    const clcnn_conv2d_shape *s = &n->conv;
    clcnn_conv2d_shape g;
    int k = 0, s1 = s->stride == 1;
    if (pass == CLCNN_PASS_FORWARD) {
        if (n->n_layers == 2) {
            out[k++] = CLCNN_ALGO_DIRECT_POOL;
            if (wino_fits(s)) out[k++] = CLCNN_ALGO_WINOGRAD_POOL;
            return k;
        }
        if (s1) out[k++] = CLCNN_ALGO_DIRECT, out[k++] = CLCNN_ALGO_DIRECT_LANES;
        if (wino_fits(s)) out[k++] = CLCNN_ALGO_WINOGRAD;
        if (implicit_ok(ctx)) out[k++] = CLCNN_ALGO_IMPLICIT;
        if (implicit_ok(ctx) && clcnn_tune_enabled(ctx)) out[k++] = CLCNN_ALGO_GEMM_TUNED;
        out[k++] = CLCNN_ALGO_IM2COL;
    } else if (pass == CLCNN_PASS_WGRAD) {
        if (n->n_layers == 2) return out[0] = CLCNN_ALGO_WGRAD_ROWS, 1;
        if (s1) out[k++] = CLCNN_ALGO_WGRAD_ROWS, out[k++] = CLCNN_ALGO_WGRAD_LANES;
        if (s1 && clcnn_tune_enabled(ctx)) out[k++] = CLCNN_ALGO_WGRAD_TUNED;
        if (implicit_ok(ctx)) out[k++] = CLCNN_ALGO_WGRAD_IMPLICIT;
        if (implicit_ok(ctx) && clcnn_tune_enabled(ctx)) out[k++] = CLCNN_ALGO_GEMM_TUNED;
        out[k++] = CLCNN_ALGO_IM2COL;
    } else if (n->need_gx) {
        int gw = grad_input_shape(s, &g) && wino_fits(&g);
        if (n->n_layers == 2) {
            out[k++] = CLCNN_ALGO_FLIP_DIRECT;
            if (gw) out[k++] = CLCNN_ALGO_FLIP_WINOGRAD;
            return k;
        }
        if (grad_input_shape(s, &g))
            out[k++] = CLCNN_ALGO_FLIP_DIRECT, out[k++] = CLCNN_ALGO_FLIP_LANES,
            out[k++] = CLCNN_ALGO_FLIP_IM2COL;
        if (gw) out[k++] = CLCNN_ALGO_FLIP_WINOGRAD;
        if (grad_input_shape(s, &g) && implicit_ok(ctx)) out[k++] = CLCNN_ALGO_FLIP_IMPLICIT;
        if (grad_input_shape(s, &g) && implicit_ok(ctx) && clcnn_tune_enabled(ctx))
            out[k++] = CLCNN_ALGO_GEMM_TUNED;
        out[k++] = CLCNN_ALGO_COL2IM;
    }
    return k;
}

/* The rules: the direct kernels where the device takes the CPU-shaped GEMM (they are written
 * for CPU devices) and the output has DIRECT_MIN_PIXELS pixels or more or suits the lanes
 * kernels, or where CLCNN_CONV_ALGO=direct asks; im2col elsewhere. A direct forward takes
 * winograd where wino_rule says (not under CLCNN_CONV_ALGO=direct), else direct-lanes where
 * its tiles suit the shape (pick_bcast), else direct; a fused node winograd+pool or
 * direct+pool by the same rule. On the direct path the weight gradient reads gy in place below
 * WGRAD_ROWS_MIN_TAPS taps and takes the row GEMM above (or the autotuner times both); the
 * input gradient is the flipped convolution, by flip-winograd where wino_rule takes the
 * flipped shape, else flip-lanes where the lanes tiles suit it, else by the forward's kind,
 * where the shape allows one, else col2im. CLCNN_CONV_ALGO=implicit takes the implicit GEMMs
 * for all three passes where the device runs them. Off the direct path with autotuning on (a
 * GPU, or a forced GEMM backend other than cpu), each pass takes gemm-tuned where the device
 * runs the implicit GEMMs: the first step times them against im2col + the GEMM backend per
 * shape and keeps the fastest; without tuning no rule picks them (not yet measured faster on
 * any GPU). */
static void conv_plan(const clcnn_context *ctx, clcnn_node *n, const clcnn_plan_force *f) {
    const clcnn_conv2d_shape *s = &n->conv;
    clcnn_conv2d_shape g;
    clcnn_algo a[CLCNN_MAX_ALGOS];
    if (n->n_layers == 2) { /* fused: Winograd where the rules take it, else direct */
        int gw = grad_input_shape(s, &g) && wino_rule(ctx, &g);
        n->algo[CLCNN_PASS_FORWARD] =
            wino_rule(ctx, s) ? CLCNN_ALGO_WINOGRAD_POOL : CLCNN_ALGO_DIRECT_POOL;
        n->algo[CLCNN_PASS_WGRAD] = CLCNN_ALGO_WGRAD_ROWS;
        n->algo[CLCNN_PASS_DGRAD] = !n->need_gx ? CLCNN_ALGO_NONE
                                    : gw        ? CLCNN_ALGO_FLIP_WINOGRAD
                                                : CLCNN_ALGO_FLIP_DIRECT;
        for (int p = 0; p < CLCNN_PASS_COUNT; p++)
            if (f && has(a, conv_algos(ctx, n, p, a), f->algo[p])) n->algo[p] = f->algo[p];
        return;
    }
    int na = conv_algos(ctx, n, CLCNN_PASS_FORWARD, a), taps = s->C * s->K * s->K;
    int lanes = pick_bcast(s, 1) != BCAST_NONE;
    int tiny = s->OH * s->OW < DIRECT_MIN_PIXELS && !lanes;
    int implicit = ctx->conv_algo == CLCNN_CONV_ALGO_IMPLICIT && has(a, na, CLCNN_ALGO_IMPLICIT);
    int direct = ctx->conv_algo == CLCNN_CONV_ALGO_DIRECT ||
                 (ctx->conv_algo == CLCNN_CONV_ALGO_DEFAULT &&
                  clcnn_gemm_kind(ctx) == CLCNN_GEMM_CPU && !tiny);
    direct = direct && has(a, na, CLCNN_ALGO_DIRECT);
    int tuned = !implicit && !direct && ctx->conv_algo == CLCNN_CONV_ALGO_DEFAULT &&
                has(a, na, CLCNN_ALGO_GEMM_TUNED);
    clcnn_algo fwd = implicit            ? CLCNN_ALGO_IMPLICIT
                     : tuned             ? CLCNN_ALGO_GEMM_TUNED
                     : !direct           ? CLCNN_ALGO_IM2COL
                     : wino_rule(ctx, s) ? CLCNN_ALGO_WINOGRAD
                     : lanes             ? CLCNN_ALGO_DIRECT_LANES
                                         : CLCNN_ALGO_DIRECT;
    if (f && has(a, na, f->algo[CLCNN_PASS_FORWARD])) fwd = f->algo[CLCNN_PASS_FORWARD];
    n->algo[CLCNN_PASS_FORWARD] = fwd;
    implicit = fwd == CLCNN_ALGO_IMPLICIT;
    tuned = fwd == CLCNN_ALGO_GEMM_TUNED;
    direct = fwd != CLCNN_ALGO_IM2COL && !implicit && !tuned;
    n->algo[CLCNN_PASS_WGRAD] = implicit                     ? CLCNN_ALGO_WGRAD_IMPLICIT
                                : tuned                      ? CLCNN_ALGO_GEMM_TUNED
                                : !direct                    ? CLCNN_ALGO_IM2COL
                                : clcnn_tune_enabled(ctx)    ? CLCNN_ALGO_WGRAD_TUNED
                                : taps < WGRAD_ROWS_MIN_TAPS ? CLCNN_ALGO_WGRAD_LANES
                                                             : CLCNN_ALGO_WGRAD_ROWS;
    na = conv_algos(ctx, n, CLCNN_PASS_WGRAD, a);
    if (f && has(a, na, f->algo[CLCNN_PASS_WGRAD])) n->algo[1] = f->algo[CLCNN_PASS_WGRAD];
    na = conv_algos(ctx, n, CLCNN_PASS_DGRAD, a);
    int glanes = grad_input_shape(s, &g) && pick_bcast(&g, 1) != BCAST_NONE;
    int gwino = grad_input_shape(s, &g) && wino_rule(ctx, &g);
    int gimplicit = implicit && has(a, na, CLCNN_ALGO_FLIP_IMPLICIT);
    int gtuned = tuned && has(a, na, CLCNN_ALGO_GEMM_TUNED);
    n->algo[CLCNN_PASS_DGRAD] = na == 0                               ? CLCNN_ALGO_NONE
                                : !has(a, na, CLCNN_ALGO_FLIP_DIRECT) ? CLCNN_ALGO_COL2IM
                                : gimplicit                           ? CLCNN_ALGO_FLIP_IMPLICIT
                                : gtuned                              ? CLCNN_ALGO_GEMM_TUNED
                                : !direct                             ? CLCNN_ALGO_FLIP_IM2COL
                                : gwino                               ? CLCNN_ALGO_FLIP_WINOGRAD
                                : glanes                              ? CLCNN_ALGO_FLIP_LANES
                                                                      : CLCNN_ALGO_FLIP_DIRECT;
    if (f && has(a, na, f->algo[CLCNN_PASS_DGRAD])) n->algo[2] = f->algo[CLCNN_PASS_DGRAD];
}

static int is_direct(clcnn_algo a) {
    return a == CLCNN_ALGO_DIRECT || a == CLCNN_ALGO_DIRECT_POOL || a == CLCNN_ALGO_DIRECT_LANES ||
           a == CLCNN_ALGO_WINOGRAD || a == CLCNN_ALGO_WINOGRAD_POOL;
}

static int is_wgrad_direct(clcnn_algo a) {
    return a == CLCNN_ALGO_WGRAD_ROWS || a == CLCNN_ALGO_WGRAD_LANES || a == CLCNN_ALGO_WGRAD_TUNED;
}

static void grow(size_t *cap, size_t need) {
    if (need > *cap) *cap = need;
}

/* Images per im2col chunk of s (1..N), bounded by WORKSPACE_FLOATS. */
static size_t plan_chunk(const clcnn_conv2d_shape *s, int N) {
    size_t per_col, per_rows;
    per_image(s, &per_col, &per_rows);
    size_t chunk = WORKSPACE_FLOATS / (per_col ? per_col : 1);
    return chunk < 1 ? 1 : chunk > (size_t)N ? (size_t)N : chunk;
}

static void grow_im2col(const clcnn_conv2d_shape *s, size_t chunk, clcnn_node_ws *ws) {
    size_t per_col, per_rows;
    per_image(s, &per_col, &per_rows);
    grow(&ws->col, chunk * per_col);
    grow(&ws->rows, chunk * per_rows);
}

static void conv_workspace(const clcnn_context *ctx, const clcnn_node *n, int N,
                           clcnn_node_ws *ws) {
    const clcnn_conv2d_shape *s = &n->conv;
    clcnn_algo fwd = n->algo[0], wg = n->algo[1], dg = n->algo[2];
    clcnn_conv2d_shape g;
    (void)ctx;
    size_t xp = is_direct(fwd) || is_wgrad_direct(wg) ? direct_scratch(s, N) : 0;
    if (is_direct(fwd)) ws->keep_pad = xp;
    if (fwd == CLCNN_ALGO_DIRECT_LANES) grow(&ws->wflip, bcast_weights(s));
    if (fwd == CLCNN_ALGO_WINOGRAD || fwd == CLCNN_ALGO_WINOGRAD_POOL)
        grow(&ws->wflip, wino_weights(s));
    if (dg == CLCNN_ALGO_FLIP_WINOGRAD && grad_input_shape(s, &g)) {
        grow(&ws->wflip, wino_weights(&g));
        grow(&ws->xpad, direct_scratch(&g, N));
    }
    grow(&ws->xpad, xp);
    if (dg == CLCNN_ALGO_FLIP_LANES && grad_input_shape(s, &g)) {
        grow(&ws->wflip, bcast_weights(&g));
        grow(&ws->xpad, direct_scratch(&g, N));
    }
    if ((dg == CLCNN_ALGO_FLIP_DIRECT || dg == CLCNN_ALGO_FLIP_IM2COL ||
         dg == CLCNN_ALGO_FLIP_IMPLICIT || dg == CLCNN_ALGO_GEMM_TUNED) &&
        grad_input_shape(s, &g)) {
        grow(&ws->wflip, (size_t)s->OC * s->C * s->K * s->K);
        if (dg == CLCNN_ALGO_FLIP_DIRECT) grow(&ws->xpad, direct_scratch(&g, N));
        if (dg == CLCNN_ALGO_FLIP_IM2COL || dg == CLCNN_ALGO_GEMM_TUNED)
            grow_im2col(&g, plan_chunk(&g, N), ws);
    }
    if (wg == CLCNN_ALGO_WGRAD_IMPLICIT || wg == CLCNN_ALGO_GEMM_TUNED) {
        for (int z = 0; z < IMPLICIT_SIZES; z++) { /* either size may run (tuning, tests) */
            long per;
            int S = implicit_slices(ctx, s, N, z, &per);
            if (S > 1) grow(&ws->col, (size_t)S * s->OC * s->C * s->K * s->K);
        }
    }
    if (wg == CLCNN_ALGO_WGRAD_ROWS || wg == CLCNN_ALGO_WGRAD_TUNED) {
        wgrad_plan p = plan_wgrad(ctx, s, N);
        grow(&ws->rows, p.rows);
        grow(&ws->col, p.part);
    }
    if (fwd == CLCNN_ALGO_DIRECT_POOL || fwd == CLCNN_ALGO_WINOGRAD_POOL)
        ws->aux = (size_t)N * n->y.c * n->y.h * n->y.w;
    if (n->gy_padded && grad_input_shape(s, &g)) ws->keep_gpad = direct_scratch(&g, N);
    if (fwd != CLCNN_ALGO_IM2COL && fwd != CLCNN_ALGO_GEMM_TUNED && wg != CLCNN_ALGO_IM2COL &&
        wg != CLCNN_ALGO_GEMM_TUNED && dg != CLCNN_ALGO_COL2IM)
        return;
    size_t per_col, per_rows, chunk = plan_chunk(s, N);
    per_image(s, &per_col, &per_rows);
    if (fwd == CLCNN_ALGO_IM2COL && (size_t)N * per_col <= KEEP_FLOATS) {
        ws->keep_col = (size_t)N * per_col;
        chunk = (size_t)N; /* the whole batch at once: rows must hold it too */
    }
    grow_im2col(s, chunk, ws);
}

/* y (N, OC, OH, OW) = conv(x, w) + b by im2col + GEMM + scatter, in chunks; with keep_col the
 * whole batch's im2col stays there for the backward. */
static clcnn_status forward_im2col(const clcnn_io *io, const clcnn_conv2d_shape *s, cl_mem y,
                                   cl_mem x, cl_mem params, int woff, int boff, cl_mem keep_col) {
    clcnn_context *ctx = io->ctx;
    int N = io->N, chunk = keep_col ? N : chunk_of(s, io), ohw = s->OH * s->OW;
    int ckk = s->C * s->K * s->K, zero = 0;
    cl_mem col = keep_col ? keep_col : io->col;
    CLCNN_ASSERT(chunk > 0); /* the plan sizes the workspace for at least one image */
    clcnn_kern *scatter = clcnn_kernel(ctx, CLCNN_K_rows_to_nchw_bias);
    clcnn_status st;
    for (int n0 = 0; n0 < N; n0 += chunk) {
        int nimg = N - n0 < chunk ? N - n0 : chunk;
        if ((st = im2col(ctx, s, col, x, zero, n0, nimg))) return st;
        /* rows[nimg*OHW, OC] = col[nimg*OHW, CKK] . w[OC, CKK]^T */
        st = clcnn_gemm(ctx, 0, 1, nimg * ohw, s->OC, ckk, 1.0f, col, 0, ckk, params, (size_t)woff,
                        ckk, 0.0f, io->rows, 0, s->OC);
        if (st) return st;
        clcnn_args a = {scatter->k, 0, CL_SUCCESS};
        CLCNN_ARG(&a, y);
        CLCNN_ARG(&a, zero);
        CLCNN_ARG(&a, io->rows);
        CLCNN_ARG(&a, params);
        CLCNN_ARG(&a, boff);
        CLCNN_ARG(&a, s->bias);
        CLCNN_ARG(&a, n0);
        CLCNN_ARG(&a, nimg);
        CLCNN_ARG(&a, s->OC);
        CLCNN_ARG(&a, ohw);
        if ((st = clcnn_launch1d(ctx, scatter, &a, (size_t)nimg * s->OC * ohw))) return st;
    }
    return CLCNN_SUCCESS;
}

static clcnn_status input_grad_conv(const clcnn_node *n, const clcnn_io *io, cl_mem gy,
                                    clcnn_algo a, int z);
static clcnn_status backward_im2col(const clcnn_node *n, const clcnn_io *io, int do_w, int do_x);

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
        return z >= 0 ? conv_implicit(ctx, s, io->y, io->x[0], io->params, io->woff, boff, io->N, z)
                      : forward_im2col(io, s, io->y, io->x[0], io->params, io->woff, boff, NULL);
    if (t->pass == CLCNN_PASS_WGRAD)
        return z >= 0 ? wgrad_implicit(io, s, z) : backward_im2col(t->n, io, 1, 0);
    return input_grad_conv(t->n, io, io->gy,
                           z >= 0 ? CLCNN_ALGO_FLIP_IMPLICIT : CLCNN_ALGO_FLIP_IM2COL, z);
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

static clcnn_status conv_forward(const clcnn_node *n, const clcnn_io *io) {
    const clcnn_conv2d_shape *s = &n->conv;
    int boff = io->boff < 0 ? 0 : io->boff;
    cl_mem xp = io->keep_pad ? io->keep_pad : io->xpad;
    int handed = io->x_padded; /* keep_pad already holds x: its producer wrote it there */
    CLCNN_ASSERT(!handed || io->keep_pad);
    switch (n->algo[CLCNN_PASS_FORWARD]) {
    case CLCNN_ALGO_DIRECT:
        return conv_direct(io->ctx, xp, handed, s, io->y, io->x[0], io->params, io->woff, boff,
                           io->N, NULL, NULL, 0, 0);
    case CLCNN_ALGO_DIRECT_POOL:
        return conv_direct(io->ctx, xp, handed, s, io->y, io->x[0], io->params, io->woff, boff,
                           io->N, io->aux, io->ypad, io->ypad_pad, io->ypad_only);
    case CLCNN_ALGO_DIRECT_LANES: {
        clcnn_status st = conv_direct(io->ctx, xp, handed, s, NULL, io->x[0], NULL, 0, 0, io->N,
                                      NULL, NULL, 0, 0);
        if (st) return st;
        return conv_bcast(io->ctx, xp, s, io->y, io->params, io->woff, boff, 0, io->wflip, io->N);
    }
    case CLCNN_ALGO_WINOGRAD:
    case CLCNN_ALGO_WINOGRAD_POOL: {
        int pool = n->algo[CLCNN_PASS_FORWARD] == CLCNN_ALGO_WINOGRAD_POOL;
        clcnn_status st = conv_direct(io->ctx, xp, handed, s, NULL, io->x[0], NULL, 0, 0, io->N,
                                      NULL, NULL, 0, 0);
        if (st) return st;
        return conv_wino(io->ctx, xp, s, io->y, io->params, io->woff, boff, 0, io->wflip, io->N,
                         pool ? io->aux : NULL, io->ypad, io->ypad_pad, io->ypad_only);
    }
    case CLCNN_ALGO_IMPLICIT:
        return conv_implicit(io->ctx, s, io->y, io->x[0], io->params, io->woff, boff, io->N,
                             implicit_size_of(io->ctx));
    case CLCNN_ALGO_GEMM_TUNED: return gemm_tuned(n, io, CLCNN_PASS_FORWARD);
    default:
        return forward_im2col(io, s, io->y, io->x[0], io->params, io->woff, boff, io->keep_col);
    }
}

/* The stride-1 input gradient as a convolution of gy with the flipped weights, by algorithm a
 * (flip-direct, -lanes, -im2col or -implicit, the last of size z, or the device's when z < 0).
 * gy NULL: io->xpad already holds it padded (flip-direct and flip-lanes only). */
static clcnn_status input_grad_conv(const clcnn_node *n, const clcnn_io *io, cl_mem gy,
                                    clcnn_algo a, int z) {
    const clcnn_conv2d_shape *s = &n->conv;
    clcnn_context *ctx = io->ctx;
    clcnn_conv2d_shape g;
    clcnn_status st;
    int padded = gy == NULL;
    /* handed over: gy's reader wrote it padded into keep_gpad in its backward */
    int handed = io->gy_padded && (a == CLCNN_ALGO_FLIP_LANES || a == CLCNN_ALGO_FLIP_DIRECT ||
                                   a == CLCNN_ALGO_FLIP_WINOGRAD);
    cl_mem gp = handed ? io->keep_gpad : io->xpad;
    CLCNN_ASSERT(grad_input_shape(s, &g));
    CLCNN_ASSERT(!padded || a == CLCNN_ALGO_FLIP_LANES || a == CLCNN_ALGO_FLIP_DIRECT ||
                 a == CLCNN_ALGO_FLIP_WINOGRAD);
    padded = padded || handed;
    if (a == CLCNN_ALGO_FLIP_WINOGRAD) {
        /* pad gy, then the flipped weights go straight into Winograd's transform */
        st = conv_direct(ctx, gp, padded, &g, NULL, gy, NULL, 0, 0, io->N, NULL, NULL, 0, 0);
        if (st) return st;
        return conv_wino(ctx, gp, &g, io->gx[0], io->params, io->woff, 0, 1, io->wflip, io->N, NULL,
                         NULL, 0, 0);
    }
    if (a == CLCNN_ALGO_FLIP_LANES) {
        /* pad gy, then the flipped weights go straight into lanes layout */
        st = conv_direct(ctx, gp, padded, &g, NULL, gy, NULL, 0, 0, io->N, NULL, NULL, 0, 0);
        if (st) return st;
        return conv_bcast(ctx, gp, &g, io->gx[0], io->params, io->woff, 0, 1, io->wflip, io->N);
    }
    clcnn_kern *flip = clcnn_kernel(ctx, CLCNN_K_flip_weights);
    clcnn_args f = {flip->k, 0, CL_SUCCESS};
    CLCNN_ARG(&f, io->wflip);
    CLCNN_ARG(&f, io->params);
    CLCNN_ARG(&f, io->woff);
    CLCNN_ARG(&f, s->OC);
    CLCNN_ARG(&f, s->C);
    CLCNN_ARG(&f, s->K);
    if ((st = clcnn_launch1d(ctx, flip, &f, (size_t)s->OC * s->C))) return st;
    if (a == CLCNN_ALGO_FLIP_DIRECT)
        return conv_direct(ctx, gp, padded, &g, io->gx[0], gy, io->wflip, 0, 0, io->N, NULL, NULL,
                           0, 0);
    if (a == CLCNN_ALGO_FLIP_IMPLICIT)
        return conv_implicit(ctx, &g, io->gx[0], gy, io->wflip, 0, 0, io->N,
                             z < 0 ? implicit_size_of(ctx) : z);
    return forward_im2col(io, &g, io->gx[0], gy, io->wflip, 0, 0, NULL);
}

/* The im2col backward: per chunk, gy gathered into pixel rows; with do_w the weight gradient
 * rows^T . col (col rebuilt unless the forward kept it), with do_x the input gradient through
 * dcol = rows . w and col2im. */
static clcnn_status backward_im2col(const clcnn_node *n, const clcnn_io *io, int do_w, int do_x) {
    const clcnn_conv2d_shape *s = &n->conv;
    clcnn_context *ctx = io->ctx;
    int N = io->N, ohw = s->OH * s->OW, ckk = s->C * s->K * s->K, zero = 0;
    int kept = io->keep_col && n->algo[CLCNN_PASS_FORWARD] == CLCNN_ALGO_IM2COL;
    int chunk = kept ? N : chunk_of(s, io);
    cl_mem col = kept ? io->keep_col : io->col;
    CLCNN_ASSERT(chunk > 0);
    clcnn_kern *gather = clcnn_kernel(ctx, CLCNN_K_nchw_to_rows),
               *c2i = clcnn_kernel(ctx, CLCNN_K_col2im);
    clcnn_status st;
    for (int n0 = 0; n0 < N; n0 += chunk) {
        int nimg = N - n0 < chunk ? N - n0 : chunk;
        clcnn_args a = {gather->k, 0, CL_SUCCESS};
        CLCNN_ARG(&a, io->rows);
        CLCNN_ARG(&a, io->gy);
        CLCNN_ARG(&a, zero);
        CLCNN_ARG(&a, n0);
        CLCNN_ARG(&a, nimg);
        CLCNN_ARG(&a, s->OC);
        CLCNN_ARG(&a, ohw);
        if ((st = clcnn_launch1d(ctx, gather, &a, (size_t)nimg * s->OC * ohw))) return st;
        if (do_w && !kept && (st = im2col(ctx, s, col, io->x[0], zero, n0, nimg))) return st;
        /* gw[OC, CKK] (+)= rows^T . col; the first chunk overwrites */
        if (do_w &&
            (st = clcnn_gemm(ctx, 1, 0, s->OC, ckk, nimg * ohw, 1.0f, io->rows, 0, s->OC, col, 0,
                             ckk, n0 == 0 ? 0.0f : 1.0f, io->grads, (size_t)io->woff, ckk)))
            return st;
        if (!do_x) continue;
        /* dcol[nimg*OHW, CKK] = rows . w, written over col (the queue is in order) */
        st = clcnn_gemm(ctx, 0, 0, nimg * ohw, ckk, s->OC, 1.0f, io->rows, 0, s->OC, io->params,
                        (size_t)io->woff, ckk, 0.0f, col, 0, ckk);
        if (st) return st;
        clcnn_args b = {c2i->k, 0, CL_SUCCESS};
        CLCNN_ARG(&b, io->gx[0]);
        CLCNN_ARG(&b, zero);
        CLCNN_ARG(&b, col);
        CLCNN_ARG(&b, n0);
        CLCNN_ARG(&b, nimg);
        CLCNN_ARG(&b, s->C);
        CLCNN_ARG(&b, s->H);
        CLCNN_ARG(&b, s->W);
        CLCNN_ARG(&b, s->K);
        CLCNN_ARG(&b, s->stride);
        CLCNN_ARG(&b, s->pad);
        CLCNN_ARG(&b, s->OH);
        CLCNN_ARG(&b, s->OW);
        if ((st = clcnn_launch1d(ctx, c2i, &b, (size_t)nimg * s->C * s->H * s->W))) return st;
    }
    return CLCNN_SUCCESS;
}

/* The direct weight gradient by the plan's algorithm (the tuned one timed once per shape and
 * batch). rows_ready: the pixel rows are already there (after a fused pool). */
static clcnn_status wgrad_direct(const clcnn_node *n, const clcnn_io *io, cl_mem gy,
                                 int rows_ready) {
    const clcnn_conv2d_shape *s = &n->conv;
    clcnn_conv2d_shape g;
    clcnn_status st = CLCNN_SUCCESS;
    clcnn_algo a = n->algo[CLCNN_PASS_WGRAD];
    /* the row GEMM reads gy from its padded copy when the next layer's backward handed it
     * over there (its plain copy may not be written: conv_gy_padded_only) */
    int handed = gy && io->gy_padded && a == CLCNN_ALGO_WGRAD_ROWS && grad_input_shape(s, &g);
    wgrad_args wa = {io,
                     s,
                     plan_wgrad(io->ctx, s, io->N),
                     handed ? io->keep_gpad : gy,
                     handed ? g.pad : 0,
                     rows_ready,
                     io->keep_pad ? io->keep_pad : io->xpad,
                     io->keep_pad != NULL};
    if (a == CLCNN_ALGO_WGRAD_TUNED) {
        static const char *const names[2] = {"lanes", "rows"};
        char key[80];
        snprintf(key, sizeof key, "wgrad-%d-%d-%d-%d-%d-%d-%d", s->C, s->H, s->W, s->OC, s->K,
                 s->pad, io->N);
        int c = clcnn_tune_choose(io->ctx, key, names, 2, wgrad_run, &wa, &st);
        if (st) return st;
        a = c == 1 ? CLCNN_ALGO_WGRAD_ROWS : CLCNN_ALGO_WGRAD_LANES;
    }
    return a == CLCNN_ALGO_WGRAD_ROWS ? wgrad_rows(io->ctx, &wa) : wgrad_lanes(io->ctx, &wa);
}

/* conv_wgrad_pool_chunks' limit on taps (CHUNK_TAPS in cl/conv2d.cl). */
enum { CHUNK_TAPS = 128 };

/* Whether a fused convolution + pool expands its gradient into pixel rows and runs the
 * weight gradient in one kernel per slice of the batch (conv_wgrad_pool_rows) rather than in
 * two passes: when there are slices enough to keep every compute unit busy (each slice is one
 * work-item). Seed's first two layers at batch 64 on 2 cores (16 and 4 slices): about 10% less
 * time than the two passes, which write every row to memory and read it back. */
static int fuse_pool_wgrad(const clcnn_context *ctx, const wgrad_plan *plan) {
    if (ctx->pool_wgrad) return ctx->pool_wgrad == 1;
    return plan->S >= 2 * (int)ctx->info.compute_units;
}

/* gw of a fused convolution + pool from the pooled gradient by conv_wgrad_pool_rows (or, with
 * 32 padded channels and few taps, conv_wgrad_pool_chunks: seed's first layer's weight
 * gradient 12% faster on PoCL), then the slices' sum. */
static clcnn_status wgrad_pool_rows(clcnn_context *ctx, const clcnn_io *io,
                                    const clcnn_conv2d_shape *s, const wgrad_plan *plan) {
    int zero = 0, ckk = s->C * s->K * s->K;
    int chunks = plan->ocp == 32 && ckk <= CHUNK_TAPS; /* few taps: a row pair at a time */
    clcnn_kern *k =
        clcnn_kernel(ctx, chunks ? CLCNN_K_conv_wgrad_pool_chunks : CLCNN_K_conv_wgrad_pool_rows);
    cl_mem out = plan->S > 1 ? io->col : io->grads;
    int outoff = plan->S > 1 ? 0 : io->woff, ostride = s->OC * ckk;
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, out);
    CLCNN_ARG(&a, outoff);
    CLCNN_ARG(&a, ostride);
    CLCNN_ARG(&a, io->rows);
    if (!chunks) CLCNN_ARG(&a, plan->ocp);
    CLCNN_ARG(&a, io->gy);
    CLCNN_ARG(&a, zero);
    CLCNN_ARG(&a, io->aux);
    CLCNN_ARG(&a, io->keep_pad);
    CLCNN_ARG(&a, io->N);
    CLCNN_ARG(&a, plan->nb);
    padded_shape_args(&a, s);
    size_t slices = (size_t)plan->S;
    clcnn_status st = clcnn_launch_single(ctx, k, &a, 1, &slices);
    if (st) return st;
    return plan->S > 1 ? reduce_slices(ctx, io->grads, io->woff, io->col, ostride, plan->S)
                       : CLCNN_SUCCESS;
}

/* The backward of a convolution and the MaxPool2d(2) fused into its forward, from the pooled
 * gradient gy (N, OC, OH/2, OW/2) and the pool's argmax, without the pool's own backward: the
 * gradient at the convolution's output goes straight into the pixel rows of the row-GEMM
 * weight gradient and, only when gx is wanted, into io->xpad padded as the flipped
 * convolution reads it (no pad_input pass of its own). */
static clcnn_status backward_pooled(const clcnn_node *n, const clcnn_io *io) {
    const clcnn_conv2d_shape *s = &n->conv;
    clcnn_context *ctx = io->ctx;
    wgrad_plan plan = plan_wgrad(io->ctx, s, io->N);
    int N = io->N, phw = (s->OH / 2) * (s->OW / 2), nchw = io->gx[0] != NULL, zero = 0;
    clcnn_status st;
    /* the bias: the zeros the pool's backward would add change no sum, so sum gp directly */
    if (s->bias && (st = clcnn_bias_grad(ctx, io->grads, io->boff, io->gy, 0, N, s->OC, phw)))
        return st;
    CLCNN_ASSERT(io->keep_pad != NULL); /* the forward kept x padded: the weight gradient's */
    if (fuse_pool_wgrad(ctx, &plan)) {
        if ((st = wgrad_pool_rows(ctx, io, s, &plan))) return st;
    } else {
        clcnn_kern *ex = clcnn_kernel(ctx, CLCNN_K_pool2_grad_to_rows);
        clcnn_args e = {ex->k, 0, CL_SUCCESS};
        CLCNN_ARG(&e, io->rows);
        CLCNN_ARG(&e, io->gy);
        CLCNN_ARG(&e, zero);
        CLCNN_ARG(&e, io->aux);
        CLCNN_ARG(&e, N);
        CLCNN_ARG(&e, s->OC);
        CLCNN_ARG(&e, plan.ocp);
        CLCNN_ARG(&e, s->OH);
        CLCNN_ARG(&e, s->OW);
        size_t blocks = (size_t)N * (size_t)((s->OH + 1) / 2) * (size_t)(plan.ocp / 16);
        if ((st = clcnn_launch1d(ctx, ex, &e, blocks))) return st;
        /* the rows are ready: wgrad-rows, the fused node's only weight gradient, reads no gy */
        if ((st = wgrad_direct(n, io, NULL, 1))) return st;
    }
    if (nchw) {
        /* io->xpad is free for gy: x is kept padded, so the weight gradient leaves it alone */
        clcnn_conv2d_shape g = {0};
        CLCNN_ASSERT(grad_input_shape(s, &g));
        int slack = (int)pad_slack((size_t)(g.W + 2 * g.pad)), noc = N * s->OC;
        clcnn_kern *pk = clcnn_kernel(ctx, CLCNN_K_pool2_grad_nchw);
        clcnn_args p = {pk->k, 0, CL_SUCCESS};
        CLCNN_ARG(&p, io->xpad);
        CLCNN_ARG(&p, g.pad);
        CLCNN_ARG(&p, slack);
        CLCNN_ARG(&p, io->gy);
        CLCNN_ARG(&p, zero);
        CLCNN_ARG(&p, io->aux);
        CLCNN_ARG(&p, noc);
        CLCNN_ARG(&p, s->OH);
        CLCNN_ARG(&p, s->OW);
        int per = 1 + PAD_ITEM_FLOATS / ((s->OH + 2 * g.pad) * (s->OW + 2 * g.pad));
        CLCNN_ARG(&p, per);
        size_t items = (size_t)(noc + per - 1) / (size_t)per;
        if ((st = clcnn_launch_single(ctx, pk, &p, 1, &items))) return st;
    }
    return nchw ? input_grad_conv(n, io, NULL, n->algo[CLCNN_PASS_DGRAD], -1) : CLCNN_SUCCESS;
}

/* gw, gb and gx (when wanted) from gy (N, OC, OH, OW), each by the plan's algorithm. */
static clcnn_status conv_backward(const clcnn_node *n, const clcnn_io *io) {
    const clcnn_conv2d_shape *s = &n->conv;
    clcnn_algo wg = n->algo[CLCNN_PASS_WGRAD], dg = io->gx[0] ? n->algo[2] : CLCNN_ALGO_NONE;
    clcnn_status st;
    if (n->algo[CLCNN_PASS_FORWARD] == CLCNN_ALGO_DIRECT_POOL ||
        n->algo[CLCNN_PASS_FORWARD] == CLCNN_ALGO_WINOGRAD_POOL)
        return backward_pooled(n, io);
    if (s->bias && (st = clcnn_bias_grad(io->ctx, io->grads, io->boff, io->gy, 0, io->N, s->OC,
                                         s->OH * s->OW)))
        return st;
    if (is_wgrad_direct(wg) && (st = wgrad_direct(n, io, io->gy, 0))) return st;
    if (wg == CLCNN_ALGO_WGRAD_IMPLICIT && (st = wgrad_implicit(io, s, implicit_size_of(io->ctx))))
        return st;
    if (wg == CLCNN_ALGO_GEMM_TUNED && (st = gemm_tuned(n, io, CLCNN_PASS_WGRAD))) return st;
    if (wg == CLCNN_ALGO_IM2COL || dg == CLCNN_ALGO_COL2IM) {
        st = backward_im2col(n, io, wg == CLCNN_ALGO_IM2COL, dg == CLCNN_ALGO_COL2IM);
        if (st) return st;
    }
    if (dg == CLCNN_ALGO_GEMM_TUNED) return gemm_tuned(n, io, CLCNN_PASS_DGRAD);
    if (dg == CLCNN_ALGO_FLIP_DIRECT || dg == CLCNN_ALGO_FLIP_LANES ||
        dg == CLCNN_ALGO_FLIP_IM2COL || dg == CLCNN_ALGO_FLIP_IMPLICIT ||
        dg == CLCNN_ALGO_FLIP_WINOGRAD)
        return input_grad_conv(n, io, io->gy, dg, -1);
    return CLCNN_SUCCESS;
}

/* A MaxPool2d(2) (kernel 2, stride 2, no padding) that only this convolution feeds rides in
 * its store when the forward is direct (either kind) or Winograd (the fused node takes
 * direct+pool or winograd+pool) and the backward can follow: the fused backward takes the row
 * GEMM for the weights and the flipped direct or Winograd convolution for the input
 * gradient. */
static int conv_can_fuse(const clcnn_context *ctx, const clcnn_node *n, const clcnn_node *next) {
    const clcnn_layer_desc *p = &next->d;
    (void)ctx;
    return n->n_layers == 1 && next->d.kind == CLCNN_LAYER_MAXPOOL2D && p->kernel == 2 &&
           p->stride == 2 && p->pad == 0 &&
           (n->algo[CLCNN_PASS_FORWARD] == CLCNN_ALGO_DIRECT ||
            n->algo[CLCNN_PASS_FORWARD] == CLCNN_ALGO_DIRECT_LANES ||
            n->algo[CLCNN_PASS_FORWARD] == CLCNN_ALGO_WINOGRAD) &&
           (!n->need_gx || n->algo[CLCNN_PASS_DGRAD] == CLCNN_ALGO_FLIP_DIRECT ||
            n->algo[CLCNN_PASS_DGRAD] == CLCNN_ALGO_FLIP_LANES ||
            n->algo[CLCNN_PASS_DGRAD] == CLCNN_ALGO_FLIP_WINOGRAD);
}

/* The input gradient by flip-direct, -lanes or -winograd pads gy by K - 1 - pad for the flipped
 * convolution; it can take gy so padded from its reader's backward (keep_gpad). A fused node
 * pads it itself, from the pooled gradient. */
static int conv_gy_pad(const clcnn_node *n) {
    clcnn_algo dg = n->algo[CLCNN_PASS_DGRAD];
    clcnn_conv2d_shape g;
    if (n->n_layers != 1 || !n->need_gx || !grad_input_shape(&n->conv, &g) ||
        (dg != CLCNN_ALGO_FLIP_DIRECT && dg != CLCNN_ALGO_FLIP_LANES &&
         dg != CLCNN_ALGO_FLIP_WINOGRAD))
        return -1;
    return g.pad;
}

/* Handed gy padded, the backward reads it there alone when nothing else wants the plain copy:
 * no bias to sum, the row GEMM for the weights (gy_to_rows_pad reads the padded planes; the
 * lanes reduction and the autotuner's choice read gy in place), and the flipped convolution
 * for the input gradient (conv_gy_pad). */
static int conv_gy_padded_only(const clcnn_node *n) {
    return conv_gy_pad(n) >= 0 && !n->conv.bias &&
           n->algo[CLCNN_PASS_WGRAD] == CLCNN_ALGO_WGRAD_ROWS;
}

/* The fused pool's store writes the pooled output into the next convolution's padded input
 * too (both direct kernels, POOL_ROW and POOL_ROW8 in cl/conv2d.cl, and both Winograd ones). */
static int conv_writes_padded(const clcnn_node *n) {
    return n->algo[CLCNN_PASS_FORWARD] == CLCNN_ALGO_DIRECT_POOL ||
           n->algo[CLCNN_PASS_FORWARD] == CLCNN_ALGO_WINOGRAD_POOL;
}

const clcnn_layer_ops clcnn_conv2d_ops = {
    .syntax = &clcnn_conv2d_syntax,
    .shape = conv_shape,
    .init = clcnn_init_fan_in,
    .can_fuse = conv_can_fuse,
    .algos = conv_algos,
    .plan = conv_plan,
    .workspace = conv_workspace,
    .forward = conv_forward,
    .backward = conv_backward,
    .writes_padded = conv_writes_padded,
    .gy_pad = conv_gy_pad,
    .gy_padded_only = conv_gy_padded_only,
};
