/* Dropout reference: the mask of cl/dropout.cl, drawn from the same hash. */
#include <stdint.h>

#include "ref.h"

/* lowbias32 of the element index mixed with the seed, as clcnn_dropout_hash in cl/dropout.cl. */
uint32_t clcnn_ref_dropout_hash(uint32_t seed, uint32_t i) {
    uint32_t h = (i * 0x9E3779B9u) ^ seed;
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    h *= 0x846ca68bu;
    h ^= h >> 16;
    return h;
}

/* The index's low 32 bits hashed with the seed, then with the high ones when they are not 0,
 * as clcnn_dropout_hash64. */
uint32_t clcnn_ref_dropout_hash64(uint32_t seed, uint64_t i) {
    uint32_t h = clcnn_ref_dropout_hash(seed, (uint32_t)i);
    return i >> 32 ? clcnn_ref_dropout_hash(h, (uint32_t)(i >> 32)) : h;
}

void clcnn_ref_dropout(double *y, const double *x, int n, uint32_t seed, uint64_t base, double p) {
    float pf = (float)p;
    double scale = p < 1.0 ? (double)(float)(1.0 / (1.0 - p)) : 0.0;
    for (int i = 0; i < n; i++) {
        uint32_t h = clcnn_ref_dropout_hash64(seed, base + (uint64_t)i);
        float u = (float)(h >> 8) * (1.0f / 16777216.0f);
        if (p == 0.0)
            y[i] += x[i];
        else
            y[i] += u >= pf ? x[i] * scale : 0.0;
    }
}
