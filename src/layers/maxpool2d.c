/* MaxPool2d (nn.MaxPool2d, floor mode): an argmax-recording forward and a backward that routes
 * each output's gradient to the input it came from (cl/maxpool2d.cl). */
#include "layer.h"

/* Spec syntax (docs/MODEL_SPEC.md) */

/* NAME(KERNEL [, STRIDE [, PAD]] [, stride=S] [, pad=P]), stride defaulting to the kernel:
 * canonical text "maxpool(2,stride=2)", with ",pad=P" when P is not 0. */
const clcnn_arg_def clcnn_window_args[3] = {
    [CLCNN_WINDOW_KERNEL] = {"kernel", NULL, 0, 1, 64, 0, CLCNN_ARGF_POS | CLCNN_ARGF_REQ},
    [CLCNN_WINDOW_STRIDE] = {"stride", NULL, 0, 1, 64, 0,
                             CLCNN_ARGF_POS | CLCNN_ARGF_KW | CLCNN_ARGF_SHOW_KW},
    [CLCNN_WINDOW_PAD] = {"pad", "padding", 0, 0, 64, 0, CLCNN_ARGF_POS | CLCNN_ARGF_KW},
};

clcnn_status clcnn_window_finish(const clcnn_spec_parser *p, const clcnn_layer_args *a,
                                 clcnn_layer_desc *d) {
    clcnn_arg_value *v = d->arg;
    int K = v[CLCNN_WINDOW_KERNEL].i;
    if (a->how[CLCNN_WINDOW_STRIDE] == CLCNN_ARG_UNSET) v[CLCNN_WINDOW_STRIDE].i = K;
    /* PyTorch refuses this only when the layer first runs; catching it here points at the
     * text instead. (It also keeps every average's divisor K*K.) */
    if (v[CLCNN_WINDOW_PAD].i > K / 2)
        return clcnn_spec_fail(p, a->col[CLCNN_WINDOW_PAD],
                               "%s pad %d is more than half the kernel %d (PyTorch requires "
                               "pad <= kernel/2)",
                               clcnn_layer_syntax_of(d->kind)->name, v[CLCNN_WINDOW_PAD].i, K);
    return CLCNN_SUCCESS;
}

const clcnn_layer_syntax clcnn_maxpool2d_syntax = {
    .name = "maxpool",
    .aliases = {"maxpool2d", "mp"},
    .torch_name = "MaxPool2d",
    CLCNN_SPEC_ARGS(clcnn_window_args),
    .finish = clcnn_window_finish,
};

/* The output size of a window of K with stride and pad over an input of `in` (checked by the
 * caller to fit). */
static int window_out(int in, int K, int stride, int pad) {
    return (in + 2 * pad - K) / stride + 1;
}

clcnn_status clcnn_window_shape(clcnn_node *n, int K, int stride, int pad, clcnn_error *e,
                                const char *where) {
    if (n->x.flat)
        return clcnn_fail(e, CLCNN_ERR_SHAPE,
                          "%s needs a C x H x W input but gets %d flat features", where, n->x.c);
    if (n->x.h + 2 * pad < K || n->x.w + 2 * pad < K)
        return clcnn_fail(e, CLCNN_ERR_SHAPE,
                          "%s: kernel %d is larger than its %d x %d input padded by %d", where, K,
                          n->x.h, n->x.w, pad);
    n->y = (clcnn_shape){n->x.c, window_out(n->x.h, K, stride, pad),
                         window_out(n->x.w, K, stride, pad), 0};
    return CLCNN_SUCCESS;
}

clcnn_status clcnn_window_node_shape(clcnn_node *n, clcnn_params *pl, clcnn_error *e,
                                     const char *where) {
    const clcnn_arg_value *a = n->d.arg;
    (void)pl;
    return clcnn_window_shape(n, a[CLCNN_WINDOW_KERNEL].i, a[CLCNN_WINDOW_STRIDE].i,
                              a[CLCNN_WINDOW_PAD].i, e, where);
}

static clcnn_status pool_forward(clcnn_context *ctx, cl_mem y, int yoff, cl_mem argmax, cl_mem x,
                                 int xoff, int NC, int H, int W, int K, int stride, int pad, int OH,
                                 int OW, const clcnn_io *io) {
    /* the padded hand-off (cl/maxpool2d.cl): the output also into the next convolution's input */
    cl_mem yp = io->y_view.buf ? io->y_view.buf : y;
    int hand = io->y_view.buf ? io->y_view.halo : -1, only = hand >= 0 && io->y_view_only;
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
        CLCNN_ASSERT(rows || !io->y_view.buf); /* maxpool_views */
        if (rows) {
            CLCNN_ARG(&a, yp);
            CLCNN_ARG(&a, hand);
            CLCNN_ARG(&a, only);
        }
        return clcnn_launch1d(ctx, k2, &a, (size_t)NC * OH * (rows ? 1 : (size_t)OW));
    }
    CLCNN_ASSERT(!io->y_view.buf);
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

/* y, argmax (N, C, OH, OW) from x (N, C, H, W). */
static clcnn_status maxpool_forward(const clcnn_node *n, const clcnn_io *io) {
    const clcnn_arg_value *a = n->d.arg;
    return pool_forward(io->ctx, io->y.buf, 0, io->aux, io->x[0].buf, 0, io->N * n->x.c, n->x.h,
                        n->x.w, a[CLCNN_WINDOW_KERNEL].i, a[CLCNN_WINDOW_STRIDE].i,
                        a[CLCNN_WINDOW_PAD].i, n->y.h, n->y.w, io);
}

/* gx (N, C, H, W) from gy through the argmax; overlapping windows accumulate. */
static clcnn_status maxpool_backward(const clcnn_node *n, const clcnn_io *io) {
    const clcnn_arg_value *a = n->d.arg;
    if (!io->gx[0].buf) return CLCNN_SUCCESS;
    return pool_backward(io->ctx, io->gx[0].buf, 0, io->gy.buf, 0, io->aux, io->N * n->x.c, n->x.h,
                         n->x.w, a[CLCNN_WINDOW_KERNEL].i, a[CLCNN_WINDOW_STRIDE].i,
                         a[CLCNN_WINDOW_PAD].i, n->y.h, n->y.w);
}

static void maxpool_workspace(const clcnn_context *ctx, const clcnn_node *n, int N,
                              clcnn_node_ws *ws) {
    (void)ctx;
    ws->aux = (size_t)N * n->y.c * n->y.h * n->y.w;
}

/* maxpool2_forward (2x2 windows, rows of 4 or more) writes the output also into the next
 * convolution's padded input. */
static void maxpool_views(const clcnn_node *n, clcnn_views *v) {
    const clcnn_arg_value *a = n->d.arg;
    v->writes_y = a[CLCNN_WINDOW_KERNEL].i == 2 && a[CLCNN_WINDOW_STRIDE].i == 2 &&
                  a[CLCNN_WINDOW_PAD].i == 0 && n->y.w >= 4;
}

const clcnn_layer_ops clcnn_maxpool2d_ops = {
    .syntax = &clcnn_maxpool2d_syntax,
    .shape = clcnn_window_node_shape,
    .algos = clcnn_algos_kernel,
    .workspace = maxpool_workspace,
    .forward = maxpool_forward,
    .backward = maxpool_backward,
    .views = maxpool_views,
    .backward_reads = clcnn_reads_nothing,
};
