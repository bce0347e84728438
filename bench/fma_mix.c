/* What a direct convolution's inner loop can reach on this CPU, without OpenCL: the fp32 rate
 * of the instruction mixes of clcnn's CPU convolution kernels, written with AVX-512
 * intrinsics over the data of seed's second convolution (32 channels of 20x20 padded rows, 5x5
 * taps, all in L1/L2), every thread at once, as fractions of a pure FMA loop (12 independent
 * chains, no loads: the peak). Mixes, per 16 FMAs of 16 lanes:
 *   direct 8x2   conv_direct_s1: 8 output channels x 2 rows; 2 unaligned input loads and 8
 *                weight broadcasts
 *   no weights   the same without the weight broadcasts (not a convolution: the ceiling of
 *                the input loads alone)
 *   direct 4x4   4 channels x 4 rows: 4 input loads and 4 broadcasts
 *   lanes 16     direct-lanes: 16 channels in the lanes, 1 weight load and 16 fmas that each
 *                broadcast an input value from memory
 * Usage: fma_mix [--threads N] [--seconds S]. x86-64 with AVX-512F only; not part of the test
 * suite. */
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { C = 32, WP = 20, K = 5, TAPS = C * K * K, OC = 8 };

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct buf {
    float x[C * WP * WP + 64] __attribute__((aligned(64)));
    float w[OC * TAPS + 64] __attribute__((aligned(64)));
    float sink;
} buf;

/* One pass over the 800 taps: 16 accumulators, 800 x 16 FMAs of 16 lanes. */
__attribute__((target("avx512f"), noinline)) static void direct_8x2(buf *b, __m512 *a) {
    __m512 A[16];
    for (int i = 0; i < 16; i++)
        A[i] = a[i];
    for (int c = 0; c < C; c++)
        for (int kh = 0; kh < K; kh++) {
            const float *r = b->x + (c * WP + kh) * WP;
            int tap = (c * K + kh) * K;
            for (int kw = 0; kw < K; kw++, tap++) {
                __m512 v0 = _mm512_loadu_ps(r + kw), v1 = _mm512_loadu_ps(r + kw + WP);
#pragma GCC unroll 8
                for (int o = 0; o < 8; o++) {
                    __m512 w = _mm512_set1_ps(b->w[o * TAPS + tap]);
                    A[o] = _mm512_fmadd_ps(w, v0, A[o]);
                    A[8 + o] = _mm512_fmadd_ps(w, v1, A[8 + o]);
                }
            }
        }
    for (int i = 0; i < 16; i++)
        a[i] = A[i];
}

__attribute__((target("avx512f"), noinline)) static void no_weights(buf *b, __m512 *a) {
    __m512 A[16];
    for (int i = 0; i < 16; i++)
        A[i] = a[i];
    for (int c = 0; c < C; c++)
        for (int kh = 0; kh < K; kh++) {
            const float *r = b->x + (c * WP + kh) * WP;
            for (int kw = 0; kw < K; kw++) {
                __m512 v0 = _mm512_loadu_ps(r + kw), v1 = _mm512_loadu_ps(r + kw + WP);
#pragma GCC unroll 8
                for (int o = 0; o < 8; o++) {
                    A[o] = _mm512_fmadd_ps(v1, v0, A[o]);
                    A[8 + o] = _mm512_fmadd_ps(v0, v1, A[8 + o]);
                }
            }
        }
    for (int i = 0; i < 16; i++)
        a[i] = A[i];
}

__attribute__((target("avx512f"), noinline)) static void direct_4x4(buf *b, __m512 *a) {
    __m512 A[16];
    for (int i = 0; i < 16; i++)
        A[i] = a[i];
    for (int c = 0; c < C; c++)
        for (int kh = 0; kh < K; kh++) {
            const float *r = b->x + (c * WP + kh) * WP;
            int tap = (c * K + kh) * K;
            for (int kw = 0; kw < K; kw++, tap++) {
                __m512 v0 = _mm512_loadu_ps(r + kw), v1 = _mm512_loadu_ps(r + kw + WP);
                __m512 v2 = _mm512_loadu_ps(r + kw + 2 * WP), v3 = _mm512_loadu_ps(r + kw + 3 * WP);
#pragma GCC unroll 4
                for (int o = 0; o < 4; o++) {
                    __m512 w = _mm512_set1_ps(b->w[o * TAPS + tap]);
                    A[o * 4] = _mm512_fmadd_ps(w, v0, A[o * 4]);
                    A[o * 4 + 1] = _mm512_fmadd_ps(w, v1, A[o * 4 + 1]);
                    A[o * 4 + 2] = _mm512_fmadd_ps(w, v2, A[o * 4 + 2]);
                    A[o * 4 + 3] = _mm512_fmadd_ps(w, v3, A[o * 4 + 3]);
                }
            }
        }
    for (int i = 0; i < 16; i++)
        a[i] = A[i];
}

