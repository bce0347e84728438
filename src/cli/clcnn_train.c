/* clcnn_train: the command-line front end. It uses only the public API (include/clcnn.h);
 * it is the one place that prints. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clcnn.h"

typedef struct cli_options {
    int platform, device;
    int list_devices, version, help;
} cli_options;

static const char usage_text[] =
    "Usage: clcnn_train [options]\n"
    "Train a CNN on an OpenCL device (the PyTorch CIFAR-10 tutorial loop).\n"
    "\n"
    "Device selection:\n"
    "  --list-devices        list the visible OpenCL devices (like nvidia-smi) and exit\n"
    "  --platform P          use platform P (index in clGetPlatformIDs order)\n"
    "  --device D            with --platform: the D-th visible device of platform P;\n"
    "                        alone: the D-th device of the visible list\n"
    "                        (neither: the first visible GPU, else the first visible device)\n"
    "  --version             print clcnn's version and the OpenCL/CLBlast versions found\n"
    "  -h, --help            show this help\n"
    "\n"
    "Environment:\n"
    "  CLCNN_VISIBLE_DEVICES  comma list of global indices (3), P:D pairs (0:1) or type words\n"
    "                         (cpu, gpu, accelerator); its order is the visible order; empty\n"
    "                         hides every device\n"
    "  CLCNN_KERNEL_DIR       read kernel sources from DIR/<name>.cl instead of the embedded ones\n"
    "  CLCNN_CACHE_DIR        program-binary cache folder (default $XDG_CACHE_HOME/clcnn or\n"
    "                         ~/.cache/clcnn); CLCNN_CACHE=0 turns the cache off\n";

static void die(const char *fmt, const char *a, const char *b) {
    fprintf(stderr, "clcnn_train: ");
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
    exit(2);
}

/* Parses a non-negative int option value strictly (no trailing garbage, no overflow). */
static int parse_index(const char *opt, const char *v) {
    char *end = NULL;
    long x;
    if (!v) die("%s needs a value%s", opt, "");
    errno = 0;
    x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < 0 || x > INT_MAX)
        die("%s: '%s' is not a non-negative integer", opt, v);
    return (int)x;
}

static void parse_args(int argc, char **argv, cli_options *o) {
    memset(o, 0, sizeof *o);
    o->platform = o->device = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            o->help = 1;
        else if (!strcmp(a, "--version"))
            o->version = 1;
        else if (!strcmp(a, "--list-devices"))
            o->list_devices = 1;
        else if (!strcmp(a, "--platform"))
            o->platform = parse_index(a, v), i++;
        else if (!strcmp(a, "--device"))
            o->device = parse_index(a, v), i++;
        else
            die("unknown option '%s' (see --help)%s", a, "");
    }
}

static const char *type_name(clcnn_device_type t) {
    switch (t) {
    case CLCNN_DEVICE_CPU: return "CPU";
    case CLCNN_DEVICE_GPU: return "GPU";
    case CLCNN_DEVICE_ACCELERATOR: return "accelerator";
    case CLCNN_DEVICE_OTHER: break;
    }
    return "other";
}

static int print_version(void) {
    clcnn_devices *devs = NULL;
    clcnn_status st;
    printf("clcnn %s\n", clcnn_version());
    printf("CLBlast %s\n", clcnn_blas_version());
    st = clcnn_devices_create(&devs, NULL);
    if (st != CLCNN_SUCCESS) {
        printf("OpenCL: %s\n", clcnn_devices_errmsg(devs));
    } else if (clcnn_devices_count(devs) == 0) {
        printf("OpenCL: no visible device\n");
    } else {
        for (int i = 0; i < clcnn_devices_count(devs); i++) {
            clcnn_device_info in;
            clcnn_devices_get(devs, i, &in);
            printf("OpenCL device %d:%d: %s | %s | %s | driver %s\n", in.platform_index,
                   in.device_index, in.name, in.platform_version, in.opencl_c_version,
                   in.driver_version);
        }
    }
    clcnn_devices_free(devs);
    return 0;
}

int main(int argc, char **argv) {
    cli_options o;
    clcnn_devices *devs = NULL;
    clcnn_context *ctx = NULL;
    clcnn_device_info info;
    int idx = -1, rc = 1;
    clcnn_status st;
    parse_args(argc, argv, &o);
    if (o.help) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (o.version) return print_version();
    st = clcnn_devices_create(&devs, NULL);
    if (st != CLCNN_SUCCESS) {
        fprintf(stderr, "clcnn_train: %s\n", clcnn_devices_errmsg(devs));
        goto done;
    }
    st = clcnn_devices_select(devs, o.platform, o.device, &idx);
    if (o.list_devices) {
        size_t n;
        char *buf;
        if (clcnn_devices_count(devs) == 0) {
            fprintf(stderr, "clcnn_train: %s\n", clcnn_devices_errmsg(devs));
            goto done;
        }
        n = clcnn_devices_format(devs, st == CLCNN_SUCCESS ? idx : -1, NULL, 0);
        if (!(buf = malloc(n + 1))) goto done;
        clcnn_devices_format(devs, st == CLCNN_SUCCESS ? idx : -1, buf, n + 1);
        fputs(buf, stdout);
        free(buf);
        rc = 0;
        goto done;
    }
    if (st != CLCNN_SUCCESS) {
        fprintf(stderr, "clcnn_train: %s\n", clcnn_devices_errmsg(devs));
        goto done;
    }
    clcnn_devices_get(devs, idx, &info);
    st = clcnn_context_create(&ctx, devs, idx, NULL);
    if (st != CLCNN_SUCCESS) {
        fprintf(stderr, "clcnn_train: %s\n", clcnn_context_errmsg(ctx));
        goto done;
    }
    printf("device %d:%d %s (%s), kernels ready in %.3f s (%s)\n", info.platform_index,
           info.device_index, info.name, type_name(info.type), clcnn_context_build_seconds(ctx),
           clcnn_context_cache_hit(ctx) ? "binary cache" : "compiled");
    rc = 0;
done:
    clcnn_context_free(ctx);
    clcnn_devices_free(devs);
    return rc;
}
