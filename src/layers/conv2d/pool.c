/* The gradients of a convolution with a MaxPool2d(2) fused into its store (direct+pool,
 * winograd+pool), from the pooled gradient gy (N, OC, OH/2, OW/2) and the pool's argmax,
 * without the pool's own backward: the gradient at the convolution's output goes straight into
 * the pixel rows of the row-GEMM weight gradient (pool2_grad_to_rows, or in the same kernel as
 * that gradient: conv_wgrad_pool_rows and conv_wgrad_pool_chunks in cl/conv2d.cl) and, only
 * when gx is wanted, into io->xpad padded as the flipped convolution reads it
 * (pool2_grad_nchw: no pad_input pass of its own). Its rows: `wgrad-rows`, `flip-direct` and
 * `flip-winograd`, as the unfused node's of those names but from the pooled gradient. */
#include "conv2d.h"

/* conv_wgrad_pool_chunks' limit on taps (CHUNK_TAPS in cl/conv2d.cl). */
enum { CHUNK_TAPS = 128 };

/* Whether a fused convolution + pool expands its gradient into pixel rows and runs the
 * weight gradient in one kernel per slice of the batch (conv_wgrad_pool_rows) rather than in
 * two passes: when there are slices enough to keep every compute unit busy (each slice is one
 * work-item). Seed's first two layers at batch 64 on 2 cores (16 and 4 slices): about 10% less
 * time than the two passes, which write every row to memory and read it back. */
static int fuse_pool_wgrad(const clcnn_context *ctx, const clcnn_conv_wgrad_plan *plan) {
    if (ctx->pool_wgrad) return ctx->pool_wgrad == 1;
    return plan->S >= 2 * (int)ctx->info.compute_units;
}

/* gw of a fused convolution + pool from the pooled gradient by conv_wgrad_pool_rows (or, with
 * 32 padded channels and few taps, conv_wgrad_pool_chunks: seed's first layer's weight
 * gradient 12% faster on PoCL), then the slices' sum. */
static clcnn_status wgrad_pool_rows(clcnn_context *ctx, const clcnn_io *io,
                                    const clcnn_conv2d_shape *s,
                                    const clcnn_conv_wgrad_plan *plan) {
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
    CLCNN_ARG(&a, io->gy.buf);
    CLCNN_ARG(&a, zero);
    CLCNN_ARG(&a, io->aux);
    CLCNN_ARG(&a, io->keep_pad);
    CLCNN_ARG(&a, io->N);
    CLCNN_ARG(&a, plan->nb);
    clcnn_conv_padded_args(&a, s);
    size_t slices = (size_t)plan->S;
    clcnn_status st = clcnn_launch_single(ctx, k, &a, 1, &slices);
    if (st) return st;
    return plan->S > 1
               ? clcnn_conv_reduce_slices(ctx, io->grads, io->woff, io->col, ostride, plan->S)
               : CLCNN_SUCCESS;
}

/* The pooled gradient into pixel rows (pool2_grad_to_rows), then the row GEMM, which reads no
 * gy: the rows are ready. */
static clcnn_status wgrad_two_passes(const clcnn_node *n, const clcnn_io *io,
                                     const clcnn_conv_wgrad_plan *plan) {
    const clcnn_conv2d_shape *s = &n->conv;
    clcnn_kern *ex = clcnn_kernel(io->ctx, CLCNN_K_pool2_grad_to_rows);
    int zero = 0;
    clcnn_status st;
    clcnn_args e = {ex->k, 0, CL_SUCCESS};
    CLCNN_ARG(&e, io->rows);
    CLCNN_ARG(&e, io->gy.buf);
    CLCNN_ARG(&e, zero);
    CLCNN_ARG(&e, io->aux);
    CLCNN_ARG(&e, io->N);
    CLCNN_ARG(&e, s->OC);
    CLCNN_ARG(&e, plan->ocp);
    CLCNN_ARG(&e, s->OH);
    CLCNN_ARG(&e, s->OW);
    size_t blocks = (size_t)io->N * (size_t)((s->OH + 1) / 2) * (size_t)(plan->ocp / 16);
    if ((st = clcnn_launch1d(io->ctx, ex, &e, blocks))) return st;
    clcnn_conv_wgrad_args w = clcnn_conv_wgrad_args_of(n, io, NULL, 0, 1);
    return clcnn_conv_wgrad_rows_of(io->ctx, &w);
}

