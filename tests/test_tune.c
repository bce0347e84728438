/* Autotuning (src/tune.h) through the public API: a tuned run records its choices in the
 * cache directory and trains to the same losses as an untuned one (tuning only picks among
 * kernels that compute the same sums in another order); a second process-like context reuses
 * the file without timing again; a damaged file is read past (bad lines ignored, an unknown
 * candidate re-timed); without autotuning nothing is written; with CLCNN_BACKEND forced the
 * GEMM is not tuned, and with a backend other than cpu (no direct convolutions) each
 * convolution pass times its implicit GEMMs (both sizes) against im2col instead. The file's
 * parsing itself is checked through the tuner's lookup. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clcnn.h"
#include "tune.h"
#include "testutil.h"

#define N_IMG 16
#define BATCH 8
#define STEPS 4 /* two epochs of two batches */
/* conv2 (200 taps, a ReLU before its pool, so its backward is not fused with the pool's) is
 * a weight-gradient decision on the direct path; conv1's pool is fused, so it has none; the
 * linear layer gives GEMM decisions. */
static const char *spec =
    "conv(8,3,pad=1) maxpool(2) conv(8,5,pad=2) relu maxpool(2) flatten linear(10)";

static char tmp[256];

/* Trains STEPS steps in a fresh context with the cache in `dir`; losses in out[]. */
static int train(const char *dir, int autotune, float *out) {
    clcnn_devices *devs = NULL;
    clcnn_context *ctx = NULL;
    clcnn_dataset *ds = NULL;
    clcnn_model *m = NULL;
    clcnn_context_options co;
    clcnn_context_options_init(&co);
    uint8_t images[N_IMG * 3 * 16 * 16], labels[N_IMG];
    int idx = -1, rc = 1;
    co.autotune = autotune;
    setenv("CLCNN_CACHE_DIR", dir, 1);
    for (int i = 0; i < N_IMG; i++) {
        labels[i] = (uint8_t)(i % 10);
        for (int p = 0; p < 3 * 16 * 16; p++)
            images[i * 768 + p] = (uint8_t)((i * 31 + p * 7 + (p % 5) * labels[i]) % 256);
    }
    if (clcnn_devices_create(&devs, NULL) || clcnn_devices_select(devs, -1, -1, &idx) ||
        clcnn_context_create(&ctx, devs, idx, &co)) {
        fprintf(stderr, "context: %s%s\n", clcnn_devices_errmsg(devs), clcnn_context_errmsg(ctx));
        goto out;
    }
    if (clcnn_dataset_from_memory(&ds, ctx, images, labels, N_IMG, 3, 16, 16) ||
        clcnn_model_create(&m, ctx, spec, 3, 16, 16, 7)) {
        fprintf(stderr, "set-up: %s%s\n", clcnn_dataset_errmsg(ds), clcnn_model_errmsg(m));
        goto out;
    }
    for (int s = 0; s < STEPS; s++) {
        if ((s % 2 == 0 && clcnn_dataset_set_epoch(ds, 3, s / 2, 1)) ||
            clcnn_model_train_dataset(m, ds, (s % 2) * BATCH, BATCH) ||
            clcnn_model_last_loss(m, &out[s], NULL)) {
            fprintf(stderr, "step %d: %s\n", s, clcnn_model_errmsg(m));
            goto out;
        }
    }
    rc = 0;
out:
    clcnn_model_free(m);
    clcnn_dataset_free(ds);
    clcnn_context_free(ctx);
    clcnn_devices_free(devs);
    return rc;
}

/* The tuning file in dir (the only autotune-*.txt); "" when there is none. */
static void tune_file(const char *dir, char *path, size_t size) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls %s/autotune-*.txt 2>/dev/null", dir);
    FILE *p = popen(cmd, "r");
    path[0] = '\0';
    if (p && fgets(path, (int)size, p)) path[strcspn(path, "\n")] = '\0';
    if (p) pclose(p);
}

/* Counts the file's lines, and those naming decisions of each kind with a valid candidate. */
static int count_lines(const char *path, int *gemm, int *wgrad, int *conv, int *bad) {
    FILE *f = fopen(path, "r");
    char line[300], key[100], choice[40];
    int n = 0;
    *gemm = *wgrad = *conv = *bad = 0;
    if (!f) return -1;
    while (fgets(line, sizeof line, f)) {
        n++;
        if (sscanf(line, "%99s %39s", key, choice) != 2) {
            (*bad)++;
            continue;
        }
        if (!strncmp(key, "gemm-", 5) &&
            (!strcmp(choice, "cpu") || !strcmp(choice, "opencl") || !strcmp(choice, "clblast")))
            (*gemm)++;
        else if (!strncmp(key, "wgrad-", 6) &&
                 (!strcmp(choice, "lanes") || !strcmp(choice, "rows")))
            (*wgrad)++;
        else if (!strncmp(key, "conv-", 5) &&
                 (!strcmp(choice, "implicit") || !strcmp(choice, "implicit-32") ||
                  !strcmp(choice, "implicit-64x128") || !strcmp(choice, "implicit-64w8") ||
                  !strcmp(choice, "im2col")))
            (*conv)++;
        else
            (*bad)++;
    }
    fclose(f);
    return n;
}

