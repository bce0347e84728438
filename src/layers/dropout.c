/* Dropout (nn.Dropout(p)): in training, each element is zeroed with probability p and the rest
 * scaled by 1/(1-p); in evaluation, the identity. The mask comes from a hash of the node's
 * per-step seed (clcnn_io.seed) and the element's index, so it is never stored: the backward
 * draws it again (cl/dropout.cl). */
#include "layer.h"

/* Spec syntax (docs/MODEL_SPEC.md): dropout or dropout(P), 0 <= P <= 1, default 0.5. */

static const clcnn_arg_def dropout_args[] = {
    {"p", NULL, 1, 0, 1, 0.5, CLCNN_ARGF_POS | CLCNN_ARGF_KW | CLCNN_ARGF_SHOW_POS},
};

const clcnn_layer_syntax clcnn_dropout_syntax = {
    .name = "dropout",
    .torch_name = "Dropout",
    CLCNN_SPEC_ARGS(dropout_args),
};

/* out = in masked and scaled (training, p > 0), or a copy. The backward applies the same mask
 * to the gradient: the seed has not changed since the forward. */
static clcnn_status dropout_run(const clcnn_node *n, const clcnn_io *io, cl_mem out, cl_mem in) {
    int count = io->N * n->x.c * n->x.h * n->x.w;
    if (!io->training || n->d.arg[0].r == 0.0) {
        clcnn_kern *k = clcnn_kernel(io->ctx, CLCNN_K_copy_f32);
        clcnn_args a = {k->k, 0, CL_SUCCESS};
        CLCNN_ARG(&a, out);
        CLCNN_ARG(&a, in);
        CLCNN_ARG(&a, count);
        return clcnn_launch1d(io->ctx, k, &a, (size_t)count);
    }
    clcnn_kern *k = clcnn_kernel(io->ctx, CLCNN_K_dropout_forward);
    double pd = n->d.arg[0].r;
    float p = (float)pd, scale = pd < 1.0 ? (float)(1.0 / (1.0 - pd)) : 0.0f;
    cl_uint seed = io->seed;
    /* The element index is global over the step's whole batch, and 64-bit: each share holds
     * fewer than 2^31 elements (CLCNN_MAX_ELEMENTS), but a global batch of three or more shares
     * can pass 2^32, where a 32-bit index would wrap and give later shares the first ones'
     * masks. It goes to the kernel as two uints (OpenCL C 1.2's embedded profile may lack
     * 64-bit integers). */
    uint64_t base = (uint64_t)io->sample0 * (uint64_t)(n->x.c * n->x.h * n->x.w);
    cl_uint base_lo = (cl_uint)base, base_hi = (cl_uint)(base >> 32);
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, out);
    CLCNN_ARG(&a, in);
    CLCNN_ARG(&a, count);
    CLCNN_ARG(&a, seed);
    CLCNN_ARG(&a, base_lo);
    CLCNN_ARG(&a, base_hi);
    CLCNN_ARG(&a, p);
    CLCNN_ARG(&a, scale);
    return clcnn_launch1d(io->ctx, k, &a, (size_t)count);
}

static clcnn_status dropout_forward(const clcnn_node *n, const clcnn_io *io) {
    return dropout_run(n, io, io->y.buf, io->x[0].buf);
}

static clcnn_status dropout_backward(const clcnn_node *n, const clcnn_io *io) {
    return io->gx[0].buf ? dropout_run(n, io, io->gx[0].buf, io->gy.buf) : CLCNN_SUCCESS;
}

const clcnn_layer_ops clcnn_dropout_ops = {
    .syntax = &clcnn_dropout_syntax,
    .shape = clcnn_shape_same,
    .algos = clcnn_algos_kernel,
    .forward = dropout_forward,
    .backward = dropout_backward,
    .backward_reads = clcnn_reads_nothing,
};
