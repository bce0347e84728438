/* The layer registry: one line per layer kind. Each line X(UPPER, lower, KERNELS) declares the
 * kind CLCNN_LAYER_UPPER, whose unit is src/layers/lower.c (host side: spec syntax, shapes,
 * parameters, plan, forward, backward; it defines clcnn_lower_syntax and clcnn_lower_ops),
 * cl/lower.cl (its kernels, each named in KERNELS as K(name): the context resolves them into
 * its kernel table as CLCNN_K_name) and tests/ref/lower.c (the double-precision reference).
 * Adding a layer adds its line here and nothing else outside its own files. The order is the
 * order of the enum. add is the residual block's sum without the block: its unit is res.c. */
#ifndef CLCNN_LAYERS_REGISTRY_H
#define CLCNN_LAYERS_REGISTRY_H

/* clang-format off */
#define CLCNN_LAYER_LIST(X, K)                                                                     \
    X(CONV2D, conv2d, K(im2col) K(rows_to_nchw_bias) K(nchw_to_rows) K(col2im) K(flip_weights)     \
      K(pad_input) K(conv_direct_s1) K(conv_direct_s1_w8) K(conv_bcast_s1)                        \
      K(conv_bcast_s1_w28) K(conv_bcast_s1_w14) K(conv_bcast_s1_3x3) K(weights_to_lanes)         \
      K(conv_implicit) K(conv_wgrad_implicit) K(conv_implicit_32) K(conv_wgrad_implicit_32)        \
      K(conv_implicit_128) K(conv_wgrad_implicit_128) K(conv_implicit_w8)                          \
      K(conv_wgrad_implicit_w8) K(conv_wgrad_s1) K(gy_to_rows_pad)                                 \
      K(conv_wgrad_rows) K(pool2_grad_to_rows) K(pool2_grad_nchw)                                  \
      K(conv_wgrad_pool_rows) K(conv_wgrad_rows64) K(conv_wgrad_pool_chunks)                       \
      K(wino5_weights) K(conv_wino5) K(conv_wino5_w4))                                             \
    X(MAXPOOL2D, maxpool2d, K(maxpool_forward) K(maxpool2_forward) K(maxpool2_forward_px)          \
      K(maxpool_backward) K(maxpool2_backward) K(maxpool_backward_scatter))                        \
    X(RELU, relu, K(relu_forward) K(relu_backward))                                                \
    X(FLATTEN, flatten, )                                                                          \
    X(LINEAR, linear, K(bias_add))                                                                 \
    X(GELU, gelu, K(gelu_forward) K(gelu_backward))                                                \
    X(DROPOUT, dropout, K(dropout_forward))                                                        \
    X(SCALE, scale, K(scale_f32))                                                                  \
    X(RES, res, K(add_f32) K(add_f32_pad) K(copy_f32))                                             \
    X(BATCHNORM, bn, K(bn_stats_partial) K(bn_stats_reduce) K(bn_forward_apply)                    \
      K(bn_backward_partial) K(bn_backward_reduce) K(bn_backward_apply))                           \
    X(AVGPOOL2D, avgpool2d, K(avgpool_forward) K(avgpool_backward))                                \
    X(GLOBALAVGPOOL, globalavgpool, K(globalavgpool_forward) K(globalavgpool_backward))            \
    X(GLOBALMAXPOOL, globalmaxpool, K(globalmaxpool_forward) K(globalmaxpool_backward))        \
    X(ADD, add, )                                                                                  \
    X(CAT, cat, K(copy_slice))                                                                     \
    X(MUL, mul, K(mul_bcast) K(mul_bcast_grad))                                                   \
    X(LEAKYRELU, leakyrelu, K(leakyrelu_forward) K(leakyrelu_backward))
/* clang-format on */

/* For CLCNN_LAYER_LIST's K when the kernels are not wanted. */
#define CLCNN_LAYER_NO_KERNELS_(name)

#endif
