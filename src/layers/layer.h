/* A layer as one unit. Each layer kind has one host file (src/layers/<kind>.c), one kernel file
 * (cl/<kind>.cl) and one line in registry.h, and exports one clcnn_layer_ops table: its spec
 * syntax, shapes and parameters (with PyTorch's names and initialisation), its plan (which
 * algorithm each pass takes, and the workspace that needs) and its forward and backward
 * passes. The model (src/model.c) builds a graph of nodes from the spec, asks each node's ops
 * for its plan, sizes the buffers from it and runs the passes; it knows nothing of any kind.
 *
 * A node's passes see its values as tensors (clcnn_tensor, dense at offset 0) and its buffers
 * through clcnn_io. Backward passes overwrite the gradients they produce (each step starts from
 * zero, as after PyTorch's zero_grad); a NULL gx[i] skips that input gradient. */
#ifndef CLCNN_LAYERS_LAYER_H
#define CLCNN_LAYERS_LAYER_H

#include "context.h"
#include "rng.h"
#include "spec.h"

struct clcnn_node;
struct clcnn_io;
struct clcnn_node_ws;

/* The passes a plan records an algorithm for. */
enum { CLCNN_PASS_FORWARD, CLCNN_PASS_WGRAD, CLCNN_PASS_DGRAD, CLCNN_PASS_COUNT };

/* What an algorithm is, beyond its pass: the traits that the plan, the workspace and the other
 * passes of the node read. */
enum {
    CLCNN_ALGO_VIEW = 1 << 0,          /* no work: the output is the input's buffer (flatten) */
    CLCNN_ALGO_PADDED_X = 1 << 1,      /* reads a zero-padded copy of the input (xpad; a
                                          forward keeps it in keep_pad, for the backward) */
    CLCNN_ALGO_WRITES_PADDED = 1 << 2, /* forward: can write its output also zero-padded into a
                                          consumer's keep_pad (io->y_view) */
    CLCNN_ALGO_FUSES_POOL = 1 << 3,    /* forward: a MaxPool2d(2) after it can ride in its
                                          store; input gradient: the fused node's backward
                                          has its counterpart */
    CLCNN_ALGO_FLIPPED_W = 1 << 4,     /* input gradient: needs the flipped weights (wflip) */
    CLCNN_ALGO_PADDED_GY = 1 << 5,     /* reads gy zero-padded, as the flipped convolution
                                          does: an input gradient pads it (into xpad) unless
                                          gy's reader hands it over so (keep_gpad); a weight
                                          gradient reads that handed-over copy too */
    CLCNN_ALGO_KEEPS_COL = 1 << 6,     /* forward: keeps the batch's im2col matrix for the
                                          backward (keep_col) where it fits */
    CLCNN_ALGO_GY_ROWS = 1 << 7,       /* a gradient that gathers gy into pixel rows chunk by
                                          chunk: with both gradients so, one pass does both */
    CLCNN_ALGO_IMPLICIT_GEMM = 1 << 8, /* runs the implicit-GEMM kernels, in the size
                                          CLCNN_IMPLICIT_SIZE or the device class picks */
};

/* One algorithm of a layer: a row of its table (clcnn_layer_ops.algos). The plan records, per
 * pass, the row it took; `clcnn_train --plan` prints their names. */
typedef struct clcnn_algo {
    const char *name; /* "direct", "direct+pool", "im2col", "wgrad-rows", ... */
    int pass;         /* CLCNN_PASS_* */
    unsigned flags;   /* CLCNN_ALGO_* traits */
    /* The layer's grouping of its rows (a convolution's: direct, im2col, implicit GEMM, tuned):
     * its preference order for a gradient pass can follow the forward's path. */
    int path;
    /* Whether the row can run its pass of n on ctx's device (NULL: always). A weight gradient
     * runs only for a node with parameters, an input gradient only where one is needed. */
    int (*applies)(const clcnn_context *ctx, const struct clcnn_node *n);
    /* Buffers a batch of N needs for this row, grown into ws (NULL: none of its own). */
    void (*workspace)(const clcnn_context *ctx, const struct clcnn_node *n, int N,
                      struct clcnn_node_ws *ws);
    /* The pass by this row, called by the layer's forward or backward (NULL: the layer's own
     * forward or backward is its one way). */
    clcnn_status (*run)(const struct clcnn_node *n, const struct clcnn_io *io);
} clcnn_algo;

