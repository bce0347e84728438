/* Scale: y = x * factor for a constant factor (ResNet-9's final Mul(0.125)); its backward is
 * the same product on the gradient (cl/scale.cl). */
#include "layer.h"

#include <float.h>

/* Spec syntax (docs/MODEL_SPEC.md): scale(FACTOR), any finite number. */

static const clcnn_arg_def scale_args[] = {
    {"factor", NULL, 1, -DBL_MAX, DBL_MAX, 0, CLCNN_ARGF_POS | CLCNN_ARGF_REQ},
};

const clcnn_layer_syntax clcnn_scale_syntax = {
    .name = "scale",
    .aliases = {"mul"},
    .torch_name = "Scale",
    CLCNN_SPEC_ARGS(scale_args),
};

static clcnn_status scale_run(const clcnn_node *n, const clcnn_io *io, cl_mem out, cl_mem in) {
    clcnn_kern *k = clcnn_kernel(io->ctx, CLCNN_K_scale_f32);
    int count = io->N * n->x.c * n->x.h * n->x.w;
    float factor = (float)n->d.arg[0].r;
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, out);
    CLCNN_ARG(&a, in);
    CLCNN_ARG(&a, count);
    CLCNN_ARG(&a, factor);
    return clcnn_launch1d(io->ctx, k, &a, (size_t)count);
}

static clcnn_status scale_forward(const clcnn_node *n, const clcnn_io *io) {
    return scale_run(n, io, io->y.buf, io->x[0].buf);
}

static clcnn_status scale_backward(const clcnn_node *n, const clcnn_io *io) {
    return io->gx[0].buf ? scale_run(n, io, io->gx[0].buf, io->gy.buf) : CLCNN_SUCCESS;
}

const clcnn_layer_ops clcnn_scale_ops = {
    .syntax = &clcnn_scale_syntax,
    .shape = clcnn_shape_same,
    .algos = clcnn_algos_kernel,
    .forward = scale_forward,
    .backward = scale_backward,
    .backward_reads = clcnn_reads_nothing,
};
