/* ReLU (nn.ReLU): y = max(x, 0); the backward passes gy where y > 0 (cl/relu.cl). */
#include "layer.h"

/* Spec syntax (docs/MODEL_SPEC.md) */

const clcnn_layer_syntax clcnn_relu_syntax = {.name = "relu", .torch_name = "ReLU"};

/* y (N*C*H*W) = max(x, 0); a NaN passes through, as PyTorch's clamp_min. */
static clcnn_status relu_forward(const clcnn_node *n, const clcnn_io *io) {
    clcnn_kern *k = clcnn_kernel(io->ctx, CLCNN_K_relu_forward);
    int count = io->N * n->x.c * n->x.h * n->x.w, zero = 0;
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, io->y.buf);
    CLCNN_ARG(&a, zero);
    CLCNN_ARG(&a, io->x[0].buf);
    CLCNN_ARG(&a, zero);
    CLCNN_ARG(&a, count);
    return clcnn_launch1d(io->ctx, k, &a, (size_t)count);
}

/* gx = y > 0 ? gy : 0, from the layer's own output y. */
static clcnn_status relu_backward(const clcnn_node *n, const clcnn_io *io) {
    if (!io->gx[0].buf) return CLCNN_SUCCESS;
    clcnn_kern *k = clcnn_kernel(io->ctx, CLCNN_K_relu_backward);
    int count = io->N * n->x.c * n->x.h * n->x.w, zero = 0;
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, io->gx[0].buf);
    CLCNN_ARG(&a, zero);
    CLCNN_ARG(&a, io->gy.buf);
    CLCNN_ARG(&a, zero);
    CLCNN_ARG(&a, io->y.buf);
    CLCNN_ARG(&a, zero);
    CLCNN_ARG(&a, count);
    return clcnn_launch1d(io->ctx, k, &a, (size_t)count);
}

const clcnn_layer_ops clcnn_relu_ops = {
    .syntax = &clcnn_relu_syntax,
    .shape = clcnn_shape_same,
    .algos = clcnn_algos_kernel,
    .forward = relu_forward,
    .backward = relu_backward,
    .backward_reads = clcnn_reads_y,
};