/* One step of a preference order: the row, and the rule under which the order takes it where
 * it applies (NULL: whenever it applies). An order ends with a NULL row. */
typedef struct clcnn_algo_pref {
    const clcnn_algo *algo;
    int (*when)(const clcnn_context *ctx, const struct clcnn_node *n);
} clcnn_algo_pref;

/* The row's name; "-" for NULL (the pass does not run). */
const char *clcnn_algo_name(const clcnn_algo *a);

/* The most algorithms a pass of a node can choose from. */
enum { CLCNN_MAX_ALGOS = 8 };

/* Per-sample tensor shape; a flat tensor is (features, 1, 1) with flat = 1. */
typedef struct clcnn_shape {
    int c, h, w, flat;
} clcnn_shape;

/* A tensor a pass reads or writes: a buffer and where in it the N x C x H x W values lie
 * (ggml's ne[] and nb[]). A value of the graph is dense at offset 0. A view with a halo is a
 * zero-padded copy: planes of (H + 2 halo) x (W + 2 halo) floats with the values inside and
 * the zeros around them, written once when its buffer is made; the padded hand-off passes one
 * from a consumer to its producer, and kernels that take one read its buffer and halo. */
typedef struct clcnn_tensor {
    cl_mem buf;        /* NULL: absent (a gradient nothing needs, no view) */
    size_t off;        /* element offset of value (0, 0, 0, 0) */
    int n, c, h, w;    /* a flat value is (n, features, 1, 1) */
    size_t sn, sc, sh; /* strides in elements of a sample, a channel and a row (a column: 1) */
    int halo;          /* rows of zeros above and below each plane, columns left and right */
} clcnn_tensor;

/* The tensor of n samples of shape s in buf with a halo of `halo` around each plane (0: a dense
 * value); buf NULL gives an absent tensor. */
clcnn_tensor clcnn_tensor_of(cl_mem buf, int n, const clcnn_shape *s, int halo);

/* The channels of shape s from element `off` of each sample of the dense n x `whole` tensor in
 * buf: a view of a concatenation's output. */
clcnn_tensor clcnn_tensor_slice(cl_mem buf, int n, const clcnn_shape *s, size_t off,
                                const clcnn_shape *whole);

/* What a node's passes can do with views that have a halo (the padded hand-off), as its plan
 * stands (clcnn_layer_ops.views). */
typedef struct clcnn_views {
    int writes_y;  /* its forward can also write its output into a consumer's view */
    int writes_gx; /* its backward can also write its input gradient into a producer's view */
    int x_halo;    /* the halo of the padded copy of x[0] its forward keeps (keep_pad); -1: none */
    int gy_halo;   /* the halo its input-gradient pass wants around gy; -1: none */
    int gy_only;   /* given gy in a view (keep_gpad), its backward reads gy only there */
    int writes_slice; /* its forward can write its output as a channel slice of a larger
                       * tensor (a sample stride y.sn beyond C x H x W, an offset y.off) */
    int x_slices;     /* it reads its inputs as channel slices of its output, in order (cat):
                       * an input whose producer wrote it there is a view of its output */
} clcnn_views;

/* The shape of one convolution, derived from its node. */
typedef struct clcnn_conv2d_shape {
    int C, H, W, OC, K, stride, pad, OH, OW, bias;
} clcnn_conv2d_shape;

