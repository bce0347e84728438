/* libFuzzer harness: the IDX images + labels parser. The input is split in two: its first two
 * bytes (big-endian) say how long the images part is, the rest after it is the labels file.
 * A success is parsed a second time into the same data set (append, shape check). */
#include <stdlib.h>
#include <string.h>

#include "data/dataset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    clcnn_host_dataset d = {0};
    clcnn_error e = {0};
    if (size < 2) return 0;
    size_t split = (size_t)data[0] << 8 | data[1];
    const uint8_t *rest = data + 2;
    size_t n = size - 2;
    if (split > n) split = n;
    clcnn_status st = clcnn_idx_parse(rest, split, "img", rest + split, n - split, "lab", &d, &e);
    if (st == CLCNN_SUCCESS) {
        int before = d.n;
        if (d.n <= 0 || d.c != 1 || (size_t)d.n * d.h * d.w + 16 != split) abort();
        for (int i = 0; i < d.n; i++)
            if (d.labels[i] >= 10) abort();
        /* The same files again: appended, shape unchanged. */
        if (clcnn_idx_parse(rest, split, "img", rest + split, n - split, "lab", &d, &e) ||
            d.n != 2 * before)
            abort();
    } else if (d.n != 0 || d.images || !e.msg[0]) {
        abort();
    }
    clcnn_host_dataset_free(&d);
    return 0;
}
