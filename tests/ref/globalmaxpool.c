/* Double-precision reference of AdaptiveMaxPool2d(1), forward with argmax and backward. */
#include "ref.h"

#include <math.h>

void clcnn_ref_globalmaxpool_forward(double *y, int *argmax, const double *x, int NC, int HW) {
    for (int nc = 0; nc < NC; nc++) {
        const double *plane = x + (long)nc * HW;
        double maxval = -INFINITY;
        int best = 0;
        for (int i = 0; i < HW; i++) {
            if (plane[i] > maxval || isnan(plane[i])) {
                maxval = plane[i];
                best = i;
            }
        }
        y[nc] = maxval;
        if (argmax) argmax[nc] = best;
    }
}

void clcnn_ref_globalmaxpool_backward(double *gx, const double *gy, const int *argmax, int NC,
                                      int HW) {
    if (!gx) return;
    for (int nc = 0; nc < NC; nc++)
        gx[(long)nc * HW + argmax[nc]] += gy[nc];
}
