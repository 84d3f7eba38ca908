/*
 * profile.c - reading and writing the auto-balance profile snapshot (see
 * profile.h for the format and the rules).  Owns only the file; no book
 * access, no clock.  The file lives in tempDir, which others may write:
 * reading never blocks (a FIFO) nor follows a symbolic link and takes only
 * a regular file of at most 64 KiB; writing goes through a fresh temporary
 * file of an unpredictable name, never an existing one.
 */
#include "autoconfig.h"
#include "master/profile.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <json-c/json.h>

#include "book/book_class.h"

#define FORMAT_NAME "execserver-profile"
#define PROFILE_MAX_BYTES (64 * 1024)

const char *profile_arch(void)
{
	static char machine[sizeof((struct utsname *)0)->machine];
	struct utsname u;
	if (!machine[0])
		snprintf(machine, sizeof machine, "%s", uname(&u) == 0 ? u.machine : "unknown");
	return machine;
}

static int fail(char *why, size_t whylen, const char *what, const char *detail)
{
	snprintf(why, whylen, "%s%s", what, detail);
	return -1;
}

static struct json_object *encode(const char *arch, uint32_t pool, const struct profile_entry *e,
				  size_t n)
{
	struct json_object *o = json_object_new_object(), *svcs = json_object_new_object();
	json_object_object_add(o, "format", json_object_new_string(FORMAT_NAME));
	json_object_object_add(o, "version", json_object_new_int(PROFILE_VERSION));
	json_object_object_add(o, "arch", json_object_new_string(arch));
	json_object_object_add(o, "pool", json_object_new_int64(pool));
	for (size_t i = 0; i < n; i++) {
		struct json_object *s = json_object_new_object();
		const char *cls = class_name(e[i].p.klass);
		json_object_object_add(s, "class", json_object_new_string(cls ? cls : "unknown"));
		json_object_object_add(s, "mean_runtime_ms", json_object_new_double(e[i].p.ema_ms));
		json_object_object_add(s, "samples",
				       json_object_new_int64((int64_t)e[i].p.samples));
		json_object_object_add(svcs, e[i].name, s);
	}
	json_object_object_add(o, "services", svcs);
	return o;
}

/* Syncs the directory of path, so that a rename in it is durable. */
static int fsync_dir_of(const char *path)
{
	char *copy = strdup(path);
	if (!copy) {
		errno = ENOMEM;
		return -1;
	}
	int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(copy);
	if (fd < 0)
		return -1;
	int rc = fsync(fd);
	int saved = errno;
	close(fd);
	errno = saved;
	return rc;
}

/* All of text to fd; -1 with errno set (EIO for a write that wrote
 * nothing, which sets no errno of its own). */
