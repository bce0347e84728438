/* Element-wise helpers used across the engine: fill, axpy, scale. OpenCL C 1.2.
 * Every buffer argument comes with an element offset, so views into one allocation work
 * without sub-buffers (whose alignment rules differ between devices). */

/* x[off + i] = value for i < n */
__kernel void fill_f32(__global float *x, int off, int n, float value) {
    int i = get_global_id(0);
    if (i < n) x[off + i] = value;
}

/* y[yoff + i] += alpha * x[xoff + i] for i < n */
__kernel void axpy_f32(__global float *y, int yoff, __global const float *x, int xoff, int n,
                       float alpha) {
    int i = get_global_id(0);
    if (i < n) y[yoff + i] = fma(alpha, x[xoff + i], y[yoff + i]);
}
