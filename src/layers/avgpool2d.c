/* AvgPool2d (nn.AvgPool2d, floor mode, count_include_pad=True): a window mean over K*K and a
 * backward that gathers, for each input, the windows that cover it (cl/avgpool2d.cl). */
#include "layer.h"

/* Spec syntax (docs/MODEL_SPEC.md): the arguments and rules of maxpool. */
const clcnn_layer_syntax clcnn_avgpool2d_syntax = {
    .name = "avgpool",
    .aliases = {"avgpool2d", "ap"},
    .torch_name = "AvgPool2d",
    CLCNN_SPEC_ARGS(clcnn_window_args),
    .finish = clcnn_window_finish,
};

/* y (N, C, OH, OW) = window sums of x (N, C, H, W) / (K*K). */
static clcnn_status avgpool_forward(const clcnn_node *n, const clcnn_io *io) {
    const clcnn_arg_value *w = n->d.arg;
    clcnn_kern *k = clcnn_kernel(io->ctx, CLCNN_K_avgpool_forward);
    int NC = io->N * n->x.c, zero = 0;
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, io->y.buf);
    CLCNN_ARG(&a, zero);
    CLCNN_ARG(&a, io->x[0].buf);
    CLCNN_ARG(&a, zero);
    CLCNN_ARG(&a, NC);
    CLCNN_ARG(&a, n->x.h);
    CLCNN_ARG(&a, n->x.w);
    CLCNN_ARG(&a, w[CLCNN_WINDOW_KERNEL].i);
    CLCNN_ARG(&a, w[CLCNN_WINDOW_STRIDE].i);
    CLCNN_ARG(&a, w[CLCNN_WINDOW_PAD].i);
    CLCNN_ARG(&a, n->y.h);
    CLCNN_ARG(&a, n->y.w);
    return clcnn_launch1d(io->ctx, k, &a, (size_t)NC * n->y.h * n->y.w);
}

/* gx (N, C, H, W) = sum of gy (N, C, OH, OW) / (K*K) over the windows holding each pixel
 * (0 where none does: stride > K leaves gaps). */
static clcnn_status avgpool_backward(const clcnn_node *n, const clcnn_io *io) {
    const clcnn_arg_value *w = n->d.arg;
    if (!io->gx[0].buf) return CLCNN_SUCCESS;
    clcnn_kern *k = clcnn_kernel(io->ctx, CLCNN_K_avgpool_backward);
    int NC = io->N * n->x.c, zero = 0;
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, io->gx[0].buf);
    CLCNN_ARG(&a, zero);
    CLCNN_ARG(&a, io->gy.buf);
    CLCNN_ARG(&a, zero);
    CLCNN_ARG(&a, NC);
    CLCNN_ARG(&a, n->x.h);
    CLCNN_ARG(&a, n->x.w);
    CLCNN_ARG(&a, w[CLCNN_WINDOW_KERNEL].i);
    CLCNN_ARG(&a, w[CLCNN_WINDOW_STRIDE].i);
    CLCNN_ARG(&a, w[CLCNN_WINDOW_PAD].i);
    CLCNN_ARG(&a, n->y.h);
    CLCNN_ARG(&a, n->y.w);
    return clcnn_launch1d(io->ctx, k, &a, (size_t)NC * n->x.h);
}

const clcnn_layer_ops clcnn_avgpool2d_ops = {
    .syntax = &clcnn_avgpool2d_syntax,
    .shape = clcnn_window_node_shape,
    .algos = clcnn_algos_kernel,
    .forward = avgpool_forward,
    .backward = avgpool_backward,
    .backward_reads = clcnn_reads_nothing,
};
