/* CIFAR-10 binary batches: data_batch_1..5.bin (training) and test_batch.bin (test), each a run
 * of 3073-byte records (1 label byte, then 32x32 R, G and B planes), already in CHW order. */
#include "dataset.h"

#include <stdlib.h>
#include <string.h>

#define CIFAR_C 3
#define CIFAR_H 32
#define CIFAR_W 32
#define CIFAR_PIXELS (CIFAR_C * CIFAR_H * CIFAR_W)
#define CIFAR_RECORD (1 + CIFAR_PIXELS)
#define CIFAR_SUBDIR "cifar-10-batches-bin"
#define CIFAR_TRAIN_BATCHES 5

clcnn_status clcnn_cifar10_parse(const uint8_t *buf, size_t size, const char *name,
                                 clcnn_host_dataset *out, clcnn_error *e) {
    clcnn_status st;
    size_t n;
    if (!name) name = "<memory>";
    if (!out || (!buf && size > 0))
        return clcnn_fail(e, CLCNN_ERR_INVALID_ARGUMENT, "%s: NULL buffer or dataset", name);
    if (size == 0)
        return clcnn_fail(e, CLCNN_ERR_FORMAT, "%s: empty file, expected %d-byte CIFAR-10 records",
                          name, CIFAR_RECORD);
    if (size % CIFAR_RECORD != 0)
        return clcnn_fail(e, CLCNN_ERR_FORMAT,
                          "%s: size %zu is not a multiple of the %d-byte CIFAR-10 record", name,
                          size, CIFAR_RECORD);
    n = size / CIFAR_RECORD;
    /* Validate everything first so a bad file leaves *out untouched. */
    for (size_t i = 0; i < n; i++) {
        unsigned label = buf[i * CIFAR_RECORD];
        if (label >= 10)
            return clcnn_fail(e, CLCNN_ERR_FORMAT,
                              "%s: record %zu has label %u, expected 0..9 (is this a CIFAR-100 "
                              "file or not CIFAR at all?)",
                              name, i, label);
    }
    st = clcnn_host_dataset_reserve(out, CIFAR_C, CIFAR_H, CIFAR_W, n, name, e);
    if (st != CLCNN_SUCCESS) return st;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *rec = buf + i * CIFAR_RECORD;
        size_t dst = (size_t)out->n + i;
        out->labels[dst] = rec[0];
        memcpy(out->images + dst * CIFAR_PIXELS, rec + 1, CIFAR_PIXELS);
    }
    out->n += (int)n;
    return CLCNN_SUCCESS;
}

static int has_batches(const char *dir) {
    char path[4096];
    if (clcnn_data_path_join(path, sizeof path, dir, "data_batch_1.bin", NULL) == CLCNN_SUCCESS &&
        clcnn_data_is_file(path))
        return 1;
    return clcnn_data_path_join(path, sizeof path, dir, "test_batch.bin", NULL) == CLCNN_SUCCESS &&
           clcnn_data_is_file(path);
}

/* The folder holding the batches: dir itself, else the cifar-10-batches-bin/ that the official
 * archive unpacks to. When neither holds any, dir, so errors name the files where looked. */
static clcnn_status batch_dir(const char *dir, char *buf, size_t size, clcnn_error *e) {
    int n;
    if (!has_batches(dir)) {
        clcnn_status st = clcnn_data_path_join(buf, size, dir, CIFAR_SUBDIR, e);
        if (st != CLCNN_SUCCESS || has_batches(buf)) return st;
    }
    n = snprintf(buf, size, "%s", dir);
    if (n < 0 || (size_t)n >= size)
        return clcnn_fail(e, CLCNN_ERR_INVALID_ARGUMENT, "%s: path too long", dir);
    return CLCNN_SUCCESS;
}

int clcnn_cifar10_present(const char *dir) {
    char sub[4096];
    if (has_batches(dir)) return 1;
    return clcnn_data_path_join(sub, sizeof sub, dir, CIFAR_SUBDIR, NULL) == CLCNN_SUCCESS &&
           has_batches(sub);
}

static clcnn_status load_file(const char *path, clcnn_host_dataset *out, clcnn_error *e) {
    uint8_t *buf = NULL;
    size_t size = 0;
    clcnn_status st = clcnn_read_file_maybe_gz(path, &buf, &size, e);
    if (st != CLCNN_SUCCESS) goto fail;
    st = clcnn_cifar10_parse(buf, size, path, out, e);
fail:
    free(buf);
    return st;
}

clcnn_status clcnn_cifar10_load(const char *dir, int train, clcnn_host_dataset *out,
                                clcnn_error *e) {
    char base[4096], path[4096], name[32];
    clcnn_status st = batch_dir(dir, base, sizeof base, e);
    if (st != CLCNN_SUCCESS) return st;
    if (!train) {
        st = clcnn_data_path_join(path, sizeof path, base, "test_batch.bin", e);
        if (st != CLCNN_SUCCESS) return st;
        if (!clcnn_data_is_file(path))
            return clcnn_fail(e, CLCNN_ERR_IO, "%s: missing (the CIFAR-10 test split)", path);
        return load_file(path, out, e);
    }
    /* All five batches or none: like torchvision, an incomplete download is an error (that
     * lists what is missing), never a silent run on part of the data. */
    char missing[128] = "";
    int n_missing = 0;
    for (int k = 1; k <= CIFAR_TRAIN_BATCHES; k++) {
        snprintf(name, sizeof name, "data_batch_%d.bin", k);
        st = clcnn_data_path_join(path, sizeof path, base, name, e);
        if (st != CLCNN_SUCCESS) return st;
        if (clcnn_data_is_file(path)) continue;
        size_t used = strlen(missing);
        snprintf(missing + used, sizeof missing - used, "%s%s", n_missing++ ? ", " : "", name);
    }
    if (n_missing)
        return clcnn_fail(e, CLCNN_ERR_IO,
                          "%s: missing %s (CIFAR-10 training needs data_batch_1.bin.."
                          "data_batch_5.bin; for a smaller run use --max-steps)",
                          base, missing);
    for (int k = 1; k <= CIFAR_TRAIN_BATCHES; k++) {
        snprintf(name, sizeof name, "data_batch_%d.bin", k);
        st = clcnn_data_path_join(path, sizeof path, base, name, e);
        if (st != CLCNN_SUCCESS) return st;
        st = load_file(path, out, e);
        if (st != CLCNN_SUCCESS) return st;
    }
    return CLCNN_SUCCESS;
}
