/* Optimizer updates over the single parameter allocation: one launch updates every tensor.
 * The arithmetic follows PyTorch 1.13's single-tensor implementations step for step. */

/* Weight decay applies to the first n_decay parameters only (the weights first, then biases and
 * BatchNorm parameters: --no-decay-bn-bias puts the second group's decay at 0).
 *
 * SGD: d = g + wd*p; buf = first ? d : momentum*buf + (1-dampening)*d;
 * d = nesterov ? d + momentum*buf : buf (when momentum != 0); p -= lr*d.
 * one_minus_damp is computed on the host in double, as PyTorch's Python scalars are. */
__kernel void sgd_step(__global float *p, __global const float *g, __global float *buf, int n,
                       float lr, float momentum, float one_minus_damp, float weight_decay,
                       int n_decay, int nesterov, int first) {
    int i = get_global_id(0);
    if (i >= n) return;
    float d = g[i];
    if (weight_decay != 0.0f && i < n_decay) d = d + weight_decay * p[i];
    if (momentum != 0.0f) {
        float b = first ? d : buf[i] * momentum + one_minus_damp * d;
        buf[i] = b;
        d = nesterov ? d + momentum * b : b;
    }
    p[i] = p[i] - lr * d;
}

/* Adam / AdamW: p *= decay (AdamW: 1 - lr*wd, else 1); g += wd*p (Adam only);
 * m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g; p -= step_size * m / (sqrt(v)/bc2_sqrt + eps),
 * step_size = lr / (1 - b1^t), bc2_sqrt = sqrt(1 - b2^t); the scalars come from the host,
 * computed in double as PyTorch does. */
__kernel void adam_step(__global float *p, __global const float *g, __global float *m,
                        __global float *v, int n, float beta1, float one_minus_b1, float beta2,
                        float one_minus_b2, float eps, float weight_decay, float decay,
                        int n_decay, float step_size, float bc2_sqrt) {
    int i = get_global_id(0);
    if (i >= n) return;
    int dec = i < n_decay;
    float pi = dec ? p[i] * decay : p[i], gi = g[i];
    if (weight_decay != 0.0f && dec) gi = gi + weight_decay * pi;
    float mi = m[i] * beta1 + one_minus_b1 * gi;
    float vi = v[i] * beta2 + one_minus_b2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    float denom = sqrt(vi) / bc2_sqrt + eps;
    p[i] = pi - step_size * (mi / denom);
}
