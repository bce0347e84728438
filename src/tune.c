/* Autotuning: timed choices among interchangeable kernels, kept on disk (see tune.h). */
#include "tune.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files.h"
#include "xxhash.h"

struct clcnn_tuner {
    struct tune_entry {
        char key[80];
        char choice[24];
    } * entries;
    int n, cap;
    char path[4200]; /* the decisions' file; "" = memory only */
};

static const char *lookup(const clcnn_tuner *t, const char *key) {
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->entries[i].key, key)) return t->entries[i].choice;
    return NULL;
}

/* Adds or replaces a decision in memory; 0 when out of memory (the choice is then re-timed
 * next time, nothing else is lost). */
static int remember(clcnn_tuner *t, const char *key, const char *choice) {
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->entries[i].key, key)) {
            snprintf(t->entries[i].choice, sizeof t->entries[i].choice, "%s", choice);
            return 1;
        }
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 16;
        void *e = realloc(t->entries, (size_t)cap * sizeof *t->entries);
        if (!e) return 0;
        t->entries = e, t->cap = cap;
    }
    snprintf(t->entries[t->n].key, sizeof t->entries[0].key, "%s", key);
    snprintf(t->entries[t->n].choice, sizeof t->entries[0].choice, "%s", choice);
    t->n++;
    return 1;
}

/* The decisions' file for a device in cache_dir: one per device, driver and clcnn version (the
 * program cache's identity), in a folder that must be ours. "" when there is none. */
static void file_path(clcnn_tuner *t, const clcnn_device_info *info, const char *cache_dir) {
    char dir[4096];
    const char *parts[] = {info->platform_name, info->platform_version, info->name,
                           info->driver_version, clcnn_version()};
    snprintf(dir, sizeof dir, "%s", cache_dir);
    if (!dir[0]) return;
    XXH64_state_t *s = XXH64_createState();
    if (!s) return;
    XXH64_reset(s, 0);
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        XXH64_update(s, parts[i], strlen(parts[i]) + 1);
    unsigned long long h = XXH64_digest(s);
    XXH64_freeState(s);
    if (clcnn_private_dir(dir) != 0) return;
    snprintf(t->path, sizeof t->path, "%s/autotune-%016llx.txt", dir, h);
}

/* Reads the decisions in the tuner's file, skipping what cannot be one. */
static void read_file(clcnn_tuner *t) {
    int fd = clcnn_open_owned(t->path);
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (!f) {
        if (fd >= 0) close(fd);
        return;
    }
    char line[256], key[sizeof t->entries[0].key], choice[sizeof t->entries[0].choice], end;
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
        remember(t, key, choice);
    }
    fclose(f);
}

clcnn_status clcnn_tuner_create(clcnn_tuner **out, const clcnn_device_info *info,
                                const char *cache_dir, clcnn_error *e) {
    clcnn_tuner *t = calloc(1, sizeof *t);
    *out = t;
    if (!t) return clcnn_fail(e, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    file_path(t, info, cache_dir);
    if (t->path[0]) read_file(t);
    return CLCNN_SUCCESS;
}

void clcnn_tuner_free(clcnn_tuner *t) {
    if (!t) return;
    free(t->entries);
    free(t);
}

int clcnn_tune_enabled(const clcnn_context *ctx) {
    return ctx->tuner != NULL;
}

const char *clcnn_tune_lookup(const clcnn_context *ctx, const char *key) {
    return ctx->tuner ? lookup(ctx->tuner, key) : NULL;
}

/* Appends one decision to the tuner's file. One short line per append: concurrent processes
 * interleave whole lines. A file that cannot be written only costs a timing in the next
 * process. Never through a link, and only into a file of ours (the folder was checked when it
 * was opened). */
static void append(const clcnn_tuner *t, const char *key, const char *choice) {
    int fd = open(t->path, O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    struct stat sb;
    if (fd >= 0 && (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_uid != geteuid())) {
        close(fd);
        fd = -1;
    }
    FILE *f = fd >= 0 ? fdopen(fd, "a+") : NULL;
    if (!f && fd >= 0) close(fd);
    if (!f) return;
    /* A torn last line (no newline) must not swallow this one. */
    int torn = fseek(f, -1, SEEK_END) == 0 && fgetc(f) != '\n';
    fseek(f, 0, SEEK_END);
    fprintf(f, "%s%s %s\n", torn ? "\n" : "", key, choice);
    fclose(f);
}

int clcnn_tune_choose(clcnn_context *ctx, const char *key, const char *const *names, int n,
                      clcnn_tune_run run, void *arg, clcnn_status *st) {
    clcnn_tuner *t = ctx->tuner;
    *st = CLCNN_SUCCESS;
    if (!t || n < 2) return -1;
    const char *known = lookup(t, key);
    for (int c = 0; known && c < n; c++)
        if (!strcmp(names[c], known)) return c;
    /* Unknown decision (or a recorded name that is no candidate now): time them all. */
    int best = 0;
    double best_t = 0;
    for (int c = 0; c < n; c++) {
        double tc = 0;
        if ((*st = run(ctx, c, arg)) != CLCNN_SUCCESS) return -1; /* warm-up (and compile) */
        clFinish(ctx->queue);
        for (int r = 0; r < 3; r++) {
            double t0 = clcnn_now_seconds();
            if ((*st = run(ctx, c, arg)) != CLCNN_SUCCESS) return -1;
            clFinish(ctx->queue);
            double dt = clcnn_now_seconds() - t0;
            if (r == 0 || dt < tc) tc = dt;
        }
        if (c == 0 || tc < best_t) best = c, best_t = tc;
    }
    remember(t, key, names[best]);
    if (t->path[0]) append(t, key, names[best]);
    return best;
}
