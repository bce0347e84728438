/* Dataset reader tests: small CIFAR-10 and IDX (plain and gzip) files written to a temporary
 * directory, a table of malformed inputs with the status and message each must produce, and the
 * real Fashion-MNIST when the machine has a copy. Exits non-zero on any failure. */
#ifndef _XOPEN_SOURCE
#define _XOPEN_SOURCE 700 /* mkdtemp, nftw, symlink */
#endif

#include "data/dataset.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            failures++;                                                                            \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

static char tmp[4096];

/* Returns a static "tmp/a[/b]"; two slots so a call may take two paths at once. */
static const char *at(const char *a, const char *b) {
    static char bufs[2][8192];
    static int slot;
    char *p = bufs[slot++ & 1];
    if (b)
        snprintf(p, sizeof bufs[0], "%s/%s/%s", tmp, a, b);
    else
        snprintf(p, sizeof bufs[0], "%s/%s", tmp, a);
    return p;
}

static void make_dir(const char *path) {
    if (mkdir(path, 0700) != 0) CHECK(clcnn_data_is_dir(path), "mkdir %s", path);
}

static void put(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(data, 1, size, f) == size && fclose(f) == 0, "write %s", path);
}

/* mode "wb" starts a file; "ab" appends a second gzip member. */
static void put_gz(const char *path, const void *data, size_t size, const char *mode) {
    gzFile g = gzopen(path, mode);
    CHECK(g && gzwrite(g, data, (unsigned)size) == (int)size && gzclose(g) == Z_OK, "gz %s", path);
}

/* The raw bytes of a file, gzip or not: damaging a stream needs it compressed. */
static uint8_t *slurp(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    uint8_t *buf = malloc(1 << 20);
    *size = f && buf ? fread(buf, 1, 1 << 20, f) : 0;
    CHECK(f && buf && *size > 0 && *size < (1 << 20), "read %s", path);
    if (f) fclose(f);
    return buf;
}

/* ---- synthetic content: every byte derives from where it sits, so misplacement shows ---- */

static uint8_t cifar_px(int file, int rec, int c, int y, int x) {
    return (uint8_t)(file * 31 + rec * 17 + c * 71 + y * 5 + x * 3);
}

static uint8_t cifar_label(int file, int rec) {
    return (uint8_t)((file * 3 + rec) % 10);
}

static uint8_t *cifar_buf(int file, int nrec, size_t *size) {
    uint8_t *buf = malloc((size_t)nrec * 3073), *p = buf;
    for (int r = 0; r < nrec; r++) {
        *p++ = cifar_label(file, r);
        for (int c = 0; c < 3; c++)
            for (int y = 0; y < 32; y++)
                for (int x = 0; x < 32; x++)
                    *p++ = cifar_px(file, r, c, y, x);
    }
    *size = (size_t)nrec * 3073;
    return buf;
}

static void put_cifar(const char *path, int file, int nrec) {
    size_t size;
    uint8_t *buf = cifar_buf(file, nrec, &size);
    put(path, buf, size);
    free(buf);
}

static uint8_t idx_px(int seed, int i, int y, int x) {
    return (uint8_t)(seed * 13 + i * 29 + y * 7 + x);
}

static uint8_t idx_label(int seed, int i) {
    return (uint8_t)((seed + i * 7) % 10);
}

