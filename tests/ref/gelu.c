/* GELU reference (nn.GELU(), the exact form). */
#include <math.h>

#include "ref.h"

void clcnn_ref_gelu_forward(double *y, const double *x, int n) {
    for (int i = 0; i < n; i++)
        y[i] = x[i] * 0.5 * (1.0 + erf(x[i] / sqrt(2.0)));
}

void clcnn_ref_gelu_backward(double *gx, const double *gy, const double *x, int n) {
    const double inv_sqrt_2pi = 1.0 / sqrt(2.0 * 3.14159265358979323846);
    for (int i = 0; i < n; i++) {
        double cdf = 0.5 * (1.0 + erf(x[i] / sqrt(2.0)));
        double pdf = exp(-0.5 * x[i] * x[i]) * inv_sqrt_2pi;
        gx[i] += gy[i] * (cdf + x[i] * pdf);
    }
}
