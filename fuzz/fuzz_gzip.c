/* libFuzzer harness: the file reader with its gzip decoder (clcnn_read_file_limit), fed through
 * a real file because that is its interface. Odd first byte: the rest is written to a file
 * named *.gz (always gunzipped); even: to a plain name (gunzipped when it starts with 1f 8b).
 * A 64 KiB limit keeps decompression bombs cheap; success must return a buffer within it. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/dataset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char paths[2][256];
static int fds[2] = {-1, -1};

static void setup(void) {
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    for (int i = 0; i < 2; i++) {
        snprintf(paths[i], sizeof paths[i], "%s/clcnn-fuzz-%ld%s", dir, (long)getpid(),
                 i ? ".bin" : ".gz");
        fds[i] = open(paths[i], O_RDWR | O_CREAT | O_TRUNC, 0600);
        if (fds[i] < 0) abort();
    }
}

static void cleanup(void) {
    for (int i = 0; i < 2; i++)
        unlink(paths[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *buf = NULL;
    size_t got = 0;
    clcnn_error e = {0};
    if (fds[0] < 0) {
        setup();
        atexit(cleanup);
    }
    if (size < 1) return 0;
    int which = data[0] & 1 ? 0 : 1;
    if (ftruncate(fds[which], 0) != 0 ||
        pwrite(fds[which], data + 1, size - 1, 0) != (ssize_t)(size - 1))
        abort();
    clcnn_status st = clcnn_read_file_limit(paths[which], (size_t)1 << 16, &buf, &got, &e);
    if (st == CLCNN_SUCCESS) {
        if (!buf || got > ((size_t)1 << 16)) abort();
        /* A plain file comes back as it is. */
        if (which == 1 && !(size >= 3 && data[1] == 0x1f && data[2] == 0x8b) &&
            (got != size - 1 || (got && memcmp(buf, data + 1, got) != 0)))
            abort();
    } else if (buf || !e.msg[0]) {
        abort();
    }
    free(buf);
    return 0;
}
