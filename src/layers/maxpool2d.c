/* MaxPool2d (nn.MaxPool2d, floor mode): an argmax-recording forward and a backward that routes
 * each output's gradient to the input it came from (cl/maxpool2d.cl). */
#include "layer.h"

/* Spec syntax (docs/MODEL_SPEC.md) */

clcnn_status clcnn_window_finish(const clcnn_spec_parser *p, const clcnn_layer_args *a,
                                 clcnn_layer_desc *d) {
    d->kernel = a->val[CLCNN_SLOT_KERNEL];
    d->stride = clcnn_layer_arg(a, CLCNN_SLOT_STRIDE, d->kernel);
    d->pad = clcnn_layer_arg(a, CLCNN_SLOT_PAD, 0);
    /* PyTorch refuses this only when the layer first runs; catching it here points at the
     * text instead. (It also keeps every average's divisor K*K.) */
    if (d->pad > d->kernel / 2)
        return clcnn_spec_fail(p, a->col[CLCNN_SLOT_PAD],
                               "%s pad %d is more than half the kernel %d (PyTorch requires "
                               "pad <= kernel/2)",
                               clcnn_layer_syntax_of(d->kind)->name, d->pad, d->kernel);
    return CLCNN_SUCCESS;
}

void clcnn_window_format(const clcnn_layer_desc *d, clcnn_spec_buf *b) {
    clcnn_spec_append(b, "%s(%d,stride=%d", clcnn_layer_syntax_of(d->kind)->name, d->kernel,
                      d->stride);
    if (d->pad) clcnn_spec_append(b, ",pad=%d", d->pad);
    clcnn_spec_append(b, ")");
}

const clcnn_layer_syntax clcnn_maxpool2d_syntax = {
    .name = "maxpool",
    .aliases = {"maxpool2d", "mp"},
    .torch_name = "MaxPool2d",
    .pos = {CLCNN_SLOT_KERNEL, CLCNN_SLOT_STRIDE, CLCNN_SLOT_PAD},
    .npos = 3,
    .nreq = 1,
    .kw = CLCNN_SLOT_BIT(CLCNN_SLOT_STRIDE) | CLCNN_SLOT_BIT(CLCNN_SLOT_PAD),
    .finish = clcnn_window_finish,
    .format = clcnn_window_format,
};

/* The output size of a window of K with stride and pad over an input of `in` (checked by the
 * caller to fit). */
static int window_out(int in, int K, int stride, int pad) {
    return (in + 2 * pad - K) / stride + 1;
}

clcnn_status clcnn_window_shape(clcnn_node *n, clcnn_error *e, const char *where) {
    const clcnn_layer_desc *d = &n->d;
    if (n->x.flat)
        return clcnn_fail(e, CLCNN_ERR_SHAPE,
                          "%s needs a C x H x W input but gets %d flat features", where, n->x.c);
    if (n->x.h + 2 * d->pad < d->kernel || n->x.w + 2 * d->pad < d->kernel)
        return clcnn_fail(e, CLCNN_ERR_SHAPE,
                          "%s: kernel %d is larger than its %d x %d input padded by %d", where,
                          d->kernel, n->x.h, n->x.w, d->pad);
    n->y = (clcnn_shape){n->x.c, window_out(n->x.h, d->kernel, d->stride, d->pad),
                         window_out(n->x.w, d->kernel, d->stride, d->pad), 0};
    return CLCNN_SUCCESS;
}

static clcnn_status pool_forward(clcnn_context *ctx, cl_mem y, int yoff, cl_mem argmax, cl_mem x,
                                 int xoff, int NC, int H, int W, int K, int stride, int pad, int OH,
                                 int OW, const clcnn_io *io) {
    /* the padded hand-off (cl/maxpool2d.cl): the output also into the next convolution's input */
    cl_mem yp = io->ypad ? io->ypad : y;
    int hand = io->ypad ? io->ypad_pad : -1, only = hand >= 0 && io->ypad_only;
    if (K == 2 && stride == 2 && pad == 0) {
        int rows = OW >= 4; /* maxpool2_forward: a row per work-item; _px: an output each */
        clcnn_kern *k2 =
            clcnn_kernel(ctx, rows ? CLCNN_K_maxpool2_forward : CLCNN_K_maxpool2_forward_px);
        clcnn_args a = {k2->k, 0, CL_SUCCESS};
        CLCNN_ARG(&a, y);
        CLCNN_ARG(&a, yoff);
        CLCNN_ARG(&a, argmax);
        CLCNN_ARG(&a, x);
        CLCNN_ARG(&a, xoff);
        CLCNN_ARG(&a, NC);
        CLCNN_ARG(&a, H);
        CLCNN_ARG(&a, W);
        CLCNN_ARG(&a, OH);
        CLCNN_ARG(&a, OW);
        CLCNN_ASSERT(rows || !io->ypad); /* maxpool_writes_padded */
        if (rows) {
            CLCNN_ARG(&a, yp);
            CLCNN_ARG(&a, hand);
            CLCNN_ARG(&a, only);
        }
        return clcnn_launch1d(ctx, k2, &a, (size_t)NC * OH * (rows ? 1 : (size_t)OW));
    }
    CLCNN_ASSERT(!io->ypad);
    clcnn_kern *k = clcnn_kernel(ctx, CLCNN_K_maxpool_forward);
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, y);
    CLCNN_ARG(&a, yoff);
    CLCNN_ARG(&a, argmax);
    CLCNN_ARG(&a, x);
    CLCNN_ARG(&a, xoff);
    CLCNN_ARG(&a, NC);
    CLCNN_ARG(&a, H);
    CLCNN_ARG(&a, W);
    CLCNN_ARG(&a, K);
    CLCNN_ARG(&a, stride);
    CLCNN_ARG(&a, pad);
    CLCNN_ARG(&a, OH);
    CLCNN_ARG(&a, OW);
    return clcnn_launch1d(ctx, k, &a, (size_t)NC * OH * OW);
}

