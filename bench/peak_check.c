/* Cross-checks clcnn_context_measure_peak against an independent fp32 FMA loop in C: 12
 * independent AVX-512 (else AVX2/FMA) chains per thread, one thread per core, alternated with
 * the probe a few times. Exits 1 when the median ratio probe / C is outside [0.9, 1.1].
 * Usage: peak_check [--platform P] [--device D] [--threads N] [--rounds R] [N]
 * (CLCNN_VISIBLE_DEVICES applies as for clcnn_train). On a non-CPU device only the probe runs.
 * Not part of the test suite. */
#include <immintrin.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clcnn.h"

#define CHAINS 12 /* > latency (4) x ports (2): enough independent FMAs in flight */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Written out: GCC at -O2 keeps a looped c[] in memory, one load and store per FMA. */
#define FMA12(f)                                                                                   \
    c[0] = f(c[0], m, b), c[1] = f(c[1], m, b), c[2] = f(c[2], m, b), c[3] = f(c[3], m, b);        \
    c[4] = f(c[4], m, b), c[5] = f(c[5], m, b), c[6] = f(c[6], m, b), c[7] = f(c[7], m, b);        \
    c[8] = f(c[8], m, b), c[9] = f(c[9], m, b), c[10] = f(c[10], m, b), c[11] = f(c[11], m, b)

/* Set at run time so no compiler can fold the chains; each lane and chain starts apart. */
static volatile float g_seed = 0.5f, g_mul = 0.999f;
static volatile float g_sink;

__attribute__((target("avx512f"))) static float fma_avx512(long iters) {
    __m512 c[CHAINS], m = _mm512_set1_ps(g_mul), b = _mm512_set1_ps(g_seed);
    for (int j = 0; j < CHAINS; j++)
        c[j] = _mm512_add_ps(
            b, _mm512_set_ps(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, (float)j));
    for (long i = 0; i < iters; i++) {
        FMA12(_mm512_fmadd_ps);
    }
    for (int j = 1; j < CHAINS; j++)
        c[0] = _mm512_add_ps(c[0], c[j]);
    return _mm512_reduce_add_ps(c[0]);
}

__attribute__((target("avx2,fma"))) static float fma_avx2(long iters) {
    __m256 c[CHAINS], m = _mm256_set1_ps(g_mul), b = _mm256_set1_ps(g_seed);
    for (int j = 0; j < CHAINS; j++)
        c[j] = _mm256_add_ps(b, _mm256_set_ps(7, 6, 5, 4, 3, 2, 1, (float)j));
    for (long i = 0; i < iters; i++) {
        FMA12(_mm256_fmadd_ps);
    }
    for (int j = 1; j < CHAINS; j++)
        c[0] = _mm256_add_ps(c[0], c[j]);
    float l[8];
    _mm256_storeu_ps(l, c[0]);
    return l[0] + l[1] + l[2] + l[3] + l[4] + l[5] + l[6] + l[7];
}

static int g_width; /* floats per vector: 16 (AVX-512F), 8 (AVX2+FMA) or 0 (neither) */

/* Work is handed out in chunks, 8 per thread, as PoCL hands out the probe's work-items: a thread
 * slowed by a neighbour on a shared machine takes fewer, as it would in the probe. */
typedef struct job {
    long iters; /* per chunk */
    int chunks;
    atomic_int next;
} job;

typedef struct worker {
    pthread_t id;
    job *job;
    float out;
} worker;

static void *run_worker(void *arg) {
    worker *w = arg;
    while (atomic_fetch_add(&w->job->next, 1) < w->job->chunks)
        w->out += g_width == 16 ? fma_avx512(w->job->iters) : fma_avx2(w->job->iters);
    return NULL;
}

/* Seconds for `threads` threads to run threads * 8 chunks of `iters` iterations, < 0 on failure. */
static double c_run(int threads, long iters) {
    worker *w = calloc((size_t)threads, sizeof *w);
    job jb = {iters, threads * 8, 0};
    if (!w) return -1;
    double t0 = now();
    int started = 0;
    for (; started < threads; started++) {
        w[started].job = &jb;
        if (pthread_create(&w[started].id, NULL, run_worker, &w[started])) break;
    }
    float s = 0;
    for (int i = 0; i < started; i++) {
        pthread_join(w[i].id, NULL);
        s += w[i].out;
    }
    double t = now() - t0;
    g_sink = s;
    free(w);
    return started < threads ? -1 : t;
}

/* The C loop's GFLOP/s, timed as the probe is: the work grows until a run lasts 20 ms, then the
 * fastest of three runs of about 70 ms. */
