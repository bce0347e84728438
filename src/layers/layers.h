/* Host side of each layer: kernel launches over device buffers. Buffers are passed as
 * (cl_mem, element offset) pairs so views into one allocation need no sub-buffers. Backward
 * functions overwrite the gradients they produce (each step starts from zero, as after
 * PyTorch's zero_grad). A NULL gx skips the input gradient (the first layer needs none). */
#ifndef CLCNN_LAYERS_H
#define CLCNN_LAYERS_H

#include "context.h"

/* Scratch space the convolutions share: an im2col matrix and a row-per-pixel matrix. Images
 * are processed in chunks so the scratch stays bounded whatever the batch size. */
typedef struct clcnn_workspace {
    cl_mem col;
    size_t col_cap; /* floats */
    cl_mem rows;
    size_t rows_cap;  /* floats */
    cl_mem wflip;     /* flipped weights for the input gradient; NULL: use col2im */
    size_t wflip_cap; /* floats */
    cl_mem xpad;      /* zero-padded input for the direct convolution; NULL: im2col + GEMM */
    size_t xpad_cap;  /* floats */
} clcnn_workspace;

typedef struct clcnn_conv2d_shape {
    int C, H, W, OC, K, stride, pad, OH, OW, bias;
} clcnn_conv2d_shape;

/* Images per chunk for a conv layer given the workspace; 0 when not even one image fits. */
int clcnn_conv2d_chunk(const clcnn_conv2d_shape *s, const clcnn_workspace *ws);
/* The convolution whose forward pass computes this layer's input gradient, when the layer has
 * stride 1 and pad <= K-1: channels swapped, weights flipped, padding K-1-pad. Returns 0 when
 * there is none (then the backward uses col2im). */
int clcnn_conv2d_grad_input_shape(const clcnn_conv2d_shape *s, clcnn_conv2d_shape *g);
/* Floats of padded-input scratch the direct convolution needs for N images, or 0 when the
 * layer does not take that path on this context (it is for stride 1 on CPU devices). */
size_t clcnn_conv2d_direct_scratch(const clcnn_context *ctx, const clcnn_conv2d_shape *s, int N);

/* Floats of rows and col scratch the direct weight gradient needs for N images (gy as pixel
 * rows, per-slice partial sums), or 0 and 0 off the direct path. `pooled`: the layer's output
 * goes through a fused MaxPool2d(2), whose backward always takes the row GEMM. */
void clcnn_conv2d_wgrad_scratch(const clcnn_context *ctx, const clcnn_conv2d_shape *s, int N,
                                int pooled, size_t *rows, size_t *col);

/* Floats of col and rows scratch that `chunk` images of this layer need. */
void clcnn_conv2d_scratch(const clcnn_conv2d_shape *s, int chunk, size_t *col, size_t *rows);

/* y (N,OC,OH,OW) = conv(x (N,C,H,W), w (OC,C,K,K)) + b. keep_col, when not NULL, is a buffer
 * with room for the whole batch's im2col matrix: the forward leaves it there and the backward
 * of the same batch reuses it instead of building it again (pass the same buffer to both).
 * keep_pad does the same for the direct path's padded input (clcnn_conv2d_direct_scratch
 * floats); either may be NULL. */
clcnn_status clcnn_conv2d_forward(clcnn_context *ctx, clcnn_workspace *ws,
                                  const clcnn_conv2d_shape *s, cl_mem y, int yoff, cl_mem x,
                                  int xoff, cl_mem params, int woff, int boff, int N,
                                  cl_mem keep_col, cl_mem keep_pad);
/* Whether this layer's forward can carry a MaxPool2d(2) (kernel 2, stride 2, no padding) in
 * its store: on the direct path. clcnn_conv2d_forward_pool then writes the pooled output
 * (N, OC, OH/2, OW/2) and its argmax exactly as clcnn_maxpool2d_forward would from the
 * unpooled output, which is never written. */
int clcnn_conv2d_can_pool(const clcnn_context *ctx, const clcnn_workspace *ws,
                          const clcnn_conv2d_shape *s, int N);
clcnn_status clcnn_conv2d_forward_pool(clcnn_context *ctx, clcnn_workspace *ws,
                                       const clcnn_conv2d_shape *s, cl_mem y, int yoff,
                                       cl_mem argmax, cl_mem x, int xoff, cl_mem params, int woff,
                                       int boff, int N, cl_mem keep_pad);