/* gw from the pooled gradient, in one kernel per slice or in two passes (fuse_pool_wgrad). */
static clcnn_status pool_wgrad_rows_run(const clcnn_node *n, const clcnn_io *io) {
    clcnn_conv_wgrad_plan plan = clcnn_conv_plan_wgrad(io->ctx, &n->conv, io->N);
    CLCNN_ASSERT(io->keep_pad != NULL); /* the forward kept x padded: the weight gradient's */
    if (fuse_pool_wgrad(io->ctx, &plan)) return wgrad_pool_rows(io->ctx, io, &n->conv, &plan);
    return wgrad_two_passes(n, io, &plan);
}

/* The pooled gradient expanded into io->xpad (N, OC, OH, OW), zero-padded as the flipped
 * convolution reads it. io->xpad is free for it: x is kept padded, so the weight gradient
 * leaves it alone. */
static clcnn_status pool_grad_padded(const clcnn_node *n, const clcnn_io *io) {
    const clcnn_conv2d_shape *s = &n->conv;
    clcnn_conv2d_shape g = {0};
    CLCNN_ASSERT(clcnn_conv_grad_shape(s, &g));
    int slack = (int)clcnn_conv_pad_slack((size_t)(g.W + 2 * g.pad)), noc = io->N * s->OC;
    int zero = 0;
    clcnn_kern *pk = clcnn_kernel(io->ctx, CLCNN_K_pool2_grad_nchw);
    clcnn_args p = {pk->k, 0, CL_SUCCESS};
    CLCNN_ARG(&p, io->xpad);
    CLCNN_ARG(&p, g.pad);
    CLCNN_ARG(&p, slack);
    CLCNN_ARG(&p, io->gy.buf);
    CLCNN_ARG(&p, zero);
    CLCNN_ARG(&p, io->aux);
    CLCNN_ARG(&p, noc);
    CLCNN_ARG(&p, s->OH);
    CLCNN_ARG(&p, s->OW);
    int per = 1 + PAD_ITEM_FLOATS / ((s->OH + 2 * g.pad) * (s->OW + 2 * g.pad));
    CLCNN_ARG(&p, per);
    size_t items = (size_t)(noc + per - 1) / (size_t)per;
    return clcnn_launch_single(io->ctx, pk, &p, 1, &items);
}

static clcnn_status pool_flip_direct_run(const clcnn_node *n, const clcnn_io *io) {
    clcnn_status st = pool_grad_padded(n, io);
    return st ? st : clcnn_conv_flip_direct_from(n, io, NULL, io->xpad, 1);
}

static clcnn_status pool_flip_winograd_run(const clcnn_node *n, const clcnn_io *io) {
    clcnn_status st = pool_grad_padded(n, io);
    return st ? st : clcnn_conv_flip_wino_from(n, io, NULL, io->xpad, 1);
}

static int pool_flip_winograd_applies(const clcnn_context *ctx, const clcnn_node *n) {
    return clcnn_conv_fused(ctx, n) && clcnn_conv_flip_wino_fits(n);
}

const clcnn_algo clcnn_conv_pool_wgrad_rows = {
    .name = "wgrad-rows",
    .pass = CLCNN_PASS_WGRAD,
    .flags = CLCNN_ALGO_PADDED_X,
    .path = CONV_PATH_DIRECT,
    .applies = clcnn_conv_fused,
    .workspace = clcnn_conv_wgrad_rows_ws,
    .run = pool_wgrad_rows_run,
};

const clcnn_algo clcnn_conv_pool_flip_direct = {
    .name = "flip-direct",
    .pass = CLCNN_PASS_DGRAD,
    .flags = CLCNN_ALGO_FLIPPED_W | CLCNN_ALGO_PADDED_GY,
    .path = CONV_PATH_DIRECT,
    .applies = clcnn_conv_fused,
    .run = pool_flip_direct_run,
};

const clcnn_algo clcnn_conv_pool_flip_winograd = {
    .name = "flip-winograd",
    .pass = CLCNN_PASS_DGRAD,
    .flags = CLCNN_ALGO_PADDED_GY,
    .path = CONV_PATH_DIRECT,
    .applies = pool_flip_winograd_applies,
    .workspace = clcnn_conv_flip_wino_ws,
    .run = pool_flip_winograd_run,
};
