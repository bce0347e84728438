/* IDX files as MNIST and Fashion-MNIST ship them: {train,t10k}-images-idx3-ubyte and
 * {train,t10k}-labels-idx1-ubyte, plain or .gz, with big-endian headers. */
#include "dataset.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define IDX_IMAGES_MAGIC 0x00000803u /* unsigned bytes, 3 dimensions */
#define IDX_LABELS_MAGIC 0x00000801u /* unsigned bytes, 1 dimension */

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* Checks the magic and that the header fits; the dimensions follow at buf + 4. */
static clcnn_status check_header(const uint8_t *buf, size_t size, const char *name, uint32_t magic,
                                 const char *what, clcnn_error *e) {
    unsigned ndims = magic & 0xff;
    size_t need = 4 + 4 * (size_t)ndims;
    uint32_t got;
    if (size == 0)
        return clcnn_fail(e, CLCNN_ERR_FORMAT, "%s: empty file, expected IDX %s", name, what);
    if (size < 4)
        return clcnn_fail(e, CLCNN_ERR_FORMAT, "%s: truncated IDX header: %zu bytes, expected %zu",
                          name, size, need);
    got = be32(buf);
    if (got != magic)
        return clcnn_fail(
            e, CLCNN_ERR_FORMAT,
            "%s: bad IDX magic 0x%08x (element type 0x%02x, %u dimensions), expected 0x%08x for "
            "%s (unsigned bytes, %u dimensions)",
            name, (unsigned)got, (unsigned)(got >> 8 & 0xff), (unsigned)(got & 0xff),
            (unsigned)magic, what, ndims);
    if (size < need)
        return clcnn_fail(e, CLCNN_ERR_FORMAT, "%s: truncated IDX header: %zu bytes, expected %zu",
                          name, size, need);
    return CLCNN_SUCCESS;
}

/* The body must be exactly what the header declares: short is a truncated download, long is
 * not the file it claims to be. `expected` saturates at UINT64_MAX when the product overflows. */
static clcnn_status check_length(size_t size, uint64_t expected, const char *name,
                                 const char *declared, clcnn_error *e) {
    if ((uint64_t)size < expected)
        return clcnn_fail(e, CLCNN_ERR_FORMAT,
                          "%s: truncated: header declares %s, expected %llu bytes, got %zu", name,
                          declared, (unsigned long long)expected, size);
    if ((uint64_t)size > expected)
        return clcnn_fail(e, CLCNN_ERR_FORMAT,
                          "%s: %llu bytes of trailing data: header declares %s, expected %llu "
                          "bytes, got %zu",
                          name, (unsigned long long)((uint64_t)size - expected), declared,
                          (unsigned long long)expected, size);
    return CLCNN_SUCCESS;
}