static int write_all(int fd, const char *text, size_t len)
{
	size_t off = 0;
	while (off < len) {
		ssize_t w = write(fd, text + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		if (w == 0) {
			errno = EIO;
			return -1;
		}
		off += (size_t)w;
	}
	return 0;
}

/* The snapshot goes to a temporary file of a unique, unpredictable name
 * next to path (mkostemp: O_CREAT|O_EXCL, mode 0600, so an existing file
 * or symbolic link of that name is never opened), is synced, renamed over
 * path (rename replaces a symbolic link at path, it does not follow it)
 * and the directory is synced. */
int profile_write(const char *path, const char *arch, uint32_t pool, const struct profile_entry *e,
		  size_t n, char *why, size_t whylen)
{
	char tmp[4096];
	if (snprintf(tmp, sizeof tmp, "%s.tmp-XXXXXX", path) >= (int)sizeof tmp)
		return fail(why, whylen, path, ": path too long");
	int fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		snprintf(why, whylen, "%s: cannot create a temporary file next to it: %s", path,
			 strerror(errno));
		return -1;
	}
	struct json_object *o = encode(arch, pool, e, n);
	const char *text = json_object_to_json_string_ext(
		o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
	int rc = -1;
	if (write_all(fd, text, strlen(text)) != 0 || write_all(fd, "\n", 1) != 0 ||
	    fsync(fd) != 0) {
		snprintf(why, whylen, "%s: %s", tmp, strerror(errno));
		close(fd);
		unlink(tmp);
		goto out;
	}
	close(fd);
	if (rename(tmp, path) != 0) {
		snprintf(why, whylen, "rename %s to %s: %s", tmp, path, strerror(errno));
		unlink(tmp);
		goto out;
	}
	if (fsync_dir_of(path) != 0) {
		snprintf(why, whylen,
			 "%s written, but syncing its directory failed (it may not "
			 "survive a power loss): %s",
			 path, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	json_object_put(o);
	return rc;
}

static int get(struct json_object *o, const char *key, json_type type, struct json_object **v)
{
	return json_object_object_get_ex(o, key, v) && json_object_is_type(*v, type);
}

/* One service entry; 0 or -1 if malformed. */
static int decode_entry(const char *name, struct json_object *s, struct profile_entry *e)
{
	struct json_object *cls, *mean, *samples;
	if (!json_object_is_type(s, json_type_object) || strlen(name) >= sizeof e->name ||
	    !get(s, "class", json_type_string, &cls) || !get(s, "samples", json_type_int, &samples))
		return -1;
	if (!json_object_object_get_ex(s, "mean_runtime_ms", &mean) ||
	    !(json_object_is_type(mean, json_type_double) ||
	      json_object_is_type(mean, json_type_int)))
		return -1;
	int k = class_parse(json_object_get_string(cls));
	double ms = json_object_get_double(mean);
	int64_t n = json_object_get_int64(samples);
	if (k < 0 || !class_ema_valid(ms) || n < 0) /* at most UINT32_MAX ms */
		return -1;
	snprintf(e->name, sizeof e->name, "%s", name);
	e->p.klass = (uint32_t)k;
	e->p.ema_ms = ms;
	e->p.samples = (uint64_t)n;
	return 0;
}

int profile_read(const char *path, const char *arch, uint32_t pool, struct profile_entry **out,
		 size_t *n, char *why, size_t whylen)
{
	*out = NULL;
	*n = 0;
	/* never block (a FIFO), never follow a symbolic link, only a regular
	 * file of at most PROFILE_MAX_BYTES */
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		if (errno == ELOOP)
			return fail(why, whylen, "", "a symbolic link (not followed)");
		return fail(why, whylen, "cannot open it: ", strerror(errno));
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return fail(why, whylen, "", "not a regular file");
	}
	char buf[PROFILE_MAX_BYTES + 1];
	size_t len = 0;
	int big = st.st_size > PROFILE_MAX_BYTES, err = 0;
	while (!big && !err) {
		ssize_t r = read(fd, buf + len, sizeof buf - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			err = errno;
		else if (r == 0)
			break;
		else if ((len += (size_t)r) > PROFILE_MAX_BYTES)
			big = 1; /* it grew while we read */
	}
	close(fd);
	if (big)
		return fail(why, whylen, "", "larger than 64 KiB");
	if (err)
		return fail(why, whylen, "cannot read it: ", strerror(err));
	buf[len] = '\0';
	struct json_object *o = json_tokener_parse(buf), *v = NULL, *svcs;
	int rc = -1;
	if (!o || !json_object_is_type(o, json_type_object) ||
	    !get(o, "format", json_type_string, &v) ||
	    strcmp(json_object_get_string(v), FORMAT_NAME)) {
		fail(why, whylen, "", "not an execserver profile snapshot");
		goto out;
	}
	if (!get(o, "version", json_type_int, &v) || json_object_get_int64(v) != PROFILE_VERSION) {
		fail(why, whylen, "", "written by another version (its format version differs)");
		goto out;
	}
	if (!get(o, "arch", json_type_string, &v) || strcmp(json_object_get_string(v), arch) != 0) {
		snprintf(why, whylen, "taken on another architecture (%s, this host is %s)",
			 v && json_object_is_type(v, json_type_string) ? json_object_get_string(v)
								       : "?",
			 arch);
		goto out;
	}
	if (!get(o, "pool", json_type_int, &v) || json_object_get_int64(v) != (int64_t)pool) {
		snprintf(why, whylen, "taken with a pool of %lld slots, this pool has %u",
			 v && json_object_is_type(v, json_type_int)
				 ? (long long)json_object_get_int64(v)
				 : -1LL,
			 pool);
		goto out;
	}
	if (!get(o, "services", json_type_object, &svcs)) {
		fail(why, whylen, "", "no \"services\" object");
		goto out;
	}
	size_t cap = (size_t)json_object_object_length(svcs);
	*out = calloc(cap ? cap : 1, sizeof **out);
	if (!*out) {
		fail(why, whylen, "", "out of memory");
		goto out;
	}
	json_object_object_foreach(svcs, name, s)
	{
		if (decode_entry(name, s, &(*out)[*n]) != 0) {
			snprintf(why, whylen, "service \"%.64s\": malformed entry", name);
			free(*out);
			*out = NULL;
			*n = 0;
			goto out;
		}
		(*n)++;
	}
	rc = 1;
out:
	if (o)
		json_object_put(o);
	return rc;
}
