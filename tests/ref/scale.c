/* Scale reference: y = x * factor. */
#include "ref.h"

void clcnn_ref_scale(double *y, const double *x, int n, double factor) {
    for (int i = 0; i < n; i++)
        y[i] += x[i] * (double)(float)factor;
}
