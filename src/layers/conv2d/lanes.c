/* The direct convolutions with output channels in the vector lanes (weights_to_lanes and
 * conv_bcast_s1* in cl/conv2d.cl) and the weight gradient that reduces across lanes
 * (conv_wgrad_s1). Its rows: `direct-lanes`, `flip-lanes` (the input gradient as the flipped
 * convolution, the flipped weights going straight into lanes layout), `wgrad-lanes` (gy read
 * in place) and `wgrad-tuned` (wgrad-lanes or wgrad-rows, whichever the autotuner times
 * faster). */
#include "conv2d.h"

#include <stdio.h>

#include "tune.h"

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

int clcnn_conv_lanes_suit(const clcnn_conv2d_shape *s) {
    return pick_bcast(s, 1) != BCAST_NONE;
}

/* Floats of weights in lanes layout the lanes kernels need for s. */
static size_t bcast_weights(const clcnn_conv2d_shape *s) {
    return (size_t)lanes_of(&bcast_tiles[pick_bcast(s, 0)], s->OC) * s->C * s->K * s->K;
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
    clcnn_conv_padded_args(&b, s);
    size_t global[3] = {(size_t)((s->OW + t->q - 1) / t->q) * (size_t)((s->OH + t->r - 1) / t->r),
                        (size_t)op / (16 * (size_t)t->v), (size_t)N};
    return clcnn_launch_single(ctx, k, &b, 3, global);
}

/* y = conv(x, w) + b: x padded (unless its producer wrote it so), then conv_bcast. */
static clcnn_status direct_lanes_run(const clcnn_node *n, const clcnn_io *io) {
    const clcnn_conv2d_shape *s = &n->conv;
    cl_mem xp = io->keep_pad ? io->keep_pad : io->xpad;
    clcnn_status st = clcnn_conv_direct_s1(io->ctx, xp, io->x_in_view, s, NULL, io->x[0].buf, NULL,
                                           0, 0, io->N, NULL, NULL, 0, 0);
    if (st) return st;
    return conv_bcast(io->ctx, xp, s, io->y.buf, io->params, io->woff, io->boff < 0 ? 0 : io->boff,
                      0, io->wflip, io->N);
}

static void direct_lanes_ws(const clcnn_context *ctx, const clcnn_node *n, int N,
                            clcnn_node_ws *ws) {
    (void)ctx, (void)N;
    clcnn_conv_grow(&ws->wflip, bcast_weights(&n->conv));
}

/* gx: gy padded (unless handed over so), then the flipped weights straight into lanes
 * layout and conv_bcast. */
static clcnn_status flip_lanes_run(const clcnn_node *n, const clcnn_io *io) {
    clcnn_conv2d_shape g;
    clcnn_status st;
    int padded;
    cl_mem gp = clcnn_conv_gy_padded(io, &padded);
    CLCNN_ASSERT(clcnn_conv_grad_shape(&n->conv, &g));
    st = clcnn_conv_direct_s1(io->ctx, gp, padded, &g, NULL, io->gy.buf, NULL, 0, 0, io->N, NULL,
                              NULL, 0, 0);
    if (st) return st;
    return conv_bcast(io->ctx, gp, &g, io->gx[0].buf, io->params, io->woff, 0, 1, io->wflip, io->N);
}

static void flip_lanes_ws(const clcnn_context *ctx, const clcnn_node *n, int N, clcnn_node_ws *ws) {
    clcnn_conv2d_shape g;
    (void)ctx, (void)N;
    if (clcnn_conv_grad_shape(&n->conv, &g)) clcnn_conv_grow(&ws->wflip, bcast_weights(&g));
}

