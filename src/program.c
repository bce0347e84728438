/* Builds the embedded (or CLCNN_KERNEL_DIR) kernel sources for a device, with an on-disk
 * program-binary cache keyed by an XXH3-128 hash of everything that affects the binary. */
#include "program.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "files.h"

/* Cache file layout: magic, the entry's own cache key (32 hex digits), the lengths of the
 * kernel-name list and of the binary, an XXH64 of both, then the kernel names
 * (CL_PROGRAM_KERNEL_NAMES of the program built from source: "a;b;c") and the binary. A file
 * that fails any check is ignored and rebuilt: a torn write or a foreign file must never
 * crash. The key ties an entry to its name (an entry copied or renamed over another's is
 * refused) and the names to what its source defines (a binary that loads without them is
 * refused). */
static const char cache_magic[8] = {'C', 'L', 'C', 'N', 'N', 'B', 'N', '2'};
enum { CACHE_KEY = 8, CACHE_LENS = 40, CACHE_HEADER = 64 };

static char *read_text_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) goto fail;
    if (!(buf = malloc((size_t)n + 1))) goto fail;
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) goto fail;
    buf[n] = '\0';
    *len = (size_t)n;
    fclose(f);
    return buf;
fail:
    free(buf);
    fclose(f);
    return NULL;
}

static void cache_key(const char *src, size_t len, const char *options,
                      const clcnn_device_info *info, char hex[33]) {
    XXH3_state_t *s = XXH3_createState();
    XXH128_hash_t h;
    const char *parts[] = {options,    info->platform_name,  info->platform_version,
                           info->name, info->driver_version, clcnn_version()};
    XXH3_128bits_reset(s);
    XXH3_128bits_update(s, src, len);
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) /* NUL separates the fields */
        XXH3_128bits_update(s, parts[i], strlen(parts[i]) + 1);
    h = XXH3_128bits_digest(s);
    XXH3_freeState(s);
    snprintf(hex, 33, "%016llx%016llx", (unsigned long long)h.high64, (unsigned long long)h.low64);
}

/* Reads a cache entry when it is a regular file of ours (on PoCL a program binary is native
 * code: an entry someone else could have written is never loaded). */
static unsigned char *read_owned(const char *path, size_t *len) {
    struct stat sb;
    unsigned char *buf = NULL;
    size_t got = 0;
    int fd = clcnn_open_owned(path);
    if (fd < 0) return NULL;
    if (fstat(fd, &sb) != 0 || sb.st_size <= 0 || (uintmax_t)sb.st_size > (uintmax_t)1 << 30 ||
        !(buf = malloc((size_t)sb.st_size)))
        goto fail;
    while (got < (size_t)sb.st_size) {
        ssize_t k = read(fd, buf + got, (size_t)sb.st_size - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) goto fail;
        got += (size_t)k;
    }
    close(fd);
    *len = got;
    return buf;
fail:
    free(buf);
    close(fd);
    return NULL;
}

/* The program's kernel names (CL_PROGRAM_KERNEL_NAMES, malloc'd), or NULL. */
static char *kernel_names(cl_program prog) {
    size_t n = 0;
    char *names = NULL;
    if (clGetProgramInfo(prog, CL_PROGRAM_KERNEL_NAMES, 0, NULL, &n) != CL_SUCCESS || n == 0 ||
        !(names = malloc(n + 1)))
        return NULL;
    if (clGetProgramInfo(prog, CL_PROGRAM_KERNEL_NAMES, n, names, NULL) != CL_SUCCESS) {
        free(names);
        return NULL;
    }
    names[n] = '\0';
    return names;
}

/* Whether name (len bytes) is one of the ';'-separated names in list. */
static int name_listed(const char *list, const char *name, size_t len) {
    for (const char *p = list; *p;) {
        size_t k = strcspn(p, ";");
        if (k == len && memcmp(p, name, len) == 0) return 1;
        p += k + (p[k] == ';');
    }
    return 0;
}

/* Whether two ';'-separated lists of distinct names hold the same names, in any order. */
static int same_names(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    for (const char *p = a; *p;) {
        size_t k = strcspn(p, ";");
        if (k && !name_listed(b, p, k)) return 0;
        na += k > 0;
        p += k + (p[k] == ';');
    }
    for (const char *p = b; *p;) {
        size_t k = strcspn(p, ";");
        nb += k > 0;
        p += k + (p[k] == ';');
    }
    return na == nb;
}

/* Loads and builds a cached binary; returns NULL (and leaves nothing behind) on any problem:
 * a damaged file, an entry made for another key, or a binary that does not define the kernels
 * its source did. */
