/*
 * stream.c - the local end of one pipe endpoint: a source the GET is
 * served from (a caller fd, a file we opened, a copied buffer) or a sink a
 * PUT body goes to (a caller fd, a file we opened, nothing).
 *
 * Invariants: a caller's fd is never closed and its flags never changed;
 * a pollable fd (pipe, socket, terminal) is read or written only after
 * libevent said it is ready, once per readiness, and a blocking one with
 * at most PIPE_BUF bytes per write, so the event loop never blocks on it;
 * a regular file or a device epoll refuses (EPERM: /dev/null, /dev/zero)
 * is read and written directly.  A read or write error is sticky: every
 * later stream_read/stream_write returns -1 at once (no retry loop on a
 * broken pipe).
 * Memory: a source hands over at most the asked bytes; a sink's queue
 * holds what its fd has not taken yet, and the pipe server stops reading
 * the PUT while it is long (pipes.c).
 */
#include "autoconfig.h"
#include "client/client_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

struct stream {
	int is_sink;
	enum exc_io_kind kind;
	int fd;
	int own_fd;   /* opened here (EXC_IO_FILE): closed at free */
	int dirfd;    /* file sink: the directory of the file, held open */
	char *tmp;    /* ... the temporary file's name in it, until committed */
	char *base;   /* ... and the name it takes there */
	int regular;  /* a regular file or unpollable device: no polling */
	int failed;   /* a read/write error happened: err says which */
	int nonblock; /* the fd is O_NONBLOCK: write what it takes */
	int ready;    /* a pollable fd is readable/writable now */
	int64_t length;
	struct evbuffer *buf; /* source: the copied buffer; sink: the queue */
	struct event *ev;
	void (*cb)(void *arg);
	void *cb_arg;
	char err[160];
};

static void fd_ready(evutil_socket_t fd, short what, void *arg)
{
	struct stream *s = arg;

	s->ready = 1;
	if (s->is_sink) {
		long left = stream_write(s, NULL, s->cb, s->cb_arg);

		if (left > 0)
			return; /* still queued: the next readiness goes on */
	}
	/* drained, or failed: the owner's next stream_write says which */
	if (s->cb)
		s->cb(s->cb_arg);
}

/* Waits for readiness of a pollable fd: 0.  A device epoll refuses
 * (EPERM) becomes direct I/O: 1 (go on now).  -1: error set. */
static int wait_ready(struct stream *s)
{
	if (event_add(s->ev, NULL) == 0)
		return 0;
	if (errno == EPERM) {
		s->regular = 1;
		return 1;
	}
	snprintf(s->err, sizeof s->err, "cannot poll the fd: %s", strerror(errno));
	s->failed = 1;
	return -1;
}

/* Opens the sink of path (docs/client.md, "A file sink never damages its
 * file"): a new temporary file in the directory of a regular (or absent)
 * file, that directory held open so that the rename and the removal find
 * it wherever it is moved; a file that is not regular is opened itself.
 * A symbolic link is followed by the kernel (stat), with its protections
 * (fs.protected_symlinks): realpath only names the file the kernel found.
 * The fd, or -1 with errno. */