/* What a state_dict entry is, and where it lives. */
typedef enum clcnn_param_kind {
    CLCNN_PARAM_WEIGHT,   /* trained, and weight-decayed */
    CLCNN_PARAM_NO_DECAY, /* trained; no weight decay under --no-decay-bn-bias (biases, bn) */
    CLCNN_PARAM_STAT,     /* a running statistic (bn): F32 in the stats buffer, not trained */
    CLCNN_PARAM_COUNTER   /* bn's num_batches_tracked: a 0-dim I64 the model holds */
} clcnn_param_kind;

#define CLCNN_PARAM_NAME_MAX 96

/* A state_dict entry: its name, PyTorch shape and place in its allocation. */
typedef struct clcnn_param {
    char name[CLCNN_PARAM_NAME_MAX]; /* "<module path>.weight", e.g. "3.weight", "4.1.bias" */
    clcnn_param_kind kind;
    int ndim; /* 0: a scalar (numel 1) */
    int64_t shape[4];
    size_t numel;
    /* Element offset: trained entries in the parameter (and gradient, optimizer state)
     * buffers, statistics in the stats buffer; 0 for a counter. */
    size_t off;
} clcnn_param;

/* Whether the optimizer trains entries of this kind. */
static inline int clcnn_param_trained(clcnn_param_kind k) {
    return k == CLCNN_PARAM_WEIGHT || k == CLCNN_PARAM_NO_DECAY;
}

/* Device buffers in floats a node needs for a batch, beyond its output and gradient. The shared
 * ones (col, rows, xpad, wflip) are one allocation for the whole model, sized by the largest
 * node; the others are the node's own. */
typedef struct clcnn_node_ws {
    size_t col, rows, xpad, wflip; /* shared scratch */
    size_t keep_col, keep_pad;     /* kept from the forward for the backward */
    size_t keep_gpad;              /* gy zero-padded for the input gradient (a hand-off) */
    size_t aux;                    /* ints: a pool's argmax */
} clcnn_node_ws;

struct clcnn_layer_ops;

/* One node of the graph: a spec layer, or two fused into one (a convolution and the
 * MaxPool2d(2) after it), with its inputs, shapes, parameters and plan. */
typedef struct clcnn_node {
    const struct clcnn_layer_ops *ops;
    clcnn_layer_desc d;     /* the spec layer (the first, for a fused node) */
    clcnn_layer_desc fused; /* the fused layer (kind and arguments); valid when n_layers == 2 */
    int layer, n_layers;    /* index of the first spec layer it covers, and how many */
    int n_in, in[CLCNN_MAX_INPUTS]; /* input nodes; -1 is the model's input */
    /* PyTorch module path of the layer: "3", "3.0" inside a res, or the names the spec gives
     * ("layer1.0.conv1") */
    char path[CLCNN_PARAM_NAME_MAX];
    clcnn_shape x, y;                 /* per-sample input (of in[0]) and output */
    clcnn_shape xs[CLCNN_MAX_INPUTS]; /* per-sample input of each in[] (xs[0] is x) */
    int param0, n_params;             /* its parameters: params[param0 .. param0 + n_params) */
    int need_gx;                      /* whether some node before it has parameters */
    const clcnn_algo *algo[CLCNN_PASS_COUNT]; /* the row each pass takes; NULL: it does not run */
    clcnn_views views; /* what its passes can do with views (plan.c, from its layer's views) */
    /* The padded hand-off (plan.c): pad_to is the node into whose kept padded input (keep_pad,
     * a view with its x_halo) this node's forward writes its output as well (-1: none),
     * pad_only that it writes only there (that node is the output's only reader); x_padded says
     * that the node's keep_pad is written so by its input's producer, and its forward pads
     * nothing. */
    int pad_to, pad_only, x_padded;
    /* The same in the backward: gpad_to is the node into whose keep_gpad (a view with its
     * gy_halo) this node's backward writes its input gradient as well (-1: none), gpad_only
     * that it writes only there (that node's backward reads its output gradient nowhere else);
     * gy_padded says that the node's keep_gpad is so written. */
    int gpad_to, gpad_only, gy_padded;
    /* Zero-copy concatenation (plan.c): slice_of is the node (views.x_slices) into whose
     * output this node's forward writes its own, as the channels from element slice_off of
     * each sample, and which reads it there (-1: none); this node's output has no buffer. */
    int slice_of;
    size_t slice_off;
    clcnn_conv2d_shape conv; /* convolution nodes */
    double flops;            /* forward multiply-adds x 2 per sample */
    char label[2][48];       /* profiling section names: forward, backward */
} clcnn_node;

