/* Model internals shared by model.c, the training loop and the checkpoint code. */
#ifndef CLCNN_MODEL_H
#define CLCNN_MODEL_H

#include "context.h"
#include "layers/layer.h"
#include "spec.h"

/* A node's buffers for the current batch capacity: what its plan asked for, and the
 * allocations (NULL when it asked for none). */
typedef struct clcnn_node_bufs {
    clcnn_node_ws ws;
    cl_mem aux, keep_col, keep_pad, keep_gpad;
} clcnn_node_bufs;

struct clcnn_model {
    clcnn_error err;
    clcnn_context *ctx;
    char *spec;
    int in_c, in_h, in_w, out_size;
    int n_layers; /* spec layers */
    int n_nodes;  /* graph nodes (fewer than layers when some are fused) */
    clcnn_node *nodes;
    int n_params; /* state_dict entries: parameters, running statistics, counters */
    clcnn_param *params;
    size_t total;            /* floats in all trained parameters */
    size_t n_decay;          /* the first n_decay of them are weights (the rest: biases, bn) */
    size_t n_stats;          /* floats in all running statistics */
    cl_mem p, g, s1, s2;     /* parameters, gradients, optimizer state (momentum / m, v) */
    cl_mem stats;            /* running statistics (bn) */
    int64_t batches_tracked; /* training forwards taken: bn's num_batches_tracked */
    uint64_t seed;           /* the model's seed: initial weights, dropout streams */
    cl_mem acc, acc_correct; /* loss and hit accumulators (one value each) */
    clcnn_optimizer_options opt;
    int64_t step;
    int last_n;
    /* Per-batch buffers, sized for `cap` samples (clcnn_model_reserve). act[0] is the input,
     * act[i+1] the output of node i; gact[i] the gradient of act[i]. A node whose forward is a
     * view shares its input's buffers; entries whose spans in a step do not meet share one
     * buffer (clcnn_model_reserve). gsum[s] holds the gradient a node's backward writes for
     * its input s when another reader of that value has written the value's gradient already,
     * until it is added in. */
    int cap;
    cl_mem *act, *gact;
    clcnn_node_bufs *bufs;
    cl_mem labels, loss_vec, correct_vec;
    cl_mem col, rows, xpad, wflip;
    cl_mem gsum[CLCNN_MAX_INPUTS];
    /* The buffers that act[] and gact[] entries hold references to (clcnn_model_reserve places
     * outputs and output gradients by liveness, several to a buffer). */
    int n_slots;
    clcnn_node_ws shared; /* floats allocated in col, rows, xpad, wflip */
    /* The loss's label smoothing, 0..1, as given (clcnn_model_set_label_smoothing). */
    double label_smoothing;
    /* The input normalisation the weights were trained with, mean[in_c] then std[in_c]
     * (clcnn_model_set_normalize, or the checkpoint a load read); NULL when not known. */
    float *norm;
    /* The index of the staged batch's first sample within the step's global batch: a
     * data-parallel share's offset (0 on one device). Dropout draws by global sample. */
    int sample0;
};

clcnn_status clcnn_model_reserve(clcnn_model *m, int n);
/* Allocates a device buffer of `bytes` (4 when 0); a failure names `what`, the size and the
 * device's limits in m->err. */
clcnn_status clcnn_model_alloc(clcnn_model *m, cl_mem *out, size_t bytes, const char *what);
/* Whether o holds valid optimizer settings; the message names the first bad one. */
clcnn_status clcnn_optimizer_check(const clcnn_optimizer_options *o, clcnn_error *e);
/* Optimizer state tensors per parameter: 0 (plain SGD), 1 (momentum) or 2 (Adam moments). */
int clcnn_optimizer_states(const clcnn_optimizer_options *o);
/* The steps of a batch, for callers that stage act[0] and labels themselves. */
clcnn_status clcnn_model_forward(clcnn_model *m, int n);
/* sum: accumulate the sum of per-sample losses instead of the batch mean (evaluation). */
clcnn_status clcnn_model_loss(clcnn_model *m, int n, int want_grad, int sum, int accumulate);
clcnn_status clcnn_model_optimizer_step(clcnn_model *m);
clcnn_status clcnn_model_train_staged(clcnn_model *m, int n);
/* Forward and backward of a training step on the n staged samples, one share of a global batch
 * of global_n: gradients of sum(loss) / global_n, the accumulator sum(loss) / global_n. The
 * optimizer does not step. */
clcnn_status clcnn_model_grad_staged(clcnn_model *m, int n, int global_n);
/* The fewest samples a training forward takes: 2 when a BatchNorm node sees one value per
 * channel and sample (a flat input, or 1 x 1 planes), which it cannot normalise alone, else 1.
 * *node (may be NULL) receives the first such node, or -1. */
int clcnn_model_train_min(const clcnn_model *m, int *node);
/* That node as a message names it: "layer 4 (BatchNorm1d)" ("the model" when there is none). */
void clcnn_model_train_min_name(const clcnn_model *m, char *buf, size_t size);
/* Reads the accumulators (waits for the queue). */
clcnn_status clcnn_model_read_acc(clcnn_model *m, float *loss, int *correct);

#endif
