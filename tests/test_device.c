/* Device manager tests. "filter" mode runs the CLCNN_VISIBLE_DEVICES parser and the selection
 * rules over a synthetic list of several platforms (no device needed); "real" mode checks the
 * enumeration, the table and the selection on this machine's OpenCL devices (77 if none). */
#include "device.h"
#include "testutil.h"

static clcnn_device_info fake(int p, int d, clcnn_device_type t, const char *name) {
    clcnn_device_info in;
    memset(&in, 0, sizeof in);
    in.platform_index = p;
    in.device_index = d;
    in.type = t;
    snprintf(in.name, sizeof in.name, "%s", name);
    snprintf(in.platform_name, sizeof in.platform_name, "Platform %d", p);
    return in;
}

static clcnn_device_info infos[5];

/* Visible global indices for a filter, as a string like "1,2,0"; or "ERR:<message>". */
static const char *visible_for(const char *filter, char *buf, size_t cap) {
    clcnn_devices *d = NULL;
    clcnn_status st = clcnn_devices_create_synthetic(&d, infos, 5, filter);
    size_t used = 0;
    buf[0] = '\0';
    if (st != CLCNN_SUCCESS) {
        snprintf(buf, cap, "ERR:%s", clcnn_devices_errmsg(d));
        CHECK(st == CLCNN_ERR_DEVICE_FILTER);
        CHECK(clcnn_devices_count(d) == 0);
    } else {
        for (int i = 0; i < clcnn_devices_count(d); i++) {
            clcnn_device_info in;
            clcnn_devices_get(d, i, &in);
            used += (size_t)snprintf(buf + used, cap - used, "%s%d", i ? "," : "", in.global_index);
        }
    }
    clcnn_devices_free(d);
    return buf;
}

static void check_filter(const char *filter, const char *expect) {
    char buf[2048];
    const char *got = visible_for(filter, buf, sizeof buf);
    CHECK_MSG(strcmp(got, expect) == 0, "filter '%s': expected '%s', got '%s'", filter, expect,
              got);
}

static void check_filter_error(const char *filter, const char *substr) {
    char buf[2048];
    const char *got = visible_for(filter, buf, sizeof buf);
    CHECK_MSG(strncmp(got, "ERR:", 4) == 0, "filter '%s' should fail, got '%s'", filter, got);
    CHECK_MSG(strstr(got, substr) != NULL, "filter '%s': message '%s' lacks '%s'", filter, got,
              substr);
    /* Every filter error lists what is available so the user can fix the entry. */
    CHECK_MSG(strstr(got, "available: 0 (0:0 cpu") != NULL, "no device list in '%s'", got);
    CHECK_MSG(strchr(got, '\n') == NULL, "message is not one line: '%s'", got);
}

/* Selection result as the global index, or -1 with the message in msg. */
static int select_global(const char *filter, int platform, int device, char *msg, size_t cap) {
    clcnn_devices *d = NULL;
    int idx = -1, g = -1;
    clcnn_device_info in;
    msg[0] = '\0';
    CHECK(clcnn_devices_create_synthetic(&d, infos, 5, filter) == CLCNN_SUCCESS);
    clcnn_status st = clcnn_devices_select(d, platform, device, &idx);
    if (st == CLCNN_SUCCESS && clcnn_devices_get(d, idx, &in) == CLCNN_SUCCESS)
        g = in.global_index;
    else
        snprintf(msg, cap, "%s", clcnn_devices_errmsg(d));
    clcnn_devices_free(d);
    return g;
}