static double c_peak(int threads) {
    long iters = 64;
    double t = c_run(threads, iters), best = -1;
    for (int run = 0; run < 40 && t > 0 && t < 0.02; run++)
        t = c_run(threads, iters *= t < 0.0025 ? 8 : 2);
    if (t <= 0) return -1;
    iters = (long)(iters * (0.07 / t)) + 1;
    for (int run = 0; run < 3; run++) {
        if ((t = c_run(threads, iters)) <= 0) return -1;
        double g = threads * 8.0 * (double)iters * CHAINS * g_width * 2.0 / t * 1e-9;
        best = g > best ? g : best;
    }
    return best;
}

/* A pause between the two sides, so that threads one runtime leaves spinning after a run (TBB's,
 * in Intel's CPU runtime) do not eat into the other side's time. */
static void settle(void) {
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int platform = -1, device = -1, rounds = 5;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = cpus > 0 ? (int)cpus : 1;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int *dst = !strcmp(o, "--platform")  ? &platform
                   : !strcmp(o, "--device")  ? &device
                   : !strcmp(o, "--threads") ? &threads
                   : !strcmp(o, "--rounds")  ? &rounds
                                             : NULL;
        if (!dst && o[0] != '-') {
            threads = atoi(o);
            continue;
        }
        if (!dst || !v) {
            fprintf(stderr, "usage: peak_check [--platform P] [--device D] [--threads N] "
                            "[--rounds R] [N]\n");
            return 2;
        }
        *dst = atoi(v);
        i++;
    }
    if (threads <= 0 || rounds <= 0 || rounds > 64) {
        fprintf(stderr, "peak_check: threads and rounds (<= 64) must be positive\n");
        return 2;
    }
    __builtin_cpu_init();
    g_width = __builtin_cpu_supports("avx512f")                                 ? 16
              : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 8
                                                                                : 0;
    clcnn_devices *devs = NULL;
    clcnn_context *ctx = NULL;
    int idx = -1, rc = 1;
    if (clcnn_devices_create(&devs, NULL) || clcnn_devices_select(devs, platform, device, &idx)) {
        fprintf(stderr, "peak_check: %s\n", clcnn_devices_errmsg(devs));
        goto done;
    }
    if (clcnn_context_create(&ctx, devs, idx, NULL)) {
        fprintf(stderr, "peak_check: %s\n", clcnn_context_errmsg(ctx));
        goto done;
    }
    clcnn_device_info info;
    clcnn_context_device(ctx, &info);
    int cross = info.type == CLCNN_DEVICE_CPU && g_width;
    const char *type = info.type == CLCNN_DEVICE_CPU           ? "CPU"
                       : info.type == CLCNN_DEVICE_GPU         ? "GPU"
                       : info.type == CLCNN_DEVICE_ACCELERATOR ? "accelerator"
                                                               : "other";
    printf("device %d:%d: %s (%s, %s, %u compute units)\n", info.platform_index, info.device_index,
           info.name, type, info.platform_name, info.compute_units);
    if (cross)
        printf("C loop: %s, %d independent chains, %d thread%s\n",
               g_width == 16 ? "AVX-512F _mm512_fmadd_ps" : "AVX2 _mm256_fmadd_ps", CHAINS, threads,
               threads == 1 ? "" : "s");
    else
        printf("no C cross-check: %s\n", info.type != CLCNN_DEVICE_CPU
                                             ? "not a CPU device (probe only)"
                                             : "this CPU has neither AVX-512F nor AVX2+FMA");
    fflush(stdout);
    double ratio[64];
    for (int r = 0; r < rounds; r++) {
        double c = cross ? c_peak(threads) : 0, p = 0;
        settle();
        if (clcnn_context_measure_peak(ctx, &p)) {
            fprintf(stderr, "peak_check: %s\n", clcnn_context_errmsg(ctx));
            goto done;
        }
        if (cross && c <= 0) {
            fprintf(stderr, "peak_check: the C loop could not start its threads\n");
            goto done;
        }
        ratio[r] = cross ? p / c : 1.0;
        if (cross)
            printf("round %d: C %.4g GFLOP/s, probe %.4g GFLOP/s, ratio %.3f\n", r + 1, c, p,
                   ratio[r]);
        else
            printf("round %d: probe %.4g GFLOP/s\n", r + 1, p);
        fflush(stdout);
        settle();
    }
    rc = 0;
    if (cross) {
        qsort(ratio, (size_t)rounds, sizeof *ratio, cmp_double);
        double med =
            rounds % 2 ? ratio[rounds / 2] : 0.5 * (ratio[rounds / 2 - 1] + ratio[rounds / 2]);
        rc = med < 0.9 || med > 1.1;
        printf("median ratio probe / C: %.3f (%s: must be within [0.9, 1.1])\n", med,
               rc ? "FAIL" : "ok");
    }
done:
    clcnn_context_free(ctx);
    clcnn_devices_free(devs);
    return rc;
}
