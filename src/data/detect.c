/* Dataset entry points: format names, detection, dispatch to the per-format readers, and what
 * those readers share (whole-file reads with transparent gunzip, path joins, dataset growth). */
#ifndef _XOPEN_SOURCE
#define _XOPEN_SOURCE 700 /* fileno, realpath (glibc hides realpath under plain POSIX) */
#endif

#include "dataset.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* next_in becomes const, so the mapped input buffer needs no cast. */
#define ZLIB_CONST
#include <zlib.h>

void clcnn_host_dataset_free(clcnn_host_dataset *d) {
    if (!d) return;
    free(d->images);
    free(d->labels);
    memset(d, 0, sizeof *d);
}

/* ASCII-only case folding: dataset names and path words are ASCII, and the C library's
 * tolower() depends on the locale an embedder may have set. */
static int lower(int ch) {
    return ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch;
}

static int equal_nocase(const char *a, const char *b) {
    while (*a && lower((unsigned char)*a) == lower((unsigned char)*b))
        a++, b++;
    return *a == '\0' && *b == '\0';
}

static int contains_nocase(const char *hay, const char *needle) {
    size_t n = strlen(needle);
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < n && lower((unsigned char)hay[i]) == lower((unsigned char)needle[i]))
            i++;
        if (i == n) return 1;
    }
    return 0;
}

int clcnn_dataset_format_parse(const char *name) {
    static const struct {
        const char *name;
        clcnn_dataset_format f;
    } names[] = {
        {"auto", CLCNN_DATASET_AUTO},
        {"cifar10", CLCNN_DATASET_CIFAR10},
        {"cifar-10", CLCNN_DATASET_CIFAR10},
        {"mnist", CLCNN_DATASET_MNIST},
        {"fashion-mnist", CLCNN_DATASET_FASHION_MNIST},
        {"fashion_mnist", CLCNN_DATASET_FASHION_MNIST},
    };
    if (!name) return -1;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (equal_nocase(name, names[i].name)) return (int)names[i].f;
    return -1;
}

const char *clcnn_dataset_format_name(clcnn_dataset_format format) {
    switch (format) {
    case CLCNN_DATASET_AUTO: return "auto";
    case CLCNN_DATASET_CIFAR10: return "cifar10";
    case CLCNN_DATASET_MNIST: return "mnist";
    case CLCNN_DATASET_FASHION_MNIST: return "fashion-mnist";
    }
    return "unknown";
}

