/* The scale layer's kernel (src/layers/scale.c), also its backward: y = x * factor. */
__kernel void scale_f32(__global float *y, __global const float *x, int n, float factor) {
    int i = get_global_id(0);
    if (i < n) y[i] = x[i] * factor;
}
