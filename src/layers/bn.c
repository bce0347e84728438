/* BatchNorm (nn.BatchNorm2d on a C x H x W input, nn.BatchNorm1d on flat features): a training
 * forward normalises each channel by the batch's mean and biased variance and moves the running
 * statistics towards them; an evaluation forward uses the running statistics (cl/bn.cl).
 *
 * Buffers: the node's keep_col (2*C floats) holds, from a training forward to its backward,
 * each channel's batch mean and 1/sqrt(var + eps). The shared col scratch holds, within a pass,
 * two partial sums per chunk (a chunk: one channel in S consecutive samples) and the input
 * gradient's three coefficients per channel.
 *
 * A ReLU that only this node feeds is fused into it (a plan rewrite, bn_can_fuse): the forward
 * stores relu(bn(x)) in one pass and the backward masks gy by bn(x), recomputed from x inside
 * its two passes (one stream fewer than reading y back), so the ReLU's own passes over the
 * tensor and its buffers go away. */
#include "layer.h"

#include <float.h>

/* PyTorch's defaults. */
#define BN_EPS 1e-5
#define BN_MOMENTUM 0.1

/* Values per chunk of a partial sum, at least (a chunk is whole samples). A chunk of one
 * sample is one contiguous plane, and neighbouring work-items read neighbouring planes: one
 * stream through memory. A chunk of several samples reads planes C*HW apart, which costs twice
 * the time at 7 x 7 (page and prefetch misses), so only planes shorter than this take more. */
#define BN_CHUNK 64

/* Spec syntax (docs/MODEL_SPEC.md): bn, or bn(eps=E, momentum=M) with E > 0, 0 <= M <= 1. */

enum { BN_ARG_EPS, BN_ARG_MOMENTUM };

static const clcnn_arg_def bn_args[] = {
    [BN_ARG_EPS] = {"eps", NULL, 1, 0, DBL_MAX, BN_EPS, CLCNN_ARGF_KW | CLCNN_ARGF_ABOVE_MIN},
    [BN_ARG_MOMENTUM] = {"momentum", NULL, 1, 0, 1, BN_MOMENTUM, CLCNN_ARGF_KW},
};

/* "bn" with PyTorch's defaults, else both arguments. */
static void bn_format(const clcnn_layer_desc *d, clcnn_spec_buf *b) {
    double eps = d->arg[BN_ARG_EPS].r, momentum = d->arg[BN_ARG_MOMENTUM].r;
    clcnn_spec_append(b, "bn");
    if (eps == BN_EPS && momentum == BN_MOMENTUM) return;
    clcnn_spec_append(b, "(eps=");
    clcnn_spec_append_real(b, eps);
    clcnn_spec_append(b, ",momentum=");
    clcnn_spec_append_real(b, momentum);
    clcnn_spec_append(b, ")");
}

const clcnn_layer_syntax clcnn_bn_syntax = {
    .name = "bn",
    .aliases = {"batchnorm", "batchnorm2d", "batchnorm1d"},
    .torch_name = "BatchNorm",
    CLCNN_SPEC_ARGS(bn_args),
    .format = bn_format,
};

/* The state_dict entries, in PyTorch's order: weight, bias, running_mean, running_var (the
 * statistics contiguous, so io->soff + C is running_var), num_batches_tracked. */
static clcnn_status bn_shape(clcnn_node *n, clcnn_params *pl, clcnn_error *e, const char *where) {
    int64_t c[1] = {n->x.c};
    n->y = n->x;
    if (clcnn_params_add(pl, n->path, "weight", CLCNN_PARAM_NO_DECAY, 1, c) < 0 ||
        clcnn_params_add(pl, n->path, "bias", CLCNN_PARAM_NO_DECAY, 1, c) < 0 ||
        clcnn_params_add(pl, n->path, "running_mean", CLCNN_PARAM_STAT, 1, c) < 0 ||
        clcnn_params_add(pl, n->path, "running_var", CLCNN_PARAM_STAT, 1, c) < 0 ||
        clcnn_params_add(pl, n->path, "num_batches_tracked", CLCNN_PARAM_COUNTER, 0, NULL) < 0)
        return clcnn_fail(e, CLCNN_ERR_SHAPE, "%s: too many parameter tensors", where);
    return CLCNN_SUCCESS;
}

