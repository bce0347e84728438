/* ReLU host side (cl/layers.cl). */
#include "layers.h"

clcnn_status clcnn_relu_forward(clcnn_context *ctx, cl_mem y, int yoff, cl_mem x, int xoff, int n) {
    clcnn_kern *k = clcnn_kernel_must(ctx, "relu_forward");
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, y);
    CLCNN_ARG(&a, yoff);
    CLCNN_ARG(&a, x);
    CLCNN_ARG(&a, xoff);
    CLCNN_ARG(&a, n);
    return clcnn_launch1d(ctx, k, &a, (size_t)n);
}

clcnn_status clcnn_relu_backward(clcnn_context *ctx, cl_mem gx, int gxoff, cl_mem gy, int gyoff,
                                 cl_mem y, int yoff, int n) {
    clcnn_kern *k = clcnn_kernel_must(ctx, "relu_backward");
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, gx);
    CLCNN_ARG(&a, gxoff);
    CLCNN_ARG(&a, gy);
    CLCNN_ARG(&a, gyoff);
    CLCNN_ARG(&a, y);
    CLCNN_ARG(&a, yoff);
    CLCNN_ARG(&a, n);
    return clcnn_launch1d(ctx, k, &a, (size_t)n);
}
