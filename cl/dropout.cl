/* Dropout's kernels (src/layers/dropout.c). The mask is not stored: element i of a step is kept
 * (i counted over the step's whole batch, base + the local index) when the 24-bit uniform from
 * clcnn_dropout_hash(seed, i) is >= p, and the backward draws it
 * again from the same seed. tests/ref/dropout.c holds the same hash. */

/* lowbias32 (Chris Wellons' integer hash) of the element index mixed with the seed. */
uint clcnn_dropout_hash(uint seed, uint i) {
    uint h = i * 0x9E3779B9u ^ seed;
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    h *= 0x846ca68bu;
    h ^= h >> 16;
    return h;
}

/* y = keep ? x * scale : 0 (training); scale = 1 / (1 - p), 0 when p = 1 */
__kernel void dropout_forward(__global float *y, __global const float *x, int n, uint seed,
                              uint base, float p, float scale) {
    int i = get_global_id(0);
    if (i >= n) return;
    float u = (float)(clcnn_dropout_hash(seed, base + (uint)i) >> 8) * (1.0f / 16777216.0f);
    y[i] = u >= p ? x[i] * scale : 0.0f;
}
