/* xoshiro256** (Blackman and Vigna), seeded through splitmix64. */
#include "rng.h"

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void clcnn_rng_seed(clcnn_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

uint64_t clcnn_rng_next(clcnn_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double clcnn_rng_uniform(clcnn_rng *r) {
    return (double)(clcnn_rng_next(r) >> 11) * 0x1.0p-53;
}

uint64_t clcnn_rng_below(clcnn_rng *r, uint64_t n) {
    /* Rejection keeps every value equally likely. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n, x;
    do
        x = clcnn_rng_next(r);
    while (x >= limit);
    return x % n;
}

void clcnn_rng_shuffle(clcnn_rng *r, int *idx, int n) {
    for (int i = n - 1; i > 0; i--) {
        int j = (int)clcnn_rng_below(r, (uint64_t)i + 1);
        int t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
    }
}
