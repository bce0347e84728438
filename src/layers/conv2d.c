/* Conv2d host side: im2col + GEMM + scatter forward; gather + two GEMMs + col2im backward. */
#include "layers.h"

#include "gemm.h"
#include "tune.h"

int clcnn_conv2d_chunk(const clcnn_conv2d_shape *s, const clcnn_workspace *ws) {
    size_t ohw = (size_t)s->OH * (size_t)s->OW;
    size_t per_col = ohw * (size_t)s->C * (size_t)s->K * (size_t)s->K;
    size_t per_rows = ohw * (size_t)s->OC;
    size_t a = per_col ? ws->col_cap / per_col : 1, b = per_rows ? ws->rows_cap / per_rows : 1;
    size_t c = a < b ? a : b;
    return c > 1 << 20 ? 1 << 20 : (int)c;
}

int clcnn_conv2d_grad_input_shape(const clcnn_conv2d_shape *s, clcnn_conv2d_shape *g) {
    if (s->stride != 1 || s->pad > s->K - 1) return 0;
    *g = (clcnn_conv2d_shape){s->OC, s->OH, s->OW, s->C, s->K, 1, s->K - 1 - s->pad, s->H, s->W, 0};
    return 1;
}

void clcnn_conv2d_scratch(const clcnn_conv2d_shape *s, int chunk, size_t *col, size_t *rows) {
    size_t ohw = (size_t)s->OH * (size_t)s->OW;
    *col = (size_t)chunk * ohw * (size_t)s->C * (size_t)s->K * (size_t)s->K;
    *rows = (size_t)chunk * ohw * (size_t)s->OC;
}

