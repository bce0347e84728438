/* Autotuning: timed choices among interchangeable kernels, kept on disk (see tune.h). */
#include "tune.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "files.h"
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
    /* The file sits beside the program binaries, in a folder that must be ours. */
    if (clcnn_private_dir(dir) != 0) return CLCNN_SUCCESS;
    snprintf(ctx->tune_path, sizeof ctx->tune_path, "%s/autotune-%016llx.txt", dir, h);
    int fd = clcnn_open_owned(ctx->tune_path);
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (!f) {
        if (fd >= 0) close(fd);
        return CLCNN_SUCCESS;
    }
    char line[256], key[sizeof ctx->tune[0].key], choice[sizeof ctx->tune[0].choice], end;
    while (fgets(line, sizeof line, f)) {
        /* A line longer than the buffer (or a last line without its newline) is skipped whole:
         * its tail must not be read as a line of its own. */
        if (!strchr(line, '\n')) {
            int c;
            while ((c = fgetc(f)) != EOF && c != '\n') {
            }
            continue;
        }
        /* exactly two words, each within its field; anything else is skipped */
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
    if (ctx->tune_path[0]) {
        /* One short line per append: concurrent processes interleave whole lines. A file
         * that cannot be written only costs a timing in the next process. Never through a
         * link, and only into a file of ours (the folder was checked when it was opened). */
        int fd = open(ctx->tune_path, O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        struct stat sb;
        if (fd >= 0 && (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_uid != geteuid())) {
            close(fd);
            fd = -1;
        }
        FILE *f = fd >= 0 ? fdopen(fd, "a+") : NULL;
        if (!f && fd >= 0) close(fd);
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
