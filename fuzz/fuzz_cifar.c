/* libFuzzer harness: the CIFAR-10 batch parser on arbitrary bytes. A success must hold exactly
 * size / 3073 records with labels < 10; a failure must leave the data set untouched. */
#include <stdlib.h>
#include <string.h>

#include "data/dataset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    clcnn_host_dataset d = {0};
    clcnn_error e = {0};
    clcnn_status st = clcnn_cifar10_parse(data, size, "fuzz", &d, &e);
    if (st == CLCNN_SUCCESS) {
        if ((size_t)d.n != size / 3073 || d.c != 3 || d.h != 32 || d.w != 32) abort();
        for (int i = 0; i < d.n; i++)
            if (d.labels[i] >= 10 ||
                memcmp(d.images + (size_t)i * 3072, data + (size_t)i * 3073 + 1, 3072) != 0)
                abort();
    } else if (d.n != 0 || d.images || d.labels || !e.msg[0]) {
        abort();
    }
    clcnn_host_dataset_free(&d);
    return 0;
}