/* What a pass sees: the context, the shared scratch, the parameter and gradient buffers with
 * the offsets of the node's first two parameters (weight, bias; -1 when absent), its inputs,
 * output and their gradients, its own kept buffers, and the mode: training (batch statistics,
 * dropout on) or evaluation. */
typedef struct clcnn_io {
    clcnn_context *ctx;
    cl_mem col, rows, xpad, wflip; /* shared scratch, sized by the plan */
    cl_mem params, grads;
    int woff, boff;
    clcnn_tensor x[CLCNN_MAX_INPUTS], gx[CLCNN_MAX_INPUTS]; /* gx[i].buf NULL: not needed */
    clcnn_tensor y, gy;
    cl_mem aux, keep_col, keep_pad, keep_gpad;
    /* The padded hand-off, as views with a halo: the forward writes its output also into
     * y_view (a consumer's keep_pad; buf NULL: no hand-off), or with y_view_only there alone
     * (nothing reads y); x_in_view: the producer wrote x[0] into this node's keep_pad so. */
    clcnn_tensor y_view;
    int y_view_only, x_in_view;
    /* The backward's: gx[0] also into gx_view (a producer's keep_gpad; buf NULL: none), with
     * gx_view_only there alone (nothing reads gx[0]); gy_in_view: keep_gpad holds gy so. */
    clcnn_tensor gx_view;
    int gx_view_only, gy_in_view;
    clcnn_node_ws ws; /* what was allocated for this batch */
    int N;
    int training; /* 1: a training step; 0: evaluation or prediction (PyTorch's model.eval()) */
    /* A node's own random stream for this step (dropout masks): a function of the model's
     * seed, its step count and the node, so a run repeats and resumes bit for bit. */
    cl_uint seed;
    /* The batch's first sample within the step's global batch (a data-parallel share's
     * offset; 0 on one device): random draws are keyed by global sample, so every split of a
     * batch draws what one device draws. */
    int sample0;
    /* Running statistics: the stats buffer and the offset of the node's first (-1: none). */
    cl_mem stats;
    int soff;
} clcnn_io;

/* Parameter list a node's shape function appends to. */
typedef struct clcnn_params {
    clcnn_param *p;
    int n, cap;
    size_t total; /* floats of trained entries so far */
    size_t stats; /* floats of statistics so far */
} clcnn_params;

/* Appends entry `<path>.<name>` of the given kind and shape (ndim 0: a scalar); returns its
 * index, -1 when full. */
int clcnn_params_add(clcnn_params *pl, const char *path, const char *name, clcnn_param_kind kind,
                     int ndim, const int64_t *shape);

/* Forced algorithms (NULL: the rules decide). A force that the node cannot take is ignored (the
 * rules decide that pass). */
typedef struct clcnn_plan_force {
    const clcnn_algo *algo[CLCNN_PASS_COUNT];
} clcnn_plan_force;

/* A layer kind's operations. init, can_fuse, prefer and workspace may be NULL (no parameters to
 * initialise, never fuses, its rows in the table's order, no buffers beyond its output and
 * gradient and its rows' own); the rest may not. */
