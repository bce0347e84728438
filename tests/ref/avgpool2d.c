/* Double-precision reference of AvgPool2d (floor mode, count_include_pad=True). */
#include "ref.h"

static int out_size(int in, int K, int stride, int pad) {
    return (in + 2 * pad - K) / stride + 1;
}

/* The window of output (oh, ow) clipped to the input: rows [*h0, *h1), columns [*w0, *w1). */
static void window(int oh, int ow, int H, int W, int K, int stride, int pad, int *h0, int *h1,
                   int *w0, int *w1) {
    *h0 = oh * stride - pad, *w0 = ow * stride - pad;
    *h1 = *h0 + K < H ? *h0 + K : H, *w1 = *w0 + K < W ? *w0 + K : W;
    if (*h0 < 0) *h0 = 0;
    if (*w0 < 0) *w0 = 0;
}

void clcnn_ref_avgpool2d_forward(double *y, const double *x, int N, int C, int H, int W, int K,
                                 int stride, int pad) {
    int OH = out_size(H, K, stride, pad), OW = out_size(W, K, stride, pad);
    for (int nc = 0; nc < N * C; nc++) {
        const double *plane = x + (long)nc * H * W;
        for (int oh = 0; oh < OH; oh++) {
            for (int ow = 0; ow < OW; ow++) {
                int h0, h1, w0, w1;
                double sum = 0.0;
                window(oh, ow, H, W, K, stride, pad, &h0, &h1, &w0, &w1);
                for (int ih = h0; ih < h1; ih++)
                    for (int iw = w0; iw < w1; iw++)
                        sum += plane[ih * W + iw];
                y[((long)nc * OH + oh) * OW + ow] = sum / (K * K);
            }
        }
    }
}

void clcnn_ref_avgpool2d_backward(double *gx, const double *gy, int N, int C, int H, int W, int K,
                                  int stride, int pad) {
    int OH = out_size(H, K, stride, pad), OW = out_size(W, K, stride, pad);
    if (!gx) return;
    for (int nc = 0; nc < N * C; nc++) {
        for (int oh = 0; oh < OH; oh++) {
            for (int ow = 0; ow < OW; ow++) {
                int h0, h1, w0, w1;
                double g = gy[((long)nc * OH + oh) * OW + ow] / (K * K);
                window(oh, ow, H, W, K, stride, pad, &h0, &h1, &w0, &w1);
                for (int ih = h0; ih < h1; ih++)
                    for (int iw = w0; iw < w1; iw++)
                        gx[((long)nc * H + ih) * W + iw] += g;
            }
        }
    }
}
