/* LeakyReLU (nn.LeakyReLU(negative_slope)): y = x > 0 ? x : x * slope; the backward scales gy
 * by slope where x <= 0, as PyTorch's leaky_relu_backward, from the input (cl/leakyrelu.cl). */
#include "layer.h"

#include <float.h>

/* Spec syntax (docs/MODEL_SPEC.md): leakyrelu or leakyrelu(SLOPE), any finite slope, default
 * 0.01 (PyTorch's); canonical text "leakyrelu(0.01)". */
static const clcnn_arg_def leakyrelu_args[] = {
    {"slope", "negative_slope", 1, -DBL_MAX, DBL_MAX, 0.01,
     CLCNN_ARGF_POS | CLCNN_ARGF_KW | CLCNN_ARGF_SHOW_POS},
};

const clcnn_layer_syntax clcnn_leakyrelu_syntax = {
    .name = "leakyrelu",
    .torch_name = "LeakyReLU",
    CLCNN_SPEC_ARGS(leakyrelu_args),
};

/* y (N*C*H*W) = x > 0 ? x : x * slope */
static clcnn_status leakyrelu_forward(const clcnn_node *n, const clcnn_io *io) {
    clcnn_kern *k = clcnn_kernel(io->ctx, CLCNN_K_leakyrelu_forward);
    int count = io->N * n->x.c * n->x.h * n->x.w;
    float slope = (float)n->d.arg[0].r;
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, io->y.buf);
    CLCNN_ARG(&a, io->x[0].buf);
    CLCNN_ARG(&a, slope);
    CLCNN_ARG(&a, count);
    return clcnn_launch1d(io->ctx, k, &a, (size_t)count);
}

/* gx = x > 0 ? gy : gy * slope, from the layer's input x. */
static clcnn_status leakyrelu_backward(const clcnn_node *n, const clcnn_io *io) {
    if (!io->gx[0].buf) return CLCNN_SUCCESS;
    clcnn_kern *k = clcnn_kernel(io->ctx, CLCNN_K_leakyrelu_backward);
    int count = io->N * n->x.c * n->x.h * n->x.w;
    float slope = (float)n->d.arg[0].r;
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, io->gx[0].buf);
    CLCNN_ARG(&a, io->gy.buf);
    CLCNN_ARG(&a, io->x[0].buf);
    CLCNN_ARG(&a, slope);
    CLCNN_ARG(&a, count);
    return clcnn_launch1d(io->ctx, k, &a, (size_t)count);
}

const clcnn_layer_ops clcnn_leakyrelu_ops = {
    .syntax = &clcnn_leakyrelu_syntax,
    .shape = clcnn_shape_same,
    .algos = clcnn_algos_kernel,
    .forward = leakyrelu_forward,
    .backward = leakyrelu_backward,
    .backward_reads = clcnn_reads_x,
};