typedef struct clcnn_layer_ops {
    const clcnn_layer_syntax *syntax; /* spec name, arguments, canonical text */
    /* Output shape and parameters from n->x and n->d; a shape error names `where`. */
    clcnn_status (*shape)(clcnn_node *n, clcnn_params *pl, clcnn_error *e, const char *where);
    /* PyTorch's default initialisation of the node's parameters, into host memory laid out as
     * the parameter buffer (NULL: nothing to initialise). */
    void (*init)(const clcnn_node *n, const clcnn_param *params, float *host, clcnn_rng *rng);
    /* The initial running statistics, into host memory laid out as the stats buffer (NULL:
     * the node has none). */
    void (*init_stats)(const clcnn_node *n, const clcnn_param *params, float *stats);
    /* Whether n can absorb `next` (its only consumer) into one fused node; NULL: never. */
    int (*can_fuse)(const clcnn_context *ctx, const clcnn_node *n, const clcnn_node *next);
    /* The layer's algorithms: its table of rows, NULL-terminated (clcnn_algos_kernel and the
     * like for a layer with one way per pass). */
    const clcnn_algo *const *algos;
    /* The order in which the rules prefer the rows of pass `pass` of n on ctx's device, the
     * passes before it already planned; NULL (or a NULL return): the table's order. */
    const clcnn_algo_pref *(*prefer)(const clcnn_context *ctx, const clcnn_node *n, int pass);
    /* Buffers a batch of N needs under n's plan beyond its rows' own (NULL: none). */
    void (*workspace)(const clcnn_context *ctx, const clcnn_node *n, int N, clcnn_node_ws *ws);
    clcnn_status (*forward)(const clcnn_node *n, const clcnn_io *io);
    clcnn_status (*backward)(const clcnn_node *n, const clcnn_io *io);
    /* What n's backward reads besides its output gradient and its own kept buffers: its
     * inputs' values (CLCNN_READS_X) and its own output (CLCNN_READS_Y). The planner keeps
     * those alive through the backward; a value no backward reads shares its memory once its
     * last reader's forward is done. NULL: both (always safe). */
    unsigned (*backward_reads)(const clcnn_node *n);
    /* What n's passes, under its plan, can do with views that have a halo (v arrives with
     * nothing: 0 and halos -1); NULL: nothing. */
    void (*views)(const clcnn_node *n, clcnn_views *v);
} clcnn_layer_ops;

enum { CLCNN_READS_X = 1, CLCNN_READS_Y = 2 };

/* backward_reads for the layers whose backward reads nothing, only its inputs, only its
 * output. */
unsigned clcnn_reads_nothing(const clcnn_node *n);
unsigned clcnn_reads_x(const clcnn_node *n);
unsigned clcnn_reads_y(const clcnn_node *n);

/* The ops of a layer kind (registry.c). */
const clcnn_layer_ops *clcnn_layer_ops_of(clcnn_layer_kind kind);

/* Sets up a node for spec layer `d` (index `layer`, module path `path`; NULL: the index) on
 * per-sample inputs xs[0 .. n_in): shape and parameters (appended to pl), labels, flops. Its
 * input nodes (in[]) are the caller's to set: in[0] is layer - 1, the others -1. Errors name
 * the layer and its spec column. */
clcnn_status clcnn_node_init(clcnn_node *n, const clcnn_layer_desc *d, int layer, const char *path,
                             const clcnn_shape *xs, int n_in, clcnn_params *pl, clcnn_error *e);

/* The output of a K x K window with stride and pad (conv, maxpool) on the node's C x H x W
 * input: y = (x.c, OH, OW); a flat input or a window larger than the padded input is a shape
 * error naming `where`. */
clcnn_status clcnn_window_shape(clcnn_node *n, int K, int stride, int pad, clcnn_error *e,
                                const char *where);

/* "3 x 8 x 8" or "10 features", for messages; returns buf. */
const char *clcnn_shape_text(char *buf, size_t size, const clcnn_shape *s);