static clcnn_status pool_backward(clcnn_context *ctx, cl_mem gx, int gxoff, cl_mem gy, int gyoff,
                                  cl_mem argmax, int NC, int H, int W, int K, int stride, int pad,
                                  int OH, int OW) {
    if (K == 2 && stride == 2 && pad == 0) {
        clcnn_kern *k2 = clcnn_kernel(ctx, CLCNN_K_maxpool2_backward);
        clcnn_args a = {k2->k, 0, CL_SUCCESS};
        CLCNN_ARG(&a, gx);
        CLCNN_ARG(&a, gxoff);
        CLCNN_ARG(&a, gy);
        CLCNN_ARG(&a, gyoff);
        CLCNN_ARG(&a, argmax);
        CLCNN_ARG(&a, NC);
        CLCNN_ARG(&a, H);
        CLCNN_ARG(&a, W);
        CLCNN_ARG(&a, OH);
        CLCNN_ARG(&a, OW);
        return clcnn_launch1d(ctx, k2, &a, (size_t)NC * OH);
    }
    if (stride >= K) {
        clcnn_kern *f = clcnn_kernel(ctx, CLCNN_K_fill_f32), *sc;
        int count = NC * H * W;
        float zero = 0.0f;
        clcnn_status st;
        clcnn_args z = {f->k, 0, CL_SUCCESS};
        CLCNN_ARG(&z, gx);
        CLCNN_ARG(&z, gxoff);
        CLCNN_ARG(&z, count);
        CLCNN_ARG(&z, zero);
        if ((st = clcnn_launch1d(ctx, f, &z, (size_t)count))) return st;
        sc = clcnn_kernel(ctx, CLCNN_K_maxpool_backward_scatter);
        clcnn_args a = {sc->k, 0, CL_SUCCESS};
        CLCNN_ARG(&a, gx);
        CLCNN_ARG(&a, gxoff);
        CLCNN_ARG(&a, gy);
        CLCNN_ARG(&a, gyoff);
        CLCNN_ARG(&a, argmax);
        CLCNN_ARG(&a, NC);
        CLCNN_ARG(&a, H);
        CLCNN_ARG(&a, W);
        CLCNN_ARG(&a, OH);
        CLCNN_ARG(&a, OW);
        return clcnn_launch1d(ctx, sc, &a, (size_t)NC * OH * OW);
    }
    clcnn_kern *k = clcnn_kernel(ctx, CLCNN_K_maxpool_backward);
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, gx);
    CLCNN_ARG(&a, gxoff);
    CLCNN_ARG(&a, gy);
    CLCNN_ARG(&a, gyoff);
    CLCNN_ARG(&a, argmax);
    CLCNN_ARG(&a, NC);
    CLCNN_ARG(&a, H);
    CLCNN_ARG(&a, W);
    CLCNN_ARG(&a, K);
    CLCNN_ARG(&a, stride);
    CLCNN_ARG(&a, pad);
    CLCNN_ARG(&a, OH);
    CLCNN_ARG(&a, OW);
    return clcnn_launch1d(ctx, k, &a, (size_t)NC * H * W);
}

static clcnn_status maxpool_shape(clcnn_node *n, clcnn_params *pl, clcnn_error *e,
                                  const char *where) {
    (void)pl;
    return clcnn_window_shape(n, e, where);
}

/* y, argmax (N, C, OH, OW) from x (N, C, H, W). */
static clcnn_status maxpool_forward(const clcnn_node *n, const clcnn_io *io) {
    const clcnn_layer_desc *d = &n->d;
    return pool_forward(io->ctx, io->y, 0, io->aux, io->x[0], 0, io->N * n->x.c, n->x.h, n->x.w,
                        d->kernel, d->stride, d->pad, n->y.h, n->y.w, io);
}

/* gx (N, C, H, W) from gy through the argmax; overlapping windows accumulate. */
static clcnn_status maxpool_backward(const clcnn_node *n, const clcnn_io *io) {
    const clcnn_layer_desc *d = &n->d;
    if (!io->gx[0]) return CLCNN_SUCCESS;
    return pool_backward(io->ctx, io->gx[0], 0, io->gy, 0, io->aux, io->N * n->x.c, n->x.h, n->x.w,
                         d->kernel, d->stride, d->pad, n->y.h, n->y.w);
}

static void maxpool_workspace(const clcnn_context *ctx, const clcnn_node *n, int N,
                              clcnn_node_ws *ws) {
    (void)ctx;
    ws->aux = (size_t)N * n->y.c * n->y.h * n->y.w;
}

/* maxpool2_forward (2x2 windows, rows of 4 or more) writes the output also into the next
 * convolution's padded input. */
static int maxpool_writes_padded(const clcnn_node *n) {
    const clcnn_layer_desc *d = &n->d;
    return d->kernel == 2 && d->stride == 2 && d->pad == 0 && n->y.w >= 4;
}

const clcnn_layer_ops clcnn_maxpool2d_ops = {
    .syntax = &clcnn_maxpool2d_syntax,
    .shape = maxpool_shape,
    .algos = clcnn_algos_kernel,
    .workspace = maxpool_workspace,
    .forward = maxpool_forward,
    .backward = maxpool_backward,
    .writes_padded = maxpool_writes_padded,
    .backward_reads = clcnn_reads_nothing,
};
