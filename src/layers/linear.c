/* Linear host side: GEMM plus bias broadcast forward; two GEMMs and a column sum backward. */
#include "layers.h"

#include "gemm.h"

clcnn_status clcnn_linear_forward(clcnn_context *ctx, cl_mem y, int yoff, cl_mem x, int xoff,
                                  cl_mem params, int woff, int boff, int N, int IN, int OUT) {
    clcnn_status st = clcnn_gemm(ctx, 0, 1, N, OUT, IN, 1.0f, x, (size_t)xoff, IN, params,
                                 (size_t)woff, IN, 0.0f, y, (size_t)yoff, OUT);
    if (st || boff < 0) return st;
    clcnn_kern *k = clcnn_kernel_must(ctx, "bias_add");
    int one = 1;
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, y);
    CLCNN_ARG(&a, yoff);
    CLCNN_ARG(&a, params);
    CLCNN_ARG(&a, boff);
    CLCNN_ARG(&a, N);
    CLCNN_ARG(&a, OUT);
    CLCNN_ARG(&a, one);
    return clcnn_launch1d(ctx, k, &a, (size_t)N * OUT);
}

clcnn_status clcnn_linear_backward(clcnn_context *ctx, cl_mem gx, int gxoff, cl_mem grads, int woff,
                                   int boff, cl_mem gy, int gyoff, cl_mem x, int xoff,
                                   cl_mem params, int N, int IN, int OUT) {
    clcnn_status st;
    /* gw[OUT, IN] = gy^T . x */
    st = clcnn_gemm(ctx, 1, 0, OUT, IN, N, 1.0f, gy, (size_t)gyoff, OUT, x, (size_t)xoff, IN, 0.0f,
                    grads, (size_t)woff, IN);
    if (st) return st;
    if (boff >= 0 && (st = clcnn_bias_grad(ctx, grads, boff, gy, gyoff, N, OUT, 1))) return st;
    if (!gx) return CLCNN_SUCCESS;
    /* gx[N, IN] = gy . w */
    return clcnn_gemm(ctx, 0, 0, N, IN, OUT, 1.0f, gy, (size_t)gyoff, OUT, params, (size_t)woff, IN,
                      0.0f, gx, (size_t)gxoff, IN);
}