static void be32_put(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* What an IDX pair should look like, and how to spoil it. */
typedef struct idx_spec {
    int n_img, n_lab, rows, cols, seed;
    uint32_t img_magic, lab_magic; /* 0: the right one */
    long img_delta;                /* bytes appended (>0) to or cut (<0) from the images file */
    int bad_label_at;              /* index given label 12, or -1 */
} idx_spec;

static uint8_t *idx_images(const idx_spec *s, size_t *size) {
    size_t body = (size_t)s->n_img * (size_t)s->rows * (size_t)s->cols;
    size_t full = 16 + body, len = (size_t)((long)full + s->img_delta);
    uint8_t *buf = calloc(full + (s->img_delta > 0 ? (size_t)s->img_delta : 0) + 1, 1), *p;
    be32_put(buf, s->img_magic ? s->img_magic : 0x803);
    be32_put(buf + 4, (uint32_t)s->n_img);
    be32_put(buf + 8, (uint32_t)s->rows);
    be32_put(buf + 12, (uint32_t)s->cols);
    p = buf + 16;
    for (int i = 0; i < s->n_img; i++)
        for (int y = 0; y < s->rows; y++)
            for (int x = 0; x < s->cols; x++)
                *p++ = idx_px(s->seed, i, y, x);
    *size = len;
    return buf;
}

static uint8_t *idx_labels(const idx_spec *s, size_t *size) {
    uint8_t *buf = malloc(8 + (size_t)s->n_lab + 1);
    be32_put(buf, s->lab_magic ? s->lab_magic : 0x801);
    be32_put(buf + 4, (uint32_t)s->n_lab);
    for (int i = 0; i < s->n_lab; i++)
        buf[8 + i] = idx_label(s->seed, i);
    if (s->bad_label_at >= 0) buf[8 + s->bad_label_at] = 12;
    *size = 8 + (size_t)s->n_lab;
    return buf;
}

/* Writes <split>-images<sep>idx3-ubyte[.gz] and the matching labels file into dir. */
static void put_idx(const char *dir, const char *split, const char *sep, int gz,
                    const idx_spec *s) {
    char path[8192];
    size_t size;
    uint8_t *buf = idx_images(s, &size);
    snprintf(path, sizeof path, "%s/%s-images%sidx3-ubyte%s", dir, split, sep, gz ? ".gz" : "");
    if (gz)
        put_gz(path, buf, size, "wb");
    else
        put(path, buf, size);
    free(buf);
    buf = idx_labels(s, &size);
    snprintf(path, sizeof path, "%s/%s-labels%sidx1-ubyte%s", dir, split, sep, gz ? ".gz" : "");
    if (gz)
        put_gz(path, buf, size, "wb");
    else
        put(path, buf, size);
    free(buf);
}

static idx_spec good_idx(int n, int seed) {
    idx_spec s = {n, n, 5, 4, seed, 0, 0, 0, -1};
    return s;
}

/* ---- good files ---- */

static void check_cifar_record(const clcnn_host_dataset *d, int i, int file, int rec) {
    const uint8_t *img = d->images + (size_t)i * 3072;
    int bad = 0;
    CHECK(d->labels[i] == cifar_label(file, rec), "cifar image %d: label %u, want %u", i,
          d->labels[i], cifar_label(file, rec));
    for (int c = 0; c < 3; c++)
        for (int y = 0; y < 32; y++)
            for (int x = 0; x < 32; x++)
                bad += img[c * 1024 + y * 32 + x] != cifar_px(file, rec, c, y, x);
    CHECK(bad == 0, "cifar image %d: %d pixels misplaced", i, bad);
}

static void test_cifar_good(void) {
    clcnn_host_dataset d = {0};
    clcnn_error e = {0};
    clcnn_dataset_format f = CLCNN_DATASET_AUTO;
    clcnn_status st;

    /* The layout of the official archive: five training batches, read in order. */
    make_dir(at("cifar", NULL));
    make_dir(at("cifar", "cifar-10-batches-bin"));
    put_cifar(at("cifar", "cifar-10-batches-bin/data_batch_1.bin"), 1, 2);
    put_cifar(at("cifar", "cifar-10-batches-bin/data_batch_2.bin"), 2, 3);
    put_cifar(at("cifar", "cifar-10-batches-bin/data_batch_3.bin"), 3, 1);
    put_cifar(at("cifar", "cifar-10-batches-bin/data_batch_4.bin"), 4, 1);
    put_cifar(at("cifar", "cifar-10-batches-bin/data_batch_5.bin"), 5, 2);
    put_cifar(at("cifar", "cifar-10-batches-bin/test_batch.bin"), 0, 2);

    st = clcnn_data_detect(at("cifar", NULL), &f, &e);
    CHECK(st == CLCNN_SUCCESS && f == CLCNN_DATASET_CIFAR10, "detect cifar: %d %s", (int)f, e.msg);

    st = clcnn_data_load(at("cifar", NULL), CLCNN_DATASET_AUTO, 1, &d, &e);
    CHECK(st == CLCNN_SUCCESS, "load cifar train: %s", e.msg);
    CHECK(d.n == 9 && d.c == 3 && d.h == 32 && d.w == 32, "cifar train shape %dx%dx%dx%d", d.n, d.c,
          d.h, d.w);
    if (st == CLCNN_SUCCESS && d.n == 9) {
        check_cifar_record(&d, 0, 1, 0);
        check_cifar_record(&d, 1, 1, 1);
        check_cifar_record(&d, 2, 2, 0);
        check_cifar_record(&d, 4, 2, 2);
        check_cifar_record(&d, 5, 3, 0);
        check_cifar_record(&d, 6, 4, 0);
        check_cifar_record(&d, 8, 5, 1);
    }
    clcnn_host_dataset_free(&d);
    clcnn_host_dataset_free(&d); /* twice is fine */

    /* Explicit format and the batch folder itself; test split. */
    st = clcnn_data_load(at("cifar", "cifar-10-batches-bin/"), CLCNN_DATASET_CIFAR10, 0, &d, &e);
    CHECK(st == CLCNN_SUCCESS && d.n == 2, "load cifar test: n=%d %s", d.n, e.msg);
    if (st == CLCNN_SUCCESS && d.n == 2) check_cifar_record(&d, 1, 0, 1);
    clcnn_host_dataset_free(&d);
}

static void check_idx(const clcnn_host_dataset *d, int n, int seed, const char *what) {
    int bad = 0;
    CHECK(d->n == n && d->c == 1 && d->h == 5 && d->w == 4, "%s: shape %dx%dx%dx%d", what, d->n,
          d->c, d->h, d->w);
    if (d->n != n || d->h != 5 || d->w != 4) return;
    for (int i = 0; i < n; i++) {
        bad += d->labels[i] != idx_label(seed, i);
        for (int y = 0; y < 5; y++)
            for (int x = 0; x < 4; x++)
                bad +=
                    d->images[(size_t)i * 20 + (size_t)y * 4 + (size_t)x] != idx_px(seed, i, y, x);
    }
    CHECK(bad == 0, "%s: %d bytes misplaced", what, bad);
}

static void test_idx_good(void) {
    clcnn_host_dataset d = {0};
    clcnn_error e = {0};
    clcnn_dataset_format f = CLCNN_DATASET_AUTO;
    idx_spec train = good_idx(3, 1), test = good_idx(2, 2);
    clcnn_status st;

    /* Plain, with the dot spelling for the test split. */
    make_dir(at("mnist", NULL));
    put_idx(at("mnist", NULL), "train", "-", 0, &train);
    put_idx(at("mnist", NULL), "t10k", ".", 0, &test);
    st = clcnn_data_detect(at("mnist", NULL), &f, &e);
    CHECK(st == CLCNN_SUCCESS && f == CLCNN_DATASET_MNIST, "detect mnist: %d %s", (int)f, e.msg);
    st = clcnn_data_load(at("mnist", NULL), CLCNN_DATASET_AUTO, 1, &d, &e);
    CHECK(st == CLCNN_SUCCESS, "load mnist train: %s", e.msg);
    check_idx(&d, 3, 1, "mnist train");
    clcnn_host_dataset_free(&d);
    st = clcnn_data_load(at("mnist", NULL), CLCNN_DATASET_MNIST, 0, &d, &e);
    CHECK(st == CLCNN_SUCCESS, "load mnist test: %s", e.msg);
    check_idx(&d, 2, 2, "mnist test");
    clcnn_host_dataset_free(&d);

    /* Gzip, in a directory whose name says fashion in mixed case. */
    make_dir(at("FashionGz", NULL));
    put_idx(at("FashionGz", NULL), "train", "-", 1, &train);
    put_idx(at("FashionGz", NULL), "t10k", "-", 1, &test);
    st = clcnn_data_detect(at("FashionGz", NULL), &f, &e);
    CHECK(st == CLCNN_SUCCESS && f == CLCNN_DATASET_FASHION_MNIST, "detect fashion: %d %s", (int)f,
          e.msg);
    st = clcnn_data_load(at("FashionGz", NULL), CLCNN_DATASET_AUTO, 1, &d, &e);
    CHECK(st == CLCNN_SUCCESS, "load gz train: %s", e.msg);
    check_idx(&d, 3, 1, "gz train");
    clcnn_host_dataset_free(&d);
    st = clcnn_data_load(at("FashionGz", NULL), CLCNN_DATASET_FASHION_MNIST, 0, &d, &e);
    CHECK(st == CLCNN_SUCCESS, "load gz test: %s", e.msg);
    check_idx(&d, 2, 2, "gz test");
    clcnn_host_dataset_free(&d);

    /* The word may only show once the path is resolved. */
    CHECK(symlink(at("FashionGz", NULL), at("plainlink", NULL)) == 0, "symlink");
    st = clcnn_data_detect(at("plainlink", NULL), &f, &e);
    CHECK(st == CLCNN_SUCCESS && f == CLCNN_DATASET_FASHION_MNIST, "detect via symlink: %d %s",
          (int)f, e.msg);
}

/* ---- whole-file reads: gzip members, limits ---- */

static void test_read_file(void) {
    static const char hello[] = "hello, ", world[] = "world";
    size_t big = (size_t)4 << 20, size = 0;
    uint8_t *zeros = calloc(big, 1), *buf = NULL;
    clcnn_error e = {0};
    clcnn_status st;

    make_dir(at("gz", NULL));
    /* Two members, as `cat a.gz b.gz` makes: gzip(1) joins them, so do we. */
    put_gz(at("gz", "multi.gz"), hello, 7, "wb");
    put_gz(at("gz", "multi.gz"), world, 5, "ab");
    st = clcnn_read_file_maybe_gz(at("gz", "multi.gz"), &buf, &size, &e);
    CHECK(st == CLCNN_SUCCESS && size == 12 && memcmp(buf, "hello, world", 12) == 0,
          "multi-member gzip: %s", e.msg);
    free(buf);

    /* A plain file passes through; an empty one is not an error at this level. */
    put(at("gz", "plain"), hello, 7);
    buf = NULL;
    st = clcnn_read_file_maybe_gz(at("gz", "plain"), &buf, &size, &e);
    CHECK(st == CLCNN_SUCCESS && size == 7 && memcmp(buf, hello, 7) == 0, "plain: %s", e.msg);
    free(buf);
    put(at("gz", "empty"), "", 0);
    buf = NULL;
    st = clcnn_read_file_maybe_gz(at("gz", "empty"), &buf, &size, &e);
    CHECK(st == CLCNN_SUCCESS && size == 0 && buf, "empty plain file: %s", e.msg);
    free(buf);

    /* A bomb against a small limit: over by one byte fails, exactly at the limit passes. */
    put_gz(at("gz", "bomb.gz"), zeros, big, "wb");
    buf = NULL;
    st = clcnn_read_file_limit(at("gz", "bomb.gz"), big - 1, &buf, &size, &e);
    CHECK(st == CLCNN_ERR_FORMAT && strstr(e.msg, "limit") && strstr(e.msg, "bomb.gz") && !buf,
          "bomb over limit: %d %s", (int)st, e.msg);
    st = clcnn_read_file_limit(at("gz", "bomb.gz"), big, &buf, &size, &e);
    CHECK(st == CLCNN_SUCCESS && size == big && buf && buf[big - 1] == 0, "bomb at limit: %s",
          e.msg);
    free(buf);
    buf = NULL;
    st = clcnn_read_file_limit(at("gz", "plain"), 6, &buf, &size, &e);
    CHECK(st == CLCNN_ERR_FORMAT && strstr(e.msg, "limit"), "plain over limit: %s", e.msg);
    free(zeros);
}

/* ---- parsers on every truncation: no crash, an error, and the dataset untouched ---- */

static void test_parse_sweep(void) {
    clcnn_host_dataset d = {0};
    clcnn_error e = {0};
    idx_spec s = good_idx(3, 5);
    size_t size, img_size, lab_size;
    uint8_t *buf = cifar_buf(7, 2, &size), *img, *lab;
    int bad = 0;

    for (size_t len = 0; len <= size; len++) {
        clcnn_status st = clcnn_cifar10_parse(buf, len, "sweep.bin", &d, &e);
        int want_ok = len == 3073 || len == 6146;
        bad += (st == CLCNN_SUCCESS) != want_ok;
    }
    CHECK(bad == 0 && d.n == 3, "cifar truncation sweep: %d wrong, n=%d", bad, d.n);

    /* Appending a different shape is refused. */
    img = idx_images(&s, &img_size);
    lab = idx_labels(&s, &lab_size);
    CHECK(clcnn_idx_parse(img, img_size, "i", lab, lab_size, "l", &d, &e) == CLCNN_ERR_SHAPE &&
              strstr(e.msg, "3x32x32"),
          "shape mismatch: %s", e.msg);
    clcnn_host_dataset_free(&d);

    bad = 0;
    for (size_t len = 0; len < img_size; len++)
        bad += clcnn_idx_parse(img, len, "i", lab, lab_size, "l", &d, &e) != CLCNN_ERR_FORMAT;
    for (size_t len = 0; len < lab_size; len++)
        bad += clcnn_idx_parse(img, img_size, "i", lab, len, "l", &d, &e) != CLCNN_ERR_FORMAT;
    /* Every single-byte change to the images header must be caught or harmless. */
    for (size_t i = 0; i < 16; i++) {
        for (int v = 0; v < 256; v += 51) {
            uint8_t keep = img[i];
            clcnn_status st;
            img[i] = (uint8_t)(keep ^ (v | 1));
            st = clcnn_idx_parse(img, img_size, "i", lab, lab_size, "l", &d, &e);
            bad += st != CLCNN_ERR_FORMAT && st != CLCNN_SUCCESS;
            img[i] = keep;
        }
    }
    CHECK(bad == 0 && d.n == 0, "idx sweep: %d wrong, n=%d", bad, d.n);
    CHECK(clcnn_idx_parse(img, img_size, NULL, lab, lab_size, NULL, &d, NULL) == CLCNN_SUCCESS &&
              d.n == 3,
          "idx parse with NULL names and error slot");
    clcnn_host_dataset_free(&d);
    free(img);
    free(lab);
    free(buf);
}

/* ---- malformed inputs ---- */

/* data_batch_2..5.bin, good, except the one numbered `skip` (0: none): the bad cases below
 * break batch 1 or leave batches out, and everything else must be in place. */
static void put_later_batches(const char *dir, int skip) {
    char name[32];
    for (int k = 2; k <= 5; k++) {
        if (k == skip) continue;
        snprintf(name, sizeof name, "data_batch_%d.bin", k);
        put_cifar(at(dir, name), k, 1);
    }
}

static void bad_cifar_truncated(const char *dir) {
    size_t size;
    uint8_t *buf = cifar_buf(1, 2, &size);
    put(at(dir, "data_batch_1.bin"), buf, size - 1);
    put_later_batches(dir, 0);
    free(buf);
}

static void bad_cifar_empty(const char *dir) {
    put(at(dir, "data_batch_1.bin"), "", 0);
    put_later_batches(dir, 0);
}

static void bad_cifar_label(const char *dir) {
    size_t size;
    uint8_t *buf = cifar_buf(1, 3, &size);
    buf[2 * 3073] = 10;
    put(at(dir, "data_batch_1.bin"), buf, size);
    put_later_batches(dir, 0);
    free(buf);
}

static void bad_cifar_no_batch1(const char *dir) {
    put_later_batches(dir, 0);
    put_cifar(at(dir, "test_batch.bin"), 0, 1);
}

/* An interrupted download: a gap, and the last batch missing too. */
static void bad_cifar_gap(const char *dir) {
    put_cifar(at(dir, "data_batch_1.bin"), 1, 1);
    put_cifar(at(dir, "data_batch_2.bin"), 2, 1);
    put_cifar(at(dir, "data_batch_4.bin"), 4, 1);
    put_cifar(at(dir, "test_batch.bin"), 0, 1);
}

static void bad_cifar_no_test(const char *dir) {
    put_cifar(at(dir, "data_batch_1.bin"), 1, 1);
}

static void bad_cifar_batch2(const char *dir) {
    put_cifar(at(dir, "data_batch_1.bin"), 1, 1);
    put_later_batches(dir, 2);
    put(at(dir, "data_batch_2.bin"), "x", 1);
}

static void put_idx_spec(const char *dir, idx_spec s) {
    put_idx(at(dir, NULL), "train", "-", 0, &s);
}

static void bad_idx_magic(const char *dir) {
    idx_spec s = good_idx(3, 1);
    s.img_magic = 0x801;
    put_idx_spec(dir, s);
}

static void bad_idx_label_magic(const char *dir) {
    idx_spec s = good_idx(3, 1);
    s.lab_magic = 0x08000801;
    put_idx_spec(dir, s);
}

static void bad_idx_truncated(const char *dir) {
    idx_spec s = good_idx(3, 1);
    s.img_delta = -7;
    put_idx_spec(dir, s);
}

static void bad_idx_trailing(const char *dir) {
    idx_spec s = good_idx(3, 1);
    s.img_delta = 5;
    put_idx_spec(dir, s);
}

static void bad_idx_header(const char *dir) {
    idx_spec s = good_idx(0, 1);
    s.img_delta = -6; /* 10 bytes: magic and half the dimensions */
    put_idx_spec(dir, s);
}

static void bad_idx_count(const char *dir) {
    idx_spec s = good_idx(3, 1);
    s.n_lab = 2;
    put_idx_spec(dir, s);
}

static void bad_idx_label(const char *dir) {
    idx_spec s = good_idx(3, 1);
    s.bad_label_at = 1;
    put_idx_spec(dir, s);
}

static void bad_idx_zero(const char *dir) {
    put_idx_spec(dir, good_idx(0, 1));
}

static void bad_idx_no_labels(const char *dir) {
    put_idx_spec(dir, good_idx(3, 1));
    remove(at(dir, "train-labels-idx1-ubyte"));
}

/* Writes a gzip IDX pair, then damages the images file: flips bytes in the middle of the
 * deflate data (mode 0), cuts it in half (1), appends garbage (2), or makes it not gzip at all
 * while keeping the .gz name (3). */
static void damage_gz(const char *dir, int mode) {
    idx_spec s = good_idx(8, 3);
    const char *path = at(dir, "train-images-idx3-ubyte.gz");
    size_t size = 0;
    uint8_t *buf;
    put_idx(at(dir, NULL), "train", "-", 1, &s);
    buf = slurp(path, &size);
    if (!buf) return;
    if (mode == 0)
        for (size_t i = size / 2; i < size / 2 + 4; i++)
            buf[i] ^= 0x5a;
    if (mode == 1) size /= 2;
    if (mode == 3) buf[0] = 'P';
    put(path, buf, size);
    if (mode == 2) {
        FILE *f = fopen(path, "ab");
        CHECK(f && fputs("junk", f) >= 0 && fclose(f) == 0, "append %s", path);
    }
    free(buf);
}

static void bad_gz_flipped(const char *dir) {
    damage_gz(dir, 0);
}

static void bad_gz_truncated(const char *dir) {
    damage_gz(dir, 1);
}

static void bad_gz_trailing(const char *dir) {
    damage_gz(dir, 2);
}

static void bad_gz_not_gzip(const char *dir) {
    damage_gz(dir, 3);
}

static void bad_nothing(const char *dir) {
    put(at(dir, "README.txt"), "hi", 2);
}

static void bad_both(const char *dir) {
    put_cifar(at(dir, "test_batch.bin"), 0, 1);
    put_idx_spec(dir, good_idx(1, 1));
}

typedef struct bad_case {
    const char *name;
    void (*setup)(const char *dir); /* NULL: the directory is never created */
    clcnn_dataset_format fmt;
    int train;
    clcnn_status want;
    const char *msg[2]; /* substrings the message must hold (NULL: none) */
} bad_case;

static const bad_case bad_cases[] = {
    {"cifar_trunc",
     bad_cifar_truncated,
     CLCNN_DATASET_AUTO,
     1,
     CLCNN_ERR_FORMAT,
     {"data_batch_1.bin: size 6145 is not a multiple of the 3073-byte", NULL}},
    {"cifar_empty",
     bad_cifar_empty,
     CLCNN_DATASET_AUTO,
     1,
     CLCNN_ERR_FORMAT,
     {"data_batch_1.bin: empty file", NULL}},
    {"cifar_label",
     bad_cifar_label,
     CLCNN_DATASET_CIFAR10,
     1,
     CLCNN_ERR_FORMAT,
     {"data_batch_1.bin: record 2 has label 10", NULL}},
    {"cifar_no1",
     bad_cifar_no_batch1,
     CLCNN_DATASET_AUTO,
     1,
     CLCNN_ERR_IO,
     {": missing data_batch_1.bin (", NULL}},
    {"cifar_gap",
     bad_cifar_gap,
     CLCNN_DATASET_AUTO,
     1,
     CLCNN_ERR_IO,
     {": missing data_batch_3.bin, data_batch_5.bin (",
      "needs data_batch_1.bin..data_batch_5.bin"}},
    {"cifar_notest",
     bad_cifar_no_test,
     CLCNN_DATASET_AUTO,
     0,
     CLCNN_ERR_IO,
     {"test_batch.bin: missing", NULL}},
    {"cifar_batch2",
     bad_cifar_batch2,
     CLCNN_DATASET_AUTO,
     1,
     CLCNN_ERR_FORMAT,
     {"data_batch_2.bin: size 1 ", NULL}},
    {"idx_magic",
     bad_idx_magic,
     CLCNN_DATASET_AUTO,
     1,
     CLCNN_ERR_FORMAT,
     {"train-images-idx3-ubyte: bad IDX magic 0x00000801", "expected 0x00000803"}},
    {"idx_lmagic",
     bad_idx_label_magic,
     CLCNN_DATASET_MNIST,
     1,
     CLCNN_ERR_FORMAT,
     {"train-labels-idx1-ubyte: bad IDX magic 0x08000801", NULL}},
    {"idx_trunc",
     bad_idx_truncated,
     CLCNN_DATASET_MNIST,
     1,
     CLCNN_ERR_FORMAT,
     {"train-images-idx3-ubyte: truncated", "expected 76 bytes, got 69"}},
    {"idx_trail",
     bad_idx_trailing,
     CLCNN_DATASET_MNIST,
     1,
     CLCNN_ERR_FORMAT,
     {"train-images-idx3-ubyte: 5 bytes of trailing data", NULL}},
    {"idx_header",
     bad_idx_header,
     CLCNN_DATASET_MNIST,
     1,
     CLCNN_ERR_FORMAT,
     {"train-images-idx3-ubyte: truncated IDX header: 10 bytes, expected 16", NULL}},
    {"idx_count",
     bad_idx_count,
     CLCNN_DATASET_MNIST,
     1,
     CLCNN_ERR_FORMAT,
     {"train-labels-idx1-ubyte holds 2 labels but ", "train-images-idx3-ubyte holds 3 images"}},
    {"idx_label",
     bad_idx_label,
     CLCNN_DATASET_AUTO,
     1,
     CLCNN_ERR_FORMAT,
     {"train-labels-idx1-ubyte: label 12 at index 1", NULL}},
    {"idx_zero",
     bad_idx_zero,
     CLCNN_DATASET_MNIST,
     1,
     CLCNN_ERR_FORMAT,
     {"train-images-idx3-ubyte: holds zero images", NULL}},
    {"idx_nolabels",
     bad_idx_no_labels,
     CLCNN_DATASET_MNIST,
     1,
     CLCNN_ERR_IO,
     {"no train-labels-idx1-ubyte", NULL}},
    {"idx_notest",
     bad_idx_no_labels,
     CLCNN_DATASET_MNIST,
     0,
     CLCNN_ERR_IO,
     {"no t10k-images-idx3-ubyte", NULL}},
    {"gz_flip",
     bad_gz_flipped,
     CLCNN_DATASET_MNIST,
     1,
     CLCNN_ERR_FORMAT,
     {"train-images-idx3-ubyte.gz: corrupt gzip stream", NULL}},
    {"gz_trunc",
     bad_gz_truncated,
     CLCNN_DATASET_MNIST,
     1,
     CLCNN_ERR_FORMAT,
     {"train-images-idx3-ubyte.gz: truncated gzip stream", NULL}},
    {"gz_trail",
     bad_gz_trailing,
     CLCNN_DATASET_MNIST,
     1,
     CLCNN_ERR_FORMAT,
     {"train-images-idx3-ubyte.gz: 4 bytes of trailing garbage", NULL}},
    {"gz_notgz",
     bad_gz_not_gzip,
     CLCNN_DATASET_MNIST,
     1,
     CLCNN_ERR_FORMAT,
     {"train-images-idx3-ubyte.gz: not a gzip stream", NULL}},
    {"nothing",
     bad_nothing,
     CLCNN_DATASET_AUTO,
     1,
     CLCNN_ERR_FORMAT,
     {"nothing: no dataset found", "t10k-labels-idx1-ubyte"}},
    {"both",
     bad_both,
     CLCNN_DATASET_AUTO,
     1,
     CLCNN_ERR_FORMAT,
     {"both: holds both CIFAR-10 and IDX", NULL}},
    {"wrongfmt",
     bad_cifar_no_test,
     CLCNN_DATASET_MNIST,
     1,
     CLCNN_ERR_IO,
     {"no train-images-idx3-ubyte", NULL}},
    {"absent",
     NULL,
     CLCNN_DATASET_AUTO,
     1,
     CLCNN_ERR_IO,
     {"absent: cannot open dataset directory", NULL}},
    {"absent2",
     NULL,
     CLCNN_DATASET_CIFAR10,
     0,
     CLCNN_ERR_IO,
     {"absent2: cannot open dataset directory", NULL}},
};

static void test_bad_cases(void) {
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const bad_case *c = &bad_cases[i];
        clcnn_host_dataset d = {0};
        clcnn_error e = {0};
        clcnn_status st;
        if (c->setup) {
            make_dir(at(c->name, NULL));
            c->setup(c->name);
        }
        d.n = 99; /* must come back zeroed */
        st = clcnn_data_load(at(c->name, NULL), c->fmt, c->train, &d, &e);
        CHECK(st == c->want, "%s: status %s, want %s (%s)", c->name, clcnn_status_str(st),
              clcnn_status_str(c->want), e.msg);
        for (int k = 0; k < 2; k++)
            CHECK(!c->msg[k] || strstr(e.msg, c->msg[k]), "%s: message \"%s\" lacks \"%s\"",
                  c->name, e.msg, c->msg[k]);
        CHECK(!strchr(e.msg, '\n'), "%s: message spans lines", c->name);
        CHECK(d.n == 0 && !d.images && !d.labels, "%s: dataset not zeroed on failure", c->name);
        clcnn_host_dataset_free(&d);
    }

    /* A regular file where a directory belongs. */
    {
        clcnn_dataset_format f;
        clcnn_error e = {0};
        put(at("afile", NULL), "x", 1);
        CHECK(clcnn_data_detect(at("afile", NULL), &f, &e) == CLCNN_ERR_IO &&
                  strstr(e.msg, "not a directory"),
              "detect on a file: %s", e.msg);
    }
}