/* PyTorch's reset_parameters: weight 1, bias 0 (no random draws). */
static void bn_init(const clcnn_node *n, const clcnn_param *params, float *host, clcnn_rng *rng) {
    const clcnn_param *w = &params[n->param0], *b = &params[n->param0 + 1];
    (void)rng;
    for (size_t c = 0; c < w->numel; c++)
        host[w->off + c] = 1.0f, host[b->off + c] = 0.0f;
}

/* reset_running_stats: mean 0, variance 1. */
static void bn_init_stats(const clcnn_node *n, const clcnn_param *params, float *stats) {
    const clcnn_param *m = &params[n->param0 + 2], *v = &params[n->param0 + 3];
    for (size_t c = 0; c < m->numel; c++)
        stats[m->off + c] = 0.0f, stats[v->off + c] = 1.0f;
}

/* Samples per chunk for a batch of N with hw values per channel and sample: 1..N, about
 * BN_CHUNK values. */
static int bn_samples(int N, int hw) {
    int s = (BN_CHUNK + hw - 1) / hw;
    return s > N ? N : s;
}

static void bn_workspace(const clcnn_context *ctx, const clcnn_node *n, int N, clcnn_node_ws *ws) {
    int C = n->x.c, hw = n->x.h * n->x.w, S = bn_samples(N, hw), G = (N + S - 1) / S;
    (void)ctx;
    ws->keep_col = 2 * (size_t)C;
    ws->col = 2 * (size_t)G * C + 3 * (size_t)C;
}

/* Launches n work-items that each reduce a chunk or run over a plane: the usual work-groups,
 * smaller on a CPU device when that leaves fewer than four per compute unit, so that a short
 * range still spreads over every core. */
static clcnn_status bn_launch(clcnn_context *ctx, const clcnn_kern *k, const clcnn_args *a,
                              size_t n) {
    size_t local = ctx->local1d < k->max_wg ? ctx->local1d : k->max_wg;
    size_t want = 4 * (size_t)(ctx->info.compute_units ? ctx->info.compute_units : 1);
    if (ctx->info.type != CLCNN_DEVICE_GPU)
        while (local > 1 && (n + local - 1) / local < want)
            local /= 2;
    size_t global = (n + local - 1) / local * local;
    return clcnn_launch(ctx, k, a, 1, &global, &local);
}

/* The batch statistics of x (N, C, HW) into keep_col, and the running statistics moved towards
 * them: chunk partials into col, then one work-item per channel. */
static clcnn_status bn_batch_stats(const clcnn_node *n, const clcnn_io *io) {
    clcnn_context *ctx = io->ctx;
    clcnn_kern *kp = clcnn_kernel(ctx, CLCNN_K_bn_stats_partial);
    clcnn_kern *kr = clcnn_kernel(ctx, CLCNN_K_bn_stats_reduce);
    int N = io->N, C = n->x.c, HW = n->x.h * n->x.w, S = bn_samples(N, HW), G = (N + S - 1) / S;
    float eps = (float)n->d.arg[BN_ARG_EPS].r, momentum = (float)n->d.arg[BN_ARG_MOMENTUM].r;
    clcnn_status st;
    clcnn_args a = {kp->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, io->col);
    CLCNN_ARG(&a, io->x[0].buf);
    CLCNN_ARG(&a, N);
    CLCNN_ARG(&a, C);
    CLCNN_ARG(&a, HW);
    CLCNN_ARG(&a, S);
    CLCNN_ARG(&a, G);
    if ((st = bn_launch(ctx, kp, &a, (size_t)G * C))) return st;
    clcnn_args r = {kr->k, 0, CL_SUCCESS};
    CLCNN_ARG(&r, io->keep_col);
    CLCNN_ARG(&r, io->stats);
    CLCNN_ARG(&r, io->soff);
    CLCNN_ARG(&r, io->col);
    CLCNN_ARG(&r, N);
    CLCNN_ARG(&r, C);
    CLCNN_ARG(&r, HW);
    CLCNN_ARG(&r, S);
    CLCNN_ARG(&r, G);
    CLCNN_ARG(&r, eps);
    CLCNN_ARG(&r, momentum);
    return clcnn_launch1d(ctx, kr, &r, (size_t)C);
}

