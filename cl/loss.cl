/* Cross-entropy: per-sample losses and gradients, then their sum (src/loss.c). */

/* Per-sample cross-entropy with label smoothing (on = 1 - eps, off = eps / K, both 0 terms when
 * eps is 0): loss[i] = on * (lse - z[label]) + off * sum_k (lse - z[k]), lse = logsumexp(z);
 * correct[i] = argmax == label; glogits = (softmax - (on * onehot + off)) * inv_n when
 * want_grad. Max-shifted, so large logits are safe. */
__kernel void cross_entropy(__global float *loss, __global int *correct, __global float *glogits,
                            __global const float *z, int zoff, __global const uchar *labels,
                            int N, int K, float inv_n, int want_grad, int smooth, float on,
                            float off) {
    int i = get_global_id(0);
    if (i >= N) return;
    __global const float *row = z + zoff + i * K;
    int label = labels[i];
    float m = row[0];
    int best = 0;
    for (int k = 1; k < K; k++)
        if (row[k] > m) m = row[k], best = k;
    float s = 0.0f;
    for (int k = 0; k < K; k++) s += exp(row[k] - m);
    float lse = m + log(s);
    if (smooth) {
        float all = 0.0f;
        for (int k = 0; k < K; k++) all += lse - row[k];
        loss[i] = on * (lse - row[label]) + off * all;
    } else {
        loss[i] = lse - row[label];
    }
    correct[i] = best == label;
    if (want_grad && smooth)
        for (int k = 0; k < K; k++)
            glogits[i * K + k] = (exp(row[k] - lse) - ((k == label ? on : 0.0f) + off)) * inv_n;
    else if (want_grad)
        for (int k = 0; k < K; k++)
            glogits[i * K + k] = (exp(row[k] - lse) - (k == label ? 1.0f : 0.0f)) * inv_n;
}

/* One work-item: acc[0] (+)= sum(loss) / divisor, acc_correct[0] (+)= sum(correct). Sequential so
 * the result does not depend on the device's work-group shape. */
__kernel void loss_reduce(__global float *acc, __global int *acc_correct,
                          __global const float *loss, __global const int *correct, int N,
                          float divisor, int accumulate) {
    if (get_global_id(0) != 0) return;
    float s = 0.0f;
    int c = 0;
    for (int i = 0; i < N; i++) s += loss[i], c += correct[i];
    acc[0] = accumulate ? acc[0] + s / divisor : s / divisor;
    acc_correct[0] = accumulate ? acc_correct[0] + c : c;
}
