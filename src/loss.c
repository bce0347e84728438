/* CrossEntropyLoss host side: per-sample kernel, then a sequential reduction (cl/loss.cl). */
#include "loss.h"

clcnn_status clcnn_cross_entropy(clcnn_context *ctx, cl_mem loss, cl_mem correct, cl_mem glogits,
                                 cl_mem logits, int zoff, cl_mem labels, int N, int K, cl_mem acc,
                                 cl_mem acc_correct, float divisor, int accumulate,
                                 double smoothing, int grad_n) {
    clcnn_kern *k = clcnn_kernel(ctx, CLCNN_K_cross_entropy);
    clcnn_kern *r = clcnn_kernel(ctx, CLCNN_K_loss_reduce);
    int want_grad = glogits != NULL;
    float inv_n = 1.0f / (float)grad_n;
    /* PyTorch's (1 - label_smoothing) and label_smoothing / n_classes: doubles, then fp32
     * scalars against fp32 tensors. 0 keeps the plain kernel path, bit for bit. */
    int smooth = smoothing > 0;
    float on = (float)(1.0 - smoothing), off = (float)(smoothing / K);
    cl_mem g = glogits ? glogits : loss; /* any valid buffer: the kernel does not touch it */
    clcnn_status st;
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, loss);
    CLCNN_ARG(&a, correct);
    CLCNN_ARG(&a, g);
    CLCNN_ARG(&a, logits);
    CLCNN_ARG(&a, zoff);
    CLCNN_ARG(&a, labels);
    CLCNN_ARG(&a, N);
    CLCNN_ARG(&a, K);
    CLCNN_ARG(&a, inv_n);
    CLCNN_ARG(&a, want_grad);
    CLCNN_ARG(&a, smooth);
    CLCNN_ARG(&a, on);
    CLCNN_ARG(&a, off);
    if ((st = clcnn_launch1d(ctx, k, &a, (size_t)N))) return st;
    clcnn_args b = {r->k, 0, CL_SUCCESS};
    CLCNN_ARG(&b, acc);
    CLCNN_ARG(&b, acc_correct);
    CLCNN_ARG(&b, loss);
    CLCNN_ARG(&b, correct);
    CLCNN_ARG(&b, N);
    CLCNN_ARG(&b, divisor);
    CLCNN_ARG(&b, accumulate);
    return clcnn_launch1d(ctx, r, &b, 1);
}