int clcnn_data_is_file(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

int clcnn_data_is_dir(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

clcnn_status clcnn_data_path_join(char *buf, size_t size, const char *dir, const char *name,
                                  clcnn_error *e) {
    size_t len = strlen(dir);
    const char *sep = len > 0 && dir[len - 1] == '/' ? "" : "/";
    int n = snprintf(buf, size, "%s%s%s", dir, sep, name);
    if (n < 0 || (size_t)n >= size)
        return clcnn_fail(e, CLCNN_ERR_INVALID_ARGUMENT, "%s: path too long (limit %zu bytes)", dir,
                          size - 1);
    return CLCNN_SUCCESS;
}

clcnn_status clcnn_host_dataset_reserve(clcnn_host_dataset *d, int c, int h, int w, size_t more,
                                        const char *name, clcnn_error *e) {
    size_t per = (size_t)c * (size_t)h * (size_t)w, total;
    uint8_t *p;
    if (d->n > 0 && (d->c != c || d->h != h || d->w != w))
        return clcnn_fail(e, CLCNN_ERR_SHAPE,
                          "%s: images are %dx%dx%d but the dataset already holds %dx%dx%d", name, c,
                          h, w, d->c, d->h, d->w);
    if (more > (size_t)(INT_MAX - d->n))
        return clcnn_fail(e, CLCNN_ERR_FORMAT, "%s: %zu more images would exceed %d in all", name,
                          more, INT_MAX);
    total = (size_t)d->n + more;
    if (per > 0 && total > SIZE_MAX / per)
        return clcnn_fail(e, CLCNN_ERR_OUT_OF_HOST_MEMORY, "%s: %zu images of %zu bytes overflow",
                          name, total, per);
    /* +1 keeps malloc(0) out of the picture, whose NULL would read as failure. */
    p = realloc(d->images, total * per + 1);
    if (!p) goto oom;
    d->images = p;
    p = realloc(d->labels, total + 1);
    if (!p) goto oom;
    d->labels = p;
    d->c = c;
    d->h = h;
    d->w = w;
    return CLCNN_SUCCESS;
oom:
    return clcnn_fail(e, CLCNN_ERR_OUT_OF_HOST_MEMORY, "%s: out of host memory for %zu images",
                      name, total);
}

/* ---- whole-file reads ---- */

static int has_gz_suffix(const char *path) {
    size_t len = strlen(path);
    return len >= 3 && equal_nocase(path + len - 3, ".gz");
}

static clcnn_status read_raw(const char *path, size_t max_size, uint8_t **buf, size_t *size,
                             clcnn_error *e) {
    clcnn_status st = CLCNN_SUCCESS;
    struct stat sb;
    uint8_t *data = NULL;
    size_t len, got;
    FILE *f = fopen(path, "rb");
    if (!f) return clcnn_fail(e, CLCNN_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (fstat(fileno(f), &sb) != 0) {
        st = clcnn_fail(e, CLCNN_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
        goto fail;
    }
    /* A directory opens fine on Linux and only fails at the first read; say what it is. */
    if (!S_ISREG(sb.st_mode)) {
        st = clcnn_fail(e, CLCNN_ERR_IO, "%s: not a regular file", path);
        goto fail;
    }
    if ((uintmax_t)sb.st_size > (uintmax_t)max_size) {
        st = clcnn_fail(e, CLCNN_ERR_FORMAT, "%s: %jd bytes exceeds the %zu-byte limit", path,
                        (intmax_t)sb.st_size, max_size);
        goto fail;
    }
    len = (size_t)sb.st_size;
    data = malloc(len + 1);
    if (!data) {
        st = clcnn_fail(e, CLCNN_ERR_OUT_OF_HOST_MEMORY, "%s: out of host memory for %zu bytes",
                        path, len);
        goto fail;
    }
    got = fread(data, 1, len, f);
    if (got != len) {
        st = clcnn_fail(e, CLCNN_ERR_IO, "%s: read %zu of %zu bytes: %s", path, got, len,
                        ferror(f) ? strerror(errno) : "file shrank while reading");
        goto fail;
    }
    fclose(f);
    *buf = data;
    *size = len;
    return CLCNN_SUCCESS;
fail:
    free(data);
    fclose(f);
    return st;
}

/* Grows dst by doubling up to max_size + 1 bytes: one byte past the limit is how a stream that
 * exceeds it is told apart from one that fills it exactly. */
static clcnn_status grow(uint8_t **dst, size_t *cap, size_t max_size, const char *path,
                         clcnn_error *e) {
    size_t want = *cap > max_size / 2 ? max_size + 1 : *cap * 2;
    uint8_t *p;
    if (*cap > max_size)
        return clcnn_fail(e, CLCNN_ERR_FORMAT,
                          "%s: decompresses to more than the %zu-byte limit (a gzip bomb?)", path,
                          max_size);
    p = realloc(*dst, want);
    if (!p)
        return clcnn_fail(e, CLCNN_ERR_OUT_OF_HOST_MEMORY, "%s: out of host memory for %zu bytes",
                          path, want);
    *dst = p;
    *cap = want;
    return CLCNN_SUCCESS;
}

/* The gzip trailer's ISIZE (uncompressed length mod 2^32) as a first guess at the output size,
 * which saves reallocating a 47 MB buffer several times. It is only a hint: clamp it to what
 * deflate can expand to (about 1032:1) so a forged trailer cannot force a huge allocation. */
static size_t initial_capacity(const uint8_t *src, size_t src_size, size_t max_size) {
    size_t hint = src_size > SIZE_MAX / 4 ? SIZE_MAX : 4 * src_size, bound;
    if (src_size >= 18)
        hint = (size_t)src[src_size - 4] | (size_t)src[src_size - 3] << 8 |
               (size_t)src[src_size - 2] << 16 | (size_t)src[src_size - 1] << 24;
    bound = src_size > (SIZE_MAX - 4096) / 1032 ? SIZE_MAX : src_size * 1032 + 4096;
    /* Slack so an exact hint does not force one doubling just to see the end of stream. */
    hint = hint > SIZE_MAX - 64 ? SIZE_MAX : hint + 64;
    if (hint > bound) hint = bound;
    if (hint > max_size) hint = max_size;
    return hint < 4096 ? 4096 : hint;
}

/* What inflate's return code ret means once its output is counted (len bytes so far, in_pos
 * bytes of src handed to zlib): CLCNN_SUCCESS to go on, with *end set after the last gzip
 * member, or the failure. */
static clcnn_status after_inflate(z_stream *zs, int ret, const char *path, size_t src_size,
                                  size_t in_pos, size_t len, int *end, clcnn_error *e) {
    if (ret == Z_STREAM_END) {
        size_t left = zs->avail_in + (src_size - in_pos);
        if (left == 0) {
            *end = 1;
            return CLCNN_SUCCESS;
        }
        /* gzip(1) joins concatenated members; anything else after the end is damage. */
        /* next_in points into src, which is contiguous past the current chunk. */
        if (left >= 2 && zs->next_in[0] == 0x1f && zs->next_in[1] == 0x8b) {
            inflateReset(zs);
            return CLCNN_SUCCESS;
        }
        return clcnn_fail(e, CLCNN_ERR_FORMAT,
                          "%s: %zu bytes of trailing garbage after the gzip stream", path, left);
    }
    if (ret == Z_OK || (ret == Z_BUF_ERROR && zs->avail_out == 0)) return CLCNN_SUCCESS;
    if (ret == Z_BUF_ERROR && zs->avail_in == 0 && in_pos == src_size)
        return clcnn_fail(e, CLCNN_ERR_FORMAT,
                          "%s: truncated gzip stream (ends after %zu compressed bytes, %zu "
                          "decompressed)",
                          path, src_size, len);
    if (ret == Z_MEM_ERROR)
        return clcnn_fail(e, CLCNN_ERR_OUT_OF_HOST_MEMORY, "%s: zlib ran out of memory", path);
    return clcnn_fail(e, CLCNN_ERR_FORMAT, "%s: corrupt gzip stream: %s", path,
                      zs->msg ? zs->msg : zError(ret));
}

static clcnn_status gunzip(const char *path, const uint8_t *src, size_t src_size, size_t max_size,
                           uint8_t **buf, size_t *size, clcnn_error *e) {
    clcnn_status st = CLCNN_SUCCESS;
    z_stream zs;
    int zinit = 0, ret;
    size_t cap = initial_capacity(src, src_size, max_size), len = 0, in_pos = 0;
    uint8_t *dst = NULL;

    memset(&zs, 0, sizeof zs);
    if (src_size == 0) {
        st = clcnn_fail(e, CLCNN_ERR_FORMAT, "%s: empty file, expected a gzip stream", path);
        goto fail;
    }
    if (src_size < 2 || src[0] != 0x1f || src[1] != 0x8b) {
        st = clcnn_fail(e, CLCNN_ERR_FORMAT,
                        "%s: not a gzip stream (named .gz but does not start with 1f 8b)", path);
        goto fail;
    }
    dst = malloc(cap);
    if (!dst) {
        st = clcnn_fail(e, CLCNN_ERR_OUT_OF_HOST_MEMORY, "%s: out of host memory", path);
        goto fail;
    }
    /* 16 + MAX_WBITS: expect a gzip wrapper and check its CRC-32 and length. */
    if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) {
        st = clcnn_fail(e, CLCNN_ERR_OUT_OF_HOST_MEMORY, "%s: cannot initialise zlib", path);
        goto fail;
    }
    zinit = 1;
    for (int end = 0; !end;) {
        size_t room;
        /* zlib counts in uInt; feed and drain in pieces so no size is truncated. */
        if (zs.avail_in == 0 && in_pos < src_size) {
            size_t chunk = src_size - in_pos > UINT_MAX ? UINT_MAX : src_size - in_pos;
            zs.next_in = src + in_pos;
            zs.avail_in = (uInt)chunk;
            in_pos += chunk;
        }
        if (len == cap && (st = grow(&dst, &cap, max_size, path, e)) != CLCNN_SUCCESS) goto fail;
        room = cap - len > UINT_MAX ? UINT_MAX : cap - len;
        zs.next_out = dst + len;
        zs.avail_out = (uInt)room;
        ret = inflate(&zs, Z_NO_FLUSH);
        len += room - zs.avail_out;
        if (len > max_size) {
            st = grow(&dst, &cap, max_size, path, e); /* reports the limit */
            goto fail;
        }
        st = after_inflate(&zs, ret, path, src_size, in_pos, len, &end, e);
        if (st != CLCNN_SUCCESS) goto fail;
    }
    inflateEnd(&zs);
    *buf = dst;
    *size = len;
    return CLCNN_SUCCESS;
fail:
    if (zinit) inflateEnd(&zs);
    free(dst);
    return st;
}

clcnn_status clcnn_read_file_limit(const char *path, size_t max_size, uint8_t **buf, size_t *size,
                                   clcnn_error *e) {
    clcnn_status st;
    uint8_t *raw = NULL;
    size_t raw_size = 0;
    if (!path || !buf || !size)
        return clcnn_fail(e, CLCNN_ERR_INVALID_ARGUMENT, "read_file: NULL argument");
    *buf = NULL;
    *size = 0;
    /* grow() needs max_size + 1 to be representable. */
    if (max_size == SIZE_MAX) max_size--;
    st = read_raw(path, max_size, &raw, &raw_size, e);
    if (st != CLCNN_SUCCESS) return st;
    if ((raw_size >= 2 && raw[0] == 0x1f && raw[1] == 0x8b) || has_gz_suffix(path)) {
        st = gunzip(path, raw, raw_size, max_size, buf, size, e);
        free(raw);
        return st;
    }
    *buf = raw;
    *size = raw_size;
    return CLCNN_SUCCESS;
}

clcnn_status clcnn_read_file_maybe_gz(const char *path, uint8_t **buf, size_t *size,
                                      clcnn_error *e) {
    return clcnn_read_file_limit(path, CLCNN_DATA_MAX_FILE_BYTES, buf, size, e);
}

/* ---- detection and dispatch ---- */

static int path_says_fashion(const char *dir) {
    char *resolved;
    int yes;
    if (contains_nocase(dir, "fashion")) return 1;
    /* "." inside .../fashion-mnist should count too. */
    resolved = realpath(dir, NULL);
    yes = resolved && contains_nocase(resolved, "fashion");
    free(resolved);
    return yes;
}

/* Said once up front so that a mistyped path reads as such rather than as a missing file. */
static clcnn_status check_dir(const char *dir, clcnn_error *e) {
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return clcnn_fail(e, CLCNN_ERR_IO, "%s: cannot open dataset directory: %s", dir,
                          strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return clcnn_fail(e, CLCNN_ERR_IO, "%s: not a directory (pass the dataset's directory)",
                          dir);
    return CLCNN_SUCCESS;
}

clcnn_status clcnn_data_detect(const char *dir, clcnn_dataset_format *out, clcnn_error *e) {
    clcnn_status st;
    int cifar, idx;
    if (!dir || !out)
        return clcnn_fail(e, CLCNN_ERR_INVALID_ARGUMENT, "data_detect: NULL argument");
    st = check_dir(dir, e);
    if (st != CLCNN_SUCCESS) return st;
    cifar = clcnn_cifar10_present(dir);
    idx = clcnn_idx_present(dir);
    if (cifar && idx)
        return clcnn_fail(e, CLCNN_ERR_FORMAT,
                          "%s: holds both CIFAR-10 and IDX (MNIST) files; name the format", dir);
    if (cifar) {
        *out = CLCNN_DATASET_CIFAR10;
    } else if (idx) {
        *out = path_says_fashion(dir) ? CLCNN_DATASET_FASHION_MNIST : CLCNN_DATASET_MNIST;
    } else {
        return clcnn_fail(e, CLCNN_ERR_FORMAT,
                          "%s: no dataset found; expected CIFAR-10 binary (data_batch_1.bin.."
                          "data_batch_5.bin, test_batch.bin, here or in cifar-10-batches-bin/) "
                          "or MNIST/Fashion-MNIST IDX (train-images-idx3-ubyte, "
                          "train-labels-idx1-ubyte, t10k-images-idx3-ubyte, "
                          "t10k-labels-idx1-ubyte, each optionally .gz)",
                          dir);
    }
    return CLCNN_SUCCESS;
}

clcnn_status clcnn_data_load(const char *dir, clcnn_dataset_format fmt, int train,
                             clcnn_host_dataset *out, clcnn_error *e) {
    clcnn_status st;
    clcnn_host_dataset d = {0};
    if (!dir || !out) return clcnn_fail(e, CLCNN_ERR_INVALID_ARGUMENT, "data_load: NULL argument");
    memset(out, 0, sizeof *out);
    if (fmt == CLCNN_DATASET_AUTO)
        st = clcnn_data_detect(dir, &fmt, e);
    else
        st = check_dir(dir, e);
    if (st != CLCNN_SUCCESS) goto fail;
    switch (fmt) {
    case CLCNN_DATASET_CIFAR10: st = clcnn_cifar10_load(dir, train, &d, e); break;
    case CLCNN_DATASET_MNIST:
    case CLCNN_DATASET_FASHION_MNIST: st = clcnn_idx_load(dir, train, &d, e); break;
    default:
        st = clcnn_fail(e, CLCNN_ERR_INVALID_ARGUMENT, "%s: unknown dataset format %d", dir,
                        (int)fmt);
        break;
    }
    if (st != CLCNN_SUCCESS) goto fail;
    *out = d;
    return CLCNN_SUCCESS;
fail:
    clcnn_host_dataset_free(&d);
    return st;
}
