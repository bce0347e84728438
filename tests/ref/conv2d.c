/* Double-precision reference of Conv2d (zero padding, no dilation or groups), forward and
 * backward: naive loops, the ground truth for cl/ and src/layers/conv2d.c. */
#include "ref.h"

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
