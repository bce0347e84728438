/* TensorBoard event-file writer: scalar summaries in the TFRecord/Event format that PyTorch's
 * SummaryWriter.add_scalar produces, so `tensorboard --logdir` shows clcnn training curves. */
#ifndef CLCNN_TBLOG_H
#define CLCNN_TBLOG_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

typedef struct clcnn_tblog clcnn_tblog;

/* Creates logdir (and its parents, like mkdir -p) when needed and opens a new event file
 * logdir/events.out.tfevents.<10-digit unix seconds>.<hostname>, whose first record names the
 * format ("brain.Event:2"). An existing file is never overwritten: on a name clash (two opens
 * within one second) ".1", ".2", ... is appended. On failure *out is NULL and e says why
 * (CLCNN_ERR_IO names the path that failed). */
clcnn_status clcnn_tblog_open(clcnn_tblog **out, const char *logdir, clcnn_error *e);

/* Appends one scalar event (Summary.Value.simple_value). wall_time is seconds since the epoch,
 * passed in so that callers and tests control it. The record reaches the OS before the call
 * returns (write(2), no buffering), so a killed run leaves every complete record readable. A
 * write that fails part-way (a full disk) is cut back off the file, which keeps ending in a
 * whole record; after a failed write every later call fails too (a gap would go unseen). */
clcnn_status clcnn_tblog_scalar(clcnn_tblog *tb, const char *tag, float value, int64_t step,
                                double wall_time, clcnn_error *e);

/* Path of the event file being written; valid until clcnn_tblog_close. */
const char *clcnn_tblog_path(const clcnn_tblog *tb);

/* Closes the file and frees tb, reporting an earlier write failure or a failing close as
 * CLCNN_ERR_IO. tb is freed whatever the status. NULL is a no-op. */
clcnn_status clcnn_tblog_close(clcnn_tblog *tb, clcnn_error *e);

/* CRC-32C (Castagnoli), as TFRecord uses. Start with crc = 0; feed pieces by passing the
 * previous result: clcnn_crc32c(clcnn_crc32c(0, a, na), b, nb) == crc of a followed by b. */
uint32_t clcnn_crc32c(uint32_t crc, const void *data, size_t n);

#endif
