/* GELU (nn.GELU(), the exact erf form): y = x * Phi(x); the backward reads the layer's input
 * (cl/gelu.cl). */
#include "layer.h"

/* Spec syntax (docs/MODEL_SPEC.md) */

const clcnn_layer_syntax clcnn_gelu_syntax = {.name = "gelu", .torch_name = "GELU"};

static clcnn_status gelu_forward(const clcnn_node *n, const clcnn_io *io) {
    clcnn_kern *k = clcnn_kernel(io->ctx, CLCNN_K_gelu_forward);
    int count = io->N * n->x.c * n->x.h * n->x.w;
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, io->y.buf);
    CLCNN_ARG(&a, io->x[0].buf);
    CLCNN_ARG(&a, count);
    return clcnn_launch1d(io->ctx, k, &a, (size_t)count);
}

static clcnn_status gelu_backward(const clcnn_node *n, const clcnn_io *io) {
    if (!io->gx[0].buf) return CLCNN_SUCCESS;
    clcnn_kern *k = clcnn_kernel(io->ctx, CLCNN_K_gelu_backward);
    int count = io->N * n->x.c * n->x.h * n->x.w;
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, io->gx[0].buf);
    CLCNN_ARG(&a, io->gy.buf);
    CLCNN_ARG(&a, io->x[0].buf);
    CLCNN_ARG(&a, count);
    return clcnn_launch1d(io->ctx, k, &a, (size_t)count);
}

const clcnn_layer_ops clcnn_gelu_ops = {
    .syntax = &clcnn_gelu_syntax,
    .shape = clcnn_shape_same,
    .algos = clcnn_algos_kernel,
    .forward = gelu_forward,
    .backward = gelu_backward,
    .backward_reads = clcnn_reads_x,
};
