/* Double-precision CPU references with PyTorch semantics: conv2d, maxpool2d, linear, relu,
 * cross-entropy, SGD and Adam/AdamW. Deliberately naive loops: these are the ground truth. */
#include "layers/ref.h"

#include <math.h>

#include "common.h"

static int out_size(int in, int K, int stride, int pad) {
    return (in + 2 * pad - K) / stride + 1;
}

void clcnn_ref_conv2d_forward(double *y, const double *x, const double *w, const double *b, int N,
                              int C, int H, int W, int OC, int K, int stride, int pad) {
    int OH = out_size(H, K, stride, pad), OW = out_size(W, K, stride, pad);
    for (int n = 0; n < N; n++) {
        for (int oc = 0; oc < OC; oc++) {
            for (int oh = 0; oh < OH; oh++) {
                for (int ow = 0; ow < OW; ow++) {
                    double sum = b ? b[oc] : 0.0;
                    for (int c = 0; c < C; c++) {
                        for (int kh = 0; kh < K; kh++) {
                            int ih = oh * stride - pad + kh;
                            if (ih < 0 || ih >= H) continue;
                            for (int kw = 0; kw < K; kw++) {
                                int iw = ow * stride - pad + kw;
                                if (iw < 0 || iw >= W) continue;
                                sum += x[((n * C + c) * H + ih) * W + iw] *
                                       w[((oc * C + c) * K + kh) * K + kw];
                            }
                        }
                    }
                    y[((n * OC + oc) * OH + oh) * OW + ow] = sum;
                }
            }
        }
    }
}

void clcnn_ref_conv2d_backward(double *gx, double *gw, double *gb, const double *gy,
                               const double *x, const double *w, int N, int C, int H, int W, int OC,
                               int K, int stride, int pad) {
    int OH = out_size(H, K, stride, pad), OW = out_size(W, K, stride, pad);
    for (int n = 0; n < N; n++) {
        for (int oc = 0; oc < OC; oc++) {
            for (int oh = 0; oh < OH; oh++) {
                for (int ow = 0; ow < OW; ow++) {
                    double g = gy[((n * OC + oc) * OH + oh) * OW + ow];
                    if (gb) gb[oc] += g;
                    for (int c = 0; c < C; c++) {
                        for (int kh = 0; kh < K; kh++) {
                            int ih = oh * stride - pad + kh;
                            if (ih < 0 || ih >= H) continue;
                            for (int kw = 0; kw < K; kw++) {
                                int iw = ow * stride - pad + kw;
                                if (iw < 0 || iw >= W) continue;
                                int xi = ((n * C + c) * H + ih) * W + iw;
                                int wi = ((oc * C + c) * K + kh) * K + kw;
                                if (gx) gx[xi] += g * w[wi];
                                if (gw) gw[wi] += g * x[xi];
                            }
                        }
                    }
                }
            }
        }
    }
}

void clcnn_ref_maxpool2d_forward(double *y, int *argmax, const double *x, int N, int C, int H,
                                 int W, int K, int stride, int pad) {
    int OH = out_size(H, K, stride, pad), OW = out_size(W, K, stride, pad);
    for (int nc = 0; nc < N * C; nc++) {
        const double *plane = x + (long)nc * H * W;
        for (int oh = 0; oh < OH; oh++) {
            for (int ow = 0; ow < OW; ow++) {
                /* Clip the window to the input, as MaxPoolKernel.cpp does: the start of the
                 * clipped window is the index an all -inf (or empty of winners) window reports. */
                int h0 = oh * stride - pad, w0 = ow * stride - pad;
                int h1 = h0 + K < H ? h0 + K : H, w1 = w0 + K < W ? w0 + K : W;
                if (h0 < 0) h0 = 0;
                if (w0 < 0) w0 = 0;
                int best = h0 * W + w0;
                double maxval = -INFINITY;
                for (int ih = h0; ih < h1; ih++) {
                    for (int iw = w0; iw < w1; iw++) {
                        double v = plane[ih * W + iw];
                        if (v > maxval || isnan(v)) {
                            maxval = v;
                            best = ih * W + iw;
                        }
                    }
                }
                int o = (nc * OH + oh) * OW + ow;
                y[o] = maxval;
                if (argmax) argmax[o] = best;
            }
        }
    }
}

