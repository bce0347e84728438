/* Global average pooling (nn.AdaptiveAvgPool2d(1)): each (n, c) plane's mean, kept as a
 * C x 1 x 1 map (a flatten follows before a linear, as in PyTorch); the backward spreads
 * gy / (H*W) over the plane (cl/globalavgpool.cl). */
#include "layer.h"

/* Spec syntax (docs/MODEL_SPEC.md) */

const clcnn_layer_syntax clcnn_globalavgpool_syntax = {.name = "globalavgpool",
                                                       .torch_name = "AdaptiveAvgPool2d"};

/* y (N, C, 1, 1) = mean of x (N, C, H, W) over H, W. */
static clcnn_status globalavgpool_forward(const clcnn_node *n, const clcnn_io *io) {
    clcnn_kern *k = clcnn_kernel(io->ctx, CLCNN_K_globalavgpool_forward);
    int NC = io->N * n->x.c, HW = n->x.h * n->x.w, zero = 0;
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, io->y.buf);
    CLCNN_ARG(&a, zero);
    CLCNN_ARG(&a, io->x[0].buf);
    CLCNN_ARG(&a, zero);
    CLCNN_ARG(&a, NC);
    CLCNN_ARG(&a, HW);
    return clcnn_launch1d(io->ctx, k, &a, (size_t)NC);
}

/* gx (N, C, H, W) = gy (N, C, 1, 1) / (H*W), broadcast over each plane. */
static clcnn_status globalavgpool_backward(const clcnn_node *n, const clcnn_io *io) {
    if (!io->gx[0].buf) return CLCNN_SUCCESS;
    clcnn_kern *k = clcnn_kernel(io->ctx, CLCNN_K_globalavgpool_backward);
    int NC = io->N * n->x.c, HW = n->x.h * n->x.w, chunks = (HW + 15) / 16, zero = 0;
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, io->gx[0].buf);
    CLCNN_ARG(&a, zero);
    CLCNN_ARG(&a, io->gy.buf);
    CLCNN_ARG(&a, zero);
    CLCNN_ARG(&a, NC);
    CLCNN_ARG(&a, HW);
    CLCNN_ARG(&a, chunks);
    return clcnn_launch1d(io->ctx, k, &a, (size_t)NC * chunks);
}

const clcnn_layer_ops clcnn_globalavgpool_ops = {
    .syntax = &clcnn_globalavgpool_syntax,
    .shape = clcnn_shape_global,
    .algos = clcnn_algos_kernel,
    .forward = globalavgpool_forward,
    .backward = globalavgpool_backward,
    .backward_reads = clcnn_reads_nothing,
};
