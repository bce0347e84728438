/* libFuzzer harness: the CLCNN_VISIBLE_DEVICES filter and the selection rules over a made-up
 * list of three platforms (CPU, GPUs, an accelerator). The first two bytes choose --platform
 * and --device (or neither); the rest is the filter text. A failure must be one line; a success
 * must list each device at most once, and a selected index must be in range. */
#include <stdlib.h>
#include <string.h>

#include "device.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static clcnn_device_info infos[6];

static void fake(int i, int p, int d, clcnn_device_type t, const char *name) {
    memset(&infos[i], 0, sizeof infos[i]);
    infos[i].platform_index = p;
    infos[i].device_index = d;
    infos[i].type = t;
    snprintf(infos[i].name, sizeof infos[i].name, "%s", name);
    snprintf(infos[i].platform_name, sizeof infos[i].platform_name, "Platform %d", p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    clcnn_devices *d = NULL;
    int idx = -1;
    if (!infos[0].name[0]) {
        fake(0, 0, 0, CLCNN_DEVICE_CPU, "cpu0");
        fake(1, 1, 0, CLCNN_DEVICE_GPU, "gpu0");
        fake(2, 1, 1, CLCNN_DEVICE_GPU, "gpu1");
        fake(3, 1, 2, CLCNN_DEVICE_OTHER, "other");
        fake(4, 2, 0, CLCNN_DEVICE_ACCELERATOR, "acc0");
        fake(5, 2, 1, CLCNN_DEVICE_CPU, "cpu1");
    }
    if (size < 2) return 0;
    int platform = data[0] < 128 ? data[0] % 5 - 1 : -1, device = data[1] % 9 - 1;
    char *filter = malloc(size - 1);
    if (!filter) return 0;
    memcpy(filter, data + 2, size - 2);
    filter[size - 2] = '\0';
    clcnn_status st = clcnn_devices_create_synthetic(&d, infos, 6, filter);
    if (st == CLCNN_SUCCESS) {
        int n = clcnn_devices_count(d), seen[6] = {0};
        if (n < 0 || n > 6) abort();
        for (int i = 0; i < n; i++) {
            clcnn_device_info in;
            if (clcnn_devices_get(d, i, &in) || in.global_index < 0 || in.global_index >= 6 ||
                seen[in.global_index]++)
                abort();
        }
        if (clcnn_devices_select(d, platform, device, &idx) == CLCNN_SUCCESS) {
            if (idx < 0 || idx >= n) abort();
        } else if (!clcnn_devices_errmsg(d)[0] || strchr(clcnn_devices_errmsg(d), '\n')) {
            abort();
        }
        size_t len = clcnn_devices_format(d, idx, NULL, 0);
        char *buf = malloc(len + 1);
        if (!buf || clcnn_devices_format(d, idx, buf, len + 1) != len) abort();
        free(buf);
    } else if (d && (!clcnn_devices_errmsg(d)[0] || strchr(clcnn_devices_errmsg(d), '\n'))) {
        abort();
    }
    clcnn_devices_free(d);
    free(filter);
    return 0;
}