/* The backward of a convolution and the MaxPool2d(2) fused into its forward, from the pooled
 * gradient gp (N, OC, OH/2, OW/2) and the pool's argmax, without the pool's own backward:
 * the gradient at the convolution's output goes straight into the pixel rows of the
 * row-GEMM weight gradient, and into gy (N, OC, OH, OW) only when gx is wanted. Possible
 * when clcnn_conv2d_can_pool_backward says so (the direct path, with the row GEMM's scratch
 * sized for `pooled` by clcnn_conv2d_wgrad_scratch, and the input-gradient convolution's). */
int clcnn_conv2d_can_pool_backward(const clcnn_context *ctx, const clcnn_workspace *ws,
                                   const clcnn_conv2d_shape *s, int N, int need_gx);
clcnn_status clcnn_conv2d_backward_pooled(clcnn_context *ctx, clcnn_workspace *ws,
                                          const clcnn_conv2d_shape *s, cl_mem gx, int gxoff,
                                          cl_mem grads, int woff, int boff, cl_mem gp, int gpoff,
                                          cl_mem argmax, cl_mem gy, cl_mem x, int xoff,
                                          cl_mem params, int N, cl_mem keep_pad);
/* gw, gb (into grads at woff/boff) and gx (if gx != NULL) from gy (N,OC,OH,OW). With keep_col
 * the forward's im2col matrix is reused and then overwritten (by the input gradient's); with
 * keep_pad the forward's padded input is reused as it is. */
clcnn_status clcnn_conv2d_backward(clcnn_context *ctx, clcnn_workspace *ws,
                                   const clcnn_conv2d_shape *s, cl_mem gx, int gxoff, cl_mem grads,
                                   int woff, int boff, cl_mem gy, int gyoff, cl_mem x, int xoff,
                                   cl_mem params, int N, cl_mem keep_col, cl_mem keep_pad);

/* gb[boff + c] = sum over n < N and p < hw of g[goff + (n*C + c)*hw + p] (a conv layer's bias
 * gradient; hw = 1 for a linear layer's). */
clcnn_status clcnn_bias_grad(clcnn_context *ctx, cl_mem grads, int boff, cl_mem g, int goff, int N,
                             int C, int hw);

/* MaxPool2d over N*C planes of HxW; argmax (int per output) feeds the backward. */
clcnn_status clcnn_maxpool2d_forward(clcnn_context *ctx, cl_mem y, int yoff, cl_mem argmax,
                                     cl_mem x, int xoff, int NC, int H, int W, int K, int stride,
                                     int pad, int OH, int OW);
clcnn_status clcnn_maxpool2d_backward(clcnn_context *ctx, cl_mem gx, int gxoff, cl_mem gy,
                                      int gyoff, cl_mem argmax, int NC, int H, int W, int K,
                                      int stride, int pad, int OH, int OW);

/* y (N,OUT) = x (N,IN) w^T + b, w (OUT,IN) */
clcnn_status clcnn_linear_forward(clcnn_context *ctx, cl_mem y, int yoff, cl_mem x, int xoff,
                                  cl_mem params, int woff, int boff, int N, int IN, int OUT);
clcnn_status clcnn_linear_backward(clcnn_context *ctx, cl_mem gx, int gxoff, cl_mem grads, int woff,
                                   int boff, cl_mem gy, int gyoff, cl_mem x, int xoff,
                                   cl_mem params, int N, int IN, int OUT);

clcnn_status clcnn_relu_forward(clcnn_context *ctx, cl_mem y, int yoff, cl_mem x, int xoff, int n);
clcnn_status clcnn_relu_backward(clcnn_context *ctx, cl_mem gx, int gxoff, cl_mem gy, int gyoff,
                                 cl_mem y, int yoff, int n);

/* Per-sample cross-entropy over logits (N,K) with byte labels: loss and correct (N each), and
 * glogits = d(mean loss)/d(logits) when glogits != NULL. Then acc[0] (+)= sum(loss)/divisor and
 * acc_correct[0] (+)= sum(correct). */
clcnn_status clcnn_cross_entropy(clcnn_context *ctx, cl_mem loss, cl_mem correct, cl_mem glogits,
                                 cl_mem logits, int zoff, cl_mem labels, int N, int K, cl_mem acc,
                                 cl_mem acc_correct, float divisor, int accumulate);

#endif
