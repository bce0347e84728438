/* Kernel build tests: embedded sources build and run (a real kernel against a CPU
 * computation), the binary cache is written, hit (a warm start compiles and rewrites nothing),
 * and survives corruption and well-formed entries that are wrong, a cache folder others may
 * write to is not used, and a broken kernel source reached through CLCNN_KERNEL_DIR is
 * reported with the device and build log, as is one that lacks a kernel the library needs. Nothing
 * here depends on timing: start-up times are printed, never compared, so a loaded machine cannot
 * fail the test. */
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "context.h"
#include "program.h"
#include "testutil.h"

static char cache_dir[256];

static int count_cache_files(char *first, size_t cap) {
    DIR *dir = opendir(cache_dir);
    struct dirent *de;
    int n = 0;
    if (!dir) return 0;
    while ((de = readdir(dir))) {
        if (!strstr(de->d_name, ".bin") || strstr(de->d_name, ".tmp")) continue;
        if (n == 0 && first) snprintf(first, cap, "%s/%s", cache_dir, de->d_name);
        n++;
    }
    closedir(dir);
    return n;
}

/* One line per cache file: name, inode, size and modification time. A start that rewrites an
 * entry (written under a temporary name, then renamed) changes its inode and time. */
static void cache_listing(char *buf, size_t cap) {
    DIR *dir = opendir(cache_dir);
    struct dirent *de;
    size_t len = 0;
    buf[0] = '\0';
    if (!dir) return;
    while ((de = readdir(dir)) && len < cap) {
        char p[600];
        struct stat st;
        if (de->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s/%s", cache_dir, de->d_name);
        if (stat(p, &st) != 0) continue;
        len += (size_t)snprintf(buf + len, cap - len, "%s %llu %lld %lld.%09ld\n", de->d_name,
                                (unsigned long long)st.st_ino, (long long)st.st_size,
                                (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
    }
    closedir(dir);
}

static clcnn_context *make(clcnn_devices *devs, int idx, clcnn_status *st) {
    clcnn_context *ctx = NULL;
    *st = clcnn_context_create(&ctx, devs, idx, NULL);
    return ctx;
}

/* axpy on the device against the same arithmetic on the host (fma both sides: exact). */
static void check_axpy(clcnn_context *ctx) {
    enum { N = 1000 };
    float x[N], y[N], out[N];
    cl_int rc;
    for (int i = 0; i < N; i++)
        x[i] = (float)i * 0.5f - 7.0f, y[i] = (float)(i % 13) - 3.25f;
    cl_mem bx =
        clCreateBuffer(ctx->context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof x, x, &rc);
    cl_mem by =
        clCreateBuffer(ctx->context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof y, y, &rc);
    clcnn_kern *k = clcnn_kernel(ctx, CLCNN_K_axpy_f32);
    CHECK(k != NULL);
    if (!k) return;
    int off = 3, n = N - 5; /* offsets and a length that is not a multiple of the group size */
    float alpha = 1.5f;
    clcnn_args a = {k->k, 0, CL_SUCCESS};
    CLCNN_ARG(&a, by);
    CLCNN_ARG(&a, off);
    CLCNN_ARG(&a, bx);
    CLCNN_ARG(&a, off);
    CLCNN_ARG(&a, n);
    CLCNN_ARG(&a, alpha);
    CHECK(clcnn_launch1d(ctx, k, &a, (size_t)n) == CLCNN_SUCCESS);
    CHECK(clEnqueueReadBuffer(ctx->queue, by, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL) == 0);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        float want = (i >= off && i < off + n) ? fmaf(alpha, x[i], y[i]) : y[i];
        if (out[i] != want) bad++;
    }
    CHECK_MSG(bad == 0, "%d of %d axpy results differ", bad, N);
    clReleaseMemObject(bx);
    clReleaseMemObject(by);
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* The cache file of program `name` ("util", "conv2d"), or "" when there is none. */
static void entry_path(const char *name, char *out, size_t cap) {
    DIR *dir = opendir(cache_dir);
    struct dirent *de;
    size_t len = strlen(name);
    out[0] = '\0';
    if (!dir) return;
    while ((de = readdir(dir)))
        if (!strncmp(de->d_name, name, len) && de->d_name[len] == '-' &&
            strlen(de->d_name) == len + 1 + 32 + 4 && !strcmp(de->d_name + len + 33, ".bin"))
            snprintf(out, cap, "%s/%s", cache_dir, de->d_name);
    closedir(dir);
}

static unsigned char *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    unsigned char *buf = NULL;
    long len;
    if (f && fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)len)) && fread(buf, 1, (size_t)len, f) != (size_t)len) {
        free(buf);
        buf = NULL;
    }
    if (buf) *n = (size_t)ftell(f);
    if (f) fclose(f);
    return buf;
}