/* Lane reduction: reads gy in place, sums along rows in float16 lanes (conv_wgrad_s1). */
static clcnn_status wgrad_lanes(clcnn_context *ctx, const clcnn_conv_wgrad_args *w) {
    const clcnn_conv2d_shape *s = w->s;
    const clcnn_io *io = w->io;
    int ckk = s->C * s->K * s->K, zero = 0;
    clcnn_status st;
    clcnn_kern *k = clcnn_kernel(ctx, CLCNN_K_conv_wgrad_s1);
    if ((st = clcnn_conv_wgrad_pad(ctx, w))) return st;
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, io->grads);
    CLCNN_ARG(&a, io->woff);
    CLCNN_ARG(&a, w->gy);
    CLCNN_ARG(&a, zero);
    CLCNN_ARG(&a, w->xp);
    CLCNN_ARG(&a, io->N);
    clcnn_conv_padded_args(&a, s);
    size_t global[2] = {(size_t)(ckk + 3) / 4, (size_t)(s->OC + 3) / 4};
    return clcnn_launch_single(ctx, k, &a, 2, global);
}

static clcnn_status wgrad_lanes_run(const clcnn_node *n, const clcnn_io *io) {
    clcnn_conv_wgrad_args w = clcnn_conv_wgrad_args_of(n, io, io->gy.buf, 0, 0);
    return wgrad_lanes(io->ctx, &w);
}

/* The autotuner's candidates: 0 lanes, 1 rows. */
static clcnn_status wgrad_run(clcnn_context *ctx, int c, void *arg) {
    return c == 1 ? clcnn_conv_wgrad_rows_of(ctx, arg) : wgrad_lanes(ctx, arg);
}

/* gw by the lanes reduction or the row GEMM, whichever the autotuner keeps for the shape and
 * batch (timed once); the lanes reduction when tuning is off (a forced plan). */
static clcnn_status wgrad_tuned_run(const clcnn_node *n, const clcnn_io *io) {
    static const char *const names[2] = {"lanes", "rows"};
    const clcnn_conv2d_shape *s = &n->conv;
    clcnn_conv_wgrad_args w = clcnn_conv_wgrad_args_of(n, io, io->gy.buf, 0, 0);
    clcnn_status st = CLCNN_SUCCESS;
    char key[80];
    snprintf(key, sizeof key, "wgrad-%d-%d-%d-%d-%d-%d-%d", s->C, s->H, s->W, s->OC, s->K, s->pad,
             io->N);
    int c = clcnn_tune_choose(io->ctx, key, names, 2, wgrad_run, &w, &st);
    if (st) return st;
    return wgrad_run(io->ctx, c == 1 ? 1 : 0, &w);
}

/* Whether autotuning can time wgrad-tuned's two ways on a stride-1 node. */
static int wgrad_tuned_applies(const clcnn_context *ctx, const clcnn_node *n) {
    return clcnn_conv_s1(ctx, n) && clcnn_tune_enabled(ctx);
}

const clcnn_algo clcnn_conv_direct_lanes = {
    .name = "direct-lanes",
    .pass = CLCNN_PASS_FORWARD,
    .flags = CLCNN_ALGO_PADDED_X | CLCNN_ALGO_FUSES_POOL,
    .path = CONV_PATH_DIRECT,
    .applies = clcnn_conv_s1,
    .workspace = direct_lanes_ws,
    .run = direct_lanes_run,
};

const clcnn_algo clcnn_conv_flip_lanes = {
    .name = "flip-lanes",
    .pass = CLCNN_PASS_DGRAD,
    .flags = CLCNN_ALGO_PADDED_GY | CLCNN_ALGO_FUSES_POOL,
    .path = CONV_PATH_DIRECT,
    .applies = clcnn_conv_flips,
    .workspace = flip_lanes_ws,
    .run = flip_lanes_run,
};

const clcnn_algo clcnn_conv_wgrad_lanes = {
    .name = "wgrad-lanes",
    .pass = CLCNN_PASS_WGRAD,
    .flags = CLCNN_ALGO_PADDED_X,
    .path = CONV_PATH_DIRECT,
    .applies = clcnn_conv_s1,
    .run = wgrad_lanes_run,
};

const clcnn_algo clcnn_conv_wgrad_tuned = {
    .name = "wgrad-tuned",
    .pass = CLCNN_PASS_WGRAD,
    .flags = CLCNN_ALGO_PADDED_X,
    .path = CONV_PATH_DIRECT,
    .applies = wgrad_tuned_applies,
    .workspace = clcnn_conv_wgrad_rows_ws,
    .run = wgrad_tuned_run,
};