size_t clcnn_conv2d_direct_scratch(const clcnn_context *ctx, const clcnn_conv2d_shape *s, int N) {
    if (ctx->gemm_backend != CLCNN_GEMM_CPU || s->stride != 1) return 0;
    size_t hp = (size_t)s->H + 2 * (size_t)s->pad, wp = (size_t)s->W + 2 * (size_t)s->pad;
    /* Slack: the last tile's extra rows (up to 3) and lanes past the edge read beyond the data. */
    return (size_t)N * (size_t)s->C * hp * wp + 3 * wp + 32;
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
typedef struct wgrad_plan {
    int ocp, nb, S;
    size_t rows, part; /* floats of ws->rows and ws->col needed */
} wgrad_plan;

/* The row GEMM's plan; all zero when the rule rules it out (tuned: never, it is a candidate). */
static wgrad_plan plan_wgrad(const clcnn_context *ctx, const clcnn_conv2d_shape *s, int N,
                             int pooled) {
    wgrad_plan p = {0, 0, 0, 0, 0};
    /* After a fused pool the rows come without a transpose: always the row GEMM. */
    if (!ctx->autotune && !pooled && s->C * s->K * s->K < WGRAD_ROWS_MIN_TAPS) return p;
    size_t per = (size_t)s->OH * (size_t)s->OW * (size_t)((s->OC + 31) / 32 * 32);
    size_t nb = WGRAD_SLICE_FLOATS / (per ? per : 1);
    p.ocp = (s->OC + 31) / 32 * 32;
    p.nb = nb < 1 ? 1 : nb > (size_t)N ? N : (int)nb;
    p.S = N > 0 ? (N + p.nb - 1) / p.nb : 1;
    p.rows = (size_t)N * per;
    p.part = p.S > 1 ? (size_t)p.S * (size_t)s->OC * (size_t)s->C * (size_t)s->K * (size_t)s->K : 0;
    return p;
}

void clcnn_conv2d_wgrad_scratch(const clcnn_context *ctx, const clcnn_conv2d_shape *s, int N,
                                int pooled, size_t *rows, size_t *col) {
    *rows = *col = 0;
    if (!clcnn_conv2d_direct_scratch(ctx, s, N)) return;
    wgrad_plan p = plan_wgrad(ctx, s, N, pooled);
    *rows = p.rows, *col = p.part;
}

/* The direct stride-1 convolution: pad the input once, then one launch for the batch. */
static clcnn_status conv_direct(clcnn_context *ctx, cl_mem xp, int padded,
                                const clcnn_conv2d_shape *s, cl_mem y, int yoff, cl_mem x, int xoff,
                                cl_mem params, int woff, int boff, int N, cl_mem argmax) {
    int hp = s->H + 2 * s->pad, wp = s->W + 2 * s->pad, nc = N * s->C;
    clcnn_kern *pad = clcnn_kernel_must(ctx, "pad_input");
    clcnn_kern *k = clcnn_kernel_must(ctx, "conv_direct_s1");
    clcnn_status st;
    if (padded) goto conv; /* xp already holds this x, padded (a kept forward input) */
    clcnn_args a = {pad->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, xp);
    CLCNN_ARG(&a, x);
    CLCNN_ARG(&a, xoff);
    CLCNN_ARG(&a, nc);
    CLCNN_ARG(&a, s->H);
    CLCNN_ARG(&a, s->W);
    CLCNN_ARG(&a, s->pad);
    CLCNN_ARG(&a, hp);
    CLCNN_ARG(&a, wp);
    if ((st = clcnn_launch1d(ctx, pad, &a, (size_t)nc * hp))) return st;
    /* Zero the slack past the data too: the kernels read it in lanes they do not store, but
     * the weight gradient multiplies those lanes by zeros, and 0 * NaN (left-over bytes) would
     * poison the sum. */
    clcnn_kern *fill = clcnn_kernel_must(ctx, "fill_f32");
    int slack_off = nc * hp * wp, slack = 3 * wp + 32;
    float zero = 0.0f;
    clcnn_args z = {fill->k, 0, CL_SUCCESS};
    CLCNN_ARG(&z, xp);
    CLCNN_ARG(&z, slack_off);
    CLCNN_ARG(&z, slack);
    CLCNN_ARG(&z, zero);
    if ((st = clcnn_launch1d(ctx, fill, &z, (size_t)slack))) return st;
conv:
    if (!y) return CLCNN_SUCCESS; /* padding only (the weight gradient's input) */
    if (s->OW == 8) k = clcnn_kernel_must(ctx, "conv_direct_s1_w8");
    clcnn_args b = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&b, y);
    CLCNN_ARG(&b, yoff);
    CLCNN_ARG(&b, xp);
    CLCNN_ARG(&b, params);
    CLCNN_ARG(&b, woff);
    CLCNN_ARG(&b, boff);
    CLCNN_ARG(&b, s->bias);
    CLCNN_ARG(&b, s->C);
    CLCNN_ARG(&b, hp);
    CLCNN_ARG(&b, wp);
    CLCNN_ARG(&b, s->OC);
    CLCNN_ARG(&b, s->K);
    CLCNN_ARG(&b, s->OH);
    if (s->OW != 8) CLCNN_ARG(&b, s->OW);
    int pool = argmax != NULL;
    cl_mem am = pool ? argmax : y; /* a valid buffer the kernel does not touch */
    CLCNN_ARG(&b, am);
    CLCNN_ARG(&b, pool);
    size_t global[3] = {s->OW == 8 ? (size_t)(s->OH + 3) / 4
                                   : (size_t)((s->OW + 15) / 16) * (size_t)((s->OH + 1) / 2),
                        (size_t)(s->OC + 7) / 8, (size_t)N};
    return clcnn_launch_single(ctx, k, &b, 3, global);
}

/* Whether this layer's forward takes the direct path (the backward must know it: the direct
 * forward leaves no im2col matrix behind). */
static int use_direct(const clcnn_context *ctx, const clcnn_workspace *ws,
                      const clcnn_conv2d_shape *s, int N) {
    size_t need = clcnn_conv2d_direct_scratch(ctx, s, N);
    return need && ws->xpad && ws->xpad_cap >= need;
}

