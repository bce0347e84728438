/* Batch staging from a data set held on the device (src/train.c). */

/* Stages a batch from a data set held on the device as bytes: x[b] = (pixel/255 - mean[c]) *
 * inv_std[c] for sample order[first + b] (or first + b when use_order is 0), with its label.
 * norm holds C means then C inverse standard deviations. */
__kernel void gather_batch(__global float *x, __global uchar *labels_out,
                           __global const uchar *images, __global const uchar *labels,
                           __global const int *order, int use_order, int first, int N, int C,
                           int HW, __global const float *norm) {
    int i = get_global_id(0);
    if (i >= N * C * HW) return;
    int p = i % HW, c = (i / HW) % C, b = i / (HW * C);
    int s = use_order ? order[first + b] : first + b;
    float v = (float)images[((long)s * C + c) * HW + p] / 255.0f;
    x[i] = (v - norm[c]) * norm[C + c];
    if (c == 0 && p == 0) labels_out[b] = labels[s];
}
