/* Concatenation along channels (torch.cat(xs, dim=1)): `cat(@a, ...)` joins inputs of one
 * height and width (or flat features) channel after channel, in order; the backward hands each
 * input its slice of the output's gradient (cl/cat.cl). */
#include "layer.h"

#include <string.h>

const clcnn_layer_syntax clcnn_cat_syntax = {
    .name = "cat",
    .aliases = {"concat"},
    .torch_name = "Cat",
    .min_in = 2,
    .max_in = CLCNN_MAX_INPUTS,
};

/* (sum of C) x H x W: every input has the first's height, width and flatness. */
static clcnn_status cat_shape(clcnn_node *n, clcnn_params *pl, clcnn_error *e, const char *where) {
    (void)pl;
    long long c = 0;
    for (int k = 0; k < n->n_in; k++) {
        const clcnn_shape *s = &n->xs[k];
        if (s->h != n->x.h || s->w != n->x.w || s->flat != n->x.flat) {
            char a[48], b[48];
            return clcnn_fail(e, CLCNN_ERR_SHAPE,
                              "%s joins channels of one height and width, but input 1 is %s "
                              "and input %d is %s",
                              where, clcnn_shape_text(a, sizeof a, &n->x), k + 1,
                              clcnn_shape_text(b, sizeof b, s));
        }
        c += s->c;
    }
    if (c * n->x.h * n->x.w > (1LL << 28))
        return clcnn_fail(e, CLCNN_ERR_SHAPE, "%s makes %lld channels of %d x %d, too large", where,
                          c, n->x.h, n->x.w);
    n->y = n->x;
    n->y.c = (int)c;
    return CLCNN_SUCCESS;
}

/* The copy of input k's block between its buffer and its slice of the output's: out = 1 into
 * the output (forward), 0 out of it (backward). */
static clcnn_status copy_slice(const clcnn_node *n, const clcnn_io *io, int k, int off, int out,
                               cl_mem slice_buf, cl_mem whole_buf) {
    clcnn_kern *kk = clcnn_kernel(io->ctx, CLCNN_K_copy_slice);
    const clcnn_shape *s = &n->xs[k];
    int count = s->c * s->h * s->w, whole = n->y.c * n->y.h * n->y.w, zero = 0;
    int total = io->N * count;
    cl_mem dst = out ? whole_buf : slice_buf, src = out ? slice_buf : whole_buf;
    int dst_ps = out ? whole : count, dst_off = out ? off : zero;
    int src_ps = out ? count : whole, src_off = out ? zero : off;
    clcnn_args a = {kk->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, dst);
    CLCNN_ARG(&a, dst_ps);
    CLCNN_ARG(&a, dst_off);
    CLCNN_ARG(&a, src);
    CLCNN_ARG(&a, src_ps);
    CLCNN_ARG(&a, src_off);
    CLCNN_ARG(&a, count);
    CLCNN_ARG(&a, total);
    return clcnn_launch1d(io->ctx, kk, &a, (size_t)total);
}

/* Each input into its slice of y, except those already there: views of y (their producers
 * wrote them in place, views.x_slices). */
static clcnn_status cat_forward(const clcnn_node *n, const clcnn_io *io) {
    clcnn_status st = CLCNN_SUCCESS;
    for (int k = 0, off = 0; k < n->n_in && !st; k++) {
        if (io->x[k].buf != io->y.buf) st = copy_slice(n, io, k, off, 1, io->x[k].buf, io->y.buf);
        off += n->xs[k].c * n->xs[k].h * n->xs[k].w;
    }
    return st;
}

static clcnn_status cat_backward(const clcnn_node *n, const clcnn_io *io) {
    clcnn_status st = CLCNN_SUCCESS;
    for (int k = 0, off = 0; k < n->n_in && !st; k++) {
        if (io->gx[k].buf) st = copy_slice(n, io, k, off, 0, io->gx[k].buf, io->gy.buf);
        off += n->xs[k].c * n->xs[k].h * n->xs[k].w;
    }
    return st;
}

static void cat_views(const clcnn_node *n, clcnn_views *v) {
    (void)n;
    v->x_slices = 1;
}

const clcnn_layer_ops clcnn_cat_ops = {
    .syntax = &clcnn_cat_syntax,
    .shape = cat_shape,
    .algos = clcnn_algos_kernel,
    .forward = cat_forward,
    .backward = cat_backward,
    .backward_reads = clcnn_reads_nothing,
    .views = cat_views,
};
