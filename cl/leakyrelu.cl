/* LeakyReLU's kernels (src/layers/leakyrelu.c). */

/* y = x > 0 ? x : x * slope (a NaN passes through, as torch's leaky_relu) */
__kernel void leakyrelu_forward(__global float *y, __global const float *x, float slope, int n) {
    int i = get_global_id(0);
    if (i >= n) return;
    float v = x[i];
    y[i] = v > 0.0f ? v : v * slope;
}

/* gx = x > 0 ? gy : gy * slope (PyTorch's leaky_relu_backward, from the input) */
__kernel void leakyrelu_backward(__global float *gx, __global const float *gy,
                                 __global const float *x, float slope, int n) {
    int i = get_global_id(0);
    if (i >= n) return;
    float g = gy[i];
    gx[i] = x[i] > 0.0f ? g : g * slope;
}
