/* Device manager: enumerates every device of every OpenCL platform into one flat list, applies
 * the CLCNN_VISIBLE_DEVICES filter and implements the --platform/--device selection rules. */
#include "device.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "env.h"

typedef struct device_entry {
    cl_platform_id platform;
    cl_device_id device;
    clcnn_device_info info;
} device_entry;

struct clcnn_devices {
    clcnn_error err;
    int n_all;
    device_entry *all; /* every device, global index order */
    int n_visible;
    int *visible; /* indices into all, in visible order */
};

static void get_str(cl_platform_id p, cl_device_id d, cl_uint param, char *dst, size_t cap) {
    size_t len = 0;
    cl_int rc =
        p ? clGetPlatformInfo(p, param, cap, dst, &len) : clGetDeviceInfo(d, param, cap, dst, &len);
    if (rc != CL_SUCCESS) {
        /* Too long for the field, or unsupported: fetch the whole string and truncate. */
        char *tmp = NULL;
        dst[0] = '\0';
        rc = p ? clGetPlatformInfo(p, param, 0, NULL, &len)
               : clGetDeviceInfo(d, param, 0, NULL, &len);
        if (rc != CL_SUCCESS || len == 0 || !(tmp = malloc(len))) return;
        rc = p ? clGetPlatformInfo(p, param, len, tmp, NULL)
               : clGetDeviceInfo(d, param, len, tmp, NULL);
        if (rc == CL_SUCCESS) snprintf(dst, cap, "%s", tmp);
        free(tmp);
    }
    dst[cap - 1] = '\0';
    /* Drivers pad some strings with spaces; trim them for clean tables. */
    for (size_t n = strlen(dst); n > 0 && isspace((unsigned char)dst[n - 1]); n--)
        dst[n - 1] = 0;
}

void clcnn_device_query(cl_platform_id platform, cl_device_id device, clcnn_device_info *info) {
    cl_device_type type = 0;
    cl_uint cu = 0;
    cl_ulong mem = 0, alloc = 0;
    size_t wg = 0;
    get_str(platform, NULL, CL_PLATFORM_NAME, info->platform_name, sizeof info->platform_name);
    get_str(platform, NULL, CL_PLATFORM_VERSION, info->platform_version,
            sizeof info->platform_version);
    get_str(NULL, device, CL_DEVICE_NAME, info->name, sizeof info->name);
    get_str(NULL, device, CL_DEVICE_VENDOR, info->vendor, sizeof info->vendor);
    get_str(NULL, device, CL_DEVICE_OPENCL_C_VERSION, info->opencl_c_version,
            sizeof info->opencl_c_version);
    get_str(NULL, device, CL_DRIVER_VERSION, info->driver_version, sizeof info->driver_version);
    clGetDeviceInfo(device, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    clGetDeviceInfo(device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL);
    clGetDeviceInfo(device, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, NULL);
    clGetDeviceInfo(device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof alloc, &alloc, NULL);
    clGetDeviceInfo(device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
    info->type = (type & CL_DEVICE_TYPE_GPU)           ? CLCNN_DEVICE_GPU
                 : (type & CL_DEVICE_TYPE_CPU)         ? CLCNN_DEVICE_CPU
                 : (type & CL_DEVICE_TYPE_ACCELERATOR) ? CLCNN_DEVICE_ACCELERATOR
                                                       : CLCNN_DEVICE_OTHER;
    info->compute_units = cu;
    info->global_mem_bytes = mem;
    info->max_alloc_bytes = alloc;
    info->max_work_group_size = wg;
}

static const char *type_word(clcnn_device_type t) {
    switch (t) {
    case CLCNN_DEVICE_CPU: return "cpu";
    case CLCNN_DEVICE_GPU: return "gpu";
    case CLCNN_DEVICE_ACCELERATOR: return "accelerator";
    case CLCNN_DEVICE_OTHER: break;
    }
    return "other";
}

static clcnn_status enumerate(clcnn_devices *d) {
    cl_uint np = 0;
    cl_platform_id *plats = NULL;
    cl_int rc = clGetPlatformIDs(0, NULL, &np);
    /* No ICD installed is not an error here: the list is simply empty. */
    if (rc == -1001 /* CL_PLATFORM_NOT_FOUND_KHR */ || (rc == CL_SUCCESS && np == 0)) return 0;
    if (rc != CL_SUCCESS)
        return clcnn_fail(&d->err, (clcnn_status)rc, "clGetPlatformIDs failed: %s",
                          clcnn_cl_error_name(rc));
    plats = calloc(np, sizeof *plats);
    if (!plats) return clcnn_fail(&d->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    rc = clGetPlatformIDs(np, plats, NULL);
    if (rc != CL_SUCCESS) {
        free(plats);
        return clcnn_fail(&d->err, (clcnn_status)rc, "clGetPlatformIDs failed: %s",
                          clcnn_cl_error_name(rc));
    }
    for (cl_uint p = 0; p < np; p++) {
        cl_uint nd = 0;
        cl_device_id *ids = NULL;
        /* A platform without devices (or a broken one) is skipped, not fatal. */
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 0, NULL, &nd) != CL_SUCCESS || !nd)
            continue;
        ids = calloc(nd, sizeof *ids);
        device_entry *grown = realloc(d->all, (size_t)(d->n_all + (int)nd) * sizeof *grown);
        if (!ids || !grown) {
            free(ids);
            if (grown) d->all = grown;
            free(plats);
            return clcnn_fail(&d->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
        }
        d->all = grown;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, nd, ids, NULL) == CL_SUCCESS) {
            for (cl_uint i = 0; i < nd; i++) {
                device_entry *e = &d->all[d->n_all];
                memset(e, 0, sizeof *e);
                e->platform = plats[p];
                e->device = ids[i];
                clcnn_device_query(plats[p], ids[i], &e->info);
                e->info.global_index = d->n_all;
                e->info.platform_index = (int)p;
                e->info.device_index = (int)i;
                d->n_all++;
            }
        }
        free(ids);
    }
    free(plats);
    return CLCNN_SUCCESS;
}

