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

#include <stdint.h>

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

/* PyTorch AvgPool2d(K, stride, pad), floor mode, count_include_pad=True: y (N,C,OH,OW) = the sum
 * of each window's in-bounds elements / (K*K) (with pad <= K/2 no window passes the padding). */
void clcnn_ref_avgpool2d_forward(double *y, const double *x, int N, int C, int H, int W, int K,
                                 int stride, int pad);
/* gx (N,C,H,W) += gy / (K*K) over every window that holds the pixel. */
void clcnn_ref_avgpool2d_backward(double *gx, const double *gy, int N, int C, int H, int W, int K,
                                  int stride, int pad);

/* AdaptiveAvgPool2d(1) over NC planes of HW: y[nc] = the plane's mean; gx += gy[nc] / HW. */
void clcnn_ref_globalavgpool_forward(double *y, const double *x, int NC, int HW);
void clcnn_ref_globalavgpool_backward(double *gx, const double *gy, int NC, int HW);

/* AdaptiveMaxPool2d(1) over NC planes of HW: y, argmax[nc] = the plane's maximum and its index,
 * by the rule of clcnn_ref_maxpool2d_forward (first maximum, the last NaN wins, index 0 for an
 * all -inf plane); gx[argmax] += gy. */
void clcnn_ref_globalmaxpool_forward(double *y, int *argmax, const double *x, int NC, int HW);
void clcnn_ref_globalmaxpool_backward(double *gx, const double *gy, const int *argmax, int NC,
                                      int HW);

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

/* LeakyReLU: y = x > 0 ? x : x * slope over n values (a NaN passes through); gx += x > 0 ? gy :
 * gy * slope, from the input as PyTorch's leaky_relu_backward. */
void clcnn_ref_leakyrelu_forward(double *y, const double *x, int n, double slope);
void clcnn_ref_leakyrelu_backward(double *gx, const double *gy, const double *x, int n,
                                  double slope);

/* GELU, exact: y = x * Phi(x) over n values; gx += gy * (Phi(x) + x * phi(x)). */
void clcnn_ref_gelu_forward(double *y, const double *x, int n);
void clcnn_ref_gelu_backward(double *gx, const double *gy, const double *x, int n);

/* The dropout hash of cl/dropout.cl: element i of a step is kept when (hash >> 8) / 2^24 >= p.
 * clcnn_ref_dropout_hash64 takes the 64-bit index; below 2^32 it is clcnn_ref_dropout_hash. */
uint32_t clcnn_ref_dropout_hash(uint32_t seed, uint32_t i);
uint32_t clcnn_ref_dropout_hash64(uint32_t seed, uint64_t i);
/* y += x masked and scaled by 1/(1-p) (in float, as the device) with the mask of `seed`, x[k]
 * being element base + k of the step's batch; p = 0: y += x. Also the backward, applied to the
 * gradient. */
void clcnn_ref_dropout(double *y, const double *x, int n, uint32_t seed, uint64_t base, double p);

/* y += x * factor (the factor rounded to float, as the device takes it). Also the backward. */
void clcnn_ref_scale(double *y, const double *x, int n, double factor);

/* The sum of n_in values of n elements each (PyTorch's x[0] + x[1] + ...): y (SET) = the sum;
 * gx[k] += gy for each k, a NULL gx[k] skipped. */
void clcnn_ref_add_forward(double *y, const double *const *x, int n_in, int n);
void clcnn_ref_add_backward(double *const *gx, const double *gy, int n_in, int n);

/* torch.cat(x, dim=1): y (N, C, HW) (SET), C = the sum of c[k], from x[k] (N, c[k], HW) for
 * k < n_in, channel after channel in order (HW = 1 for flat features); gx[k] += its channel
 * slice of gy (N, C, HW), a NULL gx[k] skipped. */
void clcnn_ref_cat_forward(double *y, const double *const *x, const int *c, int n_in, int N,
                           int HW);
void clcnn_ref_cat_backward(double *const *gx, const double *gy, const int *c, int n_in, int N,
                            int HW);

/* torch.mul(a, b) with broadcasting: y (N, C, HW) (SET) = a (N, C, hwa) * b (N, C, hwb), where
 * hwa and hwb are each HW = max(hwa, hwb) or 1 (a [N,C,1,1] factor broadcast over its plane,
 * on either side; hwa = hwb = 1 also for flat features). ga += gy * b and gb += gy * a, each
 * summed over the plane where its factor was broadcast; either may be NULL. */
void clcnn_ref_mul_forward(double *y, const double *a, const double *b, int N, int C, int hwa,
                           int hwb);
void clcnn_ref_mul_backward(double *ga, double *gb, const double *gy, const double *a,
                            const double *b, int N, int C, int hwa, int hwb);

/* BatchNorm1d/2d on x (N,C,HW), HW = H*W (1 for flat features): y (SET) = (x - mean) * invstd *
 * w + b per channel, invstd = 1/sqrt(var + eps). Training takes the batch's mean and biased
 * variance (two passes) and moves the running statistics rm, rv (C each; either may be NULL):
 * rm = (1-momentum)*rm + momentum*mean, rv likewise with the unbiased variance var*M/(M-1),
 * M = N*HW. Evaluation takes mean = rm, var = rv and changes nothing. */
void clcnn_ref_bn_forward_train(double *y, double *rm, double *rv, const double *x, const double *w,
                                const double *b, int N, int C, int HW, double eps, double momentum);
void clcnn_ref_bn_forward_eval(double *y, const double *x, const double *w, const double *b,
                               const double *rm, const double *rv, int N, int C, int HW,
                               double eps);
/* The training forward's backward: gb += sum gy, gw += sum gy * xhat and
 * gx += w * invstd / M * (M*gy - sum gy - xhat * sum gy*xhat), per channel, the statistics
 * taken again from x; each may be NULL. */
void clcnn_ref_bn_backward(double *gx, double *gw, double *gb, const double *gy, const double *x,
                           const double *w, int N, int C, int HW, double eps);

/* CrossEntropyLoss (log-softmax + NLL, mean over N) of logits (N,K) against labels (N), each in
 * [0,K). Stable for large logits. Returns the mean loss; glogits (N,K), if not NULL, is SET (not
 * added) to d(mean loss)/d(logits) = (softmax - onehot)/N; *correct, if not NULL, is the number
 * of rows whose argmax (first maximum) equals the label. */
double clcnn_ref_cross_entropy(double *glogits, int *correct, const double *logits,
                               const unsigned char *labels, int N, int K);
/* The same as nn.CrossEntropyLoss(label_smoothing=eps): (1-eps) * NLL + eps/K * sum_k
 * -log_softmax[k], mean over N; glogits = (softmax - ((1-eps) * onehot + eps/K))/N. */
double clcnn_ref_cross_entropy_ls(double *glogits, int *correct, const double *logits,
                                  const unsigned char *labels, int N, int K, double eps);

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