void clcnn_ref_maxpool2d_backward(double *gx, const double *gy, const int *argmax, int N, int C,
                                  int H, int W, int K, int stride, int pad) {
    int OH = out_size(H, K, stride, pad), OW = out_size(W, K, stride, pad);
    for (int nc = 0; nc < N * C; nc++) {
        for (int o = 0; o < OH * OW; o++) {
            int i = argmax[nc * OH * OW + o];
            CLCNN_ASSERT(i >= 0 && i < H * W);
            gx[(long)nc * H * W + i] += gy[nc * OH * OW + o];
        }
    }
}

void clcnn_ref_linear_forward(double *y, const double *x, const double *w, const double *b, int N,
                              int IN, int OUT) {
    for (int n = 0; n < N; n++) {
        for (int o = 0; o < OUT; o++) {
            double sum = b ? b[o] : 0.0;
            for (int i = 0; i < IN; i++)
                sum += x[n * IN + i] * w[o * IN + i];
            y[n * OUT + o] = sum;
        }
    }
}

void clcnn_ref_linear_backward(double *gx, double *gw, double *gb, const double *gy,
                               const double *x, const double *w, int N, int IN, int OUT) {
    for (int n = 0; n < N; n++) {
        for (int o = 0; o < OUT; o++) {
            double g = gy[n * OUT + o];
            if (gb) gb[o] += g;
            for (int i = 0; i < IN; i++) {
                if (gx) gx[n * IN + i] += g * w[o * IN + i];
                if (gw) gw[o * IN + i] += g * x[n * IN + i];
            }
        }
    }
}

void clcnn_ref_relu_forward(double *y, const double *x, int n) {
    for (int i = 0; i < n; i++)
        y[i] = (x[i] > 0.0 || isnan(x[i])) ? x[i] : 0.0;
}

void clcnn_ref_relu_backward(double *gx, const double *gy, const double *y, int n) {
    for (int i = 0; i < n; i++)
        gx[i] += y[i] <= 0.0 ? 0.0 : gy[i];
}

double clcnn_ref_cross_entropy(double *glogits, int *correct, const double *logits,
                               const unsigned char *labels, int N, int K) {
    double total = 0.0;
    int hits = 0;
    for (int n = 0; n < N; n++) {
        const double *z = logits + n * K;
        int label = labels[n];
        CLCNN_ASSERT(label < K);
        int best = 0;
        for (int k = 1; k < K; k++) {
            if (z[k] > z[best]) best = k;
        }
        hits += best == label;
        double zmax = z[best], sum = 0.0;
        for (int k = 0; k < K; k++)
            sum += exp(z[k] - zmax);
        /* -log_softmax[label] as log(sum) - (z[label] - zmax): every term stays O(1) however
         * large the logits, so no precision is lost to a large zmax cancelling. */
        total += log(sum) - (z[label] - zmax);
        if (glogits) {
            for (int k = 0; k < K; k++) {
                glogits[n * K + k] = (exp(z[k] - zmax) / sum - (k == label ? 1.0 : 0.0)) / N;
            }
        }
    }
    if (correct) *correct = hits;
    return total / N;
}

void clcnn_ref_sgd_step(double *p, const double *g, double *buf, int n, double lr, double momentum,
                        double dampening, double weight_decay, int nesterov, int step) {
    for (int i = 0; i < n; i++) {
        double d_p = g[i];
        if (weight_decay != 0.0) d_p += weight_decay * p[i];
        if (momentum != 0.0) {
            /* PyTorch creates the buffer as a copy of d_p: no dampening on the first step. */
            if (step == 1) {
                buf[i] = d_p;
            } else {
                buf[i] = momentum * buf[i] + (1.0 - dampening) * d_p;
            }
            d_p = nesterov ? d_p + momentum * buf[i] : buf[i];
        }
        p[i] -= lr * d_p;
    }
}

void clcnn_ref_adam_step(double *p, const double *g, double *m, double *v, int n, double lr,
                         double beta1, double beta2, double eps, double weight_decay, int decoupled,
                         int step) {
    double bias_correction1 = 1.0 - pow(beta1, step);
    double bias_correction2 = 1.0 - pow(beta2, step);
    double step_size = lr / bias_correction1;
    double bias_correction2_sqrt = sqrt(bias_correction2);
    for (int i = 0; i < n; i++) {
        double grad = g[i];
        if (decoupled) {
            p[i] *= 1.0 - lr * weight_decay;
        } else if (weight_decay != 0.0) {
            grad += weight_decay * p[i];
        }
        m[i] = m[i] * beta1 + (1.0 - beta1) * grad;
        v[i] = v[i] * beta2 + (1.0 - beta2) * grad * grad;
        double denom = sqrt(v[i]) / bias_correction2_sqrt + eps;
        p[i] -= step_size * m[i] / denom;
    }
}
