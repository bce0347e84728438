/* The plan: a model's graph of nodes with every algorithm chosen and fusions applied (plan.c). */
#ifndef CLCNN_PLAN_H
#define CLCNN_PLAN_H

#include "model.h"

/* Builds m->nodes and m->params from the spec's n layers for m's input shape on m->ctx: shapes
 * and parameters (shape errors name the layer), then each node's algorithms by its layer's
 * rules (force, when not NULL, overrides them where a node can take the forced algorithm),
 * then the fusions. */
clcnn_status clcnn_plan_build(clcnn_model *m, const clcnn_layer_desc *descs, int n,
                              const clcnn_plan_force *force);

/* Node a absorbs b (its only consumer, which a's ops->can_fuse accepted): a takes b's output
 * and plans again as a fused node. */
void clcnn_node_absorb(const clcnn_context *ctx, clcnn_node *a, const clcnn_node *b,
                       const clcnn_plan_force *force);

/* One line per node: index, layer(s), input node(s), output shape, the algorithm of each pass
 * and the bytes of its buffers for a batch of N. snprintf-style. */
size_t clcnn_plan_format(const clcnn_model *m, int N, char *buf, size_t size);

#endif
