/* safetensors files (the Hugging Face format used for checkpoints and PyTorch fixtures): a
 * validating reader over a buffer or a file, and an atomic writer. Internal to the library. */
#ifndef CLCNN_SAFETENSORS_H
#define CLCNN_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "files.h"

/* The most dimensions a tensor may have here; files with more are rejected. */
#define CLCNN_ST_MAX_DIMS 8

/* Element types, named as in the file ("F32", "BF16", ...). Prefixed clcnn_st_ so that a
 * library-wide tensor dtype can be defined elsewhere without a clash. */
typedef enum clcnn_st_dtype {
    CLCNN_ST_F32,
    CLCNN_ST_F64,
    CLCNN_ST_F16,
    CLCNN_ST_BF16,
    CLCNN_ST_I64,
    CLCNN_ST_I32,
    CLCNN_ST_I16,
    CLCNN_ST_I8,
    CLCNN_ST_U8,
    CLCNN_ST_BOOL,
    CLCNN_ST_U16,
    CLCNN_ST_U32,
    CLCNN_ST_U64,
    CLCNN_ST_F8_E4M3,
    CLCNN_ST_F8_E5M2,
    CLCNN_ST_NDTYPES /* count, not a type */
} clcnn_st_dtype;

/* Bytes per element (BOOL is one byte); 0 for a value outside the enum. */
size_t clcnn_st_dtype_size(clcnn_st_dtype dt);

/* The name the file uses ("F32"); "?" for a value outside the enum. */
const char *clcnn_st_dtype_name(clcnn_st_dtype dt);

/* Looks up a file dtype name (exact, case-sensitive). Returns 0 on success, -1 if unknown. */
int clcnn_st_dtype_from_name(const char *name, clcnn_st_dtype *out);

/* One tensor of a parsed file. begin/end are byte offsets into the data buffer. */
typedef struct clcnn_st_tensor {
    char *name; /* UTF-8, NUL-terminated, owned by the file */
    clcnn_st_dtype dtype;
    int ndim; /* 0 for a scalar */
    int64_t shape[CLCNN_ST_MAX_DIMS];
    size_t begin, end;
} clcnn_st_tensor;

/* A parsed file. Zero-initialise before first use; treat every field as read-only. */
typedef struct clcnn_st_file {
    const unsigned char *bytes; /* the whole file: borrowed (parse) or == owned (read) */
    size_t size;
    size_t data_start; /* offset of the data buffer in bytes: 8 + header length */
    int ntensors;
    clcnn_st_tensor *tensors; /* in header order */
    int nmeta;
    char **meta_keys; /* __metadata__, in header order */
    char **meta_values;
    /* Internal. */
    unsigned char *owned;      /* file contents read by clcnn_st_read, else NULL */
    char *strings;             /* every decoded name, key and value lives here */
    clcnn_st_tensor **by_name; /* tensors sorted by name, for clcnn_st_find */
} clcnn_st_file;

/* Parses a safetensors image in memory. The buffer is borrowed, not copied: it must outlive
 * *f. *f is overwritten (free a previous file first); on failure it is left zeroed. `name`
 * (a path, usually) opens every error message. Rejects, with CLCNN_ERR_FORMAT: truncation,
 * malformed JSON, unknown dtypes, bad shapes or offsets, length/shape mismatches, overlapping
 * tensors, duplicate names and non-string metadata. */
clcnn_status clcnn_st_parse(clcnn_st_file *f, const unsigned char *buf, size_t size,
                            const char *name, clcnn_error *e);

/* Reads the whole file at `path` and parses it; *f owns the bytes. The file must be a regular
 * file (a folder, a device such as /dev/zero or a FIFO is CLCNN_ERR_IO, never an endless read
 * or a hang) of at most max bytes (else CLCNN_ERR_FORMAT, before anything is read).
 * CLCNN_ERR_IO when the file cannot be opened or read. */
clcnn_status clcnn_st_read_max(clcnn_st_file *f, const char *path, size_t max, clcnn_error *e);
/* The same without a size limit. */
clcnn_status clcnn_st_read(clcnn_st_file *f, const char *path, clcnn_error *e);

/* The longest header clcnn_st_read_header accepts: the limit of the reference implementation
 * (safetensors' MAX_HEADER_SIZE). */
#define CLCNN_ST_MAX_HEADER 100000000

/* Reads and parses only the header of the file at `path` (its names, shapes, offsets, checked
 * against the file's size, and its metadata), however large the file: tensor data is not
 * read, so clcnn_st_data must not be used on *f. */
clcnn_status clcnn_st_read_header(clcnn_st_file *f, const char *path, clcnn_error *e);

/* The tensor called `name`, or NULL. O(log n). */
const clcnn_st_tensor *clcnn_st_find(const clcnn_st_file *f, const char *name);

/* The first byte of t's data (t->end - t->begin bytes, little-endian). Not aligned in
 * general: copy it out with memcpy rather than casting. */
const void *clcnn_st_data(const clcnn_st_file *f, const clcnn_st_tensor *t);

/* The __metadata__ value for `key`, or NULL when absent. */
const char *clcnn_st_meta(const clcnn_st_file *f, const char *key);

/* Releases everything *f owns and zeroes it. Safe on a zeroed struct and twice; NULL is a
 * no-op. */
void clcnn_st_free(clcnn_st_file *f);

/* One tensor to write; data holds product(shape) * dtype_size bytes, little-endian. */
typedef struct clcnn_st_entry {
    const char *name;
    clcnn_st_dtype dtype;
    int ndim;
    int64_t shape[CLCNN_ST_MAX_DIMS];
    const void *data; /* may be NULL when the tensor has no elements */
} clcnn_st_entry;

/* Writes a safetensors file atomically: into a fresh temporary file beside it (see
 * clcnn_tmp_create in files.h: created exclusively, mode 0600, never through a link), flushed
 * and fsync'd, given the mode a new file would have, then renamed over `path`. On any failure
 * the temporary file is removed and a file already at `path` is left as it was. Tensors are
 * stored in the given order, back to back (no gaps, as the Python reader requires), so data
 * may be unaligned; the header is padded with spaces to a multiple of 8 bytes as the Python
 * writer does. meta holds n_meta key/value pairs (meta[2i], meta[2i+1]) and may be NULL when
 * n_meta is 0. Names must be valid UTF-8 and unique, and no tensor may be called
 * "__metadata__" (CLCNN_ERR_INVALID_ARGUMENT); write failures are CLCNN_ERR_IO. POSIX only. */
clcnn_status clcnn_st_write(const char *path, const clcnn_st_entry *entries, int n,
                            const char *const *meta, int n_meta, clcnn_error *e);

/* The two halves of clcnn_st_write, for callers that must write several files before any of
 * them replaces its predecessor (a checkpoint's weights and optimizer state): write_tmp writes
 * and fsyncs a temporary file beside path and holds it in *tmp, open and locked so that no
 * sweep removes it (clcnn_write_tmp in files.h), leaving nothing behind on failure; commit
 * renames it over path, syncs the directory and closes it, and removes it when the rename
 * fails. A caller that gives up between the two calls clcnn_tmp_discard. */
clcnn_status clcnn_st_write_tmp(const char *path, const clcnn_st_entry *entries, int n,
                                const char *const *meta, int n_meta, clcnn_tmpfile *tmp,
                                clcnn_error *e);
clcnn_status clcnn_st_commit(clcnn_tmpfile *tmp, const char *path, clcnn_error *e);

#endif