static int open_file_sink(struct stream *s, const char *path)
{
	struct stat st, at;
	char *real = NULL, *dir = NULL;
	const char *target = path, *slash;
	int have = stat(path, &st) == 0, fd = -1, e;

	if (!have && errno != ENOENT)
		goto fail; /* EACCES: also a link the kernel will not follow */
	if (!have && lstat(path, &at) == 0) {
		errno = ENOENT; /* a link to nothing: never replaced by a file */
		goto fail;
	}
	if (have && !S_ISREG(st.st_mode))
		return open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (have && (target = real = realpath(path, NULL)) == NULL)
		goto fail;
	slash = strrchr(target, '/');
	dir = slash ? strndup(target, (size_t)(slash - target) + 1) : strdup(".");
	s->base = strdup(slash ? slash + 1 : target);
	s->tmp = malloc(strlen(s->base) + 20);
	if (dir == NULL || s->base == NULL || s->tmp == NULL) {
		errno = ENOMEM;
		goto fail;
	}
	s->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s->dirfd < 0)
		goto fail;
	/* the file the kernel found is the one in the directory held */
	if (have && (fstatat(s->dirfd, s->base, &at, AT_SYMLINK_NOFOLLOW) != 0 ||
		     at.st_dev != st.st_dev || at.st_ino != st.st_ino)) {
		errno = EAGAIN; /* it was replaced meanwhile */
		goto fail;
	}
	for (int tries = 0; tries < 8; tries++) {
		char id[17];

		if (client_random_hex(id, 8) != 0)
			goto fail;
		/* at most 218 bytes: within NAME_MAX for any name */
		snprintf(s->tmp, strlen(s->base) + 20, ".%.200s.%s", s->base, id);
		fd = openat(s->dirfd, s->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd >= 0 || errno != EEXIST)
			break;
	}
	if (fd < 0)
		goto fail;
	if (have) {
		/* the file keeps its owner and group where this process may give
		 * them (root; a group it is in), and its permission bits; set-id
		 * bits are not carried to new bytes (a write would clear them) */
		if (fchown(fd, st.st_uid, st.st_gid) != 0)
			(void)fchown(fd, (uid_t)-1, st.st_gid);
		(void)fchmod(fd, st.st_mode & 0777);
	}
	free(real);
	free(dir);
	return fd;
fail:
	e = errno;
	free(real);
	free(dir);
	free(s->tmp);
	s->tmp = NULL; /* nothing of ours to remove */
	errno = e;
	return -1;
}

static struct stream *stream_new(struct event_base *base, const struct exc_io *io, int is_sink)
{
	struct stream *s = calloc(1, sizeof *s);
	struct stat st;

	if (s == NULL)
		return NULL;
	s->is_sink = is_sink;
	s->kind = io->kind;
	s->fd = -1;
	s->dirfd = -1;
	s->length = -1;
	s->buf = evbuffer_new();
	if (s->buf == NULL)
		goto fail;
	switch (io->kind) {
	case EXC_IO_BUFFER:
		if (is_sink || evbuffer_add(s->buf, io->data, io->len) != 0)
			goto fail;
		s->length = (int64_t)io->len;
		return s;
	case EXC_IO_DISCARD:
		if (!is_sink)
			goto fail;
		return s;
	case EXC_IO_FILE:
		s->fd = is_sink ? open_file_sink(s, io->path)
				: open(io->path, O_RDONLY | O_CLOEXEC);
		if (s->fd < 0)
			goto fail;
		s->own_fd = 1;
		break;
	case EXC_IO_FD:
		if (io->fd < 0) {
			errno = EBADF;
			goto fail;
		}
		s->fd = io->fd;
		break;
	default: errno = EINVAL; goto fail;
	}
	if (fstat(s->fd, &st) != 0)
		goto fail;
	/* a character device but a terminal (/dev/null, /dev/zero) cannot be
	 * polled by epoll (EPERM) and never blocks: direct I/O, no warning */
	s->regular = S_ISREG(st.st_mode) || S_ISBLK(st.st_mode) ||
		     (S_ISCHR(st.st_mode) && !isatty(s->fd));
	if (S_ISREG(st.st_mode) && !is_sink)
		s->length = (int64_t)st.st_size - (int64_t)lseek(s->fd, 0, SEEK_CUR);
	if (s->length < -1)
		s->length = 0;
	s->nonblock = (fcntl(s->fd, F_GETFL) & O_NONBLOCK) != 0;
	if (!s->regular) {
		s->ev = event_new(base, s->fd, is_sink ? EV_WRITE : EV_READ, fd_ready, s);
		if (s->ev == NULL)
			goto fail;
	}
	return s;
fail : {
	int e = errno ? errno : EINVAL;

	stream_free(s);
	errno = e;
}
	return NULL;
}

