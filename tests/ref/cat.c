/* Double-precision reference of torch.cat(xs, dim=1), forward and backward. */
#include "ref.h"

void clcnn_ref_cat_forward(double *y, const double *const *x, const int *c, int n_in, int N,
                           int HW) {
    int C = 0;
    for (int k = 0; k < n_in; k++)
        C += c[k];
    for (int n = 0; n < N; n++)
        for (int k = 0, c0 = 0; k < n_in; c0 += c[k++])
            for (int ch = 0; ch < c[k]; ch++)
                for (int p = 0; p < HW; p++)
                    y[((long)n * C + c0 + ch) * HW + p] = x[k][((long)n * c[k] + ch) * HW + p];
}

void clcnn_ref_cat_backward(double *const *gx, const double *gy, const int *c, int n_in, int N,
                            int HW) {
    int C = 0;
    for (int k = 0; k < n_in; k++)
        C += c[k];
    for (int n = 0; n < N; n++)
        for (int k = 0, c0 = 0; k < n_in; c0 += c[k++]) {
            if (!gx[k]) continue;
            for (int ch = 0; ch < c[k]; ch++)
                for (int p = 0; p < HW; p++)
                    gx[k][((long)n * c[k] + ch) * HW + p] += gy[((long)n * C + c0 + ch) * HW + p];
        }
}
