/* The residual block: `res( layers )` is y = x + body(x), as a subclass of nn.Sequential whose
 * forward returns x + super().forward(x). Its entry in the layer list is followed by its body's;
 * the planner (src/plan.c) builds the body's nodes and then this node, the sum, with two
 * inputs: the block's input and the body's output (cl/res.cl). */
#include "layer.h"

/* Spec syntax (docs/MODEL_SPEC.md): a group, "res( layers )". */
const clcnn_layer_syntax clcnn_res_syntax = {
    .name = "res",
    .aliases = {"residual"},
    .torch_name = "Residual",
    .group = 1,
};

static clcnn_status res_forward(const clcnn_node *n, const clcnn_io *io) {
    int count = io->N * n->y.c * n->y.h * n->y.w;
    if (io->ypad) { /* the padded hand-off: the sum also into the next convolution's input */
        clcnn_kern *kp = clcnn_kernel(io->ctx, CLCNN_K_add_f32_pad);
        int rows = io->N * n->y.c * n->y.h;
        clcnn_args p = {kp->k, 0, CL_SUCCESS};
        CLCNN_ARG(&p, io->y);
        CLCNN_ARG(&p, io->x[0]);
        CLCNN_ARG(&p, io->x[1]);
        CLCNN_ARG(&p, rows);
        CLCNN_ARG(&p, n->y.h);
        CLCNN_ARG(&p, n->y.w);
        CLCNN_ARG(&p, io->ypad);
        CLCNN_ARG(&p, io->ypad_pad);
        CLCNN_ARG(&p, io->ypad_only);
        return clcnn_launch1d(io->ctx, kp, &p, (size_t)rows);
    }
    clcnn_kern *k = clcnn_kernel(io->ctx, CLCNN_K_add_f32);
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, io->y);
    CLCNN_ARG(&a, io->x[0]);
    CLCNN_ARG(&a, io->x[1]);
    CLCNN_ARG(&a, count);
    return clcnn_launch1d(io->ctx, k, &a, (size_t)count);
}

/* Both addends receive the output's gradient. */
static clcnn_status res_backward(const clcnn_node *n, const clcnn_io *io) {
    clcnn_kern *k = clcnn_kernel(io->ctx, CLCNN_K_copy_f32);
    int count = io->N * n->y.c * n->y.h * n->y.w;
    clcnn_status st = CLCNN_SUCCESS;
    for (int s = 0; s < 2 && !st; s++) {
        if (!io->gx[s]) continue;
        clcnn_args a = {k->k, 0, CL_SUCCESS};
        CLCNN_ARG(&a, io->gx[s]);
        CLCNN_ARG(&a, io->gy);
        CLCNN_ARG(&a, count);
        st = clcnn_launch1d(io->ctx, k, &a, (size_t)count);
    }
    return st;
}

/* The sum runs whenever a gradient flows through it. */
static int res_algos(const clcnn_context *ctx, const clcnn_node *n, int pass, clcnn_algo *out) {
    (void)ctx;
    if (pass == CLCNN_PASS_FORWARD) return out[0] = CLCNN_ALGO_KERNEL, 1;
    if (pass == CLCNN_PASS_WGRAD) return 0;
    return n->need_gx ? (out[0] = CLCNN_ALGO_KERNEL, 1) : 0;
}

/* add_f32_pad writes the sum also into the next convolution's padded input. */
static int res_writes_padded(const clcnn_node *n) {
    return !n->y.flat;
}

const clcnn_layer_ops clcnn_res_ops = {
    .syntax = &clcnn_res_syntax,
    .shape = clcnn_shape_same,
    .algos = res_algos,
    .plan = clcnn_plan_rules_one,
    .forward = res_forward,
    .backward = res_backward,
    .writes_padded = res_writes_padded,
};
