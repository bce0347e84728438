/* Scale: y = x * factor for a constant factor (ResNet-9's final Mul(0.125)); its backward is
 * the same product on the gradient (cl/scale.cl). */
#include "layer.h"

/* Spec syntax (docs/MODEL_SPEC.md): scale(FACTOR), any finite number. */

static clcnn_status scale_finish(const clcnn_spec_parser *p, const clcnn_layer_args *a,
                                 clcnn_layer_desc *d) {
    (void)p;
    d->factor = a->real[CLCNN_SLOT_FACTOR];
    return CLCNN_SUCCESS;
}

static void scale_format(const clcnn_layer_desc *d, clcnn_spec_buf *b) {
    clcnn_spec_append(b, "scale(");
    clcnn_spec_append_real(b, d->factor);
    clcnn_spec_append(b, ")");
}

const clcnn_layer_syntax clcnn_scale_syntax = {
    .name = "scale",
    .aliases = {"mul"},
    .torch_name = "Scale",
    .pos = {CLCNN_SLOT_FACTOR},
    .npos = 1,
    .nreq = 1,
    .finish = scale_finish,
    .format = scale_format,
};

static clcnn_status scale_run(const clcnn_node *n, const clcnn_io *io, cl_mem out, cl_mem in) {
    clcnn_kern *k = clcnn_kernel(io->ctx, CLCNN_K_scale_f32);
    int count = io->N * n->x.c * n->x.h * n->x.w;
    float factor = (float)n->d.factor;
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, out);
    CLCNN_ARG(&a, in);
    CLCNN_ARG(&a, count);
    CLCNN_ARG(&a, factor);
    return clcnn_launch1d(io->ctx, k, &a, (size_t)count);
}

static clcnn_status scale_forward(const clcnn_node *n, const clcnn_io *io) {
    return scale_run(n, io, io->y, io->x[0]);
}

static clcnn_status scale_backward(const clcnn_node *n, const clcnn_io *io) {
    return io->gx[0] ? scale_run(n, io, io->gx[0], io->gy) : CLCNN_SUCCESS;
}

const clcnn_layer_ops clcnn_scale_ops = {
    .syntax = &clcnn_scale_syntax,
    .shape = clcnn_shape_same,
    .algos = clcnn_algos_kernel,
    .forward = scale_forward,
    .backward = scale_backward,
    .backward_reads = clcnn_reads_nothing,
};
