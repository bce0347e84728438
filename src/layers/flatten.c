/* Flatten (nn.Flatten): (C, H, W) per sample becomes C*H*W features in the same order, so the
 * output is the input's buffer and its gradient the input's gradient: no kernel runs. */
#include "layer.h"

/* Spec syntax (docs/MODEL_SPEC.md) */

const clcnn_layer_syntax clcnn_flatten_syntax = {.name = "flatten", .torch_name = "Flatten"};

static clcnn_status flatten_shape(clcnn_node *n, clcnn_params *pl, clcnn_error *e,
                                  const char *where) {
    (void)pl, (void)e, (void)where;
    n->y = (clcnn_shape){n->x.c * n->x.h * n->x.w, 1, 1, 1};
    return CLCNN_SUCCESS;
}

static clcnn_status flatten_pass(const clcnn_node *n, const clcnn_io *io) {
    (void)n, (void)io;
    return CLCNN_SUCCESS;
}

const clcnn_layer_ops clcnn_flatten_ops = {
    .syntax = &clcnn_flatten_syntax,
    .shape = flatten_shape,
    .algos = clcnn_algos_view,
    .forward = flatten_pass,
    .backward = flatten_pass,
};
