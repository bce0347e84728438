/* Internal side of the device list: the OpenCL handles behind each visible entry. */
#ifndef CLCNN_DEVICE_H
#define CLCNN_DEVICE_H

#include <CL/cl.h>

#include "common.h"

/* The OpenCL ids of visible device i; returns 0 on success, -1 when i is out of range. */
int clcnn_devices_cl_ids(const clcnn_devices *devs, int i, cl_platform_id *platform,
                         cl_device_id *device);

/* Fills info for one OpenCL device (used for the list and for adopted devices). */
void clcnn_device_query(cl_platform_id platform, cl_device_id device, clcnn_device_info *info);

/* A list over made-up devices (no OpenCL ids), for testing the filter and selection rules
 * with several platforms and device types on any machine. filter NULL = the environment. */
clcnn_status clcnn_devices_create_synthetic(clcnn_devices **out, const clcnn_device_info *infos,
                                            int n, const char *filter);

#endif
