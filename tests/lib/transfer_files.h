/*
 * transfer_files.h - files and pipes as the body of a transfer
 * (src/job/transfer.h), for the tests: a download into a file or a pipe,
 * an upload from one.  The daemon streams its bodies through job_io's own
 * sinks and sources; these helpers drive the transfer layer alone.
 */
#ifndef ES_TEST_TRANSFER_FILES_H
#define ES_TEST_TRANSFER_FILES_H

#include <stdint.h>

#include "job/transfer.h"

/* Downloads url into path (created 0644 or truncated).  More than max_bytes
 * fails the transfer.  On any failure or abort the file is removed. */
struct transfer *transfer_get_file(struct transfer_loop *loop, const char *url, const char *path,
				   uint64_t max_bytes, transfer_done_fn done, void *arg);
/* Uploads the regular file path with its size as Content-Length. */
struct transfer *transfer_put_file(struct transfer_loop *loop, const char *url, const char *path,
				   transfer_done_fn done, void *arg);

/* Streams the body of a GET into fd (a pipe), and a PUT body from fd, with
 * back-pressure both ways: a full pipe pauses the download until fd is
 * writable, an empty pipe pauses the upload until fd is readable; EOF on fd
 * ends the upload.  The helpers set O_NONBLOCK on fd but never close it:
 * the caller closes it after done (or transfer_abort).  A reader that went
 * away (EPIPE) fails the download; SIGPIPE must be ignored by the process.
 * size: as for transfer_put. */
struct transfer *transfer_get_fd(struct transfer_loop *loop, const char *url, int fd,
				 transfer_done_fn done, void *arg);
struct transfer *transfer_put_fd(struct transfer_loop *loop, const char *url, int fd, int64_t size,
				 transfer_done_fn done, void *arg);

#endif
