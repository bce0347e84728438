/* What the convolution's files share (src/layers/conv2d/): the shape helpers and kernel
 * arguments common to several families, each family's rows, and the entry points one family
 * calls in another. conv2d.c holds the layer (syntax, shape, table, plan); direct.c, lanes.c,
 * winograd.c, implicit.c and im2col.c one family of algorithms each, pool.c the backward of a
 * convolution with a MaxPool2d(2) fused into its store. */
#ifndef CLCNN_LAYERS_CONV2D_CONV2D_H
#define CLCNN_LAYERS_CONV2D_CONV2D_H

#include "layers/layer.h"

/* Scratch budget for the im2col matrix: bigger batches run in chunks. A layer whose
 * whole-batch im2col fits KEEP_FLOATS keeps its own copy from the forward for the backward,
 * which saves building it twice per step. */
enum { WORKSPACE_FLOATS = 16 << 20, KEEP_FLOATS = 64 << 20 };

/* pad_input's work per work-item, in padded floats: whole planes up to about this many. */
enum { PAD_ITEM_FLOATS = 256 };

/* The paths of the plan (clcnn_algo.path): the gradients follow the forward's. */
enum { CONV_PATH_DIRECT, CONV_PATH_IM2COL, CONV_PATH_IMPLICIT, CONV_PATH_TUNED };

/* conv2d.c: shapes, scratch and the arguments several families share */

/* The convolution whose forward pass computes this layer's input gradient, when the layer has
 * stride 1 and pad <= K-1: channels swapped, weights flipped, padding K-1-pad. */
int clcnn_conv_grad_shape(const clcnn_conv2d_shape *s, clcnn_conv2d_shape *g);
/* Floats past the padded input that the direct kernels read (in lanes they do not store): the
 * last tile's extra rows (up to 3) and lanes past the edge. */
size_t clcnn_conv_pad_slack(size_t wp);
/* Floats of padded input the direct kernels need for N images of s. */
size_t clcnn_conv_padded_floats(const clcnn_conv2d_shape *s, int N);
/* *cap = max(*cap, need). */
void clcnn_conv_grow(size_t *cap, size_t need);
/* The shape arguments of the kernels that read a padded input (the direct and lanes
 * convolutions, the direct weight gradients): C, Hp, Wp, OC, K, OH, OW. */
void clcnn_conv_padded_args(clcnn_args *a, const clcnn_conv2d_shape *s);
/* grads[woff ..] = the sum of S weight-gradient slices of n floats each, consecutive in part
 * (the split-K weight gradients' partial sums), by gemm_reduce as one n-wide row. */
clcnn_status clcnn_conv_reduce_slices(clcnn_context *ctx, cl_mem grads, int woff, cl_mem part,
                                      int n, int S);
/* io->wflip = the weights flipped as (C, OC, K, K), for the input gradient's convolution. */
clcnn_status clcnn_conv_flip_weights(const clcnn_io *io, const clcnn_conv2d_shape *s);
/* Where the flipped convolution of the input gradient reads gy padded: keep_gpad when gy's
 * reader handed it over so (*padded = 1), else xpad, which it pads itself (*padded = 0). */
cl_mem clcnn_conv_gy_padded(const clcnn_io *io, int *padded);
/* Rules for applies: an unfused node (one layer), a fused convolution + pool, an unfused
 * stride-1 node, and an unfused node whose input gradient is a stride-1 convolution
 * (clcnn_conv_grad_shape). */
int clcnn_conv_single(const clcnn_context *ctx, const clcnn_node *n);
int clcnn_conv_fused(const clcnn_context *ctx, const clcnn_node *n);
int clcnn_conv_s1(const clcnn_context *ctx, const clcnn_node *n);
int clcnn_conv_flips(const clcnn_context *ctx, const clcnn_node *n);

/* direct.c */

/* The direct stride-1 convolution: x padded into xp (unless `padded`: xp already holds it),
 * then, unless y is NULL (padding only), one launch for the batch; with argmax a MaxPool2d(2)
 * rides in the store (y pooled, and into ypad padded by ypad_pad when ypad is set). */
clcnn_status clcnn_conv_direct_s1(clcnn_context *ctx, cl_mem xp, int padded,
                                  const clcnn_conv2d_shape *s, cl_mem y, cl_mem x, cl_mem params,
                                  int woff, int boff, int N, cl_mem argmax, cl_mem ypad,
                                  int ypad_pad, int ypad_only);
/* gx by flip-direct from gy padded in gp (padded: already there; else gy is padded into it). */
clcnn_status clcnn_conv_flip_direct_from(const clcnn_node *n, const clcnn_io *io, cl_mem gy,
                                         cl_mem gp, int padded);
/* A fused node's pool argmax (aux): one int per pooled output. */
void clcnn_conv_pool_ws(const clcnn_context *ctx, const clcnn_node *n, int N, clcnn_node_ws *ws);
extern const clcnn_algo clcnn_conv_direct, clcnn_conv_direct_pool, clcnn_conv_flip_direct;

/* lanes.c */

/* Whether the lanes kernels' best tile wastes at most a quarter of the work on s and s has taps
 * enough (the rule for taking direct-lanes and flip-lanes). */
int clcnn_conv_lanes_suit(const clcnn_conv2d_shape *s);
extern const clcnn_algo clcnn_conv_direct_lanes, clcnn_conv_flip_lanes, clcnn_conv_wgrad_lanes,
    clcnn_conv_wgrad_tuned;

/* winograd.c */