/* "  0  0:0  cpu  pthread-skylake..." lines for error messages, separated by "; ". */
static void list_available(const clcnn_devices *d, char *buf, size_t cap) {
    size_t used = 0;
    buf[0] = '\0';
    if (d->n_all == 0) {
        snprintf(buf, cap, "no OpenCL device found");
        return;
    }
    used += (size_t)snprintf(buf, cap, "available: ");
    for (int i = 0; i < d->n_all && used < cap; i++) {
        const clcnn_device_info *in = &d->all[i].info;
        used += (size_t)snprintf(buf + used, cap - used, "%s%d (%d:%d %s %s)", i ? ", " : "",
                                 in->global_index, in->platform_index, in->device_index,
                                 type_word(in->type), in->name);
    }
}

static int parse_uint(const char *s, size_t n, int *out) {
    long v = 0;
    if (n == 0 || n > 6) return -1;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)s[i])) return -1;
        v = v * 10 + (s[i] - '0');
    }
    *out = (int)v;
    return 0;
}

static void add_visible(clcnn_devices *d, int g) {
    for (int i = 0; i < d->n_visible; i++)
        if (d->visible[i] == g) return; /* duplicates are dropped, first position wins */
    d->visible[d->n_visible++] = g;
}

/* The entry as it can be shown in a one-line message: control and non-ASCII bytes as \xNN (a
 * newline in the variable must not split the message), long entries cut with "...". */
static void quote_entry(const char *s, size_t n, char *out, size_t cap) {
    size_t used = 0, i = 0;
    for (; i < n && used + 8 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f)
            out[used++] = (char)c;
        else
            used += (size_t)snprintf(out + used, cap - used, "\\x%02x", c);
    }
    if (i < n) memcpy(out + used, "...", 3), used += 3;
    out[used] = '\0';
}

static clcnn_status filter_fail(clcnn_devices *d, const char *entry, size_t n, int pos,
                                const char *why) {
    char avail[700], shown[100];
    list_available(d, avail, sizeof avail);
    quote_entry(entry, n, shown, sizeof shown);
    return clcnn_fail(&d->err, CLCNN_ERR_DEVICE_FILTER,
                      "CLCNN_VISIBLE_DEVICES entry %d '%s' %s; %s", pos, shown, why, avail);
}

