/* Autotuning: timed choices among interchangeable kernels, kept on disk (see tune.h). */
#include "tune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "program.h"
#include "xxhash.h"

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const char *lookup(const clcnn_context *ctx, const char *key) {
    for (int i = 0; i < ctx->n_tune; i++)
        if (!strcmp(ctx->tune[i].key, key)) return ctx->tune[i].choice;
    return NULL;
}

/* Adds or replaces a decision in memory; 0 when out of memory (the choice is then re-timed
 * next time, nothing else is lost). */
static int remember(clcnn_context *ctx, const char *key, const char *choice) {
    for (int i = 0; i < ctx->n_tune; i++)
        if (!strcmp(ctx->tune[i].key, key)) {
            snprintf(ctx->tune[i].choice, sizeof ctx->tune[i].choice, "%s", choice);
            return 1;
        }
    if (ctx->n_tune == ctx->tune_cap) {
        int cap = ctx->tune_cap ? 2 * ctx->tune_cap : 16;
        void *t = realloc(ctx->tune, (size_t)cap * sizeof *ctx->tune);
        if (!t) return 0;
        ctx->tune = t, ctx->tune_cap = cap;
    }
    snprintf(ctx->tune[ctx->n_tune].key, sizeof ctx->tune[0].key, "%s", key);
    snprintf(ctx->tune[ctx->n_tune].choice, sizeof ctx->tune[0].choice, "%s", choice);
    ctx->n_tune++;
    return 1;
}

clcnn_status clcnn_tune_init(clcnn_context *ctx, int use_cache) {
    const char *env = getenv("CLCNN_AUTOTUNE");
    char dir[4096] = "";
    if (env && *env && strcmp(env, "0") != 0 && strcmp(env, "1") != 0)
        return clcnn_fail(&ctx->err, CLCNN_ERR_INVALID_ARGUMENT,
                          "CLCNN_AUTOTUNE='%.40s' is not 0 or 1", env);
    if (!ctx->autotune) ctx->autotune = env && !strcmp(env, "1");
    if (!ctx->autotune || !use_cache) return CLCNN_SUCCESS;
    clcnn_cache_dir(dir, sizeof dir);
    if (!dir[0]) return CLCNN_SUCCESS;
    /* One file per device, driver and clcnn version: the program cache's identity. */
    const char *parts[] = {ctx->info.platform_name, ctx->info.platform_version, ctx->info.name,
                           ctx->info.driver_version, clcnn_version()};
    XXH64_state_t *s = XXH64_createState();
    if (!s) return CLCNN_SUCCESS;
    XXH64_reset(s, 0);
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        XXH64_update(s, parts[i], strlen(parts[i]) + 1);
    unsigned long long h = XXH64_digest(s);
    XXH64_freeState(s);
    snprintf(ctx->tune_path, sizeof ctx->tune_path, "%s/autotune-%016llx.txt", dir, h);
    FILE *f = fopen(ctx->tune_path, "r");
    if (!f) return CLCNN_SUCCESS;
    char line[256], key[sizeof ctx->tune[0].key], choice[sizeof ctx->tune[0].choice], end;
    while (fgets(line, sizeof line, f)) {
        /* exactly two words, each within its field; anything else is skipped */
        if (!strchr(line, '\n')) continue;
        if (sscanf(line, "%79s %23s %c", key, choice, &end) != 2) continue;
        remember(ctx, key, choice);
    }
    fclose(f);
    return CLCNN_SUCCESS;
}

void clcnn_tune_free(clcnn_context *ctx) {
    free(ctx->tune);
    ctx->tune = NULL;
    ctx->n_tune = ctx->tune_cap = 0;
}

int clcnn_tune_choose(clcnn_context *ctx, const char *key, const char *const *names, int n,
                      clcnn_tune_run run, void *arg, clcnn_status *st) {
    *st = CLCNN_SUCCESS;
    if (!ctx->autotune || n < 2) return -1;
    const char *known = lookup(ctx, key);
    for (int c = 0; known && c < n; c++)
        if (!strcmp(names[c], known)) return c;
    /* Unknown decision (or a recorded name that is no candidate now): time them all. */
    int best = 0;
    double best_t = 0;
    for (int c = 0; c < n; c++) {
        double t = 0;
        if ((*st = run(ctx, c, arg)) != CLCNN_SUCCESS) return -1; /* warm-up (and compile) */
        clFinish(ctx->queue);
        for (int r = 0; r < 3; r++) {
            double t0 = now_seconds();
            if ((*st = run(ctx, c, arg)) != CLCNN_SUCCESS) return -1;
            clFinish(ctx->queue);
            double dt = now_seconds() - t0;
            if (r == 0 || dt < t) t = dt;
        }
        if (c == 0 || t < best_t) best = c, best_t = t;
    }
    remember(ctx, key, names[best]);
    char dir[sizeof ctx->tune_path];
    snprintf(dir, sizeof dir, "%s", ctx->tune_path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    if (ctx->tune_path[0] && slash && clcnn_mkdir_p(dir, NULL) == CLCNN_SUCCESS) {
        /* One short line per append: concurrent processes interleave whole lines. A file
         * that cannot be written only costs a timing in the next process. */
        FILE *f = fopen(ctx->tune_path, "a+");
        if (f) {
            /* A torn last line (no newline) must not swallow this one. */
            int torn = fseek(f, -1, SEEK_END) == 0 && fgetc(f) != '\n';
            fseek(f, 0, SEEK_END);
            fprintf(f, "%s%s %s\n", torn ? "\n" : "", key, names[best]);
            fclose(f);
        }
    }
    return best;
}