static void filter_tests(void) {
    char msg[1024];
    infos[0] = fake(0, 0, CLCNN_DEVICE_CPU, "cpu-a");
    infos[1] = fake(0, 1, CLCNN_DEVICE_GPU, "gpu-a");
    infos[2] = fake(1, 0, CLCNN_DEVICE_GPU, "gpu-b");
    infos[3] = fake(1, 1, CLCNN_DEVICE_ACCELERATOR, "acc-b");
    infos[4] = fake(2, 0, CLCNN_DEVICE_CPU, "cpu-c");

    unsetenv("CLCNN_VISIBLE_DEVICES");
    check_filter(NULL, "0,1,2,3,4");
    setenv("CLCNN_VISIBLE_DEVICES", "4,1", 1);
    check_filter(NULL, "4,1"); /* NULL reads the environment */
    unsetenv("CLCNN_VISIBLE_DEVICES");
    check_filter("3", "3");
    check_filter("0:1", "1");
    check_filter("1:0", "2");
    check_filter("gpu", "1,2");
    check_filter("GPU", "1,2");
    check_filter("cpu", "0,4");
    check_filter("accelerator", "3");
    check_filter("gpu,cpu", "1,2,0,4");
    check_filter("2,0,2", "2,0");     /* duplicates dropped, first position wins */
    check_filter("1:0,gpu", "2,1");   /* order is the list's order */
    check_filter("4,2:0,cpu", "4,0"); /* the same device by three names */
    check_filter(" 1 , 0 ", "1,0");   /* blanks around entries are ignored */
    check_filter("", "");             /* empty hides everything */

    check_filter_error("7", "entry 1 '7' names no device");
    check_filter_error("9:9", "'9:9' names no device");
    check_filter_error("0:5", "'0:5' names no device");
    check_filter_error("gpuu", "'gpuu' is not a device index");
    check_filter_error("0,,1", "entry 2 '' is empty");
    check_filter_error("0,", "entry 2 '' is empty");
    check_filter_error(",0", "entry 1 '' is empty");
    check_filter_error("1:", "'1:' is malformed");
    check_filter_error(":1", "':1' is malformed");
    check_filter_error("0:0:0", "'0:0:0' is malformed");
    check_filter_error("-1", "'-1' is not a device index");
    check_filter_error("1a", "'1a' is malformed");
    check_filter_error("99999999999", "is malformed");
    check_filter_error("0,gpuu", "entry 2 'gpuu'");

    /* Selection rules. */
    CHECK(select_global(NULL, -1, -1, msg, sizeof msg) == 1);  /* first visible GPU */
    CHECK(select_global("cpu", -1, -1, msg, sizeof msg) == 0); /* no GPU: first visible */
    CHECK(select_global("4,3", -1, -1, msg, sizeof msg) == 4);
    CHECK(select_global("3,2", -1, -1, msg, sizeof msg) == 2); /* a GPU wins over order */
    CHECK(select_global(NULL, 1, 1, msg, sizeof msg) == 3);    /* --platform 1 --device 1 */
    CHECK(select_global(NULL, 2, 0, msg, sizeof msg) == 4);
    CHECK(select_global(NULL, -1, 2, msg, sizeof msg) == 2);   /* --device 2 alone */
    CHECK(select_global(NULL, 0, -1, msg, sizeof msg) == 0);   /* --platform 0 alone */
    CHECK(select_global("4,1,0", 0, 0, msg, sizeof msg) == 1); /* D counts visible devices */
    CHECK(select_global("4,1,0", -1, 0, msg, sizeof msg) == 4);
    CHECK(select_global(NULL, 1, 2, msg, sizeof msg) == -1);
    CHECK_MSG(strstr(msg, "--device 2 is out of range: platform 1 has 2 visible devices") &&
                  strstr(msg, "--platform 1 --device 1 (acc-b)"),
              "got '%s'", msg);
    CHECK(select_global(NULL, -1, 5, msg, sizeof msg) == -1);
    CHECK_MSG(strstr(msg, "--device 5 is out of range: 5 devices are visible"), "got '%s'", msg);
    CHECK(select_global(NULL, 3, 0, msg, sizeof msg) == -1);
    CHECK_MSG(strstr(msg, "--platform 3 has no visible device"), "got '%s'", msg);
    CHECK(select_global("2", 0, 0, msg, sizeof msg) == -1); /* platform 0 is hidden */
    CHECK(select_global("", -1, -1, msg, sizeof msg) == -1);
    CHECK_MSG(strstr(msg, "no OpenCL device is visible"), "got '%s'", msg);

    /* The table marks the default and shows P:D. */
    {
        clcnn_devices *d = NULL;
        char buf[4096];
        CHECK(clcnn_devices_create_synthetic(&d, infos, 5, "3,1") == CLCNN_SUCCESS);
        size_t n = clcnn_devices_format(d, 1, buf, sizeof buf);
        CHECK(n == strlen(buf));
        CHECK(clcnn_devices_format(d, 1, NULL, 0) == n);
        CHECK(strstr(buf, "P:D") != NULL);
        CHECK(strstr(buf, "1:1") != NULL && strstr(buf, "acc-b") != NULL);
        char *row2 = strstr(buf, "gpu-a");
        CHECK(row2 && strchr(row2, '*') != NULL); /* the default is the second row */
        clcnn_devices_free(d);
    }
    /* NULL handles are refused or ignored, never a crash. */
    CHECK(clcnn_devices_count(NULL) == 0);
    clcnn_devices_free(NULL);
    CHECK(clcnn_devices_get(NULL, 0, NULL) == CLCNN_ERR_INVALID_ARGUMENT);
    CHECK(clcnn_devices_create(NULL, NULL) == CLCNN_ERR_INVALID_ARGUMENT);
}

static int real_tests(void) {
    clcnn_devices *d = NULL;
    clcnn_device_info in;
    int idx = -1;
    unsetenv("CLCNN_VISIBLE_DEVICES");
    CHECK(clcnn_devices_create(&d, NULL) == CLCNN_SUCCESS);
    if (clcnn_devices_count(d) == 0) {
        clcnn_devices_free(d);
        fprintf(stderr, "no OpenCL device: skipping\n");
        return 77;
    }
    CHECK(clcnn_devices_get(d, 0, &in) == CLCNN_SUCCESS);
    CHECK(in.global_index == 0 && in.platform_index == 0 && in.device_index == 0);
    CHECK(in.name[0] && in.platform_name[0] && in.opencl_c_version[0]);
    CHECK(in.compute_units > 0 && in.global_mem_bytes > 0 && in.max_work_group_size > 0);
    CHECK(clcnn_devices_select(d, 0, 0, &idx) == CLCNN_SUCCESS && idx == 0);
    CHECK(clcnn_devices_select(d, 0, 99, &idx) == CLCNN_ERR_DEVICE_INDEX);
    CHECK(strstr(clcnn_devices_errmsg(d), "visible:") != NULL);
    clcnn_devices_free(d);
    d = NULL;
    /* The type word of device 0 selects it; so do its index and its P:D. */
    const char *words[] = {in.type == CLCNN_DEVICE_CPU ? "cpu" : "gpu", "0", "0:0"};
    for (int i = 0; i < 3; i++) {
        CHECK(clcnn_devices_create(&d, words[i]) == CLCNN_SUCCESS);
        CHECK(clcnn_devices_count(d) >= 1);
        clcnn_devices_free(d);
        d = NULL;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "real") == 0) {
        int rc = real_tests();
        if (rc == 77 && !test_failures) return 77;
        return test_finish("test_device real");
    }
    filter_tests();
    return test_finish("test_device filter");
}
