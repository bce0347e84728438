/* Dropout's kernels (src/layers/dropout.c). The mask is not stored: element i of a step is kept
 * (i counted over the step's whole batch, base + the local index, a 64-bit count held as two
 * uints) when the 24-bit uniform from clcnn_dropout_hash64(seed, i) is >= p, and the backward
 * draws it again from the same seed. tests/ref/dropout.c holds the same hash. */

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

/* The hash of element hi * 2^32 + lo: that of lo, hashed again with hi when hi is not 0, so an
 * index below 2^32 draws what it always drew and the 2^32 indices of each higher block draw a
 * permutation of its own, not a repeat of the first block's masks. */
uint clcnn_dropout_hash64(uint seed, uint lo, uint hi) {
    uint h = clcnn_dropout_hash(seed, lo);
    return hi ? clcnn_dropout_hash(h, hi) : h;
}

/* y = keep ? x * scale : 0 (training); scale = 1 / (1 - p), 0 when p = 1. The element's index
 * over the step's batch is (base_hi * 2^32 + base_lo) + i, carried in uint arithmetic. */
__kernel void dropout_forward(__global float *y, __global const float *x, int n, uint seed,
                              uint base_lo, uint base_hi, float p, float scale) {
    int i = get_global_id(0);
    if (i >= n) return;
    uint lo = base_lo + (uint)i, hi = base_hi + (lo < base_lo ? 1u : 0u);
    float u = (float)(clcnn_dropout_hash64(seed, lo, hi) >> 8) * (1.0f / 16777216.0f);
    y[i] = u >= p ? x[i] * scale : 0.0f;
}