/* y (N, C, HW) = (x - mean) * invstd * w + b: the kept batch statistics, or the running ones. */
static clcnn_status bn_normalise(const clcnn_node *n, const clcnn_io *io, int running) {
    clcnn_kern *k = clcnn_kernel(io->ctx, CLCNN_K_bn_forward_apply);
    int N = io->N, C = n->x.c, HW = n->x.h * n->x.w, relu = n->n_layers == 2;
    float eps = (float)n->d.arg[BN_ARG_EPS].r;
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, io->y.buf);
    CLCNN_ARG(&a, io->x[0].buf);
    CLCNN_ARG(&a, io->keep_col);
    CLCNN_ARG(&a, io->stats);
    CLCNN_ARG(&a, io->soff);
    CLCNN_ARG(&a, io->params);
    CLCNN_ARG(&a, io->woff);
    CLCNN_ARG(&a, io->boff);
    CLCNN_ARG(&a, N);
    CLCNN_ARG(&a, C);
    CLCNN_ARG(&a, HW);
    CLCNN_ARG(&a, running);
    CLCNN_ARG(&a, eps);
    CLCNN_ARG(&a, relu);
    /* the padded hand-off: the output also into the next convolution's padded input */
    cl_mem yp = io->y_view.buf ? io->y_view.buf : io->y.buf;
    int hand = io->y_view.buf ? io->y_view.halo : -1, h = n->x.flat ? 1 : n->x.h,
        w = n->x.flat ? 1 : n->x.w;
    CLCNN_ARG(&a, yp);
    CLCNN_ARG(&a, hand);
    CLCNN_ARG(&a, io->y_view_only);
    CLCNN_ARG(&a, h);
    CLCNN_ARG(&a, w);
    /* y may be a channel slice of a concatenation's output (views.writes_slice) */
    int yoff = (int)io->y.off, ysn = (int)io->y.sn;
    CLCNN_ARG(&a, yoff);
    CLCNN_ARG(&a, ysn);
    return bn_launch(io->ctx, k, &a, (size_t)N * C);
}

/* y (N, C, H, W) or (N, C) from x: training normalises by the batch statistics (kept for the
 * backward) and moves the running ones; evaluation normalises by the running ones. As
 * PyTorch, training needs more than one value per channel. */
static clcnn_status bn_forward(const clcnn_node *n, const clcnn_io *io) {
    clcnn_status st;
    CLCNN_ASSERT(io->soff >= 0 && io->boff >= 0);
    if (!io->training) return bn_normalise(n, io, 1);
    if (io->N * n->x.h * n->x.w == 1) {
        char size[48];
        if (n->x.flat)
            snprintf(size, sizeof size, "[1, %d]", n->x.c);
        else
            snprintf(size, sizeof size, "[1, %d, 1, 1]", n->x.c);
        return clcnn_fail(&io->ctx->err, CLCNN_ERR_SHAPE,
                          "layer %s (%s): expected more than 1 value per channel when training, "
                          "got input size %s",
                          n->path, n->x.flat ? "BatchNorm1d" : "BatchNorm2d", size);
    }
    if ((st = bn_batch_stats(n, io))) return st;
    return bn_normalise(n, io, 0);
}

/* The gradient sums of gy (N, C, HW) per channel: gb = sum gy and gw = sum gy * xhat, written
 * to the gradient buffer, and the input gradient's coefficients into col after the partials. */