static void test_names(void) {
    CHECK(clcnn_dataset_format_parse("cifar10") == CLCNN_DATASET_CIFAR10, "parse cifar10");
    CHECK(clcnn_dataset_format_parse("MNIST") == CLCNN_DATASET_MNIST, "parse MNIST");
    CHECK(clcnn_dataset_format_parse("fashion-mnist") == CLCNN_DATASET_FASHION_MNIST,
          "parse fashion");
    CHECK(clcnn_dataset_format_parse("auto") == CLCNN_DATASET_AUTO, "parse auto");
    CHECK(clcnn_dataset_format_parse("imagenet") == -1, "parse unknown");
    CHECK(clcnn_dataset_format_parse("mnis") == -1, "parse prefix");
    CHECK(clcnn_dataset_format_parse(NULL) == -1, "parse NULL");
    for (int f = CLCNN_DATASET_AUTO; f <= CLCNN_DATASET_FASHION_MNIST; f++)
        CHECK(clcnn_dataset_format_parse(clcnn_dataset_format_name((clcnn_dataset_format)f)) == f,
              "name/parse round trip %d", f);
    CHECK(strcmp(clcnn_dataset_format_name((clcnn_dataset_format)42), "unknown") == 0, "name 42");
    clcnn_host_dataset_free(NULL);
}

