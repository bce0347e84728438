/* The channel concatenation's kernel (src/layers/cat.c). */

/* dst[n*dst_ps + dst_off + i] = src[n*src_ps + src_off + i] for n < total / count and
 * i < count: one input's block of each sample into its channel slice of the output (forward),
 * or back out of it (backward). ps: floats per sample. */
__kernel void copy_slice(__global float *dst, int dst_ps, int dst_off, __global const float *src,
                         int src_ps, int src_off, int count, int total) {
    int g = get_global_id(0);
    if (g >= total) return;
    int n = g / count, i = g - n * count;
    dst[(long)n * dst_ps + dst_off + i] = src[(long)n * src_ps + src_off + i];
}
