/* Lists the OpenCL devices clcnn can see (honouring CLCNN_VISIBLE_DEVICES) and the one it
 * would pick by default, then builds clcnn's kernels on it. */
#include <stdio.h>
#include <stdlib.h>

#include <clcnn.h>

int main(void) {
    clcnn_devices *devs = NULL;
    clcnn_context *ctx = NULL;
    int idx = -1, rc = 1;
    if (clcnn_version()[0] != CLCNN_VERSION_STRING[0]) {
        fprintf(stderr, "header %s does not match library %s\n", CLCNN_VERSION_STRING,
                clcnn_version());
        return 1;
    }
    if (clcnn_devices_create(&devs, NULL) != CLCNN_SUCCESS ||
        clcnn_devices_select(devs, -1, -1, &idx) != CLCNN_SUCCESS) {
        fprintf(stderr, "list_devices: %s\n", clcnn_devices_errmsg(devs));
        goto done;
    }
    for (int i = 0; i < clcnn_devices_count(devs); i++) {
        clcnn_device_info in;
        clcnn_devices_get(devs, i, &in);
        printf("%s%d  %d:%d  %s  (%s, %u compute units, %.1f GiB)\n", i == idx ? "*" : " ",
               in.global_index, in.platform_index, in.device_index, in.name, in.platform_name,
               in.compute_units, (double)in.global_mem_bytes / (1 << 30));
    }
    if (clcnn_context_create(&ctx, devs, idx, NULL) != CLCNN_SUCCESS) {
        fprintf(stderr, "list_devices: %s\n", clcnn_context_errmsg(ctx));
        goto done;
    }
    printf("clcnn %s: kernels ready in %.3f s\n", clcnn_version(),
           clcnn_context_build_seconds(ctx));
    rc = 0;
done:
    clcnn_context_free(ctx);
    clcnn_devices_free(devs);
    return rc;
}