static clcnn_status apply_filter(clcnn_devices *d, const char *filter) {
    const char *s = filter;
    int pos = 1;
    for (;;) {
        const char *end = strchr(s, ',');
        size_t n = end ? (size_t)(end - s) : strlen(s);
        const char *e = s;
        while (n && isspace((unsigned char)*e))
            e++, n--;
        while (n && isspace((unsigned char)e[n - 1]))
            n--;
        const char *colon = memchr(e, ':', n);
        int a, b, matched = 0;
        if (n == 0) {
            /* An empty filter hides everything; an empty entry inside a list is a typo. */
            if (pos == 1 && !end && filter[strspn(filter, " \t")] == '\0') return CLCNN_SUCCESS;
            return filter_fail(d, e, n, pos, "is empty");
        }
        if (colon) {
            if (parse_uint(e, (size_t)(colon - e), &a) ||
                parse_uint(colon + 1, n - (size_t)(colon - e) - 1, &b))
                return filter_fail(d, e, n, pos, "is malformed (expected P:D, e.g. 0:1)");
            for (int i = 0; i < d->n_all; i++)
                if (d->all[i].info.platform_index == a && d->all[i].info.device_index == b)
                    add_visible(d, i), matched = 1;
            if (!matched) return filter_fail(d, e, n, pos, "names no device");
        } else if (isdigit((unsigned char)e[0])) {
            if (parse_uint(e, n, &a))
                return filter_fail(d, e, n, pos, "is malformed (expected a device index)");
            if (a >= d->n_all) return filter_fail(d, e, n, pos, "names no device");
            add_visible(d, a);
        } else {
            clcnn_device_type t;
            if (n == 3 && !strncasecmp(e, "cpu", 3))
                t = CLCNN_DEVICE_CPU;
            else if (n == 3 && !strncasecmp(e, "gpu", 3))
                t = CLCNN_DEVICE_GPU;
            else if (n == 11 && !strncasecmp(e, "accelerator", 11))
                t = CLCNN_DEVICE_ACCELERATOR;
            else
                return filter_fail(d, e, n, pos,
                                   "is not a device index, P:D pair or cpu/gpu/accelerator");
            for (int i = 0; i < d->n_all; i++)
                if (d->all[i].info.type == t) add_visible(d, i), matched = 1;
            if (!matched) return filter_fail(d, e, n, pos, "names no device");
        }
        if (!end) break;
        s = end + 1;
        pos++;
    }
    return CLCNN_SUCCESS;
}

