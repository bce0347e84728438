/* Linear (nn.Linear): a GEMM plus a bias broadcast forward; two GEMMs and a column sum
 * backward. Weight (OUT, IN) and bias (OUT) as PyTorch lays them out. */
#include "layer.h"

#include "gemm.h"

/* Spec syntax (docs/MODEL_SPEC.md) */

/* linear(OUT [, bias=0|1]): canonical text "linear(10)", "linear(10,bias=0)". */
enum { LINEAR_OUT, LINEAR_BIAS };

static const clcnn_arg_def linear_args[] = {
    [LINEAR_OUT] = {"out", NULL, 0, 1, 65536, 0, CLCNN_ARGF_POS | CLCNN_ARGF_REQ},
    [LINEAR_BIAS] = {"bias", NULL, 0, 0, 1, 1, CLCNN_ARGF_KW},
};

const clcnn_layer_syntax clcnn_linear_syntax = {
    .name = "linear",
    .aliases = {"fc"},
    .torch_name = "Linear",
    CLCNN_SPEC_ARGS(linear_args),
};

static clcnn_status linear_shape(clcnn_node *n, clcnn_params *pl, clcnn_error *e,
                                 const char *where) {
    int out = n->d.arg[LINEAR_OUT].i, bias = n->d.arg[LINEAR_BIAS].i;
    if (!n->x.flat)
        return clcnn_fail(e, CLCNN_ERR_SHAPE,
                          "%s needs a flat input but gets %d x %d x %d: put flatten before it",
                          where, n->x.c, n->x.h, n->x.w);
    int64_t ws[2] = {out, n->x.c}, bs[1] = {out};
    if (clcnn_params_add(pl, n->path, "weight", CLCNN_PARAM_WEIGHT, 2, ws) < 0 ||
        (bias && clcnn_params_add(pl, n->path, "bias", CLCNN_PARAM_NO_DECAY, 1, bs) < 0))
        return clcnn_fail(e, CLCNN_ERR_SHAPE, "%s: too many parameter tensors", where);
    n->y = (clcnn_shape){out, 1, 1, 1};
    n->flops = 2.0 * out * n->x.c;
    return CLCNN_SUCCESS;
}

/* y (N, OUT) = x (N, IN) w^T + b */
static clcnn_status linear_forward(const clcnn_node *n, const clcnn_io *io) {
    int N = io->N, IN = n->x.c, OUT = n->y.c, zero = 0, one = 1;
    clcnn_status st = clcnn_gemm(io->ctx, 0, 1, N, OUT, IN, 1.0f, io->x[0].buf, 0, IN, io->params,
                                 (size_t)io->woff, IN, 0.0f, io->y.buf, 0, OUT);
    if (st || io->boff < 0) return st;
    clcnn_kern *k = clcnn_kernel(io->ctx, CLCNN_K_bias_add);
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, io->y.buf);
    CLCNN_ARG(&a, zero);
    CLCNN_ARG(&a, io->params);
    CLCNN_ARG(&a, io->boff);
    CLCNN_ARG(&a, N);
    CLCNN_ARG(&a, OUT);
    CLCNN_ARG(&a, one);
    return clcnn_launch1d(io->ctx, k, &a, (size_t)N * OUT);
}

/* gw (OUT, IN) = gy^T x, gb = column sums of gy, gx (N, IN) = gy w */
static clcnn_status linear_backward(const clcnn_node *n, const clcnn_io *io) {
    int N = io->N, IN = n->x.c, OUT = n->y.c;
    clcnn_status st = clcnn_gemm(io->ctx, 1, 0, OUT, IN, N, 1.0f, io->gy.buf, 0, OUT, io->x[0].buf,
                                 0, IN, 0.0f, io->grads, (size_t)io->woff, IN);
    if (st) return st;
    if (io->boff >= 0 &&
        (st = clcnn_bias_grad(io->ctx, io->grads, io->boff, io->gy.buf, 0, N, OUT, 1)))
        return st;
    if (!io->gx[0].buf) return CLCNN_SUCCESS;
    return clcnn_gemm(io->ctx, 0, 0, N, IN, OUT, 1.0f, io->gy.buf, 0, OUT, io->params,
                      (size_t)io->woff, IN, 0.0f, io->gx[0].buf, 0, IN);
}

const clcnn_layer_ops clcnn_linear_ops = {
    .syntax = &clcnn_linear_syntax,
    .shape = linear_shape,
    .init = clcnn_init_fan_in,
    .algos = clcnn_algos_gemm,
    .forward = linear_forward,
    .backward = linear_backward,
    .backward_reads = clcnn_reads_x,
};
