/* The elementwise product (torch.mul, `a * b`): `mul(@a)` multiplies two inputs of one shape,
 * or a C x H x W input by one value per channel (C x 1 x 1, a squeeze-excitation gate), as
 * PyTorch broadcasts [N,C,1,1] over [N,C,H,W] (cl/mul.cl). */
#include "layer.h"

#include <string.h>

const clcnn_layer_syntax clcnn_mul_syntax = {
    .name = "mul",
    .torch_name = "Mul",
    .min_in = 2,
    .max_in = 2,
};

/* The input that has the output's shape (0 when both do). */
static int mul_big(const clcnn_node *n) {
    return memcmp(&n->xs[0], &n->y, sizeof n->y) == 0 ? 0 : 1;
}

/* The larger shape: both equal, or one C x 1 x 1 against C x H x W. */
static clcnn_status mul_shape(clcnn_node *n, clcnn_params *pl, clcnn_error *e, const char *where) {
    (void)pl;
    const clcnn_shape *a = &n->xs[0], *b = &n->xs[1];
    int same = memcmp(a, b, sizeof *a) == 0;
    int a_gate = !a->flat && !b->flat && a->c == b->c && a->h == 1 && a->w == 1;
    int b_gate = !a->flat && !b->flat && a->c == b->c && b->h == 1 && b->w == 1;
    if (!same && !a_gate && !b_gate) {
        char ta[48], tb[48];
        return clcnn_fail(e, CLCNN_ERR_SHAPE,
                          "%s multiplies %s by %s: the two must have one shape, or one of them "
                          "be C x 1 x 1 against C x H x W",
                          where, clcnn_shape_text(ta, sizeof ta, a),
                          clcnn_shape_text(tb, sizeof tb, b));
    }
    n->y = same || b_gate ? *a : *b;
    return CLCNN_SUCCESS;
}

/* y = big * small[i / hw]. */
static clcnn_status mul_run(const clcnn_io *io, cl_mem y, cl_mem a, cl_mem b, int hw, int count) {
    clcnn_kern *k = clcnn_kernel(io->ctx, CLCNN_K_mul_bcast);
    clcnn_args args = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&args, y);
    CLCNN_ARG(&args, a);
    CLCNN_ARG(&args, b);
    CLCNN_ARG(&args, hw);
    CLCNN_ARG(&args, count);
    return clcnn_launch1d(io->ctx, k, &args, (size_t)count);
}

static clcnn_status mul_forward(const clcnn_node *n, const clcnn_io *io) {
    int big = mul_big(n), small = 1 - big;
    const clcnn_shape *s = &n->xs[small];
    int count = io->N * n->y.c * n->y.h * n->y.w, hw = n->y.h * n->y.w / (s->h * s->w);
    return mul_run(io, io->y.buf, io->x[big].buf, io->x[small].buf, hw, count);
}

/* g_big = gy * small (broadcast); g_small = gy * big, summed over each plane when it is the
 * gate. */
static clcnn_status mul_backward(const clcnn_node *n, const clcnn_io *io) {
    int big = mul_big(n), small = 1 - big;
    const clcnn_shape *s = &n->xs[small];
    int count = io->N * n->y.c * n->y.h * n->y.w, hw = n->y.h * n->y.w / (s->h * s->w);
    clcnn_status st = CLCNN_SUCCESS;
    if (io->gx[big].buf) st = mul_run(io, io->gx[big].buf, io->gy.buf, io->x[small].buf, hw, count);
    if (st || !io->gx[small].buf) return st;
    if (hw == 1) return mul_run(io, io->gx[small].buf, io->gy.buf, io->x[big].buf, 1, count);
    clcnn_kern *k = clcnn_kernel(io->ctx, CLCNN_K_mul_bcast_grad);
    int planes = count / hw;
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, io->gx[small].buf);
    CLCNN_ARG(&a, io->gy.buf);
    CLCNN_ARG(&a, io->x[big].buf);
    CLCNN_ARG(&a, hw);
    CLCNN_ARG(&a, planes);
    return clcnn_launch1d(io->ctx, k, &a, (size_t)planes);
}

const clcnn_layer_ops clcnn_mul_ops = {
    .syntax = &clcnn_mul_syntax,
    .shape = mul_shape,
    .algos = clcnn_algos_kernel,
    .forward = mul_forward,
    .backward = mul_backward,
    .backward_reads = clcnn_reads_x,
};
