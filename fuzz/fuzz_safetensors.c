/* libFuzzer harness: the safetensors parser (header length, JSON, dtypes, shapes, offsets,
 * overlaps, metadata). On success every tensor must lie inside the buffer, agree with its
 * shape and dtype, and be found by name; then the file is written back and parsed again, and
 * the copy must hold the same tensors and metadata. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void roundtrip(const clcnn_st_file *f) {
    static char path[256];
    clcnn_st_entry *ents = calloc((size_t)f->ntensors + 1, sizeof *ents);
    const char **meta = calloc((size_t)f->nmeta * 2 + 1, sizeof *meta);
    clcnn_st_file g = {0};
    clcnn_error e = {0};
    if (!ents || !meta) abort();
    if (!path[0]) {
        const char *dir = getenv("TMPDIR");
        snprintf(path, sizeof path, "%s/clcnn-fuzz-st-%ld", dir && *dir ? dir : "/tmp",
                 (long)getpid());
    }
    for (int i = 0; i < f->ntensors; i++) {
        const clcnn_st_tensor *t = &f->tensors[i];
        ents[i].name = t->name;
        ents[i].dtype = t->dtype;
        ents[i].ndim = t->ndim;
        memcpy(ents[i].shape, t->shape, sizeof t->shape);
        ents[i].data = clcnn_st_data(f, t);
    }
    for (int i = 0; i < f->nmeta; i++)
        meta[2 * i] = f->meta_keys[i], meta[2 * i + 1] = f->meta_values[i];
    /* The writer may refuse what the reader accepts (e.g. a tensor named like a reserved
     * key); it must then say why and write nothing. */
    if (clcnn_st_write(path, ents, f->ntensors, meta, f->nmeta, &e) == CLCNN_SUCCESS) {
        if (clcnn_st_read(&g, path, &e) != CLCNN_SUCCESS || g.ntensors != f->ntensors ||
            g.nmeta != f->nmeta)
            abort();
        for (int i = 0; i < f->ntensors; i++) {
            const clcnn_st_tensor *a = &f->tensors[i], *b = clcnn_st_find(&g, a->name);
            if (!b || b->dtype != a->dtype || b->ndim != a->ndim ||
                memcmp(b->shape, a->shape, sizeof a->shape) != 0 ||
                b->end - b->begin != a->end - a->begin ||
                memcmp(clcnn_st_data(&g, b), clcnn_st_data(f, a), a->end - a->begin) != 0)
                abort();
        }
        for (int i = 0; i < f->nmeta; i++) {
            const char *v = clcnn_st_meta(&g, f->meta_keys[i]);
            if (!v || strcmp(v, f->meta_values[i]) != 0) abort();
        }
        clcnn_st_free(&g);
        unlink(path);
    } else if (!e.msg[0]) {
        abort();
    }
    free(ents);
    free(meta);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    clcnn_st_file f;
    clcnn_error e = {0};
    if (clcnn_st_parse(&f, data, size, "fuzz", &e) != CLCNN_SUCCESS) {
        if (!e.msg[0] || f.ntensors || f.tensors) abort();
        return 0;
    }
    for (int i = 0; i < f.ntensors; i++) {
        const clcnn_st_tensor *t = &f.tensors[i];
        uint64_t count = 1;
        for (int d = 0; d < t->ndim; d++)
            count *= (uint64_t)t->shape[d];
        if (t->begin > t->end || f.data_start + t->end > size ||
            count * clcnn_st_dtype_size(t->dtype) != t->end - t->begin ||
            clcnn_st_find(&f, t->name) != t)
            abort();
    }
    for (int i = 0; i < f.nmeta; i++)
        if (!clcnn_st_meta(&f, f.meta_keys[i])) abort();
    roundtrip(&f);
    clcnn_st_free(&f);
    return 0;
}