static void write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL && fwrite(data, 1, n, f) == n);
    if (f) fclose(f);
}

/* Cache entries that are well formed but wrong (src/program.c's layout: magic, 32-byte key at
 * offset 8, names and binary lengths and their XXH64 at 40, 48 and 56, then the names and the
 * binary): util's entry copied over conv2d's; the same with conv2d's key written in, so that
 * only the kernels tell; and conv2d's own names around util's binary. Each start must still
 * work (rebuilding the entry), and the next one load it again. */
static void check_wrong_entries(clcnn_devices *devs, int idx) {
    char util[600], conv[600];
    size_t nu = 0, nc = 0;
    clcnn_status st;
    clcnn_context *ctx;
    entry_path("util", util, sizeof util);
    entry_path("conv2d", conv, sizeof conv);
    unsigned char *ub = util[0] ? read_all(util, &nu) : NULL;
    unsigned char *cb = conv[0] ? read_all(conv, &nc) : NULL;
    CHECK_MSG(ub && cb && nu > 64 && nc > 64, "no util and conv2d entries in %s", cache_dir);
    if (!ub || !cb || nu <= 64 || nc <= 64) goto done;
    uint64_t cnames, unames;
    memcpy(&cnames, cb + 40, 8);
    memcpy(&unames, ub + 40, 8);
    for (int variant = 0; variant < 3; variant++) {
        static const char *what[] = {"copied over another's", "copied with its key rewritten",
                                     "another's binary under its own names"};
        if (variant < 2) {
            unsigned char *w = malloc(nu);
            if (!w) break;
            memcpy(w, ub, nu);
            if (variant == 1) memcpy(w + 8, cb + 8, 32);
            write_bytes(conv, w, nu);
            free(w);
        } else { /* conv2d's header and names, util's binary, a valid checksum */
            size_t ubin = nu - 64 - (size_t)unames, n = 64 + (size_t)cnames + ubin;
            unsigned char *w = malloc(n);
            if (!w) break;
            memcpy(w, cb, 64 + (size_t)cnames);
            memcpy(w + 64 + cnames, ub + 64 + unames, ubin);
            uint64_t l = ubin, h = XXH64(w + 64, (size_t)cnames + ubin, 0);
            memcpy(w + 48, &l, 8);
            memcpy(w + 56, &h, 8);
            write_bytes(conv, w, n);
            free(w);
        }
        ctx = make(devs, idx, &st);
        CHECK_MSG(st == CLCNN_SUCCESS, "an entry %s: %s", what[variant], clcnn_context_errmsg(ctx));
        CHECK_MSG(clcnn_context_cache_hit(ctx) == 0, "an entry %s was used", what[variant]);
        /* Its key alone (0) or its names alone (2) give it away, silently; with both right
         * (1) only the missing kernels do, and the note says so. */
        const char *note = clcnn_context_cache_note(ctx);
        CHECK_MSG(variant == 1 ? strstr(note, "lacked a kernel") != NULL : note[0] == '\0',
                  "an entry %s: note \"%s\"", what[variant], note);
        if (st == CLCNN_SUCCESS) check_axpy(ctx);
        clcnn_context_free(ctx);
        ctx = make(devs, idx, &st);
        CHECK_MSG(st == CLCNN_SUCCESS && clcnn_context_cache_hit(ctx) == 1 &&
                      !clcnn_context_cache_note(ctx)[0],
                  "after an entry %s: not repaired (%s)", what[variant], clcnn_context_errmsg(ctx));
        clcnn_context_free(ctx);
    }
done:
    free(ub);
    free(cb);
}

/* A cache folder that group or others may write to is not used: the kernels are compiled,
 * nothing is written there, and the note names the folder. */
static void check_open_folder(clcnn_devices *devs, int idx) {
    static char before[8192], after[8192];
    static const struct {
        unsigned mode;
        const char *word;
    } modes[] = {{0770, "group-writable"}, {0703, "world-writable"}};
    clcnn_status st;
    for (int m = 0; m < 2; m++) {
        cache_listing(before, sizeof before);
        CHECK(chmod(cache_dir, modes[m].mode) == 0);
        clcnn_context *ctx = make(devs, idx, &st);
        const char *note = clcnn_context_cache_note(ctx);
        CHECK_MSG(st == CLCNN_SUCCESS && clcnn_context_cache_hit(ctx) == 0 &&
                      strstr(note, modes[m].word) && strstr(note, cache_dir),
                  "a %s cache folder: status %d, cache hit %d, note \"%s\"", modes[m].word, (int)st,
                  clcnn_context_cache_hit(ctx), note);
        clcnn_context_free(ctx);
        cache_listing(after, sizeof after);
        CHECK_MSG(!strcmp(before, after), "a %s cache folder was written to", modes[m].word);
    }
    CHECK(chmod(cache_dir, 0700) == 0);
    clcnn_context *ctx = make(devs, idx, &st);
    CHECK(st == CLCNN_SUCCESS && clcnn_context_cache_hit(ctx) == 1);
    clcnn_context_free(ctx);
}