/* Whether the rules take Winograd for s: where they take the direct kernels (CPU devices, no
 * CLCNN_CONV_ALGO) and s has channels enough. */
int clcnn_conv_wino_rule(const clcnn_context *ctx, const clcnn_conv2d_shape *s);
/* gx by flip-winograd from gy padded in gp (padded: already there; else gy is padded into it). */
clcnn_status clcnn_conv_flip_wino_from(const clcnn_node *n, const clcnn_io *io, cl_mem gy,
                                       cl_mem gp, int padded);
/* Whether the Winograd kernels take n's input-gradient convolution. */
int clcnn_conv_flip_wino_fits(const clcnn_node *n);
/* The flipped weights transformed for flip-winograd (wflip). */
void clcnn_conv_flip_wino_ws(const clcnn_context *ctx, const clcnn_node *n, int N,
                             clcnn_node_ws *ws);
extern const clcnn_algo clcnn_conv_winograd, clcnn_conv_winograd_pool, clcnn_conv_flip_winograd;

/* implicit.c */

/* Whether the device runs one of the implicit-GEMM sizes. */
int clcnn_conv_implicit_ok(const clcnn_context *ctx);
extern const clcnn_algo clcnn_conv_implicit, clcnn_conv_wgrad_implicit, clcnn_conv_flip_implicit,
    clcnn_conv_gemm_tuned_fwd, clcnn_conv_gemm_tuned_wgrad, clcnn_conv_gemm_tuned_dgrad;

/* im2col.c */

/* y (N, OC, OH, OW) = conv(x, w) + b by im2col + GEMM + scatter, in chunks; with keep_col the
 * whole batch's im2col stays there for the backward. */
clcnn_status clcnn_conv_forward_im2col(const clcnn_io *io, const clcnn_conv2d_shape *s, cl_mem y,
                                       cl_mem x, cl_mem params, int woff, int boff,
                                       cl_mem keep_col);
/* The im2col backward: with do_w the weight gradient, with do_x the input gradient by col2im. */
clcnn_status clcnn_conv_backward_im2col(const clcnn_node *n, const clcnn_io *io, int do_w,
                                        int do_x);
/* gx by flip-im2col: the flipped convolution of gy through im2col + GEMM, and its scratch. */
clcnn_status clcnn_conv_flip_im2col_run(const clcnn_node *n, const clcnn_io *io);
void clcnn_conv_flip_im2col_ws(const clcnn_context *ctx, const clcnn_node *n, int N,
                               clcnn_node_ws *ws);
/* Floats of im2col matrix and GEMM rows for `chunk` images of s, grown into ws. */
void clcnn_conv_grow_im2col(const clcnn_conv2d_shape *s, size_t chunk, clcnn_node_ws *ws);
/* Images per im2col chunk of s (1..N), bounded by WORKSPACE_FLOATS. */
size_t clcnn_conv_plan_chunk(const clcnn_conv2d_shape *s, int N);

/* The direct weight gradient's split: gy as pixel rows of ocp channels, the batch cut into S
 * slices of nb images. */
typedef struct clcnn_conv_wgrad_plan {
    int ocp, nb, S;
    size_t rows, part; /* floats of ws->rows and ws->col needed */
} clcnn_conv_wgrad_plan;
clcnn_conv_wgrad_plan clcnn_conv_plan_wgrad(const clcnn_context *ctx, const clcnn_conv2d_shape *s,
                                            int N);
/* ws->rows and ws->col for the row GEMM's split of a batch of N (wgrad-rows, wgrad-tuned). */
void clcnn_conv_wgrad_rows_ws(const clcnn_context *ctx, const clcnn_node *n, int N,
                              clcnn_node_ws *ws);

/* The direct weight gradient's operands, for its two kernels and the autotuner. */
typedef struct clcnn_conv_wgrad_args {
    const clcnn_io *io; /* x, the gradient buffer and the weight's offset, the scratch, N */
    const clcnn_conv2d_shape *s;
    clcnn_conv_wgrad_plan plan;
    cl_mem gy;
    int gp;         /* gy's planes padded by gp (keep_gpad, handed over), 0: plain */
    int rows_ready; /* io->rows already holds gy as pixel rows (after a fused pool) */
    cl_mem xp;      /* the padded input: io->xpad, padded here, or the forward's kept copy */
    int padded;     /* xp already holds x padded */
} clcnn_conv_wgrad_args;
/* The operands for gy (plain, or padded by gp in keep_gpad), rows_ready as above. */
clcnn_conv_wgrad_args clcnn_conv_wgrad_args_of(const clcnn_node *n, const clcnn_io *io, cl_mem gy,
                                               int gp, int rows_ready);
/* Pads x into w->xp unless the forward left it there. */
clcnn_status clcnn_conv_wgrad_pad(clcnn_context *ctx, const clcnn_conv_wgrad_args *w);
/* gw by the pixel-row GEMM (wgrad-rows). */
clcnn_status clcnn_conv_wgrad_rows_of(clcnn_context *ctx, const clcnn_conv_wgrad_args *w);
extern const clcnn_algo clcnn_conv_im2col, clcnn_conv_wgrad_im2col, clcnn_conv_col2im,
    clcnn_conv_flip_im2col, clcnn_conv_wgrad_rows;

/* pool.c: the fused node's gradients */
extern const clcnn_algo clcnn_conv_pool_wgrad_rows, clcnn_conv_pool_flip_direct,
    clcnn_conv_pool_flip_winograd;

#endif