static clcnn_status bn_param_grads(const clcnn_node *n, const clcnn_io *io, int coff) {
    clcnn_context *ctx = io->ctx;
    clcnn_kern *kp = clcnn_kernel(ctx, CLCNN_K_bn_backward_partial);
    clcnn_kern *kr = clcnn_kernel(ctx, CLCNN_K_bn_backward_reduce);
    int N = io->N, C = n->x.c, HW = n->x.h * n->x.w, S = bn_samples(N, HW), G = (N + S - 1) / S;
    int relu = n->n_layers == 2;
    clcnn_status st;
    clcnn_args a = {kp->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, io->col);
    CLCNN_ARG(&a, io->gy.buf);
    CLCNN_ARG(&a, io->x[0].buf);
    CLCNN_ARG(&a, io->keep_col);
    CLCNN_ARG(&a, N);
    CLCNN_ARG(&a, C);
    CLCNN_ARG(&a, HW);
    CLCNN_ARG(&a, S);
    CLCNN_ARG(&a, G);
    CLCNN_ARG(&a, io->params);
    CLCNN_ARG(&a, io->woff);
    CLCNN_ARG(&a, io->boff);
    CLCNN_ARG(&a, relu);
    if ((st = bn_launch(ctx, kp, &a, (size_t)G * C))) return st;
    clcnn_args r = {kr->k, 0, CL_SUCCESS};
    CLCNN_ARG(&r, io->grads);
    CLCNN_ARG(&r, io->woff);
    CLCNN_ARG(&r, io->boff);
    CLCNN_ARG(&r, io->col);
    CLCNN_ARG(&r, coff);
    CLCNN_ARG(&r, io->col);
    CLCNN_ARG(&r, io->keep_col);
    CLCNN_ARG(&r, io->params);
    CLCNN_ARG(&r, N);
    CLCNN_ARG(&r, C);
    CLCNN_ARG(&r, HW);
    CLCNN_ARG(&r, G);
    return clcnn_launch1d(ctx, kr, &r, (size_t)C);
}

/* gw, gb (C) and, when wanted, gx (N, C, HW) from gy, x and the kept statistics of the training
 * forward: gx = w * invstd / M * (M*gy - gb - xhat*gw), M = N*HW. */
static clcnn_status bn_backward(const clcnn_node *n, const clcnn_io *io) {
    int N = io->N, C = n->x.c, HW = n->x.h * n->x.w, S = bn_samples(N, HW), G = (N + S - 1) / S;
    int coff = 2 * G * C, relu = n->n_layers == 2;
    clcnn_status st;
    if ((st = bn_param_grads(n, io, coff))) return st;
    if (!io->gx[0].buf) return CLCNN_SUCCESS;
    clcnn_kern *k = clcnn_kernel(io->ctx, CLCNN_K_bn_backward_apply);
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, io->gx[0].buf);
    CLCNN_ARG(&a, io->gy.buf);
    CLCNN_ARG(&a, io->x[0].buf);
    CLCNN_ARG(&a, io->keep_col);
    CLCNN_ARG(&a, io->col);
    CLCNN_ARG(&a, coff);
    CLCNN_ARG(&a, N);
    CLCNN_ARG(&a, C);
    CLCNN_ARG(&a, HW);
    CLCNN_ARG(&a, io->params);
    CLCNN_ARG(&a, io->woff);
    CLCNN_ARG(&a, io->boff);
    CLCNN_ARG(&a, relu);
    /* the backward's hand-off: gx also padded into the producer's input-gradient buffer */
    cl_mem gp = io->gx_view.buf ? io->gx_view.buf : io->gx[0].buf;
    int hand = io->gx_view.buf ? io->gx_view.halo : -1, h = n->x.flat ? 1 : n->x.h,
        w = n->x.flat ? 1 : n->x.w;
    CLCNN_ARG(&a, gp);
    CLCNN_ARG(&a, hand);
    CLCNN_ARG(&a, io->gx_view_only);
    CLCNN_ARG(&a, h);
    CLCNN_ARG(&a, w);
    return bn_launch(io->ctx, k, &a, (size_t)N * C);
}

/* A ReLU right after, fed only by this node, becomes part of it (see the top of the file). */
static int bn_can_fuse(const clcnn_context *ctx, const clcnn_node *n, const clcnn_node *next) {
    (void)ctx;
    return n->n_layers == 1 && next->d.kind == CLCNN_LAYER_RELU;
}

/* bn_forward_apply writes the output also into the next convolution's padded input, and
 * bn_backward_apply the input gradient into the previous one's padded gradient; the output can
 * be a channel slice of a concatenation's (its backward reads x, not y). */
static void bn_views(const clcnn_node *n, clcnn_views *v) {
    v->writes_y = v->writes_gx = !n->x.flat;
    v->writes_slice = 1;
}

const clcnn_layer_ops clcnn_bn_ops = {
    .syntax = &clcnn_bn_syntax,
    .shape = bn_shape,
    .init = bn_init,
    .init_stats = bn_init_stats,
    .can_fuse = bn_can_fuse,
    .algos = clcnn_algos_kernel,
    .workspace = bn_workspace,
    .forward = bn_forward,
    .backward = bn_backward,
    .views = bn_views,
    .backward_reads = clcnn_reads_x,
};