int main(void) {
    clcnn_devices *devs = NULL;
    clcnn_context *ctx;
    clcnn_status st;
    int idx = -1;
    char path[512], tmpl[] = "/tmp/clcnn_test_program_XXXXXX";
    unsetenv("CLCNN_KERNEL_DIR");
    unsetenv("CLCNN_CACHE");
    if (!mkdtemp(tmpl)) return 1;
    snprintf(cache_dir, sizeof cache_dir, "%s/cache", tmpl);
    setenv("CLCNN_CACHE_DIR", cache_dir, 1);
    if (clcnn_devices_create(&devs, NULL) != CLCNN_SUCCESS || clcnn_devices_count(devs) == 0) {
        fprintf(stderr, "no OpenCL device: skipping\n");
        return 77;
    }
    clcnn_devices_select(devs, -1, -1, &idx);

    /* Cold: compiled from the embedded sources, cache written. */
    ctx = make(devs, idx, &st);
    CHECK_MSG(st == CLCNN_SUCCESS, "%s", clcnn_context_errmsg(ctx));
    CHECK(clcnn_context_cache_hit(ctx) == 0);
    double cold = clcnn_context_build_seconds(ctx);
    CHECK(clcnn_ctx_kernel(ctx, "fill_f32") == clcnn_kernel(ctx, CLCNN_K_fill_f32) &&
          clcnn_ctx_kernel(ctx, "gemm_nn") == clcnn_kernel(ctx, CLCNN_K_gemm_nn));
    check_axpy(ctx);
    /* The context's list of required kernels names exactly the kernels the sources define. */
    {
        int n_req = 0;
        const char *const *req = clcnn_required_kernels(&n_req);
        CHECK_MSG(ctx && n_req == ctx->n_kerns, "%d required kernels, the sources define %d", n_req,
                  ctx ? ctx->n_kerns : -1);
        for (int i = 0; ctx && i < ctx->n_kerns; i++) {
            int listed = 0;
            for (int j = 0; j < n_req; j++)
                listed += !strcmp(req[j], ctx->kerns[i].name);
            CHECK_MSG(listed == 1, "kernel %s is listed %d times", ctx->kerns[i].name, listed);
        }
        /* and the typed table holds each under its id */
        CHECK(n_req == CLCNN_K_COUNT);
        for (int id = 0; ctx && id < CLCNN_K_COUNT && id < n_req; id++) {
            clcnn_kern *k = clcnn_kernel(ctx, (clcnn_kernel_id)id);
            CHECK_MSG(k && !strcmp(k->name, req[id]), "table slot %d holds %s, not %s", id,
                      k ? k->name : "nothing", req[id]);
        }
    }
    clcnn_context_free(ctx);
    int files = count_cache_files(path, sizeof path);
    CHECK_MSG(files == clcnn_kernel_source_count, "%d cache files for %d programs", files,
              clcnn_kernel_source_count);

    /* Warm: every program from the cache, and the cache left as it was (nothing compiled,
     * nothing rewritten). Being faster is the point, but a timing comparison would fail on a
     * loaded machine, so the times are only printed. */
    static char listed_cold[8192], listed_warm[8192];
    cache_listing(listed_cold, sizeof listed_cold);
    ctx = make(devs, idx, &st);
    CHECK(st == CLCNN_SUCCESS);
    CHECK(clcnn_context_cache_hit(ctx) == 1);
    double warm = clcnn_context_build_seconds(ctx);
    printf("context creation: cold %.3f s, warm %.3f s\n", cold, warm);
    check_axpy(ctx);
    clcnn_context_free(ctx);
    cache_listing(listed_warm, sizeof listed_warm);
    CHECK_MSG(listed_cold[0] && !strcmp(listed_cold, listed_warm),
              "the warm start changed the cache:\nbefore:\n%safter:\n%s", listed_cold, listed_warm);

    /* Corrupted entries (garbage, truncated, empty) are ignored, rebuilt and rewritten. */
    const char *junk[] = {"garbage that is not a program binary at all......", "CLCNNBN1", ""};
    for (int j = 0; j < 3; j++) {
        write_file(path, junk[j]);
        ctx = make(devs, idx, &st);
        CHECK_MSG(st == CLCNN_SUCCESS, "corrupt cache %d: %s", j, clcnn_context_errmsg(ctx));
        CHECK(clcnn_context_cache_hit(ctx) == 0);
        check_axpy(ctx);
        clcnn_context_free(ctx);
        ctx = make(devs, idx, &st);
        CHECK(st == CLCNN_SUCCESS && clcnn_context_cache_hit(ctx) == 1); /* repaired */
        clcnn_context_free(ctx);
    }
    /* A flipped byte inside the binary fails the checksum and is rebuilt too. */
    {
        FILE *f = fopen(path, "r+b");
        CHECK(f != NULL);
        if (f) {
            fseek(f, -40, SEEK_END); /* inside the binary, the last part of an entry */
            int c = fgetc(f);
            fseek(f, -40, SEEK_END);
            fputc(c ^ 0x5a, f);
            fclose(f);
        }
        ctx = make(devs, idx, &st);
        CHECK(st == CLCNN_SUCCESS && clcnn_context_cache_hit(ctx) == 0);
        clcnn_context_free(ctx);
    }

    check_wrong_entries(devs, idx);
    check_open_folder(devs, idx);

    /* CLCNN_CACHE=0: nothing read, nothing written. */
    setenv("CLCNN_CACHE", "0", 1);
    snprintf(cache_dir, sizeof cache_dir, "%s/cache-off", tmpl);
    setenv("CLCNN_CACHE_DIR", cache_dir, 1);
    ctx = make(devs, idx, &st);
    CHECK(st == CLCNN_SUCCESS && clcnn_context_cache_hit(ctx) == 0);
    clcnn_context_free(ctx);
    CHECK(count_cache_files(NULL, 0) == 0);
    unsetenv("CLCNN_CACHE");

    /* CLCNN_KERNEL_DIR: sources from disk; a broken one fails with device name and log. */
    char kdir[300];
    snprintf(kdir, sizeof kdir, "%s/kernels", tmpl);
    mkdir(kdir, 0755);
    for (int i = 0; i < clcnn_kernel_source_count; i++) {
        snprintf(path, sizeof path, "%s/%s.cl", kdir, clcnn_kernel_sources[i].name);
        write_file(path, clcnn_kernel_sources[i].src);
    }
    setenv("CLCNN_KERNEL_DIR", kdir, 1);
    ctx = make(devs, idx, &st);
    CHECK_MSG(st == CLCNN_SUCCESS, "from CLCNN_KERNEL_DIR: %s", clcnn_context_errmsg(ctx));
    clcnn_context_free(ctx);
    /* A file that builds but lacks a kernel the library launches (relu_backward renamed): an
     * error naming the kernel when the context is created, not an assertion later. */
    for (int i = 0; i < clcnn_kernel_source_count; i++) {
        const char *src = clcnn_kernel_sources[i].src, *at = strstr(src, "void relu_backward(");
        if (!at) continue;
        char *copy = malloc(strlen(src) + 16);
        if (!copy) break;
        size_t head = (size_t)(at - src) + strlen("void relu_backward");
        memcpy(copy, src, head);
        strcpy(copy + head, "_old");
        strcat(copy, src + head);
        snprintf(path, sizeof path, "%s/%s.cl", kdir, clcnn_kernel_sources[i].name);
        write_file(path, copy);
        free(copy);
        ctx = make(devs, idx, &st);
        CHECK_MSG(st == CLCNN_ERR_BUILD &&
                      strstr(clcnn_context_errmsg(ctx), "kernel 'relu_backward' is missing") &&
                      strstr(clcnn_context_errmsg(ctx), kdir),
                  "a missing kernel: status %d: %s", (int)st, clcnn_context_errmsg(ctx));
        clcnn_context_free(ctx);
        write_file(path, src);
    }
    snprintf(path, sizeof path, "%s/util.cl", kdir);
    write_file(path, "__kernel void fill_f32(__global float *x) { x[0] = undeclared_name; }\n");
    ctx = make(devs, idx, &st);
    CHECK(st == CLCNN_ERR_BUILD);
    {
        clcnn_device_info in;
        clcnn_devices_get(devs, idx, &in);
        const char *m = clcnn_context_errmsg(ctx);
        CHECK_MSG(strstr(m, "util.cl") && strstr(m, in.name) && strstr(m, "undeclared_name"),
                  "build error message: %s", m);
        CHECK(strchr(m, '\n') == NULL);
    }
    clcnn_context_free(ctx);
    remove(path);
    ctx = make(devs, idx, &st);
    CHECK(st == CLCNN_ERR_IO && strstr(clcnn_context_errmsg(ctx), "util.cl"));
    clcnn_context_free(ctx);
    unsetenv("CLCNN_KERNEL_DIR");

    clcnn_devices_free(devs);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpl);
    if (system(cmd) != 0) fprintf(stderr, "cleanup of %s failed\n", tmpl);
    return test_finish("test_program");
}
