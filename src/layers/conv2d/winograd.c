/* Winograd F(2x2, 5x5) over a padded copy of the input (wino5_weights, conv_wino5 and
 * conv_wino5_w4 in cl/conv2d.cl; the transforms are derived in tests/ref/winograd_f2x5.py),
 * shaped for CPU devices. Its rows: `winograd`, `winograd+pool` (a following MaxPool2d(2) in
 * its store) and `flip-winograd` (the input gradient as the flipped convolution, the flipped
 * weights going straight into the weight transform). */
#include "conv2d.h"

#include "gemm.h"

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

int clcnn_conv_wino_rule(const clcnn_context *ctx, const clcnn_conv2d_shape *s) {
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
 * conv_direct_s1 (y pooled, the hand-off into ypad when ypad_pad >= 0). */
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
    clcnn_conv_padded_args(&b, s);
    CLCNN_ARG(&b, am);
    CLCNN_ARG(&b, pool);
    CLCNN_ARG(&b, yp);
    CLCNN_ARG(&b, hand);
    CLCNN_ARG(&b, only);
    size_t th = (size_t)(s->OH + 1) / 2, tw = (size_t)(s->OW + 1) / 2;
    size_t global[3] = {narrow ? 1 : (tw + 7) / 8, narrow ? (th + 3) / 4 : (th + 1) / 2, (size_t)N};
    return clcnn_launch_single(ctx, k, &b, 3, global);
}

/* y = conv(x, w) + b (with argmax: pooled, as direct+pool): x padded (unless its producer
 * wrote it so), then conv_wino. */
static clcnn_status wino_forward(const clcnn_node *n, const clcnn_io *io, cl_mem argmax) {
    const clcnn_conv2d_shape *s = &n->conv;
    cl_mem xp = io->keep_pad ? io->keep_pad : io->xpad;
    clcnn_status st = clcnn_conv_direct_s1(io->ctx, xp, io->x_in_view, s, NULL, io->x[0].buf, NULL,
                                           0, 0, io->N, NULL, NULL, 0, 0);
    if (st) return st;
    return conv_wino(io->ctx, xp, s, io->y.buf, io->params, io->woff, io->boff < 0 ? 0 : io->boff,
                     0, io->wflip, io->N, argmax, io->y_view.buf, io->y_view.halo, io->y_view_only);
}

static clcnn_status winograd_run(const clcnn_node *n, const clcnn_io *io) {
    return wino_forward(n, io, NULL);
}

static clcnn_status winograd_pool_run(const clcnn_node *n, const clcnn_io *io) {
    return wino_forward(n, io, io->aux);
}

static void winograd_ws(const clcnn_context *ctx, const clcnn_node *n, int N, clcnn_node_ws *ws) {
    (void)ctx, (void)N;
    clcnn_conv_grow(&ws->wflip, wino_weights(&n->conv));
}

static void winograd_pool_ws(const clcnn_context *ctx, const clcnn_node *n, int N,
                             clcnn_node_ws *ws) {
    winograd_ws(ctx, n, N, ws);
    clcnn_conv_pool_ws(ctx, n, N, ws);
}

clcnn_status clcnn_conv_flip_wino_from(const clcnn_node *n, const clcnn_io *io, cl_mem gy,
                                       cl_mem gp, int padded) {
    clcnn_conv2d_shape g;
    clcnn_status st;
    CLCNN_ASSERT(clcnn_conv_grad_shape(&n->conv, &g));
    st = clcnn_conv_direct_s1(io->ctx, gp, padded, &g, NULL, gy, NULL, 0, 0, io->N, NULL, NULL, 0,
                              0);
    if (st) return st;
    return conv_wino(io->ctx, gp, &g, io->gx[0].buf, io->params, io->woff, 0, 1, io->wflip, io->N,
                     NULL, NULL, 0, 0);
}

/* gx by flip-winograd from gy, padded here or handed over padded. */
static clcnn_status flip_winograd_run(const clcnn_node *n, const clcnn_io *io) {
    int padded;
    cl_mem gp = clcnn_conv_gy_padded(io, &padded);
    return clcnn_conv_flip_wino_from(n, io, io->gy.buf, gp, padded);
}

void clcnn_conv_flip_wino_ws(const clcnn_context *ctx, const clcnn_node *n, int N,
                             clcnn_node_ws *ws) {
    clcnn_conv2d_shape g;
    (void)ctx, (void)N;
    if (clcnn_conv_grad_shape(&n->conv, &g)) clcnn_conv_grow(&ws->wflip, wino_weights(&g));
}

/* Where the rows apply: where the Winograd kernels take the node's shape (an unfused or a
 * fused node), or for the input gradient the flipped convolution's. */
static int winograd_applies(const clcnn_context *ctx, const clcnn_node *n) {
    return clcnn_conv_single(ctx, n) && wino_fits(&n->conv);
}

static int winograd_pool_applies(const clcnn_context *ctx, const clcnn_node *n) {
    return clcnn_conv_fused(ctx, n) && wino_fits(&n->conv);
}

int clcnn_conv_flip_wino_fits(const clcnn_node *n) {
    clcnn_conv2d_shape g;
    return clcnn_conv_grad_shape(&n->conv, &g) && wino_fits(&g);
}

static int flip_winograd_applies(const clcnn_context *ctx, const clcnn_node *n) {
    return clcnn_conv_single(ctx, n) && clcnn_conv_flip_wino_fits(n);
}

const clcnn_algo clcnn_conv_winograd = {
    .name = "winograd",
    .pass = CLCNN_PASS_FORWARD,
    .flags = CLCNN_ALGO_PADDED_X | CLCNN_ALGO_FUSES_POOL,
    .path = CONV_PATH_DIRECT,
    .applies = winograd_applies,
    .workspace = winograd_ws,
    .run = winograd_run,
};

const clcnn_algo clcnn_conv_winograd_pool = {
    .name = "winograd+pool",
    .pass = CLCNN_PASS_FORWARD,
    .flags = CLCNN_ALGO_PADDED_X | CLCNN_ALGO_WRITES_PADDED,
    .path = CONV_PATH_DIRECT,
    .applies = winograd_pool_applies,
    .workspace = winograd_pool_ws,
    .run = winograd_pool_run,
};

const clcnn_algo clcnn_conv_flip_winograd = {
    .name = "flip-winograd",
    .pass = CLCNN_PASS_DGRAD,
    .flags = CLCNN_ALGO_PADDED_GY | CLCNN_ALGO_FUSES_POOL,
    .path = CONV_PATH_DIRECT,
    .applies = flip_winograd_applies,
    .workspace = clcnn_conv_flip_wino_ws,
    .run = flip_winograd_run,
};
