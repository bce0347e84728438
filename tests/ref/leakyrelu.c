/* Double-precision reference of LeakyReLU, forward and backward (NaN passes through). */
#include "ref.h"

void clcnn_ref_leakyrelu_forward(double *y, const double *x, int n, double slope) {
    for (int i = 0; i < n; i++)
        y[i] = x[i] > 0.0 ? x[i] : x[i] * slope;
}

void clcnn_ref_leakyrelu_backward(double *gx, const double *gy, const double *x, int n,
                                  double slope) {
    for (int i = 0; i < n; i++)
        gx[i] += x[i] > 0.0 ? gy[i] : gy[i] * slope;
}