/* ---- the real thing, when present ---- */

static double seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void test_real_fashion(void) {
    const char *dir = getenv("CLCNN_FASHION_MNIST_DIR");
    clcnn_dataset_format f = CLCNN_DATASET_AUTO;
    clcnn_error e = {0};
    if (!dir) dir = "/usr/share/datasets/fashion-mnist";
    if (!clcnn_data_is_dir(dir)) {
        printf("skip: no Fashion-MNIST at %s\n", dir);
        return;
    }
    CHECK(clcnn_data_detect(dir, &f, &e) == CLCNN_SUCCESS && f == CLCNN_DATASET_FASHION_MNIST,
          "detect %s: %d %s", dir, (int)f, e.msg);
    for (int train = 1; train >= 0; train--) {
        clcnn_host_dataset d = {0};
        int want = train ? 60000 : 10000, hist[10] = {0}, even = 1;
        double t0 = seconds(), dt;
        clcnn_status st = clcnn_data_load(dir, CLCNN_DATASET_AUTO, train, &d, &e);
        dt = seconds() - t0;
        CHECK(st == CLCNN_SUCCESS, "load %s: %s", dir, e.msg);
        CHECK(d.n == want && d.c == 1 && d.h == 28 && d.w == 28, "fashion shape %dx%dx%dx%d", d.n,
              d.c, d.h, d.w);
        if (st != CLCNN_SUCCESS || d.n != want) {
            clcnn_host_dataset_free(&d);
            continue;
        }
        for (int i = 0; i < d.n; i++)
            hist[d.labels[i]]++;
        for (int k = 0; k < 10; k++)
            even &= hist[k] == want / 10;
        CHECK(even, "fashion %s: labels not %d per class", train ? "train" : "test", want / 10);
        /* Both splits open on an ankle boot (class 9). */
        CHECK(d.labels[0] == 9, "fashion first label %u", d.labels[0]);
        printf("fashion-mnist %s: %d images loaded in %.3f s\n", train ? "train" : "test", d.n, dt);
        clcnn_host_dataset_free(&d);
    }
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

int main(void) {
    const char *base = getenv("TMPDIR");
    snprintf(tmp, sizeof tmp, "%s/clcnn_test_data_XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        return 1;
    }
    test_names();
    test_cifar_good();
    test_idx_good();
    test_read_file();
    test_parse_sweep();
    test_bad_cases();
    test_real_fashion();
    if (nftw(tmp, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0) perror("cleanup");
    if (failures) {
        fprintf(stderr, "test_data: %d check(s) failed\n", failures);
        return 1;
    }
    printf("test_data: all checks passed\n");
    return 0;
}
