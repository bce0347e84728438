/* Host-side datasets: the in-memory form every loader fills, format detection, and the readers
 * for CIFAR-10 binary batches and IDX files (MNIST, Fashion-MNIST), plain or gzip-compressed. */
#ifndef CLCNN_DATASET_H
#define CLCNN_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

/* Largest file a loader accepts, after decompression. Far above any real dataset file (a
 * CIFAR-10 batch is 30 MB, MNIST's training images 47 MB) and low enough that a gzip bomb fails
 * with a message instead of exhausting memory. */
#define CLCNN_DATA_MAX_FILE_BYTES ((size_t)1 << 30)

/* A dataset in host memory as raw bytes; scaling to [0,1] happens later on the device. */
typedef struct clcnn_host_dataset {
    int n, c, h, w;  /* images are n x (c,h,w), channel planes in CHW order */
    uint8_t *images; /* n*c*h*w bytes, malloc'd */
    uint8_t *labels; /* n bytes, each < 10 */
} clcnn_host_dataset;

/* Frees both arrays and zeroes *d. Safe on a zeroed struct, on NULL, and twice. */
void clcnn_host_dataset_free(clcnn_host_dataset *d);

/* The formats are the public clcnn_dataset_format; clcnn_dataset_format_parse and
 * clcnn_dataset_format_name (include/clcnn.h) are defined in detect.c. */

/* Detects the format of a directory from the files it holds. CIFAR-10 is recognised by
 * data_batch_1.bin or test_batch.bin, in dir or in dir/cifar-10-batches-bin/; IDX by
 * {train,t10k}-images-idx3-ubyte[.gz]. MNIST and Fashion-MNIST cannot be told apart by content,
 * so IDX is reported as CLCNN_DATASET_FASHION_MNIST when the path (as given or resolved) contains
 * "fashion" in any case, else CLCNN_DATASET_MNIST; both load identically. A missing or
 * non-directory path is CLCNN_ERR_IO; a directory holding neither format, or both, is
 * CLCNN_ERR_FORMAT with a message listing the files expected. */
clcnn_status clcnn_data_detect(const char *dir, clcnn_dataset_format *out, clcnn_error *e);

/* Loads the training split (train=1) or the test split (train=0) of dir in the given format
 * (CLCNN_DATASET_AUTO: detect it first). *out is overwritten, so it must not hold a dataset; on
 * failure it is left zeroed. CIFAR-10 training reads data_batch_1.bin and then every following
 * data_batch_<k>.bin up to 5 that exists, stopping at the first gap; data_batch_1.bin itself
 * must exist. */
clcnn_status clcnn_data_load(const char *dir, clcnn_dataset_format fmt, int train,
                             clcnn_host_dataset *out, clcnn_error *e);

/* Parses one CIFAR-10 .bin held in memory (records of 1 label byte + 3072 pixel bytes: 1024 R,
 * 1024 G, 1024 B, each row-major 32x32) and appends its records to *out. `name` (may be NULL)
 * goes into messages. The whole buffer is validated before anything is appended, so *out is
 * unchanged on failure. Exposed for tests and fuzzers. */
clcnn_status clcnn_cifar10_parse(const uint8_t *buf, size_t size, const char *name,
                                 clcnn_host_dataset *out, clcnn_error *e);

/* Parses an IDX images file (magic 0x00000803: unsigned bytes, dims n,rows,cols big-endian) and
 * its labels file (magic 0x00000801: unsigned bytes, dim n), both already decompressed in
 * memory, and appends the images as (1,rows,cols) to *out. Each file's length must be exactly
 * what its header declares, the counts must match and be non-zero, and every label < 10. Names
 * (may be NULL) go into messages. *out is unchanged on failure. */
clcnn_status clcnn_idx_parse(const uint8_t *img, size_t img_size, const char *img_name,
                             const uint8_t *lab, size_t lab_size, const char *lab_name,
                             clcnn_host_dataset *out, clcnn_error *e);

/* Reads a whole regular file into a malloc'd *buf (never NULL on success, even when *size is
 * 0), gunzipping it through zlib when it starts with the gzip magic 1f 8b or its name ends in
 * ".gz". Concatenated gzip members are joined as gzip(1) does. A corrupt, truncated or
 * trailing-garbage gzip stream is CLCNN_ERR_FORMAT; so is content beyond
 * CLCNN_DATA_MAX_FILE_BYTES. A file that cannot be opened or read is CLCNN_ERR_IO. */
clcnn_status clcnn_read_file_maybe_gz(const char *path, uint8_t **buf, size_t *size,
                                      clcnn_error *e);

/* clcnn_read_file_maybe_gz with the size limit as a parameter (tests use a small one). */
clcnn_status clcnn_read_file_limit(const char *path, size_t max_size, uint8_t **buf, size_t *size,
                                   clcnn_error *e);

/* ---- shared by the per-format readers ---- */

/* The per-format halves of clcnn_data_load; they append to *out. */
clcnn_status clcnn_cifar10_load(const char *dir, int train, clcnn_host_dataset *out,
                                clcnn_error *e);
clcnn_status clcnn_idx_load(const char *dir, int train, clcnn_host_dataset *out, clcnn_error *e);

/* 1 when dir holds the files clcnn_data_detect looks for in that format, else 0. */
int clcnn_cifar10_present(const char *dir);
int clcnn_idx_present(const char *dir);

/* Makes room in d for `more` further images of shape (c,h,w) and their labels. The first call
 * on an empty dataset fixes the shape; later ones must match it (CLCNN_ERR_SHAPE). d->n is left
 * for the caller to advance once the new records are filled, so d stays consistent whatever
 * fails. `name` goes into messages. */
clcnn_status clcnn_host_dataset_reserve(clcnn_host_dataset *d, int c, int h, int w, size_t more,
                                        const char *name, clcnn_error *e);

/* Writes "dir/name" into buf (no doubled '/'); a result that does not fit is
 * CLCNN_ERR_INVALID_ARGUMENT. */
clcnn_status clcnn_data_path_join(char *buf, size_t size, const char *dir, const char *name,
                                  clcnn_error *e);

/* 1 when path exists and is a regular file (respectively a directory), else 0. */
int clcnn_data_is_file(const char *path);
int clcnn_data_is_dir(const char *path);

#endif