struct stream *stream_source(struct event_base *base, const struct exc_io *io)
{
	return stream_new(base, io, 0);
}

struct stream *stream_sink(struct event_base *base, const struct exc_io *io)
{
	return stream_new(base, io, 1);
}

void stream_free(struct stream *s)
{
	if (s == NULL)
		return;
	if (s->ev)
		event_free(s->ev);
	if (s->buf)
		evbuffer_free(s->buf);
	if (s->own_fd && s->fd >= 0)
		close(s->fd);
	stream_discard(s);
	if (s->dirfd >= 0)
		close(s->dirfd);
	free(s->base);
	free(s);
}

int64_t stream_length(const struct stream *s)
{
	return s->length;
}

const char *stream_error(const struct stream *s)
{
	return s->err;
}

static void set_err(struct stream *s, const char *what)
{
	s->failed = 1;
	snprintf(s->err, sizeof s->err, "%s: %s", what, strerror(errno));
}

long stream_read(struct stream *s, struct evbuffer *out, size_t max, void (*ready)(void *arg),
		 void *arg)
{
	int n;

	s->cb = ready;
	s->cb_arg = arg;
	if (s->failed)
		return -1;
	if (s->kind == EXC_IO_BUFFER) {
		n = evbuffer_remove_buffer(s->buf, out, max);
		return n > 0 ? n : -2;
	}
	if (!s->regular && !s->ready) {
		int w = wait_ready(s);

		if (w <= 0)
			return w;
	}
	s->ready = 0;
	if (max > INT_MAX)
		max = INT_MAX;
	n = evbuffer_read(out, s->fd, (int)max);
	if (n > 0)
		return n;
	if (n == 0)
		return -2;
	if (!s->regular && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return wait_ready(s) < 0 ? -1 : 0;
	set_err(s, "read");
	return -1;
}

long stream_write(struct stream *s, struct evbuffer *in, void (*drained)(void *arg), void *arg)
{
	s->cb = drained;
	s->cb_arg = arg;
	if (s->failed)
		return -1;
	if (in) {
		if (s->kind == EXC_IO_DISCARD) {
			evbuffer_drain(in, evbuffer_get_length(in));
			return 0;
		}
		if (evbuffer_add_buffer(s->buf, in) != 0) {
			snprintf(s->err, sizeof s->err, "out of memory");
			return -1;
		}
	}
	while (evbuffer_get_length(s->buf) > 0) {
		int n;

		if (!s->regular && !s->ready) {
			int w = wait_ready(s);

			if (w < 0)
				return -1;
			if (w == 0)
				break;
		}
		if (!s->regular)
			s->ready = 0;
		n = evbuffer_write_atmost(s->buf, s->fd, s->regular || s->nonblock ? -1 : PIPE_BUF);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				continue;
			set_err(s, "write");
			return -1;
		}
		if (!s->regular && !s->nonblock)
			continue; /* wait for the next readiness */
	}
	return (long)evbuffer_get_length(s->buf);
}

void stream_detach(struct stream *s)
{
	if (s == NULL)
		return;
	if (s->ev)
		event_del(s->ev);
	s->cb = NULL;
	s->cb_arg = NULL;
}

int stream_commit(struct stream *s)
{
	if (s == NULL || s->tmp == NULL)
		return 0;
	/* the bytes on disk before the name: a crash leaves the old file or
	 * the new one, never an empty one */
	if (fsync(s->fd) != 0 || renameat(s->dirfd, s->tmp, s->dirfd, s->base) != 0) {
		set_err(s, s->base);
		return -1;
	}
	free(s->tmp);
	s->tmp = NULL;
	/* ... and the new name on disk before the caller is told */
	(void)fsync(s->dirfd);
	return 0;
}

void stream_discard(struct stream *s)
{
	if (s == NULL || s->tmp == NULL)
		return;
	unlinkat(s->dirfd, s->tmp, 0);
	free(s->tmp);
	s->tmp = NULL;
}
