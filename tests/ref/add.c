/* Double-precision reference of the sum of values (PyTorch's a + b + ...), forward and
 * backward. */
#include "ref.h"

void clcnn_ref_add_forward(double *y, const double *const *x, int n_in, int n) {
    for (int i = 0; i < n; i++) {
        double sum = x[0][i];
        for (int k = 1; k < n_in; k++)
            sum += x[k][i];
        y[i] = sum;
    }
}

void clcnn_ref_add_backward(double *const *gx, const double *gy, int n_in, int n) {
    for (int k = 0; k < n_in; k++) {
        if (!gx[k]) continue;
        for (int i = 0; i < n; i++)
            gx[k][i] += gy[i];
    }
}
