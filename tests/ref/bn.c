/* BatchNorm reference (BatchNorm1d and BatchNorm2d): batch statistics in training, running
 * statistics in evaluation, and the backward of the training forward. */
#include <math.h>
#include <stdlib.h>

#include "ref.h"

/* The mean and biased variance of channel c of x (N,C,HW), two passes. */
static void channel_stats(double *mean, double *var, const double *x, int N, int C, int HW, int c) {
    double s = 0.0, q = 0.0, M = (double)N * HW;
    for (int n = 0; n < N; n++)
        for (int p = 0; p < HW; p++)
            s += x[((size_t)n * C + c) * HW + p];
    *mean = s / M;
    for (int n = 0; n < N; n++)
        for (int p = 0; p < HW; p++) {
            double d = x[((size_t)n * C + c) * HW + p] - *mean;
            q += d * d;
        }
    *var = q / M;
}

/* y = (x - mean) * invstd * w + b over channel c. */
static void normalise(double *y, const double *x, const double *w, const double *b, int N, int C,
                      int HW, int c, double mean, double invstd) {
    for (int n = 0; n < N; n++)
        for (int p = 0; p < HW; p++) {
            size_t i = ((size_t)n * C + c) * HW + p;
            y[i] = (x[i] - mean) * invstd * w[c] + b[c];
        }
}

void clcnn_ref_bn_forward_train(double *y, double *rm, double *rv, const double *x, const double *w,
                                const double *b, int N, int C, int HW, double eps,
                                double momentum) {
    double M = (double)N * HW;
    for (int c = 0; c < C; c++) {
        double mean, var;
        channel_stats(&mean, &var, x, N, C, HW, c);
        normalise(y, x, w, b, N, C, HW, c, mean, 1.0 / sqrt(var + eps));
        if (rm) rm[c] = (1.0 - momentum) * rm[c] + momentum * mean;
        if (rv) rv[c] = (1.0 - momentum) * rv[c] + momentum * var * M / (M - 1.0);
    }
}

void clcnn_ref_bn_forward_eval(double *y, const double *x, const double *w, const double *b,
                               const double *rm, const double *rv, int N, int C, int HW,
                               double eps) {
    for (int c = 0; c < C; c++)
        normalise(y, x, w, b, N, C, HW, c, rm[c], 1.0 / sqrt(rv[c] + eps));
}

void clcnn_ref_bn_backward(double *gx, double *gw, double *gb, const double *gy, const double *x,
                           const double *w, int N, int C, int HW, double eps) {
    double M = (double)N * HW;
    for (int c = 0; c < C; c++) {
        double mean, var, sg = 0.0, sgx = 0.0;
        channel_stats(&mean, &var, x, N, C, HW, c);
        double invstd = 1.0 / sqrt(var + eps);
        for (int n = 0; n < N; n++)
            for (int p = 0; p < HW; p++) {
                size_t i = ((size_t)n * C + c) * HW + p;
                sg += gy[i];
                sgx += gy[i] * (x[i] - mean) * invstd;
            }
        if (gb) gb[c] += sg;
        if (gw) gw[c] += sgx;
        if (!gx) continue;
        for (int n = 0; n < N; n++)
            for (int p = 0; p < HW; p++) {
                size_t i = ((size_t)n * C + c) * HW + p;
                double xhat = (x[i] - mean) * invstd;
                gx[i] += w[c] * invstd / M * (M * gy[i] - sg - xhat * sgx);
            }
    }
}
