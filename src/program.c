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

/* Cache file layout: magic, binary length, XXH64 of the binary, then the binary. A file that
 * fails any check is ignored and rebuilt: a torn write or a foreign file must never crash. */
static const char cache_magic[8] = {'C', 'L', 'C', 'N', 'N', 'B', 'N', '1'};
enum { CACHE_HEADER = 24 };

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

/* Loads and builds a cached binary; returns NULL (and leaves nothing behind) on any problem. */
static cl_program load_cached(cl_context context, cl_device_id device, const char *path,
                              const char *options) {
    size_t n = 0;
    unsigned char *buf = read_owned(path, &n);
    cl_program prog = NULL;
    uint64_t blen, hash;
    cl_int rc, bin_status;
    if (!buf) return NULL;
    if (n < CACHE_HEADER || memcmp(buf, cache_magic, 8) != 0) goto done;
    memcpy(&blen, buf + 8, 8);
    memcpy(&hash, buf + 16, 8);
    if (blen != n - CACHE_HEADER || blen == 0) goto done;
    if (XXH64(buf + CACHE_HEADER, (size_t)blen, 0) != hash) goto done;
    const unsigned char *bin = buf + CACHE_HEADER;
    size_t bin_len = (size_t)blen;
    prog = clCreateProgramWithBinary(context, 1, &device, &bin_len, &bin, &bin_status, &rc);
    if (rc != CL_SUCCESS || bin_status != CL_SUCCESS) {
        if (prog) clReleaseProgram(prog);
        prog = NULL;
        goto done;
    }
    if (clBuildProgram(prog, 1, &device, options, NULL, NULL) != CL_SUCCESS) {
        clReleaseProgram(prog);
        prog = NULL;
    }
done:
    free(buf);
    return prog;
}

static void store_cached(cl_program prog, const char *path) {
    size_t blen = 0;
    unsigned char *buf = NULL;
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof blen, &blen, NULL) != CL_SUCCESS ||
        blen == 0)
        return;
    if (!(buf = malloc(CACHE_HEADER + blen))) return;
    unsigned char *bin = buf + CACHE_HEADER;
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) == CL_SUCCESS) {
        uint64_t l = blen, h = XXH64(bin, blen, 0);
        memcpy(buf, cache_magic, 8);
        memcpy(buf + 8, &l, 8);
        memcpy(buf + 16, &h, 8);
        /* A cache that cannot be written only costs speed: failures are ignored. */
        clcnn_write_file_atomic(path, buf, CACHE_HEADER + blen, 0, NULL);
    }
    free(buf);
}

static clcnn_status build_one(cl_context context, cl_device_id device,
                              const clcnn_device_info *info, const char *name, const char *src,
                              size_t len, const char *options, const char *cache_dir,
                              cl_program *out, int *from_cache, clcnn_error *e) {
    char key[33], path[4200];
    cl_int rc;
    cl_program prog;
    *from_cache = 0;
    if (cache_dir[0]) {
        cache_key(src, len, options, info, key);
        snprintf(path, sizeof path, "%s/%s-%s.bin", cache_dir, name, key);
        if ((*out = load_cached(context, device, path, options))) {
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
    if (cache_dir[0]) store_cached(prog, path);
    *out = prog;
    return CLCNN_SUCCESS;
}

clcnn_status clcnn_programs_build(cl_context context, cl_device_id device,
                                  const clcnn_device_info *info, const char *options,
                                  const char *cache, const char *kdir, cl_program *progs,
                                  int *all_cached, clcnn_error *e) {
    char cache_dir[4096];
    clcnn_status st = CLCNN_SUCCESS;
    int i, cached_count = 0;
    snprintf(cache_dir, sizeof cache_dir, "%s", cache);
    /* The cache folder must be ours (created 0700): otherwise no entry is loaded or stored. */
    if (cache_dir[0] && clcnn_private_dir(cache_dir) != 0)
        cache_dir[0] = '\0';
    else if (cache_dir[0])
        clcnn_tmp_sweep(cache_dir, ".bin");
    for (i = 0; i < clcnn_kernel_source_count; i++)
        progs[i] = NULL;
    for (i = 0; i < clcnn_kernel_source_count; i++) {
        const clcnn_kernel_source *ks = &clcnn_kernel_sources[i];
        char *disk = NULL;
        const char *src = ks->src;
        size_t len = ks->len;
        int hit = 0;
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
        st = build_one(context, device, info, ks->name, src, len, options, cache_dir, &progs[i],
                       &hit, e);
        free(disk);
        if (st != CLCNN_SUCCESS) goto fail;
        cached_count += hit;
    }
    *all_cached = cached_count == clcnn_kernel_source_count;
    return CLCNN_SUCCESS;
fail:
    for (int j = 0; j < clcnn_kernel_source_count; j++) {
        if (progs[j]) clReleaseProgram(progs[j]);
        progs[j] = NULL;
    }
    return st;
}
