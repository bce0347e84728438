/* Double-precision reference of MaxPool2d (floor mode, PyTorch's CPU tie and NaN rules),
 * forward with argmax and backward. */
#include "ref.h"

#include <math.h>

#include "common.h"

static int out_size(int in, int K, int stride, int pad) {
    return (in + 2 * pad - K) / stride + 1;
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
