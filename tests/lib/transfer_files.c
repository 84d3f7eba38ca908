/*
 * transfer_files.c - see transfer_files.h.  Built on the public side of
 * src/job/transfer.h: a sink or source per helper, its end hook
 * (transfer_set_end) closing or releasing what it holds.
 */
#include "autoconfig.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

#include "transfer_files.h"

/* ---- helpers: files ------------------------------------------------------- */

struct file_helper {
	struct transfer *t;
	int fd;
	uint64_t max, n;
	transfer_done_fn done;
	void *arg;
	char path[];
};

static size_t file_write(void *p, const char *data, size_t len)
{
	struct file_helper *h = p;

	if (h->n + len > h->max) {
		transfer_set_error(h->t, "%s: the body is larger than %llu bytes", h->path,
				   (unsigned long long)h->max);
		return TRANSFER_SINK_ERROR;
	}
	for (size_t off = 0; off < len;) {
		ssize_t w = write(h->fd, data + off, len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			transfer_set_error(h->t, "write %s: %s", h->path,
					   w < 0 ? strerror(errno) : "no progress");
			return TRANSFER_SINK_ERROR;
		}
		off += (size_t)w;
	}
	h->n += len;
	return len;
}

static ssize_t file_read(void *p, char *buf, size_t cap)
{
	struct file_helper *h = p;

	for (;;) {
		ssize_t r = read(h->fd, buf, cap);

		if (r >= 0)
			return r;
		if (errno != EINTR) {
			transfer_set_error(h->t, "read %s: %s", h->path, strerror(errno));
			return TRANSFER_ERROR;
		}
	}
}

static void file_done(void *p, const struct transfer_result *r)
{
	struct file_helper *h = p;

	if (h->done)
		h->done(h->arg, r);
}

/* Closes the file; a failed download is removed. */
static int file_end_get(void *p, int ok)
{
	struct file_helper *h = p;
	int rc = 0;

	if (h->fd >= 0 && close(h->fd) != 0 && ok) {
		transfer_set_error(h->t, "close %s: %s", h->path, strerror(errno));
		ok = 0;
		rc = -1;
	}
	h->fd = -1;
	if (!ok)
		unlink(h->path);
	return rc;
}

static int file_end_put(void *p, int ok)
{
	struct file_helper *h = p;

	if (h->fd >= 0)
		close(h->fd);
	h->fd = -1;
	return 0;
}

static struct file_helper *file_helper_new(const char *path, transfer_done_fn done, void *arg)
{
	size_t len = strlen(path);
	struct file_helper *h = malloc(sizeof *h + len + 1);

	if (h == NULL)
		return NULL;
	memset(h, 0, sizeof *h);
	memcpy(h->path, path, len + 1);
	h->fd = -1;
	h->done = done;
	h->arg = arg;
	return h;
}

struct transfer *transfer_get_file(struct transfer_loop *loop, const char *url, const char *path,
				   uint64_t max_bytes, transfer_done_fn done, void *arg)
{
	static const struct transfer_sink sink = { file_write, file_done };
	struct file_helper *h;
	struct transfer *t;
	int e;

	if (path == NULL) {
		errno = EINVAL;
		return NULL;
	}
	h = file_helper_new(path, done, arg);
	if (h == NULL)
		return NULL;
	h->max = max_bytes;
	h->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (h->fd < 0) {
		e = errno;
		free(h);
		errno = e;
		return NULL;
	}
	t = transfer_get(loop, url, &sink, h);
	if (t == NULL) {
		e = errno;
		close(h->fd);
		unlink(path);
		free(h);
		errno = e;
		return NULL;
	}
	/* a Content-Length over the limit is refused before any byte */
	transfer_set_max_body(t, max_bytes);
	h->t = t;
	transfer_set_end(t, file_end_get, h);
	return t;
}

