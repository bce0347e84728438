/* The convolutions through im2col + GEMM (im2col, rows_to_nchw_bias, nchw_to_rows and col2im
 * in cl/conv2d.cl, the GEMM by the context's backend), and the weight gradient as a GEMM of gy's
 * pixel rows against the padded input (gy_to_rows_pad, conv_wgrad_rows*). Its rows: `im2col`
 * (the forward, and the weight gradient), `col2im` (the input gradient: GEMM into columns, then
 * col2im), `flip-im2col` (the input gradient as the flipped convolution through im2col) and
 * `wgrad-rows`. */
#include "conv2d.h"

#include "gemm.h"

/* The direct weight gradient's split: gy as pixel rows of OCp channels, the batch cut into S
 * slices of nb images whose rows (about WGRAD_SLICE_FLOATS) stay in cache while every tap tile
 * passes over them. */
enum { WGRAD_SLICE_FLOATS = 1 << 17 };

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

/* col (nimg*OH*OW, C*K*K) = the patches of images n0 .. n0+nimg of x. */
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

/* Images per im2col chunk of s (1..N), bounded by WORKSPACE_FLOATS. */
size_t clcnn_conv_plan_chunk(const clcnn_conv2d_shape *s, int N) {
    size_t per_col, per_rows;
    per_image(s, &per_col, &per_rows);
    size_t chunk = WORKSPACE_FLOATS / (per_col ? per_col : 1);
    return chunk < 1 ? 1 : chunk > (size_t)N ? (size_t)N : chunk;
}

void clcnn_conv_grow_im2col(const clcnn_conv2d_shape *s, size_t chunk, clcnn_node_ws *ws) {
    size_t per_col, per_rows;
    per_image(s, &per_col, &per_rows);
    clcnn_conv_grow(&ws->col, chunk * per_col);
    clcnn_conv_grow(&ws->rows, chunk * per_rows);
}

