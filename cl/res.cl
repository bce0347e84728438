/* The residual block's kernels (src/layers/res.c): the sum at its end, and the copy that hands
 * its output gradient to both addends. */

/* y = a + b */
__kernel void add_f32(__global float *y, __global const float *a, __global const float *b, int n) {
    int i = get_global_id(0);
    if (i < n) y[i] = a[i] + b[i];
}

/* y = x */
__kernel void copy_f32(__global float *y, __global const float *x, int n) {
    int i = get_global_id(0);
    if (i < n) y[i] = x[i];
}
