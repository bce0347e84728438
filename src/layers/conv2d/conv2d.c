/* Conv2d (nn.Conv2d, zero padding, no dilation or groups): weight (OC, C, K, K), bias (OC).
 * This file is the layer: its spec syntax, shape and parameters, the table of its algorithms
 * (each a row in the file of its family, cl/conv2d.cl their kernels) and the plan that picks
 * among them, by a preference order per CLCNN_CONV_ALGO and device class:
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
 *   direct kind, Winograd, the implicit GEMM or im2col) or `col2im` (GEMM + col2im);
 * - any pass: `gemm-tuned` (its implicit GEMM or its im2col way, timed once). */
#include "conv2d.h"

#include "gemm.h"

/* Spec syntax (docs/MODEL_SPEC.md) */

/* conv(OUT, KERNEL [, STRIDE [, PAD]] [, stride=S] [, pad=P] [, bias=0|1]): canonical text
 * "conv(32,5,stride=1,pad=2)", with ",bias=0" for a convolution without bias. */
enum { CONV_OUT, CONV_KERNEL, CONV_STRIDE, CONV_PAD, CONV_BIAS };

static const clcnn_arg_def conv2d_args[] = {
    [CONV_OUT] = {"out", NULL, 0, 1, 65536, 0, CLCNN_ARGF_POS | CLCNN_ARGF_REQ},
    [CONV_KERNEL] = {"kernel", NULL, 0, 1, 64, 0, CLCNN_ARGF_POS | CLCNN_ARGF_REQ},
    [CONV_STRIDE] = {"stride", NULL, 0, 1, 64, 1,
                     CLCNN_ARGF_POS | CLCNN_ARGF_KW | CLCNN_ARGF_SHOW_KW},
    [CONV_PAD] = {"pad", "padding", 0, 0, 64, 0,
                  CLCNN_ARGF_POS | CLCNN_ARGF_KW | CLCNN_ARGF_SHOW_KW},
    [CONV_BIAS] = {"bias", NULL, 0, 0, 1, 1, CLCNN_ARGF_KW},
};

const clcnn_layer_syntax clcnn_conv2d_syntax = {
    .name = "conv",
    .aliases = {"conv2d"},
    .torch_name = "Conv2d",
    CLCNN_SPEC_ARGS(conv2d_args),
};

static clcnn_status conv_shape(clcnn_node *n, clcnn_params *pl, clcnn_error *e, const char *where) {
    const clcnn_arg_value *a = n->d.arg;
    int out = a[CONV_OUT].i, K = a[CONV_KERNEL].i, bias = a[CONV_BIAS].i;
    clcnn_status st = clcnn_window_shape(n, K, a[CONV_STRIDE].i, a[CONV_PAD].i, e, where);
    if (st) return st;
    int64_t ws[4] = {out, n->x.c, K, K}, bs[1] = {out};
    if (clcnn_params_add(pl, n->path, "weight", CLCNN_PARAM_WEIGHT, 4, ws) < 0 ||
        (bias && clcnn_params_add(pl, n->path, "bias", CLCNN_PARAM_NO_DECAY, 1, bs) < 0))
        return clcnn_fail(e, CLCNN_ERR_SHAPE, "%s: too many parameter tensors", where);
    n->conv = (clcnn_conv2d_shape){n->x.c,           n->x.h,        n->x.w, out,    K,
                                   a[CONV_STRIDE].i, a[CONV_PAD].i, n->y.h, n->y.w, bias};
    n->y.c = out;
    n->flops = 2.0 * out * n->y.h * n->y.w * n->x.c * K * K;
    return CLCNN_SUCCESS;
}

/* What the families share */

int clcnn_conv_grad_shape(const clcnn_conv2d_shape *s, clcnn_conv2d_shape *g) {
    if (s->stride != 1 || s->pad > s->K - 1) return 0;
    *g = (clcnn_conv2d_shape){s->OC, s->OH, s->OW, s->C, s->K, 1, s->K - 1 - s->pad, s->H, s->W, 0};
    return 1;
}

size_t clcnn_conv_pad_slack(size_t wp) {
    return 3 * wp + 32;
}

size_t clcnn_conv_padded_floats(const clcnn_conv2d_shape *s, int N) {
    size_t hp = (size_t)s->H + 2 * (size_t)s->pad, wp = (size_t)s->W + 2 * (size_t)s->pad;
    return (size_t)N * (size_t)s->C * hp * wp + clcnn_conv_pad_slack(wp);
}

