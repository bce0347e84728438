/* Double-precision reference of ReLU, forward and backward (NaN passes through). */
#include "ref.h"

#include <math.h>

void clcnn_ref_relu_forward(double *y, const double *x, int n) {
    for (int i = 0; i < n; i++)
        y[i] = (x[i] > 0.0 || isnan(x[i])) ? x[i] : 0.0;
}

void clcnn_ref_relu_backward(double *gx, const double *gy, const double *y, int n) {
    for (int i = 0; i < n; i++)
        gx[i] += y[i] <= 0.0 ? 0.0 : gy[i];
}
