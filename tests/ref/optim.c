/* Double-precision references of PyTorch 1.13's SGD and Adam/AdamW steps. */
#include "ref.h"

#include <math.h>

void clcnn_ref_sgd_step(double *p, const double *g, double *buf, int n, double lr, double momentum,
                        double dampening, double weight_decay, int nesterov, int step) {
    for (int i = 0; i < n; i++) {
        double d_p = g[i];
        if (weight_decay != 0.0) d_p += weight_decay * p[i];
        if (momentum != 0.0) {
            /* PyTorch creates the buffer as a copy of d_p: no dampening on the first step. */
            if (step == 1) {
                buf[i] = d_p;
            } else {
                buf[i] = momentum * buf[i] + (1.0 - dampening) * d_p;
            }
            d_p = nesterov ? d_p + momentum * buf[i] : buf[i];
        }
        p[i] -= lr * d_p;
    }
}

void clcnn_ref_adam_step(double *p, const double *g, double *m, double *v, int n, double lr,
                         double beta1, double beta2, double eps, double weight_decay, int decoupled,
                         int step) {
    double bias_correction1 = 1.0 - pow(beta1, step);
    double bias_correction2 = 1.0 - pow(beta2, step);
    double step_size = lr / bias_correction1;
    double bias_correction2_sqrt = sqrt(bias_correction2);
    for (int i = 0; i < n; i++) {
        double grad = g[i];
        if (decoupled) {
            p[i] *= 1.0 - lr * weight_decay;
        } else if (weight_decay != 0.0) {
            grad += weight_decay * p[i];
        }
        m[i] = m[i] * beta1 + (1.0 - beta1) * grad;
        v[i] = v[i] * beta2 + (1.0 - beta2) * grad * grad;
        double denom = sqrt(v[i]) / bias_correction2_sqrt + eps;
        p[i] -= step_size * m[i] / denom;
    }
}