static cl_program load_cached(cl_context context, cl_device_id device, const char *path,
                              const char *key, const char *options) {
    size_t n = 0;
    unsigned char *buf = read_owned(path, &n);
    cl_program prog = NULL;
    uint64_t nlen, blen, hash;
    cl_int rc, bin_status;
    char *names = NULL, *loaded = NULL;
    if (!buf) return NULL;
    if (n < CACHE_HEADER || memcmp(buf, cache_magic, 8) != 0) goto done;
    if (memcmp(buf + CACHE_KEY, key, 32) != 0) goto done;
    memcpy(&nlen, buf + CACHE_LENS, 8);
    memcpy(&blen, buf + CACHE_LENS + 8, 8);
    memcpy(&hash, buf + CACHE_LENS + 16, 8);
    if (blen == 0 || nlen == 0 || nlen > n - CACHE_HEADER || blen != n - CACHE_HEADER - nlen)
        goto done;
    if (XXH64(buf + CACHE_HEADER, (size_t)(nlen + blen), 0) != hash) goto done;
    if (!(names = malloc((size_t)nlen + 1))) goto done;
    memcpy(names, buf + CACHE_HEADER, (size_t)nlen);
    names[nlen] = '\0';
    const unsigned char *bin = buf + CACHE_HEADER + nlen;
    size_t bin_len = (size_t)blen;
    prog = clCreateProgramWithBinary(context, 1, &device, &bin_len, &bin, &bin_status, &rc);
    if (rc != CL_SUCCESS || bin_status != CL_SUCCESS) {
        if (prog) clReleaseProgram(prog);
        prog = NULL;
        goto done;
    }
    if (clBuildProgram(prog, 1, &device, options, NULL, NULL) != CL_SUCCESS ||
        !(loaded = kernel_names(prog)) || !same_names(names, loaded)) {
        clReleaseProgram(prog);
        prog = NULL;
    }
done:
    free(loaded);
    free(names);
    free(buf);
    return prog;
}

static void store_cached(cl_program prog, const char *path, const char *key) {
    size_t blen = 0, nlen;
    unsigned char *buf = NULL;
    char *names = kernel_names(prog);
    if (!names) return;
    nlen = strlen(names);
    if (nlen == 0 ||
        clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof blen, &blen, NULL) != CL_SUCCESS ||
        blen == 0 || !(buf = malloc(CACHE_HEADER + nlen + blen))) {
        free(names);
        return;
    }
    unsigned char *bin = buf + CACHE_HEADER + nlen;
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) == CL_SUCCESS) {
        uint64_t l[2] = {nlen, blen};
        memcpy(buf + CACHE_HEADER, names, nlen);
        uint64_t h = XXH64(buf + CACHE_HEADER, nlen + blen, 0);
        memcpy(buf, cache_magic, 8);
        memcpy(buf + CACHE_KEY, key, 32);
        memcpy(buf + CACHE_LENS, l, 16);
        memcpy(buf + CACHE_LENS + 16, &h, 8);
        /* A cache that cannot be written only costs speed: failures are ignored. */
        clcnn_write_file_atomic(path, buf, CACHE_HEADER + nlen + blen, 0, NULL);
    }
    free(buf);
    free(names);
}

static clcnn_status build_one(cl_context context, cl_device_id device,
                              const clcnn_device_info *info, const char *name, const char *src,
                              size_t len, const char *options, const char *cache_dir, int load,
                              cl_program *out, int *from_cache, clcnn_error *e) {
    char key[33], path[4200];
    cl_int rc;
    cl_program prog;
    *from_cache = 0;
    if (cache_dir[0]) {
        cache_key(src, len, options, info, key);
        snprintf(path, sizeof path, "%s/%s-%s.bin", cache_dir, name, key);
        if (load && (*out = load_cached(context, device, path, key, options))) {
            *from_cache = 1;
            return CLCNN_SUCCESS;
        }
    }
    prog = clCreateProgramWithSource(context, 1, &src, &len, &rc);
    if (rc != CL_SUCCESS)
        return clcnn_fail(e, (clcnn_status)rc, "clCreateProgramWithSource(%s.cl) failed: %s", name,
                          clcnn_cl_error_name(rc));
    rc = clBuildProgram(prog, 1, &device, options, NULL, NULL);
    if (rc != CL_SUCCESS) {
        char log[700] = "";
        size_t n = 0;
        clGetProgramBuildInfo(prog, device, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, &n);
        if (n == 0 || n >= sizeof log) { /* longer than the buffer: fetch the head of it */
            char *full = NULL;
            size_t m = 0;
            clGetProgramBuildInfo(prog, device, CL_PROGRAM_BUILD_LOG, 0, NULL, &m);
            if (m && (full = malloc(m))) {
                clGetProgramBuildInfo(prog, device, CL_PROGRAM_BUILD_LOG, m, full, NULL);
                snprintf(log, sizeof log, "%s", full);
                free(full);
            }
        }
        for (char *p = log; *p; p++) /* keep the error on one line */
            if (*p == '\n' || *p == '\r') *p = ' ';
        clReleaseProgram(prog);
        return clcnn_fail(e, CLCNN_ERR_BUILD, "building %s.cl for %s failed (%s): %s", name,
                          info->name, clcnn_cl_error_name(rc), log);
    }
    if (cache_dir[0]) store_cached(prog, path, key);
    *out = prog;
    return CLCNN_SUCCESS;
}

