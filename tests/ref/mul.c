/* Double-precision reference of the elementwise product with PyTorch's broadcasting of a
 * [N,C,1,1] factor over [N,C,H,W], on either side, forward and backward. */
#include "ref.h"

/* Element p of plane nc of a factor with hw values a plane: 1 is one value for the plane. */
static long at(int nc, int p, int hw) {
    return (long)nc * hw + (hw == 1 ? 0 : p);
}

void clcnn_ref_mul_forward(double *y, const double *a, const double *b, int N, int C, int hwa,
                           int hwb) {
    int HW = hwa > hwb ? hwa : hwb;
    for (int nc = 0; nc < N * C; nc++)
        for (int p = 0; p < HW; p++)
            y[(long)nc * HW + p] = a[at(nc, p, hwa)] * b[at(nc, p, hwb)];
}

void clcnn_ref_mul_backward(double *ga, double *gb, const double *gy, const double *a,
                            const double *b, int N, int C, int hwa, int hwb) {
    int HW = hwa > hwb ? hwa : hwb;
    for (int nc = 0; nc < N * C; nc++)
        for (int p = 0; p < HW; p++) {
            double g = gy[(long)nc * HW + p];
            if (ga) ga[at(nc, p, hwa)] += g * b[at(nc, p, hwb)];
            if (gb) gb[at(nc, p, hwb)] += g * a[at(nc, p, hwa)];
        }
}
