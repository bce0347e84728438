/* clcnn's own seeded generator (xoshiro256** seeded through splitmix64): the same seed gives
 * the same stream on every platform, so initial weights and shuffles are repeatable. */
#ifndef CLCNN_RNG_H
#define CLCNN_RNG_H

#include <stdint.h>

typedef struct clcnn_rng {
    uint64_t s[4];
} clcnn_rng;

void clcnn_rng_seed(clcnn_rng *r, uint64_t seed);
uint64_t clcnn_rng_next(clcnn_rng *r);
/* Uniform in [0, 1) with 53 random bits. */
double clcnn_rng_uniform(clcnn_rng *r);
/* Uniform integer in [0, n), n > 0, without modulo bias. */
uint64_t clcnn_rng_below(clcnn_rng *r, uint64_t n);
/* Fisher-Yates shuffle of idx[0..n). */
void clcnn_rng_shuffle(clcnn_rng *r, int *idx, int n);

#endif