struct transfer *transfer_put_file(struct transfer_loop *loop, const char *url, const char *path,
				   transfer_done_fn done, void *arg)
{
	static const struct transfer_source src = { file_read, file_done };
	struct file_helper *h;
	struct transfer *t;
	struct stat st;
	int e;

	if (path == NULL) {
		errno = EINVAL;
		return NULL;
	}
	h = file_helper_new(path, done, arg);
	if (h == NULL)
		return NULL;
	h->fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (h->fd < 0 || fstat(h->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		e = h->fd < 0 ? errno : EINVAL; /* fstat on an open fd does not fail */
		if (h->fd >= 0)
			close(h->fd);
		free(h);
		errno = e;
		return NULL;
	}
	t = transfer_put(loop, url, &src, h, (int64_t)st.st_size);
	if (t == NULL) {
		e = errno;
		close(h->fd);
		free(h);
		errno = e;
		return NULL;
	}
	h->t = t;
	transfer_set_end(t, file_end_put, h);
	return t;
}

/* ---- helpers: pipes ------------------------------------------------------- */

struct fd_helper {
	struct transfer *t;
	int fd;
	struct event *ev; /* EV_WRITE for a download, EV_READ for an upload */
	transfer_done_fn done;
	void *arg;
};

static void fd_ready(evutil_socket_t fd, short what, void *p)
{
	struct fd_helper *h = p;

	transfer_resume(h->t);
}

static size_t fd_write(void *p, const char *data, size_t len)
{
	struct fd_helper *h = p;

	for (;;) {
		ssize_t w = write(h->fd, data, len);

		if (w >= 0) {
			if ((size_t)w < len)
				event_add(h->ev, NULL); /* the rest when writable */
			return (size_t)w;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			event_add(h->ev, NULL);
			return 0;
		}
		transfer_set_error(h->t, "write to fd %d: %s", h->fd, strerror(errno));
		return TRANSFER_SINK_ERROR;
	}
}

static ssize_t fd_read(void *p, char *buf, size_t cap)
{
	struct fd_helper *h = p;

	for (;;) {
		ssize_t r = read(h->fd, buf, cap);

		if (r >= 0)
			return r;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			event_add(h->ev, NULL);
			return TRANSFER_PAUSE;
		}
		transfer_set_error(h->t, "read from fd %d: %s", h->fd, strerror(errno));
		return TRANSFER_ERROR;
	}
}

static void fd_done(void *p, const struct transfer_result *r)
{
	struct fd_helper *h = p;

	if (h->done)
		h->done(h->arg, r);
}

static int fd_end(void *p, int ok)
{
	struct fd_helper *h = p;

	if (h->ev) {
		event_free(h->ev);
		h->ev = NULL;
	}
	return 0;
}

static struct fd_helper *fd_helper_new(struct transfer_loop *loop, int fd, short what,
				       transfer_done_fn done, void *arg)
{
	struct fd_helper *h;
	int fl;

	if (loop == NULL || fd < 0) {
		errno = EINVAL;
		return NULL;
	}
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0)
		return NULL;
	h = calloc(1, sizeof *h);
	if (h == NULL)
		return NULL;
	h->fd = fd;
	h->done = done;
	h->arg = arg;
	h->ev = event_new(transfer_loop_base(loop), fd, what, fd_ready, h);
	if (h->ev == NULL) {
		free(h);
		errno = ENOMEM;
		return NULL;
	}
	return h;
}

static struct transfer *fd_attach(struct transfer *t, struct fd_helper *h)
{
	int e;

	if (t == NULL) {
		e = errno;
		event_free(h->ev);
		free(h);
		errno = e;
		return NULL;
	}
	h->t = t;
	transfer_set_end(t, fd_end, h);
	return t;
}

struct transfer *transfer_get_fd(struct transfer_loop *loop, const char *url, int fd,
				 transfer_done_fn done, void *arg)
{
	static const struct transfer_sink sink = { fd_write, fd_done };
	struct fd_helper *h = fd_helper_new(loop, fd, EV_WRITE, done, arg);

	if (h == NULL)
		return NULL;
	return fd_attach(transfer_get(loop, url, &sink, h), h);
}

struct transfer *transfer_put_fd(struct transfer_loop *loop, const char *url, int fd, int64_t size,
				 transfer_done_fn done, void *arg)
{
	static const struct transfer_source src = { fd_read, fd_done };
	struct fd_helper *h = fd_helper_new(loop, fd, EV_READ, done, arg);

	if (h == NULL)
		return NULL;
	return fd_attach(transfer_put(loop, url, &src, h, size), h);
}