static void check_close(const char *what, const float *a, const float *b) {
    for (int s = 0; s < STEPS; s++)
        CHECK_MSG(fabsf(a[s] - b[s]) <= 1e-5f * fabsf(b[s]), "%s: step %d loss %.9g vs %.9g", what,
                  s, a[s], b[s]);
}

int main(void) {
    float plain[STEPS], tuned[STEPS], again[STEPS];
    char dir[300], path[600], cmd[400];
    int gemm, wgrad, conv, bad;
    snprintf(tmp, sizeof tmp, "%s", "/tmp/clcnn_test_tune.XXXXXX");
    CHECK(mkdtemp(tmp) != NULL);
    const char *backend = getenv("CLCNN_BACKEND");
    int forced = backend && *backend;
    unsetenv("CLCNN_AUTOTUNE");

    clcnn_devices *devs = NULL;
    int ndev = clcnn_devices_create(&devs, NULL) == CLCNN_SUCCESS ? clcnn_devices_count(devs) : 0;
    clcnn_devices_free(devs);
    if (ndev == 0) {
        fprintf(stderr, "no OpenCL device: skipping\n");
        return 77;
    }

    int cpu_device = 0, groups256 = 0;
    clcnn_devices *dl = NULL;
    clcnn_device_info info;
    int di = -1;
    if (clcnn_devices_create(&dl, NULL) == CLCNN_SUCCESS &&
        clcnn_devices_select(dl, -1, -1, &di) == CLCNN_SUCCESS &&
        clcnn_devices_get(dl, di, &info) == CLCNN_SUCCESS)
        cpu_device = info.type == CLCNN_DEVICE_CPU, groups256 = info.max_work_group_size >= 256;
    clcnn_devices_free(dl);
    /* A forced GEMM backend other than cpu takes no direct convolution: what it tunes is each
     * convolution pass's implicit GEMM against im2col (conv1 forward and weight gradient, conv2
     * all three passes), on devices that run the implicit GEMM's 16x16 groups. */
    int other = forced && strcmp(backend, "cpu") != 0;

    /* Untuned: no file. */
    snprintf(dir, sizeof dir, "%s/plain", tmp);
    CHECK(train(dir, 0, plain) == 0);
    tune_file(dir, path, sizeof path);
    CHECK_MSG(path[0] == '\0', "an untuned run wrote %s", path);

    /* Tuned: the choices are recorded, the losses the same within reordering. */
    snprintf(dir, sizeof dir, "%s/tuned", tmp);
    CHECK(train(dir, 1, tuned) == 0);
    check_close("tuned vs untuned", tuned, plain);
    tune_file(dir, path, sizeof path);
    if (other && !groups256) {
        CHECK_MSG(path[0] == '\0', "CLCNN_BACKEND=%s: nothing to tune, yet %s was written", backend,
                  path);
        snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
        CHECK(system(cmd) == 0);
        return test_finish("test_tune");
    }
    CHECK_MSG(path[0] != '\0', "a tuned run wrote no autotune file in %s", dir);
    int n1 = count_lines(path, &gemm, &wgrad, &conv, &bad);
    printf("tuning file: %d lines, %d GEMM, %d weight-gradient and %d convolution decisions\n", n1,
           gemm, wgrad, conv);
    CHECK_MSG(bad == 0, "%d malformed lines in %s", bad, path);
    if (forced) {
        CHECK_MSG(gemm == 0, "CLCNN_BACKEND=%s, yet %d GEMM shapes were tuned", backend, gemm);
    } else {
        CHECK_MSG(gemm >= 3, "only %d GEMM decisions recorded", gemm);
    }
    if (other) {
        CHECK_MSG(conv == 5 && wgrad == 0,
                  "CLCNN_BACKEND=%s: %d convolution and %d weight-gradient decisions, want 5 and 0",
                  backend, conv, wgrad);
    } else {
        CHECK_MSG(conv == 0, "%d convolution decisions on the direct path", conv);
    }
    /* The direct path runs on the cpu backend: the default on CPU devices, or forced. */
    if (!other && (forced || cpu_device))
        CHECK_MSG(wgrad == 1, "%d weight-gradient decisions, want 1", wgrad);

    /* Reuse: a new context reads the file and times nothing again. */
    CHECK(train(dir, 1, again) == 0);
    check_close("second tuned run", again, tuned);
    int n2 = count_lines(path, &gemm, &wgrad, &conv, &bad);
    CHECK_MSG(n2 == n1, "the second tuned run appended %d lines instead of reusing them", n2 - n1);

    /* Damage: garbage, an over-long line, a third word, a candidate that does not exist (that
     * decision is re-timed and appended), a last line without its newline. */
    if (wgrad > 0 || conv > 0) {
        FILE *f = fopen(path, "a");
        CHECK(f != NULL);
        fprintf(f, "\n\x01\x02 garbage\nonly-one-word\nwgrad-1-2-3 rows extra\n");
        for (int i = 0; i < 400; i++)
            fputc('x', f);
        fprintf(f, " rows\n");
        fclose(f);
        /* the first wgrad (or conv) key, now with a bogus candidate (the later line wins) */
        FILE *r = fopen(path, "r");
        char line[300], key[100] = "", choice[40];
        while (r && fgets(line, sizeof line, r))
            if (sscanf(line, "%99s %39s", key, choice) == 2 &&
                (!strncmp(key, "wgrad-", 6) || !strncmp(key, "conv-", 5)))
                break;
        if (r) fclose(r);
        f = fopen(path, "a");
        CHECK(f != NULL);
        fprintf(f, "%s bogus\ngemm-nn-1-2-3 cpu", key);
        fclose(f);
        int n3 = count_lines(path, &gemm, &wgrad, &conv, &bad);
        CHECK(train(dir, 1, again) == 0);
        check_close("tuned run on a damaged file", again, tuned);
        int n4 = count_lines(path, &gemm, &wgrad, &conv, &bad);
        CHECK_MSG(n4 == n3 + 1, "damaged file: %d lines appended, expected 1 (the bogus one)",
                  n4 - n3);
    } else {
        printf("no weight-gradient or convolution decision on this device: damage test "
               "limited\n");
    }

    /* An over-long line is skipped whole: what follows its first 255 bytes is no line of its
     * own, even when it reads like one. */
    if (path[0]) {
        char longdir[300], longpath[700], cmd2[700];
        const char *base = strrchr(path, '/');
        snprintf(longdir, sizeof longdir, "%s/long", tmp);
        snprintf(cmd2, sizeof cmd2, "mkdir -p %s", longdir);
        CHECK(system(cmd2) == 0);
        snprintf(longpath, sizeof longpath, "%s%s", longdir, base ? base : "/x");
        FILE *f = fopen(longpath, "w");
        CHECK(f != NULL);
        if (f) {
            for (int i = 0; i < 255; i++)
                fputc('x', f);
            fprintf(f, "wgrad-tail-of-a-long-line rows\nwgrad-a-real-line lanes\n");
            fclose(f);
        }
        clcnn_devices *dl2 = NULL;
        clcnn_context *c2 = NULL;
        clcnn_context_options co;
        clcnn_context_options_init(&co);
        int i2 = -1;
        co.autotune = 1;
        setenv("CLCNN_CACHE_DIR", longdir, 1);
        CHECK(clcnn_devices_create(&dl2, NULL) == CLCNN_SUCCESS &&
              clcnn_devices_select(dl2, -1, -1, &i2) == CLCNN_SUCCESS &&
              clcnn_context_create(&c2, dl2, i2, &co) == CLCNN_SUCCESS);
        const char *tail = c2 ? clcnn_tune_lookup(c2, "wgrad-tail-of-a-long-line") : NULL;
        const char *real = c2 ? clcnn_tune_lookup(c2, "wgrad-a-real-line") : NULL;
        CHECK_MSG(tail == NULL, "the tail of an over-long line was read as a decision");
        CHECK_MSG(real && !strcmp(real, "lanes"), "the line after an over-long one was not read");
        clcnn_context_free(c2);
        clcnn_devices_free(dl2);
    }

    /* The environment switch alone turns tuning on. */
    snprintf(dir, sizeof dir, "%s/env", tmp);
    setenv("CLCNN_AUTOTUNE", "1", 1);
    CHECK(train(dir, 0, again) == 0);
    unsetenv("CLCNN_AUTOTUNE");
    tune_file(dir, path, sizeof path);
    CHECK_MSG(path[0] != '\0', "CLCNN_AUTOTUNE=1 wrote no autotune file");

    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    CHECK(system(cmd) == 0);
    return test_finish("test_tune");
}