/* Shape functions shared by several kinds: the output has the input's shape (elementwise
 * layers, the residual sum; the planner checks a residual body's shape); C x H x W -> C x 1 x 1
 * (global pools; a flat input is a shape error naming `where`). */
clcnn_status clcnn_shape_same(clcnn_node *n, clcnn_params *pl, clcnn_error *e, const char *where);
clcnn_status clcnn_shape_global(clcnn_node *n, clcnn_params *pl, clcnn_error *e, const char *where);

/* The spec arguments of a K x K window (maxpool, avgpool), in this order: kernel, stride
 * (default K) and pad (default 0, at most K/2 as PyTorch requires; clcnn_window_finish checks
 * it and sets the stride's default), and their shape function (the window's output, no
 * parameters). */
enum { CLCNN_WINDOW_KERNEL, CLCNN_WINDOW_STRIDE, CLCNN_WINDOW_PAD };
extern const clcnn_arg_def clcnn_window_args[3];
clcnn_status clcnn_window_finish(const clcnn_spec_parser *p, const clcnn_layer_args *a,
                                 clcnn_layer_desc *d);
clcnn_status clcnn_window_node_shape(clcnn_node *n, clcnn_params *pl, clcnn_error *e,
                                     const char *where);

/* The rows of a layer with one way per pass, every pass that runs: its own kernels ("kernel"),
 * one GEMM ("gemm", linear) or none at all ("view": the output is the input's buffer). */
extern const clcnn_algo *const clcnn_algos_kernel[];
extern const clcnn_algo *const clcnn_algos_gemm[];
extern const clcnn_algo *const clcnn_algos_view[];

/* The rows of n's table that can run pass `pass` on ctx's device, in the table's order (at most
 * CLCNN_MAX_ALGOS, written to out); returns how many. The planner filters these; tests run
 * every one. */
int clcnn_node_algos(const clcnn_context *ctx, const clcnn_node *n, int pass,
                     const clcnn_algo **out);

/* Chooses n->algo[] pass by pass: of the rows that apply, the first of the layer's preference
 * order whose rule holds (else the first that applies), unless force names one that applies. */
void clcnn_node_plan(const clcnn_context *ctx, clcnn_node *n, const clcnn_plan_force *force);

/* Buffers a batch of N needs under n's plan: the layer's own and its rows'. */
void clcnn_node_workspace(const clcnn_context *ctx, const clcnn_node *n, int N, clcnn_node_ws *ws);

/* The first row of ops' table for pass `pass` named `name`; NULL when there is none. */
const clcnn_algo *clcnn_algo_named(const clcnn_layer_ops *ops, int pass, const char *name);

/* PyTorch's default for conv and linear: weight and bias U(+-1/sqrt(fan_in)), fan_in = the
 * weight's numel / its first dimension, drawn in order weight then bias. */
void clcnn_init_fan_in(const clcnn_node *n, const clcnn_param *params, float *host, clcnn_rng *rng);

/* gb[boff + c] = sum over n < N and p < hw of g[(n*C + c)*hw + p] (a conv layer's bias
 * gradient; hw = 1 for a linear layer's). */
clcnn_status clcnn_bias_grad(clcnn_context *ctx, cl_mem grads, int boff, cl_mem g, int goff, int N,
                             int C, int hw);

/* Writes `n` floats of `value` into buf from element off. */
clcnn_status clcnn_fill(clcnn_context *ctx, cl_mem buf, int off, int n, float value);

/* Sets the size of the implicit-GEMM convolutions (src/layers/conv2d/implicit.c) from
 * CLCNN_IMPLICIT_SIZE (size "" or "auto": the device class's choice). A size that is not one of
 * them, or that the device cannot run, fails with CLCNN_ERR_INVALID_ARGUMENT and one line in ctx's
 * message. */
clcnn_status clcnn_conv_implicit_size(clcnn_context *ctx, const char *size);

#endif
