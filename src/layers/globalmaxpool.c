/* Global max pooling (nn.AdaptiveMaxPool2d(1)): each (n, c) plane's maximum, kept as a
 * C x 1 x 1 map, with its index in the plane for the backward, which routes gy there
 * (cl/globalmaxpool.cl). */
#include "layer.h"

/* Spec syntax (docs/MODEL_SPEC.md) */

const clcnn_layer_syntax clcnn_globalmaxpool_syntax = {.name = "globalmaxpool",
                                                       .torch_name = "AdaptiveMaxPool2d"};

/* y, argmax (N, C, 1, 1) = max of x (N, C, H, W) over H, W, and its index ih*W + iw. */
static clcnn_status globalmaxpool_forward(const clcnn_node *n, const clcnn_io *io) {
    clcnn_kern *k = clcnn_kernel(io->ctx, CLCNN_K_globalmaxpool_forward);
    int NC = io->N * n->x.c, HW = n->x.h * n->x.w, zero = 0;
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, io->y.buf);
    CLCNN_ARG(&a, zero);
    CLCNN_ARG(&a, io->aux);
    CLCNN_ARG(&a, io->x[0].buf);
    CLCNN_ARG(&a, zero);
    CLCNN_ARG(&a, NC);
    CLCNN_ARG(&a, HW);
    return clcnn_launch1d(io->ctx, k, &a, (size_t)NC);
}

/* gx (N, C, H, W) = gy (N, C, 1, 1) at each plane's argmax, zeros elsewhere. */
static clcnn_status globalmaxpool_backward(const clcnn_node *n, const clcnn_io *io) {
    if (!io->gx[0].buf) return CLCNN_SUCCESS;
    clcnn_kern *k = clcnn_kernel(io->ctx, CLCNN_K_globalmaxpool_backward);
    int NC = io->N * n->x.c, HW = n->x.h * n->x.w, chunks = (HW + 15) / 16, zero = 0;
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, io->gx[0].buf);
    CLCNN_ARG(&a, zero);
    CLCNN_ARG(&a, io->gy.buf);
    CLCNN_ARG(&a, zero);
    CLCNN_ARG(&a, io->aux);
    CLCNN_ARG(&a, NC);
    CLCNN_ARG(&a, HW);
    CLCNN_ARG(&a, chunks);
    return clcnn_launch1d(io->ctx, k, &a, (size_t)NC * chunks);
}

static void globalmaxpool_workspace(const clcnn_context *ctx, const clcnn_node *n, int N,
                                    clcnn_node_ws *ws) {
    (void)ctx;
    ws->aux = (size_t)N * n->x.c;
}

const clcnn_layer_ops clcnn_globalmaxpool_ops = {
    .syntax = &clcnn_globalmaxpool_syntax,
    .shape = clcnn_shape_global,
    .algos = clcnn_algos_kernel,
    .workspace = globalmaxpool_workspace,
    .forward = globalmaxpool_forward,
    .backward = globalmaxpool_backward,
    .backward_reads = clcnn_reads_nothing,
};
