/* The direct stride-1 convolution (pad_input, conv_direct_s1 and conv_direct_s1_w8 in
 * cl/conv2d.cl): a padded copy of the input, then one launch for the batch with output columns
 * in the vector lanes. Its rows: `direct`, `direct+pool` (a following MaxPool2d(2) in its
 * store) and `flip-direct` (the input gradient as the convolution of gy with the flipped
 * weights). The padding step serves the other families that read a padded input too. */
#include "conv2d.h"

/* conv_direct_s1's work per work-item, in vector fmas: a 16-column tile of a layer with few taps
 * (16 per tap) is too little for one work-group on PoCL, so a work-item takes this many tiles'
 * worth, in whole tiles. seed's first layer (75 taps: 3 tiles a work-item) 43-50 -> 36-40 ms
 * per 30 steps; its 800-tap layers keep one. */
enum { DIRECT_ITEM_FMAS = 4096 };

/* x (N, C, H, W) zero-padded into xp (N, C, Hp, Wp) by pad_input, whole planes a work-item. */
static clcnn_status pad_input(clcnn_context *ctx, cl_mem xp, const clcnn_conv2d_shape *s, cl_mem x,
                              int N) {
    int hp = s->H + 2 * s->pad, wp = s->W + 2 * s->pad, nc = N * s->C, zero = 0;
    int slack = (int)clcnn_conv_pad_slack((size_t)wp);
    clcnn_kern *pad = clcnn_kernel(ctx, CLCNN_K_pad_input);
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
    return clcnn_launch_single(ctx, pad, &a, 1, &items);
}

clcnn_status clcnn_conv_direct_s1(clcnn_context *ctx, cl_mem xp, int padded,
                                  const clcnn_conv2d_shape *s, cl_mem y, cl_mem x, cl_mem params,
                                  int woff, int boff, int N, cl_mem argmax, cl_mem ypad,
                                  int ypad_pad, int ypad_only) {
    clcnn_kern *k = clcnn_kernel(ctx, CLCNN_K_conv_direct_s1);
    int zero = 0;
    clcnn_status st;
    /* xp may already hold this x, padded (a kept forward input) */
    if (!padded && (st = pad_input(ctx, xp, s, x, N))) return st;
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
    clcnn_conv_padded_args(&b, s);
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

/* y = conv(x, w) + b into the node's padded input (its producer may have written it there). */
static clcnn_status direct_run(const clcnn_node *n, const clcnn_io *io) {
    cl_mem xp = io->keep_pad ? io->keep_pad : io->xpad;
    return clcnn_conv_direct_s1(io->ctx, xp, io->x_in_view, &n->conv, io->y.buf, io->x[0].buf,
                                io->params, io->woff, io->boff < 0 ? 0 : io->boff, io->N, NULL,
                                NULL, 0, 0);
}

/* The same with the MaxPool2d(2) in the store: y pooled, the argmax into aux, and the pooled
 * output into the next convolution's padded input when the plan hands it over. */
static clcnn_status direct_pool_run(const clcnn_node *n, const clcnn_io *io) {
    cl_mem xp = io->keep_pad ? io->keep_pad : io->xpad;
    return clcnn_conv_direct_s1(io->ctx, xp, io->x_in_view, &n->conv, io->y.buf, io->x[0].buf,
                                io->params, io->woff, io->boff < 0 ? 0 : io->boff, io->N, io->aux,
                                io->y_view.buf, io->y_view.halo, io->y_view_only);
}

void clcnn_conv_pool_ws(const clcnn_context *ctx, const clcnn_node *n, int N, clcnn_node_ws *ws) {
    (void)ctx;
    ws->aux = (size_t)N * n->y.c * n->y.h * n->y.w;
}

clcnn_status clcnn_conv_flip_direct_from(const clcnn_node *n, const clcnn_io *io, cl_mem gy,
                                         cl_mem gp, int padded) {
    clcnn_conv2d_shape g;
    clcnn_status st;
    CLCNN_ASSERT(clcnn_conv_grad_shape(&n->conv, &g));
    if ((st = clcnn_conv_flip_weights(io, &n->conv))) return st;
    return clcnn_conv_direct_s1(io->ctx, gp, padded, &g, io->gx[0].buf, gy, io->wflip, 0, 0, io->N,
                                NULL, NULL, 0, 0);
}

/* gx by flip-direct from gy, padded here or handed over padded. */
static clcnn_status flip_direct_run(const clcnn_node *n, const clcnn_io *io) {
    int padded;
    cl_mem gp = clcnn_conv_gy_padded(io, &padded);
    return clcnn_conv_flip_direct_from(n, io, io->gy.buf, gp, padded);
}

const clcnn_algo clcnn_conv_direct = {
    .name = "direct",
    .pass = CLCNN_PASS_FORWARD,
    .flags = CLCNN_ALGO_PADDED_X | CLCNN_ALGO_FUSES_POOL,
    .path = CONV_PATH_DIRECT,
    .applies = clcnn_conv_s1,
    .run = direct_run,
};

const clcnn_algo clcnn_conv_direct_pool = {
    .name = "direct+pool",
    .pass = CLCNN_PASS_FORWARD,
    .flags = CLCNN_ALGO_PADDED_X | CLCNN_ALGO_WRITES_PADDED,
    .path = CONV_PATH_DIRECT,
    .applies = clcnn_conv_fused,
    .workspace = clcnn_conv_pool_ws,
    .run = direct_pool_run,
};

const clcnn_algo clcnn_conv_flip_direct = {
    .name = "flip-direct",
    .pass = CLCNN_PASS_DGRAD,
    .flags = CLCNN_ALGO_FLIPPED_W | CLCNN_ALGO_PADDED_GY | CLCNN_ALGO_FUSES_POOL,
    .path = CONV_PATH_DIRECT,
    .applies = clcnn_conv_flips,
    .run = flip_direct_run,
};