clcnn_status clcnn_conv_forward_im2col(const clcnn_io *io, const clcnn_conv2d_shape *s, cl_mem y,
                                       cl_mem x, cl_mem params, int woff, int boff,
                                       cl_mem keep_col) {
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

/* The im2col backward: per chunk, gy gathered into pixel rows; with do_w the weight gradient
 * rows^T . col (col rebuilt unless the forward kept it), with do_x the input gradient through
 * dcol = rows . w and col2im. */
clcnn_status clcnn_conv_backward_im2col(const clcnn_node *n, const clcnn_io *io, int do_w,
                                        int do_x) {
    const clcnn_conv2d_shape *s = &n->conv;
    clcnn_context *ctx = io->ctx;
    int N = io->N, ohw = s->OH * s->OW, ckk = s->C * s->K * s->K, zero = 0;
    int kept = io->keep_col && (n->algo[CLCNN_PASS_FORWARD]->flags & CLCNN_ALGO_KEEPS_COL);
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
        CLCNN_ARG(&a, io->gy.buf);
        CLCNN_ARG(&a, zero);
        CLCNN_ARG(&a, n0);
        CLCNN_ARG(&a, nimg);
        CLCNN_ARG(&a, s->OC);
        CLCNN_ARG(&a, ohw);
        if ((st = clcnn_launch1d(ctx, gather, &a, (size_t)nimg * s->OC * ohw))) return st;
        if (do_w && !kept && (st = im2col(ctx, s, col, io->x[0].buf, zero, n0, nimg))) return st;
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
        CLCNN_ARG(&b, io->gx[0].buf);
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

/* y = conv(x, w) + b, the batch's im2col kept for the backward where the plan sized keep_col. */
static clcnn_status im2col_run(const clcnn_node *n, const clcnn_io *io) {
    return clcnn_conv_forward_im2col(io, &n->conv, io->y.buf, io->x[0].buf, io->params, io->woff,
                                     io->boff < 0 ? 0 : io->boff, io->keep_col);
}

/* The forward keeps the whole batch's im2col when it fits KEEP_FLOATS (then the scratch holds
 * the batch at once), else it runs in chunks. */
static void im2col_ws(const clcnn_context *ctx, const clcnn_node *n, int N, clcnn_node_ws *ws) {
    const clcnn_conv2d_shape *s = &n->conv;
    size_t per_col, per_rows, chunk = clcnn_conv_plan_chunk(s, N);
    (void)ctx;
    per_image(s, &per_col, &per_rows);
    if ((size_t)N * per_col <= KEEP_FLOATS) {
        ws->keep_col = (size_t)N * per_col;
        chunk = (size_t)N; /* the whole batch at once: rows must hold it too */
    }
    clcnn_conv_grow_im2col(s, chunk, ws);
}

static void chunks_ws(const clcnn_context *ctx, const clcnn_node *n, int N, clcnn_node_ws *ws) {
    (void)ctx;
    clcnn_conv_grow_im2col(&n->conv, clcnn_conv_plan_chunk(&n->conv, N), ws);
}

/* gw by gather + GEMM; with col2im for the input gradient as well, both in one pass over the
 * chunks (gy gathered once). */
static clcnn_status wgrad_im2col_run(const clcnn_node *n, const clcnn_io *io) {
    const clcnn_algo *dg = n->algo[CLCNN_PASS_DGRAD];
    int both = io->gx[0].buf && dg && (dg->flags & CLCNN_ALGO_GY_ROWS);
    return clcnn_conv_backward_im2col(n, io, 1, both);
}

/* gx by GEMM + col2im, unless the weight gradient's pass over the chunks did it. */
static clcnn_status col2im_run(const clcnn_node *n, const clcnn_io *io) {
    if (n->algo[CLCNN_PASS_WGRAD]->flags & CLCNN_ALGO_GY_ROWS) return CLCNN_SUCCESS;
    return clcnn_conv_backward_im2col(n, io, 0, 1);
}

clcnn_status clcnn_conv_flip_im2col_run(const clcnn_node *n, const clcnn_io *io) {
    clcnn_conv2d_shape g;
    clcnn_status st;
    CLCNN_ASSERT(clcnn_conv_grad_shape(&n->conv, &g));
    if ((st = clcnn_conv_flip_weights(io, &n->conv))) return st;
    return clcnn_conv_forward_im2col(io, &g, io->gx[0].buf, io->gy.buf, io->wflip, 0, 0, NULL);
}

void clcnn_conv_flip_im2col_ws(const clcnn_context *ctx, const clcnn_node *n, int N,
                               clcnn_node_ws *ws) {
    clcnn_conv2d_shape g;
    (void)ctx;
    if (clcnn_conv_grad_shape(&n->conv, &g))
        clcnn_conv_grow_im2col(&g, clcnn_conv_plan_chunk(&g, N), ws);
}

clcnn_conv_wgrad_plan clcnn_conv_plan_wgrad(const clcnn_context *ctx, const clcnn_conv2d_shape *s,
                                            int N) {
    clcnn_conv_wgrad_plan p = {0, 0, 0, 0, 0};
    size_t per = (size_t)s->OH * (size_t)s->OW * (size_t)((s->OC + 31) / 32 * 32);
    size_t nb = (ctx->wgrad_slice ? ctx->wgrad_slice : WGRAD_SLICE_FLOATS) / (per ? per : 1);
    p.ocp = (s->OC + 31) / 32 * 32;
    p.nb = nb < 1 ? 1 : nb > (size_t)N ? N : (int)nb;
    p.S = N > 0 ? (N + p.nb - 1) / p.nb : 1;
    p.rows = (size_t)N * per;
    p.part = p.S > 1 ? (size_t)p.S * (size_t)s->OC * (size_t)s->C * (size_t)s->K * (size_t)s->K : 0;
    return p;
}

void clcnn_conv_wgrad_rows_ws(const clcnn_context *ctx, const clcnn_node *n, int N,
                              clcnn_node_ws *ws) {
    clcnn_conv_wgrad_plan p = clcnn_conv_plan_wgrad(ctx, &n->conv, N);
    clcnn_conv_grow(&ws->rows, p.rows);
    clcnn_conv_grow(&ws->col, p.part);
}

clcnn_conv_wgrad_args clcnn_conv_wgrad_args_of(const clcnn_node *n, const clcnn_io *io, cl_mem gy,
                                               int gp, int rows_ready) {
    clcnn_conv_wgrad_args w = {.io = io,
                               .s = &n->conv,
                               .plan = clcnn_conv_plan_wgrad(io->ctx, &n->conv, io->N),
                               .gy = gy,
                               .gp = gp,
                               .rows_ready = rows_ready,
                               .xp = io->keep_pad ? io->keep_pad : io->xpad,
                               .padded = io->keep_pad != NULL};
    return w;
}

clcnn_status clcnn_conv_wgrad_pad(clcnn_context *ctx, const clcnn_conv_wgrad_args *w) {
    const clcnn_io *io = w->io;
    return clcnn_conv_direct_s1(ctx, w->xp, w->padded, w->s, NULL, io->x[0].buf, io->params, 0, 0,
                                io->N, NULL, NULL, 0, 0);
}

/* Pixel-row GEMM: gy to pixel rows, then an implicit GEMM against the padded input, per
 * slice of the batch, and the slices' sum. */
clcnn_status clcnn_conv_wgrad_rows_of(clcnn_context *ctx, const clcnn_conv_wgrad_args *w) {
    const clcnn_io *ws = w->io;
    const clcnn_conv2d_shape *s = w->s;
    clcnn_conv_wgrad_plan plan = w->plan;
    cl_mem grads = ws->grads;
    int woff = ws->woff, N = ws->N;
    int ohw = s->OH * s->OW, ckk = s->C * s->K * s->K;
    clcnn_status st;
    clcnn_kern *tr = clcnn_kernel(ctx, CLCNN_K_gy_to_rows_pad);
    clcnn_kern *k = clcnn_kernel(ctx, CLCNN_K_conv_wgrad_rows);
    if ((st = clcnn_conv_wgrad_pad(ctx, w))) return st;
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
    clcnn_conv_padded_args(&a, s);
    size_t global[3] = {(size_t)(ckk + 7) / 8, (size_t)plan.ocp / 32, (size_t)plan.S};
    if (plan.ocp % 64 == 0) /* conv_wgrad_rows64's tile: 6 taps x 64 channels */
        global[0] = (size_t)(ckk + 5) / 6, global[1] = (size_t)plan.ocp / 64;
    if ((st = clcnn_launch_single(ctx, k, &a, 3, global))) return st;
    return plan.S > 1 ? clcnn_conv_reduce_slices(ctx, grads, woff, ws->col, s->OC * ckk, plan.S)
                      : CLCNN_SUCCESS;
}

/* gw by wgrad-rows, reading gy from its padded copy when the next layer's backward handed it
 * over there (its plain copy may not be written: conv_views in conv2d.c). */
static clcnn_status wgrad_rows_run(const clcnn_node *n, const clcnn_io *io) {
    clcnn_conv2d_shape g;
    int handed = io->gy_in_view && clcnn_conv_grad_shape(&n->conv, &g);
    clcnn_conv_wgrad_args w =
        clcnn_conv_wgrad_args_of(n, io, handed ? io->keep_gpad : io->gy.buf, handed ? g.pad : 0, 0);
    return clcnn_conv_wgrad_rows_of(io->ctx, &w);
}

const clcnn_algo clcnn_conv_im2col = {
    .name = "im2col",
    .pass = CLCNN_PASS_FORWARD,
    .flags = CLCNN_ALGO_KEEPS_COL,
    .path = CONV_PATH_IM2COL,
    .applies = clcnn_conv_single,
    .workspace = im2col_ws,
    .run = im2col_run,
};

const clcnn_algo clcnn_conv_wgrad_im2col = {
    .name = "im2col",
    .pass = CLCNN_PASS_WGRAD,
    .flags = CLCNN_ALGO_GY_ROWS,
    .path = CONV_PATH_IM2COL,
    .applies = clcnn_conv_single,
    .workspace = chunks_ws,
    .run = wgrad_im2col_run,
};

const clcnn_algo clcnn_conv_col2im = {
    .name = "col2im",
    .pass = CLCNN_PASS_DGRAD,
    .flags = CLCNN_ALGO_GY_ROWS,
    .path = CONV_PATH_IM2COL,
    .applies = clcnn_conv_single,
    .workspace = chunks_ws,
    .run = col2im_run,
};

const clcnn_algo clcnn_conv_flip_im2col = {
    .name = "flip-im2col",
    .pass = CLCNN_PASS_DGRAD,
    .flags = CLCNN_ALGO_FLIPPED_W,
    .path = CONV_PATH_IM2COL,
    .applies = clcnn_conv_flips,
    .workspace = clcnn_conv_flip_im2col_ws,
    .run = clcnn_conv_flip_im2col_run,
};

const clcnn_algo clcnn_conv_wgrad_rows = {
    .name = "wgrad-rows",
    .pass = CLCNN_PASS_WGRAD,
    .flags = CLCNN_ALGO_PADDED_X | CLCNN_ALGO_PADDED_GY,
    .path = CONV_PATH_DIRECT,
    .applies = clcnn_conv_s1,
    .workspace = clcnn_conv_wgrad_rows_ws,
    .run = wgrad_rows_run,
};
