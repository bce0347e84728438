/* Double-precision reference of AdaptiveAvgPool2d(1): the mean of each plane. */
#include "ref.h"

void clcnn_ref_globalavgpool_forward(double *y, const double *x, int NC, int HW) {
    for (int nc = 0; nc < NC; nc++) {
        double sum = 0.0;
        for (int i = 0; i < HW; i++)
            sum += x[(long)nc * HW + i];
        y[nc] = sum / HW;
    }
}

void clcnn_ref_globalavgpool_backward(double *gx, const double *gy, int NC, int HW) {
    if (!gx) return;
    for (int nc = 0; nc < NC; nc++)
        for (int i = 0; i < HW; i++)
            gx[(long)nc * HW + i] += gy[nc] / HW;
}