__attribute__((target("avx512f"), noinline)) static void lanes_16(buf *b, __m512 *a) {
    __m512 A[16];
    for (int i = 0; i < 16; i++)
        A[i] = a[i];
    const float *wc = b->w;
    for (int c = 0; c < C; c++)
        for (int kh = 0; kh < K; kh++) {
            const float *r = b->x + (c * WP + kh) * WP;
            for (int kw = 0; kw < K; kw++, wc += 8) {
                __m512 w = _mm512_loadu_ps(wc);
                /* hidden from the compiler, so it cannot keep inputs in registers from one kw to
                 * the next and broadcast them from there (on the shuffle port, as PoCL does not):
                 * each fma broadcasts its input from memory, as the OpenCL kernel compiles */
                const float *rr = r + kw;
                __asm__("" : "+r"(rr));
#pragma GCC unroll 16
                for (int q = 0; q < 16; q++)
                    A[q] = _mm512_fmadd_ps(_mm512_set1_ps(rr[q]), w, A[q]);
            }
        }
    for (int i = 0; i < 16; i++)
        a[i] = A[i];
}

/* The peak: 16 independent chains, no memory operands; 800 x 16 FMAs per call too. */
#define PEAK_FMA(j) A[j] = _mm512_fmadd_ps(A[j], m, s)
__attribute__((target("avx512f"), noinline)) static void peak(buf *b, __m512 *a) {
    __m512 A[16];
    for (int i = 0; i < 16; i++)
        A[i] = a[i];
    __m512 m = _mm512_set1_ps(0.999f), s = _mm512_set1_ps(b->sink);
    for (int i = 0; i < TAPS; i++) {
        PEAK_FMA(0), PEAK_FMA(1), PEAK_FMA(2), PEAK_FMA(3), PEAK_FMA(4), PEAK_FMA(5);
        PEAK_FMA(6), PEAK_FMA(7), PEAK_FMA(8), PEAK_FMA(9), PEAK_FMA(10), PEAK_FMA(11);
        PEAK_FMA(12), PEAK_FMA(13), PEAK_FMA(14), PEAK_FMA(15);
    }
    for (int i = 0; i < 16; i++)
        a[i] = A[i];
}

typedef void (*mix_fn)(buf *, __m512 *);
static const struct {
    const char *name;
    mix_fn f;
} mixes[] = {{"peak (no loads)", peak},
             {"direct 8x2", direct_8x2},
             {"no weights", no_weights},
             {"direct 4x4", direct_4x4},
             {"lanes 16", lanes_16}};

typedef struct job {
    mix_fn f;
    double seconds;
    long calls;
    pthread_barrier_t *start;
} job;

__attribute__((target("avx512f"))) static void *run(void *arg) {
    job *j = arg;
    buf *b = aligned_alloc(64, sizeof *b);
    if (!b) return NULL;
    for (int i = 0; i < C * WP * WP + 64; i++)
        b->x[i] = 1e-3f * (float)(i % 7);
    for (int i = 0; i < OC * TAPS + 64; i++)
        b->w[i] = 1e-3f * (float)(i % 5);
    b->sink = 0.5f;
    __m512 a[16];
    for (int i = 0; i < 16; i++)
        a[i] = _mm512_setzero_ps();
    j->f(b, a); /* warm the caches */
    pthread_barrier_wait(j->start);
    double t0 = now();
    long n = 0;
    do {
        for (int i = 0; i < 64; i++)
            j->f(b, a);
        n += 64;
    } while (now() - t0 < j->seconds);
    j->seconds = now() - t0;
    j->calls = n;
    float s = 0;
    for (int i = 0; i < 16; i++)
        s += _mm512_reduce_add_ps(a[i]);
    b->sink = s;
    free(b);
    return NULL;
}

int main(int argc, char **argv) {
    int threads = 2;
    double seconds = 1.0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
            seconds = atof(argv[++i]);
        else
            return fprintf(stderr, "usage: fma_mix [--threads N] [--seconds S]\n"), 2;
    }
    if (threads < 1 || threads > 256 || !(seconds > 0))
        return fprintf(stderr, "fma_mix: --threads 1..256, --seconds > 0\n"), 2;
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f"))
        return fprintf(stderr, "fma_mix: this CPU has no AVX-512F\n"), 1;
    double base = 0;
    printf("%d threads, %.1f s each; GFLOP/s of all threads together, and as a fraction of the "
           "first line\n",
           threads, seconds);
    for (size_t m = 0; m < sizeof mixes / sizeof mixes[0]; m++) {
        pthread_t tid[256];
        job jobs[256];
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, (unsigned)threads);
        for (int t = 0; t < threads; t++) {
            jobs[t] = (job){mixes[m].f, seconds, 0, &start};
            pthread_create(&tid[t], NULL, run, &jobs[t]);
        }
        double rate = 0;
        for (int t = 0; t < threads; t++) {
            pthread_join(tid[t], NULL);
            rate += (double)jobs[t].calls * TAPS * 16 * 32 / jobs[t].seconds * 1e-9;
        }
        pthread_barrier_destroy(&start);
        if (m == 0) base = rate;
        printf("%-16s %7.1f GFLOP/s  %5.1f%%\n", mixes[m].name, rate, 100.0 * rate / base);
    }
    return 0;
}