/* Whether each of the n required kernels is defined by one of the programs; 0 also when
 * memory runs out (the caller then rebuilds, which is only slower). */
static int all_defined(cl_program *progs, const char *const *required, int n) {
    int np = clcnn_kernel_source_count, ok;
    char **names = calloc((size_t)np, sizeof *names);
    if (!names) return 0;
    for (int i = 0; i < np; i++)
        names[i] = kernel_names(progs[i]);
    ok = 1;
    for (int k = 0; ok && k < n; k++) {
        int found = 0;
        for (int i = 0; !found && i < np; i++)
            found = names[i] && name_listed(names[i], required[k], strlen(required[k]));
        ok = found;
    }
    for (int i = 0; i < np; i++)
        free(names[i]);
    free(names);
    return ok;
}

clcnn_status clcnn_programs_build(cl_context context, cl_device_id device,
                                  const clcnn_device_info *info, const char *options,
                                  const char *cache, const char *kdir, const char *const *required,
                                  int n_required, cl_program *progs, int *all_cached, char *note,
                                  size_t note_size, clcnn_error *e) {
    char cache_dir[4096];
    clcnn_status st = CLCNN_SUCCESS;
    int i, cached_count = 0, np = clcnn_kernel_source_count;
    int *hit = calloc((size_t)np + 1, sizeof *hit);
    note[0] = '\0';
    if (!hit) return clcnn_fail(e, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    snprintf(cache_dir, sizeof cache_dir, "%s", cache);
    /* The cache folder must be ours and private (created 0700): otherwise no entry is loaded
     * or stored, and the note says why. */
    if (cache_dir[0]) {
        char why[4400];
        if (clcnn_private_dir_why(cache_dir, why, sizeof why) != 0) {
            snprintf(note, note_size, "the kernel cache is off: %s", why);
            cache_dir[0] = '\0';
        } else {
            clcnn_tmp_sweep(cache_dir, ".bin");
        }
    }
    for (i = 0; i < np; i++)
        progs[i] = NULL;
    /* Two rounds at most: the second compiles from source what came from the cache, and
     * replaces those entries, when the programs together lack a kernel the library needs (an
     * entry that passed every check of its own yet defines the wrong kernels). */
    for (int round = 0; round < 2; round++) {
        for (i = 0; i < np; i++) {
            const clcnn_kernel_source *ks = &clcnn_kernel_sources[i];
            char *disk = NULL;
            const char *src = ks->src;
            size_t len = ks->len;
            if (progs[i]) continue;
            if (kdir[0]) {
                char path[4200];
                snprintf(path, sizeof path, "%s/%s.cl", kdir, ks->name);
                if (!(disk = read_text_file(path, &len))) {
                    st = clcnn_fail(e, CLCNN_ERR_IO, "CLCNN_KERNEL_DIR: cannot read %s: %s", path,
                                    strerror(errno ? errno : EIO));
                    goto fail;
                }
                src = disk;
            }
            st = build_one(context, device, info, ks->name, src, len, options, cache_dir,
                           round == 0, &progs[i], &hit[i], e);
            free(disk);
            if (st != CLCNN_SUCCESS) goto fail;
        }
        cached_count = 0;
        for (i = 0; i < np; i++)
            cached_count += hit[i];
        if (!cached_count || all_defined(progs, required, n_required)) break;
        for (i = 0; i < np; i++)
            if (hit[i]) {
                clReleaseProgram(progs[i]);
                progs[i] = NULL;
                hit[i] = 0;
            }
        snprintf(note, note_size,
                 "the programs from the kernel cache lacked a kernel the library needs; %d "
                 "rebuilt from source",
                 cached_count);
        cached_count = 0;
    }
    free(hit);
    *all_cached = cached_count == np;
    return CLCNN_SUCCESS;
fail:
    for (int j = 0; j < np; j++) {
        if (progs[j]) clReleaseProgram(progs[j]);
        progs[j] = NULL;
    }
    free(hit);
    return st;
}
