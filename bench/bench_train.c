/* Training-step benchmark: N steps of a model on synthetic data (no disk I/O), reporting
 * images/s and ms/step; with CLCNN_PROFILE=1 a per-layer breakdown from OpenCL profiling
 * events (GFLOP/s of each conv and linear layer), CLCNN_PROFILE=kernels splits each layer's
 * row per kernel; with --peak the device's measured fp32 FMA
 * peak. Usage: bench_train [--model SPEC] [--batch N] [--steps N] [--warmup N]
 * [--input CxHxW] [--platform P] [--device D] [--peak]. Not part of the test suite. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clcnn.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    const char *spec = "seed";
    int batch = 64, steps = 20, warmup = 3, c = 3, h = 32, w = 32, platform = -1, device = -1;
    int peak = 0;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "--peak")) {
            peak = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "bench_train: %s needs a value\n", o);
            return 2;
        }
        i++;
        if (!strcmp(o, "--model"))
            spec = v;
        else if (!strcmp(o, "--batch"))
            batch = atoi(v);
        else if (!strcmp(o, "--steps"))
            steps = atoi(v);
        else if (!strcmp(o, "--warmup"))
            warmup = atoi(v);
        else if (!strcmp(o, "--platform"))
            platform = atoi(v);
        else if (!strcmp(o, "--device"))
            device = atoi(v);
        else if (strcmp(o, "--input") || sscanf(v, "%dx%dx%d", &c, &h, &w) != 3) {
            fprintf(stderr, "bench_train: bad option %s %s\n", o, v);
            return 2;
        }
    }
    if (batch <= 0 || steps <= 0 || warmup < 0) {
        fprintf(stderr, "bench_train: batch and steps must be positive\n");
        return 2;
    }
    clcnn_devices *devs = NULL;
    clcnn_context *ctx = NULL;
    clcnn_model *m = NULL;
    int idx = -1, rc = 1;
    double t0 = now(), t_start = t0;
    if (clcnn_devices_create(&devs, NULL) || clcnn_devices_select(devs, platform, device, &idx)) {
        fprintf(stderr, "bench_train: %s\n", clcnn_devices_errmsg(devs));
        goto done;
    }
    clcnn_context_options copts;
    clcnn_context_options_init(&copts);
    copts.enable_profiling = getenv("CLCNN_PROFILE") != NULL;
    if (clcnn_context_create(&ctx, devs, idx, &copts)) {
        fprintf(stderr, "bench_train: %s\n", clcnn_context_errmsg(ctx));
        goto done;
    }
    double t_ctx = now() - t0;
    if (clcnn_model_create(&m, ctx, spec, c, h, w, 1)) {
        fprintf(stderr, "bench_train: %s\n", clcnn_model_errmsg(m));
        goto done;
    }
    size_t n = (size_t)batch * c * h * w;
    float *x = malloc(n * sizeof *x);
    uint8_t *lab = malloc((size_t)batch);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((i * 2654435761u) % 256) / 255.0f;
    for (int i = 0; i < batch; i++)
        lab[i] = (uint8_t)(i % 10);
    float loss = 0;
    double t_first = 0;
    for (int s = 0; s < warmup + steps; s++) {
        if (s == warmup) {
            clcnn_model_last_loss(m, &loss, NULL); /* drain the queue before timing */
            clcnn_context_profile_report(ctx, NULL, 0);
            t0 = now();
        }
        if (clcnn_model_train_batch(m, x, lab, batch)) {
            fprintf(stderr, "bench_train: %s\n", clcnn_model_errmsg(m));
            goto done;
        }
        if (s == 0) {
            clcnn_model_last_loss(m, &loss, NULL);
            t_first = now() - t_start;
        }
    }
    clcnn_model_last_loss(m, &loss, NULL);
    double dt = now() - t0;
    clcnn_device_info info;
    clcnn_context_device(ctx, &info);
    printf("device: %s\nmodel: %s, input %dx%dx%d, batch %d, %d steps after %d warm-up\n",
           info.name, clcnn_model_spec(m), c, h, w, batch, steps, warmup);
    printf("start-up: devices and context %.3f s, first step done %.3f s after start\n", t_ctx,
           t_first);
    printf("clcnn: %.1f images/s, %.2f ms/step (loss %.4f)\n", batch * steps / dt, 1e3 * dt / steps,
           loss);
    if (peak) {
        double pk = 0;
        if (clcnn_context_measure_peak(ctx, &pk) == CLCNN_SUCCESS)
            printf("peak: %.1f GFLOP/s fp32 FMA (measured)\n", pk);
        else
            fprintf(stderr, "bench_train: peak: %s\n", clcnn_context_errmsg(ctx));
    }
    if (copts.enable_profiling) {
        static char rep[1 << 16];
        clcnn_context_profile_report(ctx, rep, sizeof rep);
        printf("device time per kernel over %d steps:\n%s", steps, rep);
        const char *all = strstr(rep, "all: ");
        int launches, few;
        double ms, few_ms;
        if (all && sscanf(all, "all: %d launches, %lf ms; %d launches under 20 us, %lf", &launches,
                          &ms, &few, &few_ms) == 4)
            printf("per step: %.1f launches, %.3f ms of device time; %.1f launches under 20 us, "
                   "%.3f ms\n",
                   (double)launches / steps, ms / steps, (double)few / steps, few_ms / steps);
    }
    free(x);
    free(lab);
    rc = 0;
done:
    clcnn_model_free(m);
    clcnn_context_free(ctx);
    clcnn_devices_free(devs);
    return rc;
}
