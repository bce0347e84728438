/* Double-precision reference of Linear, forward and backward. */
#include "ref.h"

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
