/* MaxPool2d host side: argmax-recording forward, gather backward (cl/layers.cl). */
#include "layers.h"

clcnn_status clcnn_maxpool2d_forward(clcnn_context *ctx, cl_mem y, int yoff, cl_mem argmax,
                                     cl_mem x, int xoff, int NC, int H, int W, int K, int stride,
                                     int pad, int OH, int OW) {
    if (K == 2 && stride == 2 && pad == 0) {
        clcnn_kern *k2 = clcnn_kernel_must(ctx, "maxpool2_forward");
        clcnn_args a = {k2->k, 0, CL_SUCCESS};
        CLCNN_ARG(&a, y);
        CLCNN_ARG(&a, yoff);
        CLCNN_ARG(&a, argmax);
        CLCNN_ARG(&a, x);
        CLCNN_ARG(&a, xoff);
        CLCNN_ARG(&a, NC);
        CLCNN_ARG(&a, H);
        CLCNN_ARG(&a, W);
        CLCNN_ARG(&a, OH);
        CLCNN_ARG(&a, OW);
        return clcnn_launch1d(ctx, k2, &a, (size_t)NC * OH);
    }
    clcnn_kern *k = clcnn_kernel_must(ctx, "maxpool_forward");
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, y);
    CLCNN_ARG(&a, yoff);
    CLCNN_ARG(&a, argmax);
    CLCNN_ARG(&a, x);
    CLCNN_ARG(&a, xoff);
    CLCNN_ARG(&a, NC);
    CLCNN_ARG(&a, H);
    CLCNN_ARG(&a, W);
    CLCNN_ARG(&a, K);
    CLCNN_ARG(&a, stride);
    CLCNN_ARG(&a, pad);
    CLCNN_ARG(&a, OH);
    CLCNN_ARG(&a, OW);
    return clcnn_launch1d(ctx, k, &a, (size_t)NC * OH * OW);
}

clcnn_status clcnn_maxpool2d_backward(clcnn_context *ctx, cl_mem gx, int gxoff, cl_mem gy,
                                      int gyoff, cl_mem argmax, int NC, int H, int W, int K,
                                      int stride, int pad, int OH, int OW) {
    if (K == 2 && stride == 2 && pad == 0) {
        clcnn_kern *k2 = clcnn_kernel_must(ctx, "maxpool2_backward");
        clcnn_args a = {k2->k, 0, CL_SUCCESS};
        CLCNN_ARG(&a, gx);
        CLCNN_ARG(&a, gxoff);
        CLCNN_ARG(&a, gy);
        CLCNN_ARG(&a, gyoff);
        CLCNN_ARG(&a, argmax);
        CLCNN_ARG(&a, NC);
        CLCNN_ARG(&a, H);
        CLCNN_ARG(&a, W);
        CLCNN_ARG(&a, OH);
        CLCNN_ARG(&a, OW);
        return clcnn_launch1d(ctx, k2, &a, (size_t)NC * OH);
    }
    if (stride >= K) {
        clcnn_kern *f = clcnn_kernel_must(ctx, "fill_f32"), *sc;
        int count = NC * H * W;
        float zero = 0.0f;
        clcnn_status st;
        clcnn_args z = {f->k, 0, CL_SUCCESS};
        CLCNN_ARG(&z, gx);
        CLCNN_ARG(&z, gxoff);
        CLCNN_ARG(&z, count);
        CLCNN_ARG(&z, zero);
        if ((st = clcnn_launch1d(ctx, f, &z, (size_t)count))) return st;
        sc = clcnn_kernel_must(ctx, "maxpool_backward_scatter");
        clcnn_args a = {sc->k, 0, CL_SUCCESS};
        CLCNN_ARG(&a, gx);
        CLCNN_ARG(&a, gxoff);
        CLCNN_ARG(&a, gy);
        CLCNN_ARG(&a, gyoff);
        CLCNN_ARG(&a, argmax);
        CLCNN_ARG(&a, NC);
        CLCNN_ARG(&a, H);
        CLCNN_ARG(&a, W);
        CLCNN_ARG(&a, OH);
        CLCNN_ARG(&a, OW);
        return clcnn_launch1d(ctx, sc, &a, (size_t)NC * OH * OW);
    }
    clcnn_kern *k = clcnn_kernel_must(ctx, "maxpool_backward");
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, gx);
    CLCNN_ARG(&a, gxoff);
    CLCNN_ARG(&a, gy);
    CLCNN_ARG(&a, gyoff);
    CLCNN_ARG(&a, argmax);
    CLCNN_ARG(&a, NC);
    CLCNN_ARG(&a, H);
    CLCNN_ARG(&a, W);
    CLCNN_ARG(&a, K);
    CLCNN_ARG(&a, stride);
    CLCNN_ARG(&a, pad);
    CLCNN_ARG(&a, OH);
    CLCNN_ARG(&a, OW);
    return clcnn_launch1d(ctx, k, &a, (size_t)NC * H * W);
}
