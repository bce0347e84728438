/* Plain-C double-precision references for every layer, the loss and the optimizers, with
 * PyTorch semantics (NCHW, PyTorch weight layouts). They are the ground truth the OpenCL kernels
 * are tested against, so they are written as obvious loops, never for speed.
 *
 * Conventions: outputs first, dimensions last. Backward functions ADD into their gradient
 * buffers (callers zero them) and skip any gradient pointer that is NULL ("not needed", e.g. the
 * first layer's input gradient). Test code, not part of the library: tests/ref/<kind>.c per
 * layer kind plus loss.c and optim.c, built as the static library clcnn_ref. */
#ifndef CLCNN_TESTS_REF_H
#define CLCNN_TESTS_REF_H

/* y (N,OC,OH,OW) = conv(x (N,C,H,W), w (OC,C,K,K), b (OC) or NULL);
 * OH = (H + 2*pad - K)/stride + 1, OW likewise. Zero padding, no dilation, no groups. */
void clcnn_ref_conv2d_forward(double *y, const double *x, const double *w, const double *b, int N,
                              int C, int H, int W, int OC, int K, int stride, int pad);
/* gx (N,C,H,W), gw (OC,C,K,K), gb (OC) += gradients for gy (N,OC,OH,OW); each may be NULL. */
void clcnn_ref_conv2d_backward(double *gx, double *gw, double *gb, const double *gy,
                               const double *x, const double *w, int N, int C, int H, int W, int OC,
                               int K, int stride, int pad);

/* PyTorch MaxPool2d(K, stride, pad), floor mode: y, argmax (N,C,OH,OW) from x (N,C,H,W),
 * OH = (H + 2*pad - K)/stride + 1. argmax holds the flat index ih*W+iw of the chosen input
 * within its (n,c) plane. As PyTorch's CPU kernel: the index starts at the window's first
 * in-bounds position and the value at -inf, then an element replaces them when it is strictly
 * greater or is a NaN. So ties go to the first maximum in row-major scan order, padding never
 * wins, an all -inf window picks its first in-bounds element, and the LAST NaN of a window wins. */
void clcnn_ref_maxpool2d_forward(double *y, int *argmax, const double *x, int N, int C, int H,
                                 int W, int K, int stride, int pad);
/* gx (N,C,H,W) += gy (N,C,OH,OW) routed through argmax; overlapping windows accumulate. */
void clcnn_ref_maxpool2d_backward(double *gx, const double *gy, const int *argmax, int N, int C,
                                  int H, int W, int K, int stride, int pad);

/* y (N,OUT) = x (N,IN) w^T + b; w (OUT,IN), b (OUT) or NULL. */
void clcnn_ref_linear_forward(double *y, const double *x, const double *w, const double *b, int N,
                              int IN, int OUT);
/* gx (N,IN), gw (OUT,IN), gb (OUT) += gradients for gy (N,OUT); each may be NULL. */
void clcnn_ref_linear_backward(double *gx, double *gw, double *gb, const double *gy,
                               const double *x, const double *w, int N, int IN, int OUT);

/* y = max(x, 0) elementwise over n values; a NaN passes through (PyTorch's clamp_min). */
void clcnn_ref_relu_forward(double *y, const double *x, int n);
/* gx += y > 0 ? gy : 0, written as PyTorch's threshold_backward (y <= 0 ? 0 : gy), which
 * differs only in passing the gradient through where y is NaN. */
void clcnn_ref_relu_backward(double *gx, const double *gy, const double *y, int n);

/* CrossEntropyLoss (log-softmax + NLL, mean over N) of logits (N,K) against labels (N), each in
 * [0,K). Stable for large logits. Returns the mean loss; glogits (N,K), if not NULL, is SET (not
 * added) to d(mean loss)/d(logits) = (softmax - onehot)/N; *correct, if not NULL, is the number
 * of rows whose argmax (first maximum) equals the label. */
double clcnn_ref_cross_entropy(double *glogits, int *correct, const double *logits,
                               const unsigned char *labels, int N, int K);

/* One SGD step over n parameters p with gradients g, exactly PyTorch 1.13's _single_tensor_sgd
 * (maximize off). step is 1 for the first step, when the momentum buffer buf is set to d_p;
 * buf may be NULL when momentum is 0. */
void clcnn_ref_sgd_step(double *p, const double *g, double *buf, int n, double lr, double momentum,
                        double dampening, double weight_decay, int nesterov, int step);
/* One Adam (decoupled = 0, weight decay added to the gradient) or AdamW (decoupled = 1, p scaled
 * by 1 - lr*weight_decay) step, exactly PyTorch 1.13's _single_tensor_adam/_single_tensor_adamw
 * without amsgrad or maximize. m, v are the moment buffers (zero before the first step); step is
 * 1 for the first step. */
void clcnn_ref_adam_step(double *p, const double *g, double *m, double *v, int n, double lr,
                         double beta1, double beta2, double eps, double weight_decay, int decoupled,
                         int step);

#endif