/* Shared tail of the real and the synthetic constructors: the visible list from the filter. */
static clcnn_status finish_create(clcnn_devices *d, const char *filter) {
    clcnn_status st;
    d->visible = calloc((size_t)d->n_all + 1, sizeof *d->visible);
    if (!d->visible) return clcnn_fail(&d->err, CLCNN_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    if (!filter) filter = clcnn_env_visible_devices();
    if (!filter) {
        for (int i = 0; i < d->n_all; i++)
            d->visible[i] = i;
        d->n_visible = d->n_all;
        return CLCNN_SUCCESS;
    }
    st = apply_filter(d, filter);
    if (st != CLCNN_SUCCESS) d->n_visible = 0;
    return st;
}

clcnn_status clcnn_devices_create(clcnn_devices **out, const char *filter) {
    clcnn_status st;
    clcnn_devices *d;
    if (!out) return CLCNN_ERR_INVALID_ARGUMENT;
    *out = d = calloc(1, sizeof *d);
    if (!d) return CLCNN_ERR_OUT_OF_HOST_MEMORY;
    if ((st = enumerate(d)) != CLCNN_SUCCESS) return st;
    return finish_create(d, filter);
}

clcnn_status clcnn_devices_create_synthetic(clcnn_devices **out, const clcnn_device_info *infos,
                                            int n, const char *filter) {
    clcnn_devices *d;
    if (!out || n < 0 || (n && !infos)) return CLCNN_ERR_INVALID_ARGUMENT;
    *out = d = calloc(1, sizeof *d);
    if (!d || !(d->all = calloc((size_t)n + 1, sizeof *d->all)))
        return CLCNN_ERR_OUT_OF_HOST_MEMORY;
    for (int i = 0; i < n; i++) {
        d->all[i].info = infos[i];
        d->all[i].info.global_index = i;
    }
    d->n_all = n;
    return finish_create(d, filter);
}

void clcnn_devices_free(clcnn_devices *d) {
    if (!d) return;
    free(d->all);
    free(d->visible);
    free(d);
}

const char *clcnn_devices_errmsg(const clcnn_devices *d) {
    return d ? d->err.msg : "NULL device list";
}

clcnn_status clcnn_devices_errcode(const clcnn_devices *d) {
    return d ? d->err.code : CLCNN_ERR_INVALID_ARGUMENT;
}

int clcnn_devices_count(const clcnn_devices *d) {
    return d ? d->n_visible : 0;
}

clcnn_status clcnn_devices_get(const clcnn_devices *d, int i, clcnn_device_info *info) {
    if (!d || !info || i < 0 || i >= d->n_visible) return CLCNN_ERR_INVALID_ARGUMENT;
    *info = d->all[d->visible[i]].info;
    return CLCNN_SUCCESS;
}

int clcnn_devices_cl_ids(const clcnn_devices *d, int i, cl_platform_id *platform,
                         cl_device_id *device) {
    if (!d || i < 0 || i >= d->n_visible) return -1;
    *platform = d->all[d->visible[i]].platform;
    *device = d->all[d->visible[i]].device;
    return 0;
}

static void list_visible(const clcnn_devices *d, char *buf, size_t cap) {
    size_t used = 0;
    buf[0] = '\0';
    if (d->n_visible == 0) {
        snprintf(buf, cap, "no device is visible");
        return;
    }
    used += (size_t)snprintf(buf, cap, "visible: ");
    for (int i = 0; i < d->n_visible && used < cap; i++) {
        const clcnn_device_info *in = &d->all[d->visible[i]].info;
        used += (size_t)snprintf(buf + used, cap - used, "%s--platform %d --device %d (%s)",
                                 i ? ", " : "", in->platform_index, in->device_index, in->name);
    }
}

clcnn_status clcnn_devices_select(clcnn_devices *d, int platform, int device, int *index) {
    char vis[700];
    if (!d || !index) return CLCNN_ERR_INVALID_ARGUMENT;
    if (d->n_visible == 0) {
        const char *f = clcnn_env_visible_devices();
        if (d->n_all == 0)
            return clcnn_fail(&d->err, CLCNN_ERR_NO_DEVICE,
                              "no OpenCL device found (is an ICD such as pocl-opencl-icd "
                              "installed?)");
        return clcnn_fail(&d->err, CLCNN_ERR_NO_DEVICE,
                          "no OpenCL device is visible (CLCNN_VISIBLE_DEVICES='%s')", f ? f : "");
    }
    list_visible(d, vis, sizeof vis);
    if (platform >= 0) {
        int k = 0;
        for (int i = 0; i < d->n_visible; i++) {
            if (d->all[d->visible[i]].info.platform_index != platform) continue;
            if (device < 0 || k == device) {
                *index = i;
                return CLCNN_SUCCESS;
            }
            k++;
        }
        if (k == 0)
            return clcnn_fail(&d->err, CLCNN_ERR_DEVICE_INDEX,
                              "--platform %d has no visible device; %s", platform, vis);
        return clcnn_fail(&d->err, CLCNN_ERR_DEVICE_INDEX,
                          "--device %d is out of range: platform %d has %d visible device%s; %s",
                          device, platform, k, k == 1 ? "" : "s", vis);
    }
    if (device >= 0) {
        if (device >= d->n_visible)
            return clcnn_fail(&d->err, CLCNN_ERR_DEVICE_INDEX,
                              "--device %d is out of range: %d device%s visible; %s", device,
                              d->n_visible, d->n_visible == 1 ? " is" : "s are", vis);
        *index = device;
        return CLCNN_SUCCESS;
    }
    for (int i = 0; i < d->n_visible; i++) {
        if (d->all[d->visible[i]].info.type == CLCNN_DEVICE_GPU) {
            *index = i;
            return CLCNN_SUCCESS;
        }
    }
    *index = 0;
    return CLCNN_SUCCESS;
}

size_t clcnn_devices_format(const clcnn_devices *d, int default_index, char *buf, size_t size) {
    size_t used = 0;
    if (buf && size) buf[0] = '\0';
    if (!d) return 0;
    clcnn_appendf(buf, size, &used,
                  "%-3s %-5s %-11s %-40s %-20s %-28s %-26s %-13s %-12s %4s %10s %6s %s\n", "#",
                  "P:D", "Type", "Device", "Vendor", "Platform", "Platform version", "OpenCL C",
                  "Driver", "CUs", "Memory", "MaxWG", "Default");
    for (int i = 0; i < d->n_visible; i++) {
        const clcnn_device_info *in = &d->all[d->visible[i]].info;
        char pd[24];
        snprintf(pd, sizeof pd, "%d:%d", in->platform_index, in->device_index);
        clcnn_appendf(
            buf, size, &used,
            "%-3d %-5s %-11s %-40.40s %-20.20s %-28.28s %-26.26s %-13.13s %-12.12s %4u %6.1f GiB "
            "%6zu %s\n",
            in->global_index, pd, type_word(in->type), in->name, in->vendor, in->platform_name,
            in->platform_version, in->opencl_c_version, in->driver_version, in->compute_units,
            (double)in->global_mem_bytes / (1024.0 * 1024.0 * 1024.0), in->max_work_group_size,
            i == default_index ? "*" : "");
    }
    return used;
}