void clcnn_conv_grow(size_t *cap, size_t need) {
    if (need > *cap) *cap = need;
}

void clcnn_conv_padded_args(clcnn_args *a, const clcnn_conv2d_shape *s) {
    int hp = s->H + 2 * s->pad, wp = s->W + 2 * s->pad;
    CLCNN_ARG(a, s->C);
    CLCNN_ARG(a, hp);
    CLCNN_ARG(a, wp);
    CLCNN_ARG(a, s->OC);
    CLCNN_ARG(a, s->K);
    CLCNN_ARG(a, s->OH);
    CLCNN_ARG(a, s->OW);
}

clcnn_status clcnn_conv_reduce_slices(clcnn_context *ctx, cl_mem grads, int woff, cl_mem part,
                                      int n, int S) {
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

clcnn_status clcnn_conv_flip_weights(const clcnn_io *io, const clcnn_conv2d_shape *s) {
    clcnn_kern *flip = clcnn_kernel(io->ctx, CLCNN_K_flip_weights);
    clcnn_args f = {flip->k, 0, CL_SUCCESS};
    CLCNN_ARG(&f, io->wflip);
    CLCNN_ARG(&f, io->params);
    CLCNN_ARG(&f, io->woff);
    CLCNN_ARG(&f, s->OC);
    CLCNN_ARG(&f, s->C);
    CLCNN_ARG(&f, s->K);
    return clcnn_launch1d(io->ctx, flip, &f, (size_t)s->OC * s->C);
}

cl_mem clcnn_conv_gy_padded(const clcnn_io *io, int *padded) {
    *padded = io->gy_in_view; /* gy's reader wrote it padded into keep_gpad in its backward */
    return io->gy_in_view ? io->keep_gpad : io->xpad;
}

int clcnn_conv_single(const clcnn_context *ctx, const clcnn_node *n) {
    (void)ctx;
    return n->n_layers == 1;
}

int clcnn_conv_fused(const clcnn_context *ctx, const clcnn_node *n) {
    (void)ctx;
    return n->n_layers == 2;
}

int clcnn_conv_s1(const clcnn_context *ctx, const clcnn_node *n) {
    return clcnn_conv_single(ctx, n) && n->conv.stride == 1;
}

int clcnn_conv_flips(const clcnn_context *ctx, const clcnn_node *n) {
    clcnn_conv2d_shape g;
    return clcnn_conv_single(ctx, n) && clcnn_conv_grad_shape(&n->conv, &g);
}

/* The table: every algorithm of every pass, in the order a pass lists those that apply. */
static const clcnn_algo *const conv_algos[] = {
    /* forward; a fused node's */
    &clcnn_conv_direct, &clcnn_conv_direct_lanes, &clcnn_conv_winograd, &clcnn_conv_implicit,
    &clcnn_conv_gemm_tuned_fwd, &clcnn_conv_im2col, &clcnn_conv_direct_pool,
    &clcnn_conv_winograd_pool,
    /* weight gradient; a fused node's */
    &clcnn_conv_wgrad_rows, &clcnn_conv_wgrad_lanes, &clcnn_conv_wgrad_tuned,
    &clcnn_conv_wgrad_implicit, &clcnn_conv_gemm_tuned_wgrad, &clcnn_conv_wgrad_im2col,
    &clcnn_conv_pool_wgrad_rows,
    /* input gradient; a fused node's */
    &clcnn_conv_flip_direct, &clcnn_conv_flip_lanes, &clcnn_conv_flip_im2col,
    &clcnn_conv_flip_winograd, &clcnn_conv_flip_implicit, &clcnn_conv_gemm_tuned_dgrad,
    &clcnn_conv_col2im, &clcnn_conv_pool_flip_direct, &clcnn_conv_pool_flip_winograd, NULL};

/* The row GEMM pays for a transpose of gy, as many bytes as the kernel reads; with few taps
 * (the seed's first layer has 75) that is the larger cost, and conv_wgrad_s1, which reads gy
 * in place and reduces across lanes, wins (measured on PoCL: 2.3 ms against 3.2 ms per step
 * for the seed's conv0, 3.3 against 5.9 ms for its 800-tap conv2). */
enum { WGRAD_ROWS_MIN_TAPS = 128 };

/* Below this many output pixels per channel the direct kernels, which give each work-item a
 * row of pixels, run mostly empty: the resnet preset's 128-channel convolutions on 3x3 maps
 * ran at 26 GFLOP/s forward and 43 backward against im2col + the CPU GEMM's 83 and 104
 * (batch 256, 2-core EPYC guest); at 7x7 both took the same time. The rules take im2col
 * there, unless the output suits the lanes kernels. */
enum { DIRECT_MIN_PIXELS = 16 };

/* The rules of the preference orders below. */
static int lanes_suit(const clcnn_context *ctx, const clcnn_node *n) {
    (void)ctx;
    return clcnn_conv_lanes_suit(&n->conv);
}

static int direct_pays(const clcnn_context *ctx, const clcnn_node *n) {
    return n->conv.OH * n->conv.OW >= DIRECT_MIN_PIXELS || lanes_suit(ctx, n);
}

static int wino_suits(const clcnn_context *ctx, const clcnn_node *n) {
    return clcnn_conv_wino_rule(ctx, &n->conv);
}

static int wino_pays(const clcnn_context *ctx, const clcnn_node *n) {
    return wino_suits(ctx, n) && direct_pays(ctx, n);
}

static int few_taps(const clcnn_context *ctx, const clcnn_node *n) {
    (void)ctx;
    return n->conv.C * n->conv.K * n->conv.K < WGRAD_ROWS_MIN_TAPS;
}

static int grad_wino(const clcnn_context *ctx, const clcnn_node *n) {
    clcnn_conv2d_shape g;
    return clcnn_conv_grad_shape(&n->conv, &g) && clcnn_conv_wino_rule(ctx, &g);
}

static int grad_lanes(const clcnn_context *ctx, const clcnn_node *n) {
    clcnn_conv2d_shape g;
    (void)ctx;
    return clcnn_conv_grad_shape(&n->conv, &g) && clcnn_conv_lanes_suit(&g);
}

/* The forward's order per CLCNN_CONV_ALGO and device class. By default the direct kernels
 * where the device takes the CPU-shaped GEMM (they are written for CPU devices): winograd
 * where wino_rule says, else direct-lanes where its tiles suit the shape, else direct where
 * the output has DIRECT_MIN_PIXELS pixels; then, with autotuning on and a device that runs the
 * implicit GEMMs, gemm-tuned (the first step times them against im2col + the GEMM backend per
 * shape and keeps the fastest; without tuning no rule picks them: not yet measured faster on
 * any GPU); im2col last. CLCNN_CONV_ALGO=direct takes direct-lanes or direct wherever the
 * stride allows (no Winograd), im2col the im2col GEMMs, implicit the implicit GEMMs where the
 * device runs them. */
typedef struct conv_route {
    int conv_algo; /* ctx->conv_algo: a clcnn_conv_algo */
    int cpu;       /* 1: the device takes the CPU-shaped GEMM, 0: another, -1: either */
    clcnn_algo_pref forward[6];
} conv_route;

static const conv_route routes[] = {
    {CLCNN_CONV_ALGO_DEFAULT,
     1,
     {{&clcnn_conv_winograd, wino_pays},
      {&clcnn_conv_direct_lanes, lanes_suit},
      {&clcnn_conv_direct, direct_pays},
      {&clcnn_conv_gemm_tuned_fwd, NULL},
      {&clcnn_conv_im2col, NULL},
      {NULL, NULL}}},
    {CLCNN_CONV_ALGO_DEFAULT, 0, {{&clcnn_conv_gemm_tuned_fwd, NULL}, {&clcnn_conv_im2col, NULL}}},
    {CLCNN_CONV_ALGO_DIRECT,
     -1,
     {{&clcnn_conv_direct_lanes, lanes_suit},
      {&clcnn_conv_direct, NULL},
      {&clcnn_conv_im2col, NULL}}},
    {CLCNN_CONV_ALGO_IM2COL, -1, {{&clcnn_conv_im2col, NULL}}},
    {CLCNN_CONV_ALGO_IMPLICIT, -1, {{&clcnn_conv_implicit, NULL}, {&clcnn_conv_im2col, NULL}}},
};

/* The gradients' orders, per path of the forward. On the direct path the weight gradient is
 * wgrad-tuned with autotuning on, else it reads gy in place below WGRAD_ROWS_MIN_TAPS taps and
 * takes the row GEMM above; the input gradient is the flipped convolution, by flip-winograd
 * where wino_rule takes the flipped shape, else flip-lanes where the lanes tiles suit it, else
 * flip-direct. The other paths keep to their own way (the flipped convolution where the shape
 * allows one); col2im where none does. */
static const clcnn_algo_pref grads[4][2][5] = {
    [CONV_PATH_DIRECT] = {{{&clcnn_conv_wgrad_tuned, NULL},
                           {&clcnn_conv_wgrad_lanes, few_taps},
                           {&clcnn_conv_wgrad_rows, NULL}},
                          {{&clcnn_conv_flip_winograd, grad_wino},
                           {&clcnn_conv_flip_lanes, grad_lanes},
                           {&clcnn_conv_flip_direct, NULL},
                           {&clcnn_conv_col2im, NULL}}},
    [CONV_PATH_IM2COL] = {{{&clcnn_conv_wgrad_im2col, NULL}},
                          {{&clcnn_conv_flip_im2col, NULL}, {&clcnn_conv_col2im, NULL}}},
    [CONV_PATH_IMPLICIT] = {{{&clcnn_conv_wgrad_implicit, NULL}},
                            {{&clcnn_conv_flip_implicit, NULL},
                             {&clcnn_conv_flip_im2col, NULL},
                             {&clcnn_conv_col2im, NULL}}},
    [CONV_PATH_TUNED] = {{{&clcnn_conv_gemm_tuned_wgrad, NULL}},
                         {{&clcnn_conv_gemm_tuned_dgrad, NULL},
                          {&clcnn_conv_flip_im2col, NULL},
                          {&clcnn_conv_col2im, NULL}}},
};

/* A fused node: Winograd where the rules take it, else direct; the row GEMM for the weights. */
static const clcnn_algo_pref fused[CLCNN_PASS_COUNT][3] = {
    {{&clcnn_conv_winograd_pool, wino_suits}, {&clcnn_conv_direct_pool, NULL}},
    {{&clcnn_conv_pool_wgrad_rows, NULL}},
    {{&clcnn_conv_pool_flip_winograd, grad_wino}, {&clcnn_conv_pool_flip_direct, NULL}},
};

static const clcnn_algo_pref *conv_prefer(const clcnn_context *ctx, const clcnn_node *n, int pass) {
    if (n->n_layers == 2) return fused[pass];
    if (pass != CLCNN_PASS_FORWARD) return grads[n->algo[CLCNN_PASS_FORWARD]->path][pass - 1];
    int cpu = clcnn_gemm_kind(ctx) == CLCNN_GEMM_CPU;
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        if (routes[i].conv_algo == ctx->conv_algo && (routes[i].cpu < 0 || routes[i].cpu == cpu))
            return routes[i].forward;
    return NULL;
}

/* Buffers the rows' traits imply: the padded input (kept by a forward that reads it), the
 * flipped weights and the padded gradient of the input gradient's convolution, and gy padded
 * when its reader hands it over so. */
static void conv_workspace(const clcnn_context *ctx, const clcnn_node *n, int N,
                           clcnn_node_ws *ws) {
    const clcnn_conv2d_shape *s = &n->conv;
    clcnn_conv2d_shape g = {0};
    int gs = clcnn_conv_grad_shape(s, &g);
    (void)ctx;
    for (int p = 0; p < CLCNN_PASS_COUNT; p++) {
        const clcnn_algo *a = n->algo[p];
        if (!a) continue;
        if (a->flags & CLCNN_ALGO_PADDED_X) {
            size_t xp = clcnn_conv_padded_floats(s, N);
            clcnn_conv_grow(&ws->xpad, xp);
            if (p == CLCNN_PASS_FORWARD) ws->keep_pad = xp;
        }
        if (p != CLCNN_PASS_DGRAD || !gs) continue;
        if (a->flags & CLCNN_ALGO_FLIPPED_W)
            clcnn_conv_grow(&ws->wflip, (size_t)s->OC * s->C * s->K * s->K);
        if (a->flags & CLCNN_ALGO_PADDED_GY)
            clcnn_conv_grow(&ws->xpad, clcnn_conv_padded_floats(&g, N));
    }
    if (n->gy_padded && gs) ws->keep_gpad = clcnn_conv_padded_floats(&g, N);
}

/* y (N, OC, OH, OW) = conv(x, w) + b by the plan's forward row. */
static clcnn_status conv_forward(const clcnn_node *n, const clcnn_io *io) {
    CLCNN_ASSERT(!io->x_in_view || io->keep_pad); /* a hand-off writes the node's keep_pad */
    return n->algo[CLCNN_PASS_FORWARD]->run(n, io);
}

/* gb, then gw and gx (when wanted) from gy (N, OC, OH, OW; a fused node's pooled), each by
 * the plan's row. The zeros a fused pool's backward would add change no sum, so its bias sums
 * the pooled gradient directly. */
static clcnn_status conv_backward(const clcnn_node *n, const clcnn_io *io) {
    const clcnn_conv2d_shape *s = &n->conv;
    const clcnn_algo *wg = n->algo[CLCNN_PASS_WGRAD];
    const clcnn_algo *dg = io->gx[0].buf ? n->algo[CLCNN_PASS_DGRAD] : NULL;
    clcnn_status st;
    if (s->bias && (st = clcnn_bias_grad(io->ctx, io->grads, io->boff, io->gy.buf, 0, io->N, s->OC,
                                         n->y.h * n->y.w)))
        return st;
    if ((st = wg->run(n, io))) return st;
    return dg ? dg->run(n, io) : CLCNN_SUCCESS;
}

/* A MaxPool2d(2) (kernel 2, stride 2, no padding) that only this convolution feeds rides in
 * its store when the forward's row can take it (direct, direct-lanes, winograd: the fused node
 * takes direct+pool or winograd+pool) and the backward can follow (the fused node's row GEMM
 * for the weights, and its flipped direct or Winograd convolution for the input gradient). */
static int conv_can_fuse(const clcnn_context *ctx, const clcnn_node *n, const clcnn_node *next) {
    const clcnn_arg_value *p = next->d.arg;
    const clcnn_algo *dg = n->algo[CLCNN_PASS_DGRAD];
    (void)ctx;
    return n->n_layers == 1 && next->d.kind == CLCNN_LAYER_MAXPOOL2D &&
           p[CLCNN_WINDOW_KERNEL].i == 2 && p[CLCNN_WINDOW_STRIDE].i == 2 &&
           p[CLCNN_WINDOW_PAD].i == 0 &&
           (n->algo[CLCNN_PASS_FORWARD]->flags & CLCNN_ALGO_FUSES_POOL) &&
           (!n->need_gx || (dg && (dg->flags & CLCNN_ALGO_FUSES_POOL)));
}

/* The input gradient by a row that reads gy padded (flip-direct, -lanes, -winograd) pads it
 * by K - 1 - pad for the flipped convolution; it can take gy so padded from its reader's
 * backward (keep_gpad). A fused node pads it itself, from the pooled gradient. */
static int conv_gy_halo(const clcnn_node *n) {
    const clcnn_algo *dg = n->algo[CLCNN_PASS_DGRAD];
    clcnn_conv2d_shape g;
    if (n->n_layers != 1 || !n->need_gx || !clcnn_conv_grad_shape(&n->conv, &g) || !dg ||
        !(dg->flags & CLCNN_ALGO_PADDED_GY))
        return -1;
    return g.pad;
}

/* The forward keeps x padded by the convolution's pad where its row reads it so (keep_pad).
 * The fused pool's store writes the pooled output into the next convolution's padded input too
 * (both direct kernels, POOL_ROW and POOL_ROW8 in cl/conv2d.cl, and both Winograd ones).
 * Handed gy padded, the backward reads it there alone when nothing else wants the plain copy:
 * no bias to sum, a weight gradient that reads it padded too (wgrad-rows: gy_to_rows_pad reads
 * the padded planes; the lanes reduction and the autotuner's choice read gy in place), and the
 * flipped convolution for the input gradient. */
static void conv_views(const clcnn_node *n, clcnn_views *v) {
    unsigned fwd = n->algo[CLCNN_PASS_FORWARD]->flags;
    v->x_halo = (fwd & CLCNN_ALGO_PADDED_X) ? n->conv.pad : -1;
    v->writes_y = (fwd & CLCNN_ALGO_WRITES_PADDED) != 0;
    v->gy_halo = conv_gy_halo(n);
    v->gy_only = v->gy_halo >= 0 && !n->conv.bias &&
                 (n->algo[CLCNN_PASS_WGRAD]->flags & CLCNN_ALGO_PADDED_GY);
}

const clcnn_layer_ops clcnn_conv2d_ops = {
    .syntax = &clcnn_conv2d_syntax,
    .shape = conv_shape,
    .init = clcnn_init_fan_in,
    .can_fuse = conv_can_fuse,
    .algos = conv_algos,
    .prefer = conv_prefer,
    .workspace = conv_workspace,
    .forward = conv_forward,
    .backward = conv_backward,
    .views = conv_views,
};