clcnn_status clcnn_idx_parse(const uint8_t *img, size_t img_size, const char *img_name,
                             const uint8_t *lab, size_t lab_size, const char *lab_name,
                             clcnn_host_dataset *out, clcnn_error *e) {
    clcnn_status st;
    uint32_t n, rows, cols, n_lab;
    uint64_t per, expected;
    char declared[96];
    if (!img_name) img_name = "<images>";
    if (!lab_name) lab_name = "<labels>";
    if (!out || (!img && img_size > 0) || (!lab && lab_size > 0))
        return clcnn_fail(e, CLCNN_ERR_INVALID_ARGUMENT, "%s: NULL buffer or dataset", img_name);

    st = check_header(img, img_size, img_name, IDX_IMAGES_MAGIC, "images", e);
    if (st != CLCNN_SUCCESS) return st;
    n = be32(img + 4);
    rows = be32(img + 8);
    cols = be32(img + 12);
    if (n == 0) return clcnn_fail(e, CLCNN_ERR_FORMAT, "%s: holds zero images", img_name);
    if (rows == 0 || cols == 0)
        return clcnn_fail(e, CLCNN_ERR_FORMAT, "%s: zero-sized images (%u x %u)", img_name,
                          (unsigned)rows, (unsigned)cols);
    /* rows*cols < 2^64 always; the product with n may not be, and then no file can match. */
    per = (uint64_t)rows * cols;
    expected = n > (UINT64_MAX - 16) / per ? UINT64_MAX : 16 + (uint64_t)n * per;
    snprintf(declared, sizeof declared, "%u images of %u x %u", (unsigned)n, (unsigned)rows,
             (unsigned)cols);
    st = check_length(img_size, expected, img_name, declared, e);
    if (st != CLCNN_SUCCESS) return st;
    /* The file fits in memory, but the dataset stores counts and sides as int. */
    if (n > INT_MAX || per > INT_MAX)
        return clcnn_fail(e, CLCNN_ERR_FORMAT, "%s: %s is too large", img_name, declared);

    st = check_header(lab, lab_size, lab_name, IDX_LABELS_MAGIC, "labels", e);
    if (st != CLCNN_SUCCESS) return st;
    n_lab = be32(lab + 4);
    snprintf(declared, sizeof declared, "%u labels", (unsigned)n_lab);
    st = check_length(lab_size, 8 + (uint64_t)n_lab, lab_name, declared, e);
    if (st != CLCNN_SUCCESS) return st;
    if (n_lab != n)
        return clcnn_fail(e, CLCNN_ERR_FORMAT, "%s holds %u labels but %s holds %u images",
                          lab_name, (unsigned)n_lab, img_name, (unsigned)n);
    for (size_t i = 0; i < n; i++)
        if (lab[8 + i] >= 10)
            return clcnn_fail(e, CLCNN_ERR_FORMAT, "%s: label %u at index %zu, expected 0..9",
                              lab_name, (unsigned)lab[8 + i], i);

    st = clcnn_host_dataset_reserve(out, 1, (int)rows, (int)cols, n, img_name, e);
    if (st != CLCNN_SUCCESS) return st;
    memcpy(out->images + (size_t)out->n * per, img + 16, (size_t)n * per);
    memcpy(out->labels + out->n, lab + 8, n);
    out->n += (int)n;
    return CLCNN_SUCCESS;
}

/* Finds dir/<split>-<kind>-<idx>-ubyte, preferring the plain file, then .gz, then the
 * "<kind>.<idx>" spelling some mirrors use. Writes the path that exists into path. */
static clcnn_status find_file(const char *dir, const char *split, const char *kind, const char *idx,
                              char *path, size_t size, clcnn_error *e) {
    static const char *const seps[] = {"-", "."};
    static const char *const exts[] = {"", ".gz"};
    char name[64];
    for (int s = 0; s < 2; s++) {
        for (int x = 0; x < 2; x++) {
            clcnn_status st;
            snprintf(name, sizeof name, "%s-%s%s%s-ubyte%s", split, kind, seps[s], idx, exts[x]);
            st = clcnn_data_path_join(path, size, dir, name, e);
            if (st != CLCNN_SUCCESS) return st;
            if (clcnn_data_is_file(path)) return CLCNN_SUCCESS;
        }
    }
    return clcnn_fail(e, CLCNN_ERR_IO, "%s: no %s-%s-%s-ubyte (nor .gz) for the IDX %s split", dir,
                      split, kind, idx, split);
}

int clcnn_idx_present(const char *dir) {
    char path[4096];
    return find_file(dir, "train", "images", "idx3", path, sizeof path, NULL) == CLCNN_SUCCESS ||
           find_file(dir, "t10k", "images", "idx3", path, sizeof path, NULL) == CLCNN_SUCCESS;
}

clcnn_status clcnn_idx_load(const char *dir, int train, clcnn_host_dataset *out, clcnn_error *e) {
    const char *split = train ? "train" : "t10k";
    char img_path[4096], lab_path[4096];
    uint8_t *img = NULL, *lab = NULL;
    size_t img_size = 0, lab_size = 0;
    clcnn_status st;

    st = find_file(dir, split, "images", "idx3", img_path, sizeof img_path, e);
    if (st != CLCNN_SUCCESS) goto fail;
    st = find_file(dir, split, "labels", "idx1", lab_path, sizeof lab_path, e);
    if (st != CLCNN_SUCCESS) goto fail;
    st = clcnn_read_file_maybe_gz(img_path, &img, &img_size, e);
    if (st != CLCNN_SUCCESS) goto fail;
    st = clcnn_read_file_maybe_gz(lab_path, &lab, &lab_size, e);
    if (st != CLCNN_SUCCESS) goto fail;
    st = clcnn_idx_parse(img, img_size, img_path, lab, lab_size, lab_path, out, e);
fail:
    free(lab);
    free(img);
    return st;
}