static clcnn_status im2col(clcnn_context *ctx, const clcnn_conv2d_shape *s, cl_mem col, cl_mem x,
                           int xoff, int n0, int nimg) {
    clcnn_kern *k = clcnn_kernel_must(ctx, "im2col");
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

clcnn_status clcnn_conv2d_forward(clcnn_context *ctx, clcnn_workspace *ws,
                                  const clcnn_conv2d_shape *s, cl_mem y, int yoff, cl_mem x,
                                  int xoff, cl_mem params, int woff, int boff, int N,
                                  cl_mem keep_col, cl_mem keep_pad) {
    int chunk = keep_col ? N : clcnn_conv2d_chunk(s, ws), ohw = s->OH * s->OW;
    int ckk = s->C * s->K * s->K;
    cl_mem col = keep_col ? keep_col : ws->col;
    if (use_direct(ctx, ws, s, N))
        return conv_direct(ctx, keep_pad ? keep_pad : ws->xpad, 0, s, y, yoff, x, xoff, params,
                           woff, boff, N, NULL);
    CLCNN_ASSERT(chunk > 0); /* callers size the workspace for at least one image */
    clcnn_kern *scatter = clcnn_kernel_must(ctx, "rows_to_nchw_bias");
    clcnn_status st;
    for (int n0 = 0; n0 < N; n0 += chunk) {
        int nimg = N - n0 < chunk ? N - n0 : chunk;
        if ((st = im2col(ctx, s, col, x, xoff, n0, nimg))) return st;
        /* rows[nimg*OHW, OC] = col[nimg*OHW, CKK] . w[OC, CKK]^T */
        st = clcnn_gemm(ctx, 0, 1, nimg * ohw, s->OC, ckk, 1.0f, col, 0, ckk, params, (size_t)woff,
                        ckk, 0.0f, ws->rows, 0, s->OC);
        if (st) return st;
        clcnn_args a = {scatter->k, 0, CL_SUCCESS};
        CLCNN_ARG(&a, y);
        CLCNN_ARG(&a, yoff);
        CLCNN_ARG(&a, ws->rows);
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

int clcnn_conv2d_can_pool(const clcnn_context *ctx, const clcnn_workspace *ws,
                          const clcnn_conv2d_shape *s, int N) {
    return use_direct(ctx, ws, s, N);
}

clcnn_status clcnn_conv2d_forward_pool(clcnn_context *ctx, clcnn_workspace *ws,
                                       const clcnn_conv2d_shape *s, cl_mem y, int yoff,
                                       cl_mem argmax, cl_mem x, int xoff, cl_mem params, int woff,
                                       int boff, int N, cl_mem keep) {
    CLCNN_ASSERT(use_direct(ctx, ws, s, N) && argmax);
    return conv_direct(ctx, keep ? keep : ws->xpad, 0, s, y, yoff, x, xoff, params, woff, boff, N,
                       argmax);
}

/* The direct weight gradient's operands, for its two kernels and the autotuner. */
typedef struct wgrad_args {
    clcnn_workspace *ws;
    const clcnn_conv2d_shape *s;
    wgrad_plan plan;
    cl_mem grads, gy, x, params;
    int woff, boff, gyoff, xoff, N;
    int rows_ready; /* ws->rows already holds gy as pixel rows (after a fused pool) */
    cl_mem xp;      /* the padded input: ws->xpad, padded here, or the forward's kept copy */
    int padded;     /* xp already holds x padded */
} wgrad_args;

/* The weight-gradient kernels' trailing shape arguments: C, Hp, Wp, OC, K, OH, OW. */
static void wgrad_shape_args(clcnn_args *a, const clcnn_conv2d_shape *s) {
    int hp = s->H + 2 * s->pad, wp = s->W + 2 * s->pad;
    CLCNN_ARG(a, s->C);
    CLCNN_ARG(a, hp);
    CLCNN_ARG(a, wp);
    CLCNN_ARG(a, s->OC);
    CLCNN_ARG(a, s->K);
    CLCNN_ARG(a, s->OH);
    CLCNN_ARG(a, s->OW);
}

/* Pixel-row GEMM: gy to pixel rows, then an implicit GEMM against the padded input, per
 * slice of the batch, and the slices' sum. */
static clcnn_status wgrad_rows(clcnn_context *ctx, const wgrad_args *w) {
    clcnn_workspace *ws = w->ws;
    const clcnn_conv2d_shape *s = w->s;
    wgrad_plan plan = w->plan;
    cl_mem grads = w->grads, gy = w->gy, x = w->x, params = w->params;
    int woff = w->woff, boff = w->boff, gyoff = w->gyoff, xoff = w->xoff, N = w->N;
    int ohw = s->OH * s->OW, ckk = s->C * s->K * s->K;
    clcnn_status st;
    clcnn_kern *tr = clcnn_kernel_must(ctx, "gy_to_rows_pad");
    clcnn_kern *k = clcnn_kernel_must(ctx, "conv_wgrad_rows");
    st = conv_direct(ctx, w->xp, w->padded, s, NULL, 0, x, xoff, params, woff, boff, N, NULL);
    if (st) return st;
    clcnn_args t = {tr->k, 0, CL_SUCCESS};
    CLCNN_ARG(&t, ws->rows);
    CLCNN_ARG(&t, gy);
    CLCNN_ARG(&t, gyoff);
    CLCNN_ARG(&t, N);
    CLCNN_ARG(&t, s->OC);
    CLCNN_ARG(&t, ohw);
    CLCNN_ARG(&t, plan.ocp);
    if (!w->rows_ready && (st = clcnn_launch1d(ctx, tr, &t, (size_t)N * ohw))) return st;
    cl_mem out = plan.S > 1 ? ws->col : grads;
    int outoff = plan.S > 1 ? 0 : woff, ostride = s->OC * ckk;
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, out);
    CLCNN_ARG(&a, outoff);
    CLCNN_ARG(&a, ostride);
    CLCNN_ARG(&a, ws->rows);
    CLCNN_ARG(&a, plan.ocp);
    CLCNN_ARG(&a, w->xp);
    CLCNN_ARG(&a, N);
    CLCNN_ARG(&a, plan.nb);
    wgrad_shape_args(&a, s);
    size_t global[3] = {(size_t)(ckk + 7) / 8, (size_t)plan.ocp / 32, (size_t)plan.S};
    if ((st = clcnn_launch_single(ctx, k, &a, 3, global))) return st;
    if (plan.S > 1) {
        clcnn_kern *r = clcnn_kernel_must(ctx, "gemm_reduce");
        float alpha = 1.0f, beta = 0.0f;
        clcnn_args b = {r->k, 0, CL_SUCCESS};
        CLCNN_ARG(&b, grads);
        CLCNN_ARG(&b, woff);
        CLCNN_ARG(&b, ckk);
        CLCNN_ARG(&b, ws->col);
        CLCNN_ARG(&b, s->OC);
        CLCNN_ARG(&b, ckk);
        CLCNN_ARG(&b, plan.S);
        CLCNN_ARG(&b, alpha);
        CLCNN_ARG(&b, beta);
        if ((st = clcnn_launch1d(ctx, r, &b, (size_t)s->OC * ckk))) return st;
    }
    return CLCNN_SUCCESS;
}

/* Lane reduction: reads gy in place, sums along rows in float16 lanes (conv_wgrad_s1). */
static clcnn_status wgrad_lanes(clcnn_context *ctx, const wgrad_args *w) {
    const clcnn_conv2d_shape *s = w->s;
    cl_mem grads = w->grads, gy = w->gy, x = w->x, params = w->params;
    int woff = w->woff, boff = w->boff, gyoff = w->gyoff, xoff = w->xoff, N = w->N;
    int ckk = s->C * s->K * s->K;
    clcnn_status st;
    clcnn_kern *k = clcnn_kernel_must(ctx, "conv_wgrad_s1");
    st = conv_direct(ctx, w->xp, w->padded, s, NULL, 0, x, xoff, params, woff, boff, N, NULL);
    if (st) return st;
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, grads);
    CLCNN_ARG(&a, woff);
    CLCNN_ARG(&a, gy);
    CLCNN_ARG(&a, gyoff);
    CLCNN_ARG(&a, w->xp);
    CLCNN_ARG(&a, N);
    wgrad_shape_args(&a, s);
    size_t global[2] = {(size_t)(ckk + 3) / 4, (size_t)(s->OC + 3) / 4};
    return clcnn_launch_single(ctx, k, &a, 2, global);
}

static clcnn_status wgrad_run(clcnn_context *ctx, int c, void *arg) {
    return c == 1 ? wgrad_rows(ctx, arg) : wgrad_lanes(ctx, arg);
}

clcnn_status clcnn_bias_grad(clcnn_context *ctx, cl_mem grads, int boff, cl_mem g, int goff, int N,
                             int OC, int hw) {
    clcnn_kern *kb = clcnn_kernel_must(ctx, "bias_grad");
    int acc = 0;
    clcnn_args a = {kb->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, grads);
    CLCNN_ARG(&a, boff);
    CLCNN_ARG(&a, g);
    CLCNN_ARG(&a, goff);
    CLCNN_ARG(&a, N);
    CLCNN_ARG(&a, OC);
    CLCNN_ARG(&a, hw);
    CLCNN_ARG(&a, acc);
    return clcnn_launch_items(ctx, kb, &a, (size_t)OC);
}

/* The stride-1 input gradient as a convolution of gy with the flipped weights. */
static clcnn_status input_grad_conv(clcnn_context *ctx, clcnn_workspace *ws,
                                    const clcnn_conv2d_shape *s, cl_mem gx, int gxoff, cl_mem gy,
                                    int gyoff, cl_mem params, int woff, int N) {
    clcnn_conv2d_shape g;
    clcnn_status st;
    CLCNN_ASSERT(clcnn_conv2d_grad_input_shape(s, &g));
    clcnn_kern *flip = clcnn_kernel_must(ctx, "flip_weights");
    clcnn_args f = {flip->k, 0, CL_SUCCESS};
    CLCNN_ARG(&f, ws->wflip);
    CLCNN_ARG(&f, params);
    CLCNN_ARG(&f, woff);
    CLCNN_ARG(&f, s->OC);
    CLCNN_ARG(&f, s->C);
    CLCNN_ARG(&f, s->K);
    if ((st = clcnn_launch1d(ctx, flip, &f, (size_t)s->OC * s->C))) return st;
    return clcnn_conv2d_forward(ctx, ws, &g, gx, gxoff, gy, gyoff, ws->wflip, 0, 0, N, NULL, NULL);
}

clcnn_status clcnn_conv2d_backward(clcnn_context *ctx, clcnn_workspace *ws,
                                   const clcnn_conv2d_shape *s, cl_mem gx, int gxoff, cl_mem grads,
                                   int woff, int boff, cl_mem gy, int gyoff, cl_mem x, int xoff,
                                   cl_mem params, int N, cl_mem keep_col, cl_mem keep_pad) {
    int chunk = keep_col ? N : clcnn_conv2d_chunk(s, ws), ohw = s->OH * s->OW;
    int ckk = s->C * s->K * s->K;
    cl_mem col = keep_col ? keep_col : ws->col;
    clcnn_conv2d_shape g;
    /* With stride 1 the input gradient is itself a convolution (of gy with the flipped
     * weights), which streams memory far better than col2im's scattered gather. */
    int via_conv = gx && ws->wflip && clcnn_conv2d_grad_input_shape(s, &g) &&
                   ws->wflip_cap >= (size_t)s->OC * ckk &&
                   (clcnn_conv2d_chunk(&g, ws) > 0 || use_direct(ctx, ws, &g, N));
    wgrad_plan plan = plan_wgrad(ctx, s, N, 0);
    /* The direct weight gradient: the pixel-row GEMM when the plan picks it and its scratch is
     * there (a model sizes it), else the kernel that reads gy in place. */
    int direct = use_direct(ctx, ws, s, N);
    int rows_path = direct && plan.rows && ws->rows && ws->rows_cap >= plan.rows &&
                    (plan.S == 1 || (ws->col && ws->col_cap >= plan.part));
    /* The im2col path below runs unless the direct kernels cover both gradients. */
    CLCNN_ASSERT(chunk > 0 || (direct && (!gx || via_conv)));
    clcnn_kern *gather = clcnn_kernel_must(ctx, "nchw_to_rows"),
               *c2i = clcnn_kernel_must(ctx, "col2im");
    clcnn_status st;
    if (s->bias && (st = clcnn_bias_grad(ctx, grads, boff, gy, gyoff, N, s->OC, ohw))) return st;
    if (direct) {
        wgrad_args wa = {ws,
                         s,
                         plan,
                         grads,
                         gy,
                         x,
                         params,
                         woff,
                         boff,
                         gyoff,
                         xoff,
                         N,
                         0,
                         keep_pad ? keep_pad : ws->xpad,
                         keep_pad != NULL};
        /* Tuned: both kernels timed once per shape and batch (only when the row GEMM's
         * scratch is there; a model sizes it for every direct layer when tuning). */
        static const char *const names[2] = {"lanes", "rows"};
        char key[80];
        snprintf(key, sizeof key, "wgrad-%d-%d-%d-%d-%d-%d-%d", s->C, s->H, s->W, s->OC, s->K,
                 s->pad, N);
        int c = clcnn_tune_choose(ctx, key, names, rows_path ? 2 : 0, wgrad_run, &wa, &st);
        if (st) return st;
        if (c >= 0) rows_path = c == 1;
        if ((st = rows_path ? wgrad_rows(ctx, &wa) : wgrad_lanes(ctx, &wa))) return st;
    }
    /* im2col + GEMM: the weight gradient when the direct path is off, and the input gradient
     * through col2im when it cannot be a convolution (the weight gradient is then computed
     * a second time, which only happens for unusual shapes). */
    for (int n0 = 0; n0 < N && !(direct && (!gx || via_conv)); n0 += chunk) {
        int nimg = N - n0 < chunk ? N - n0 : chunk;
        clcnn_args a = {gather->k, 0, CL_SUCCESS};
        CLCNN_ARG(&a, ws->rows);
        CLCNN_ARG(&a, gy);
        CLCNN_ARG(&a, gyoff);
        CLCNN_ARG(&a, n0);
        CLCNN_ARG(&a, nimg);
        CLCNN_ARG(&a, s->OC);
        CLCNN_ARG(&a, ohw);
        if ((st = clcnn_launch1d(ctx, gather, &a, (size_t)nimg * s->OC * ohw))) return st;
        if ((!keep_col || direct) && (st = im2col(ctx, s, col, x, xoff, n0, nimg))) return st;
        /* gw[OC, CKK] (+)= rows^T . col; the first chunk overwrites */
        st = clcnn_gemm(ctx, 1, 0, s->OC, ckk, nimg * ohw, 1.0f, ws->rows, 0, s->OC, col, 0, ckk,
                        n0 == 0 ? 0.0f : 1.0f, grads, (size_t)woff, ckk);
        if (st) return st;
        if (!gx || via_conv) continue;
        /* dcol[nimg*OHW, CKK] = rows . w, written over col (the queue is in order) */
        st = clcnn_gemm(ctx, 0, 0, nimg * ohw, ckk, s->OC, 1.0f, ws->rows, 0, s->OC, params,
                        (size_t)woff, ckk, 0.0f, col, 0, ckk);
        if (st) return st;
        clcnn_args b = {c2i->k, 0, CL_SUCCESS};
        CLCNN_ARG(&b, gx);
        CLCNN_ARG(&b, gxoff);
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
    if (!via_conv) return CLCNN_SUCCESS;
    return input_grad_conv(ctx, ws, s, gx, gxoff, gy, gyoff, params, woff, N);
}

int clcnn_conv2d_can_pool_backward(const clcnn_context *ctx, const clcnn_workspace *ws,
                                   const clcnn_conv2d_shape *s, int N, int need_gx) {
    wgrad_plan plan = plan_wgrad(ctx, s, N, 1);
    clcnn_conv2d_shape g;
    if (!use_direct(ctx, ws, s, N) || !ws->rows || ws->rows_cap < plan.rows ||
        (plan.S > 1 && (!ws->col || ws->col_cap < plan.part)))
        return 0;
    return !need_gx || (ws->wflip && ws->wflip_cap >= (size_t)s->OC * s->C * s->K * s->K &&
                        clcnn_conv2d_grad_input_shape(s, &g) && use_direct(ctx, ws, &g, N));
}

clcnn_status clcnn_conv2d_backward_pooled(clcnn_context *ctx, clcnn_workspace *ws,
                                          const clcnn_conv2d_shape *s, cl_mem gx, int gxoff,
                                          cl_mem grads, int woff, int boff, cl_mem gp, int gpoff,
                                          cl_mem argmax, cl_mem gy, cl_mem x, int xoff,
                                          cl_mem params, int N, cl_mem keep) {
    CLCNN_ASSERT(clcnn_conv2d_can_pool_backward(ctx, ws, s, N, gx != NULL));
    wgrad_plan plan = plan_wgrad(ctx, s, N, 1);
    int PH = s->OH / 2, PW = s->OW / 2, phw = PH * PW, nchw = gx != NULL;
    clcnn_status st;
    /* the bias: the zeros the pool's backward would add change no sum, so sum gp directly */
    if (s->bias && (st = clcnn_bias_grad(ctx, grads, boff, gp, gpoff, N, s->OC, phw))) return st;
    clcnn_kern *ex = clcnn_kernel_must(ctx, "pool2_grad_to_rows");
    cl_mem gy_arg = nchw ? gy : ws->rows; /* a valid buffer the kernel leaves alone */
    clcnn_args e = {ex->k, 0, CL_SUCCESS};
    CLCNN_ARG(&e, ws->rows);
    CLCNN_ARG(&e, gy_arg);
    CLCNN_ARG(&e, nchw);
    CLCNN_ARG(&e, gp);
    CLCNN_ARG(&e, gpoff);
    CLCNN_ARG(&e, argmax);
    CLCNN_ARG(&e, N);
    CLCNN_ARG(&e, s->OC);
    CLCNN_ARG(&e, plan.ocp);
    CLCNN_ARG(&e, s->OH);
    CLCNN_ARG(&e, s->OW);
    size_t blocks = (size_t)N * (size_t)((s->OH + 1) / 2) * (size_t)(plan.ocp / 16);
    if ((st = clcnn_launch1d(ctx, ex, &e, blocks))) return st;
    wgrad_args wa = {ws,          s,    plan, grads, gy, x, params,
                     woff,        boff, 0,    xoff,  N,  1, keep ? keep : ws->xpad,
                     keep != NULL};
    if ((st = wgrad_rows(ctx, &wa))) return st;
    if (!gx) return CLCNN_SUCCESS;
    return input_grad_conv(ctx, ws, s, gx, gxoff, gy, 0, params, woff, N);
}
