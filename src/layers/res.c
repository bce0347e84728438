/* The sum of values: `add(@a, ...)` (inputs of one shape, added left to right as PyTorch's
 * `a + b + ...`), and the residual block, `res( layers )` y = x + body(x) or `res( layers |
 * shortcut )` y = shortcut(x) + body(x), whose entry in the layer list is followed by its
 * body's and its shortcut's; the planner (src/plan.c) builds those nodes and then this one,
 * the sum, with two inputs: the block's input (or the shortcut's output) and the body's output
 * (cl/res.cl). */
#include "layer.h"

#include <string.h>

/* Spec syntax (docs/MODEL_SPEC.md): a group, "res( layers )". */
const clcnn_layer_syntax clcnn_res_syntax = {
    .name = "res",
    .aliases = {"residual"},
    .torch_name = "Residual",
    .group = 1,
};

const clcnn_layer_syntax clcnn_add_syntax = {
    .name = "add",
    .torch_name = "Add",
    .min_in = 2,
    .max_in = CLCNN_MAX_INPUTS,
};

/* Every input has the output's shape. */
static clcnn_status sum_shape(clcnn_node *n, clcnn_params *pl, clcnn_error *e, const char *where) {
    (void)pl;
    for (int k = 1; k < n->n_in; k++)
        if (memcmp(&n->xs[k], &n->x, sizeof n->x) != 0) {
            char a[48], b[48];
            return clcnn_fail(e, CLCNN_ERR_SHAPE,
                              "%s adds values of different shapes: input 1 is %s, input %d is %s",
                              where, clcnn_shape_text(a, sizeof a, &n->x), k + 1,
                              clcnn_shape_text(b, sizeof b, &n->xs[k]));
        }
    n->y = n->x;
    return CLCNN_SUCCESS;
}

/* y = x[0] + x[1], then y += x[k] for each further input, in order. */
static clcnn_status res_forward(const clcnn_node *n, const clcnn_io *io) {
    int count = io->N * n->y.c * n->y.h * n->y.w;
    if (io->y_view.buf) { /* the padded hand-off: the sum also into the next convolution's input */
        clcnn_kern *kp = clcnn_kernel(io->ctx, CLCNN_K_add_f32_pad);
        int rows = io->N * n->y.c * n->y.h;
        clcnn_args p = {kp->k, 0, CL_SUCCESS};
        CLCNN_ARG(&p, io->y.buf);
        CLCNN_ARG(&p, io->x[0].buf);
        CLCNN_ARG(&p, io->x[1].buf);
        CLCNN_ARG(&p, rows);
        CLCNN_ARG(&p, n->y.h);
        CLCNN_ARG(&p, n->y.w);
        CLCNN_ARG(&p, io->y_view.buf);
        CLCNN_ARG(&p, io->y_view.halo);
        CLCNN_ARG(&p, io->y_view_only);
        return clcnn_launch1d(io->ctx, kp, &p, (size_t)rows);
    }
    clcnn_kern *k = clcnn_kernel(io->ctx, CLCNN_K_add_f32);
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, io->y.buf);
    CLCNN_ARG(&a, io->x[0].buf);
    CLCNN_ARG(&a, io->x[1].buf);
    CLCNN_ARG(&a, count);
    clcnn_status st = clcnn_launch1d(io->ctx, k, &a, (size_t)count);
    clcnn_kern *ka = clcnn_kernel(io->ctx, CLCNN_K_axpy_f32);
    for (int s = 2; s < n->n_in && !st; s++) {
        int zero = 0;
        float one = 1.0f; /* fma(1, x, y) rounds x + y once: the plain sum */
        clcnn_args b = {ka->k, 0, CL_SUCCESS};
        CLCNN_ARG(&b, io->y.buf);
        CLCNN_ARG(&b, zero);
        CLCNN_ARG(&b, io->x[s].buf);
        CLCNN_ARG(&b, zero);
        CLCNN_ARG(&b, count);
        CLCNN_ARG(&b, one);
        st = clcnn_launch1d(io->ctx, ka, &b, (size_t)count);
    }
    return st;
}

/* Every addend receives the output's gradient. */
static clcnn_status res_backward(const clcnn_node *n, const clcnn_io *io) {
    clcnn_kern *k = clcnn_kernel(io->ctx, CLCNN_K_copy_f32);
    int count = io->N * n->y.c * n->y.h * n->y.w;
    clcnn_status st = CLCNN_SUCCESS;
    for (int s = 0; s < n->n_in && !st; s++) {
        if (!io->gx[s].buf) continue;
        clcnn_args a = {k->k, 0, CL_SUCCESS};
        CLCNN_ARG(&a, io->gx[s].buf);
        CLCNN_ARG(&a, io->gy.buf);
        CLCNN_ARG(&a, count);
        st = clcnn_launch1d(io->ctx, k, &a, (size_t)count);
    }
    return st;
}

/* add_f32_pad writes the sum of two also into the next convolution's padded input. */
static void res_views(const clcnn_node *n, clcnn_views *v) {
    v->writes_y = !n->y.flat && n->n_in == 2;
}

const clcnn_layer_ops clcnn_res_ops = {
    .syntax = &clcnn_res_syntax,
    .shape = sum_shape,
    .algos = clcnn_algos_kernel, /* no parameters: the sum runs whenever a gradient flows */
    .forward = res_forward,
    .backward = res_backward,
    .backward_reads = clcnn_reads_nothing,
    .views = res_views,
};

const clcnn_layer_ops clcnn_add_ops = {
    .syntax = &clcnn_add_syntax,
    .shape = sum_shape,
    .algos = clcnn_algos_kernel,
    .forward = res_forward,
    .backward = res_backward,
    .backward_reads = clcnn_reads_nothing,
    .views = res_views,
};
