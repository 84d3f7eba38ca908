/*
 * job_spec.c - see job_spec.h; the rules are in docs/job-payload.md.
 *
 * Owns: the validation order (command, args, env, stdin, stdout, inputs,
 * outputs, timeout_sec: the first error in that order is the one
 * reported), the placeholder rule, the table of environment names a job
 * may not set, and the URL rules on top of libcurl's URL parser.
 *
 * Invariants:
 *  - every allocation goes through malloc, calloc, realloc or strdup (the
 *    unit test fails each one in turn) and every failure ends in
 *    PROTO_E_INTERNAL with everything allocated so far released;
 *  - the spec is built in a local struct and copied out only when complete,
 *    so a caller never sees a half-filled spec;
 *  - sizes are checked before anything is allocated for them: no input can
 *    make this file allocate more than the limits allow;
 *  - strings from JSON are checked for embedded NUL (json-c keeps their
 *    length) before they are used as C strings.
 */
#include "autoconfig.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>
#include <json-c/json.h>

#include "config/config.h"
#include "execserver/protocol.h"
#include "job/job_progress.h"
#include "job/job_spec.h"

/* ---- errors ----------------------------------------------------------- */

struct ctx {
	const struct es_config *cfg;
	const struct config_service *svc;
	const char *jobdir;
	size_t jobdir_len;
	const char **code;
	char *msg;
	size_t msglen;
};

static int fail(struct ctx *c, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(struct ctx *c, const char *code, const char *fmt, ...)
{
	va_list ap;

	*c->code = code;
	if (c->msg && c->msglen) {
		va_start(ap, fmt);
		vsnprintf(c->msg, c->msglen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

static int oom(struct ctx *c)
{
	return fail(c, PROTO_E_INTERNAL, "out of memory while reading the job description");
}

/* ---- small helpers ------------------------------------------------------ */

/* The value of an optional field: 1 and *v when present and not null. */
static int get_opt(struct json_object *job, const char *key, struct json_object **v)
{
	*v = NULL;
	return json_object_object_get_ex(job, key, v) && *v &&
	       !json_object_is_type(*v, json_type_null);
}

/* A JSON string without NUL inside: 1, and its length in *len. */
static int plain_string(struct json_object *v, size_t *len)
{
	const char *s = json_object_get_string(v);
	int n = json_object_get_string_len(v);

	if (n < 0)
		return 0;
	*len = (size_t)n;
	return strlen(s) == *len;
}

static char ascii_lower(char ch)
{
	return ch >= 'A' && ch <= 'Z' ? (char)(ch - 'A' + 'a') : ch;
}

/* A growing NULL-terminated array of owned strings. */
struct strvec {
	char **v;
	size_t n, cap;
};

static int vec_reserve(struct strvec *s)
{
	if (s->n + 2 <= s->cap)
		return 0;
	size_t cap = s->cap ? s->cap * 2 : 16;
	char **v = realloc(s->v, cap * sizeof *v);
	if (!v)
		return -1;
	s->v = v;
	s->cap = cap;
	return 0;
}

/* Takes ownership of str (freed on failure). */
static int vec_take(struct strvec *s, char *str)
{
	if (!str || vec_reserve(s) != 0) {
		free(str);
		return -1;
	}
	s->v[s->n++] = str;
	s->v[s->n] = NULL;
	return 0;
}

static void strv_free(char **v)
{
	if (!v)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

/* ---- placeholders ------------------------------------------------------- */

static const char placeholder[] = "%jobdir%";

/*
 * Expands arg into dst (which has room for the returned length + 1), or
 * only measures it when dst is NULL.  Every "%jobdir%" becomes the job
 * directory, in one left-to-right pass (the inserted directory is never
 * scanned again); every other '%' is literal text, "%%" included, because
 * the tools this runs use '%' in their own syntax (ffmpeg's "%03d",
 * ImageMagick's "%w", date formats) and configurations pasted from
 * fylr.yml carry them as is.  Cannot fail.  A measurement stops counting
 * once it is past JOB_SPEC_MAX_ARGV_BYTES, so the length it returns may be
 * short of the real one but is then above the limit; the caller refuses it
 * before anything is allocated, and a write (after a measurement within the
 * limit) never stops early.
 */
static size_t expand(const char *arg, const char *dir, size_t dirlen, char *dst)
{
	const size_t plen = sizeof placeholder - 1;
	size_t out = 0;

	for (const char *p = arg; *p;) {
		if (*p == '%' && strncmp(p, placeholder, plen) == 0) {
			if (dst)
				memcpy(dst + out, dir, dirlen);
			out += dirlen;
			p += plen;
			if (out > JOB_SPEC_MAX_ARGV_BYTES) /* no need to count further */
				return out;
			continue;
		}
		if (dst)
			dst[out] = *p;
		out++;
		p++;
	}
	if (dst)
		dst[out] = '\0';
	return out;
}

/* ---- argv ---------------------------------------------------------------- */

struct argv_builder {
	struct strvec vec;
	size_t bytes;    /* sum of strlen + 1 */
	int uses_jobdir; /* an argument had the placeholder */
};

/* label names the argument in messages, e.g. "job.args[3]". */
static int argv_add(struct ctx *c, struct argv_builder *b, const char *arg, const char *label)
{
	size_t len = expand(arg, c->jobdir, c->jobdir_len, NULL);

	if (strstr(arg, placeholder))
		b->uses_jobdir = 1;

	if (b->vec.n + 1 > JOB_SPEC_MAX_ARGV)
		return fail(c, PROTO_E_BAD_JOB,
			    "%s: the command line would have more than %d "
			    "entries",
			    label, JOB_SPEC_MAX_ARGV);
	if (len + 1 > JOB_SPEC_MAX_ARGV_BYTES - b->bytes)
		return fail(c, PROTO_E_BAD_JOB,
			    "%s: the command line would be longer than %d "
			    "bytes",
			    label, JOB_SPEC_MAX_ARGV_BYTES);
	char *s = malloc(len + 1);
	if (!s)
		return oom(c);
	expand(arg, c->jobdir, c->jobdir_len, s);
	if (vec_take(&b->vec, s) != 0)
		return oom(c);
	b->bytes += len + 1;
	return 0;
}

static int parse_argv(struct ctx *c, const struct config_command *cmd, struct json_object *job,
		      struct job_spec *s)
{
	struct argv_builder b = { { NULL, 0, 0 }, 0, 0 };
	struct json_object *args;
	char label[128];
	size_t n = 0;

	if (get_opt(job, "args", &args)) {
		if (!json_object_is_type(args, json_type_array))
			return fail(c, PROTO_E_BAD_JOB,
				    "job.args: an array of strings is required");
		n = json_object_array_length(args);
	}
	/* argv[0] is the program as configured: no placeholders there. */
	size_t len0 = strlen(cmd->prog);
	if (len0 + 1 > JOB_SPEC_MAX_ARGV_BYTES) {
		fail(c, PROTO_E_BAD_JOB, "command %s: prog is longer than %d bytes", cmd->name,
		     JOB_SPEC_MAX_ARGV_BYTES);
		goto err;
	}
	if (vec_take(&b.vec, strdup(cmd->prog)) != 0) {
		oom(c);
		goto err;
	}
	b.bytes = len0 + 1;
	for (size_t i = 0; i < cmd->args.count; i++) {
		snprintf(label, sizeof label, "command %s: configured args[%zu]", cmd->name, i);
		if (argv_add(c, &b, cmd->args.items[i], label) != 0)
			goto err;
	}
	for (size_t i = 0; i < n; i++) {
		struct json_object *a = json_object_array_get_idx(args, i);
		size_t len;

		if (!json_object_is_type(a, json_type_string)) {
			fail(c, PROTO_E_BAD_JOB, "job.args[%zu]: a string is required", i);
			goto err;
		}
		if (!plain_string(a, &len)) {
			fail(c, PROTO_E_BAD_JOB, "job.args[%zu]: must not contain NUL", i);
			goto err;
		}
		snprintf(label, sizeof label, "job.args[%zu]", i);
		if (argv_add(c, &b, json_object_get_string(a), label) != 0)
			goto err;
	}
	s->argv = b.vec.v;
	s->argc = b.vec.n;
	s->uses_jobdir = b.uses_jobdir;
	return 0;
err:
	strv_free(b.vec.v);
	return -1;
}

/* ---- environment ---------------------------------------------------------- */

enum match {
	EXACT,
	PREFIX,
	SUFFIX
};

/* Names a job may not set (compared without regard to case): they change
 * how programs are found, loaded or run, not what they do.  The reasons are
 * repeated in docs/job-payload.md. */
static const struct refused_env {
	const char *name;
	enum match match;
	const char *why;
} refused_env[] = {
	{ "PATH", EXACT, "it decides which programs run" },
	{ "LD_", PREFIX, "dynamic loader setting" },
	{ "GCONV_PATH", EXACT, "iconv loads shared objects from it" },
	{ "GETCONF_DIR", EXACT, "getconf runs programs from it" },
	{ "GLIBC_TUNABLES", EXACT, "tunes glibc's allocator and loader" },
	{ "MALLOC_", PREFIX, "tunes glibc's allocator or makes it write files" },
	{ "LOCPATH", EXACT, "locale data from an arbitrary directory" },
	{ "NLSPATH", EXACT, "message catalogs (format strings) from arbitrary files" },
	{ "TZDIR", EXACT, "time zone files from an arbitrary directory" },
	{ "HOSTALIASES", EXACT, "the resolver reads an arbitrary file" },
	{ "LOCALDOMAIN", EXACT, "changes where host names resolve" },
	{ "RES_OPTIONS", EXACT, "changes how host names resolve" },
	{ "RESOLV_HOST_CONF", EXACT, "the resolver reads an arbitrary file" },
	{ "_PROXY", SUFFIX, "sends the program's network traffic elsewhere" },
	{ "SSL_CERT_FILE", EXACT, "replaces the TLS trust anchors" },
	{ "SSL_CERT_DIR", EXACT, "replaces the TLS trust anchors" },
	{ "OPENSSL_", PREFIX, "OpenSSL configuration, which can load engines" },
	{ "TMPDIR", EXACT, "temporary files belong in the job directory" },
	{ "HOME", EXACT, "programs read configuration and plugins below it" },
	{ "XDG_", PREFIX, "programs read configuration and plugins from there" },
	{ "IFS", EXACT, "changes how shell scripts split words" },
	{ "BASH_ENV", EXACT, "a file bash runs before a script" },
	{ "ENV", EXACT, "a file sh runs at start" },
	{ "SHELLOPTS", EXACT, "shell options for every bash script" },
	{ "BASHOPTS", EXACT, "shell options for every bash script" },
	{ "PS4", EXACT, "bash expands it (command substitution) when tracing" },
	{ "CDPATH", EXACT, "makes cd in a script go elsewhere" },
	{ "PYTHON", PREFIX, "Python interpreter setting (module path, startup code)" },
	{ "PERL", PREFIX, "Perl interpreter setting (module path, options)" },
	{ "RUBY", PREFIX, "Ruby interpreter setting (module path, options)" },
	{ "NODE_OPTIONS", EXACT, "Node.js options (--require loads code)" },
	{ "NODE_PATH", EXACT, "Node.js module path" },
	{ "CLASSPATH", EXACT, "Java class path" },
	{ "JAVA_TOOL_OPTIONS", EXACT, "JVM options (agents load code)" },
	{ "_JAVA_OPTIONS", EXACT, "JVM options (agents load code)" },
	{ "JDK_JAVA_OPTIONS", EXACT, "JVM options (agents load code)" },
	{ "GS_", PREFIX, "Ghostscript options (-dNOSAFER lifts its sandbox)" },
	{ "MAGICK_", PREFIX, "ImageMagick configuration (security policy, coder modules)" },
	{ "FFREPORT", EXACT, "makes ffmpeg write a file where it says" },
	{ "EXECSERVER_PROGRESS_FD", EXACT, "the execserver sets it: the progress descriptor" },
};

static const struct refused_env *env_refused(const char *name, size_t n)
{
	for (size_t i = 0; i < sizeof refused_env / sizeof refused_env[0]; i++) {
		const struct refused_env *r = &refused_env[i];
		size_t rl = strlen(r->name);

		switch (r->match) {
		case EXACT:
			if (n == rl && strncasecmp(name, r->name, n) == 0)
				return r;
			break;
		case PREFIX:
			if (n >= rl && strncasecmp(name, r->name, rl) == 0)
				return r;
			break;
		case SUFFIX:
			if (n >= rl && strncasecmp(name + n - rl, r->name, rl) == 0)
				return r;
			break;
		}
	}
	return NULL;
}

/* Length of the NAME of "NAME=value", or -1 without '=' or with a NAME not
 * matching [A-Za-z_][A-Za-z0-9_]*. */
static long env_name_len(const char *entry)
{
	static const char first[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_";
	const char *eq = strchr(entry, '=');

	if (!eq || eq == entry || !strchr(first, entry[0]))
		return -1;
	size_t n = (size_t)(eq - entry);
	if (strspn(entry, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") != n)
		return -1;
	return (long)n;
}

/* Sets "NAME=value" in v: replaces an entry with the same NAME in place,
 * else appends. */
static int env_set(struct strvec *v, const char *entry)
{
	long n = env_name_len(entry);

	if (n < 0)
		return 0; /* the configuration loader refuses these; never here */
	for (size_t i = 0; i < v->n; i++)
		if (strncmp(v->v[i], entry, (size_t)n + 1) == 0) {
			char *dup = strdup(entry);
			if (!dup)
				return -1;
			free(v->v[i]);
			v->v[i] = dup;
			return 0;
		}
	return vec_take(v, strdup(entry));
}

static int check_job_env(struct ctx *c, struct json_object *env, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct json_object *e = json_object_array_get_idx(env, i);
		size_t len;

		if (!json_object_is_type(e, json_type_string))
			return fail(c, PROTO_E_BAD_JOB,
				    "job.env[%zu]: a string NAME=value is "
				    "required",
				    i);
		if (!plain_string(e, &len))
			return fail(c, PROTO_E_BAD_JOB, "job.env[%zu]: must not contain NUL", i);
		if (len > JOB_SPEC_MAX_ENV_BYTES)
			return fail(c, PROTO_E_BAD_JOB, "job.env[%zu]: longer than %d bytes", i,
				    JOB_SPEC_MAX_ENV_BYTES);
		const char *entry = json_object_get_string(e);
		long nl = env_name_len(entry);
		if (nl < 0)
			return fail(c, PROTO_E_BAD_JOB,
				    "job.env[%zu]: NAME=value is required, "
				    "NAME of A-Z a-z 0-9 _ not starting with a digit",
				    i);
		const struct refused_env *r = env_refused(entry, (size_t)nl);
		if (r)
			return fail(c, PROTO_E_BAD_JOB,
				    "job.env[%zu]: %.*s may not be set by a "
				    "job (%s)",
				    i, (int)nl, entry, r->why);
		for (size_t j = 0; j < i; j++) {
			const char *prev = json_object_get_string(
				json_object_array_get_idx(env, j));
			if (strncmp(prev, entry, (size_t)nl + 1) == 0)
				return fail(c, PROTO_E_BAD_JOB,
					    "job.env[%zu]: duplicate name "
					    "%.*s (first at job.env[%zu])",
					    i, (int)nl, entry, j);
		}
	}
	return 0;
}

static int parse_env(struct ctx *c, const struct config_command *cmd, struct json_object *job,
		     struct job_spec *s)
{
	struct strvec v = { NULL, 0, 0 };
	struct json_object *env;
	size_t n = 0;

	if (get_opt(job, "env", &env)) {
		if (!json_object_is_type(env, json_type_array))
			return fail(c, PROTO_E_BAD_JOB,
				    "job.env: an array of NAME=value strings "
				    "is required");
		n = json_object_array_length(env);
		if (n > JOB_SPEC_MAX_ENV)
			return fail(c, PROTO_E_BAD_JOB, "job.env: at most %d entries",
				    JOB_SPEC_MAX_ENV);
		if (check_job_env(c, env, n) != 0)
			return -1;
	}
	if (env_set(&v, JOB_SPEC_DEFAULT_PATH) != 0)
		goto nomem;
	for (size_t i = 0; i < c->cfg->env.count; i++)
		if (env_set(&v, c->cfg->env.items[i]) != 0)
			goto nomem;
	for (size_t i = 0; i < cmd->env.count; i++)
		if (env_set(&v, cmd->env.items[i]) != 0)
			goto nomem;
	for (size_t i = 0; i < n; i++)
		if (env_set(&v, json_object_get_string(json_object_array_get_idx(env, i))) != 0)
			goto nomem;
	/* last: the configuration cannot move the progress descriptor */
	if (env_set(&v, JOB_PROGRESS_ENV_ENTRY) != 0)
		goto nomem;
	s->envp = v.v;
	s->envc = v.n;
	return 0;
nomem:
	strv_free(v.v);
	return oom(c);
}

/* ---- URLs ------------------------------------------------------------------ */

enum url_rc {
	URL_OK = 0,
	URL_REFUSED = -1,
	URL_NOMEM = -2
};

struct url_info {
	char host[JOB_SPEC_HOST_MAX];
	unsigned port;
	char *norm;    /* malloc'd normalized URL, when asked for */
	char why[160]; /* when refused */
};

static enum url_rc refuse(struct url_info *ui, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static enum url_rc refuse(struct url_info *ui, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(ui->why, sizeof ui->why, fmt, ap);
	va_end(ap);
	return URL_REFUSED;
}

/* One part of u: 1 present (*out, curl_free it), 0 absent, -1 no memory. */
static int url_part(CURLU *u, CURLUPart part, unsigned flags, char **out)
{
	CURLUcode rc = curl_url_get(u, part, out, flags);

	if (rc == CURLUE_OK)
		return 1;
	*out = NULL;
	return rc == CURLUE_OUT_OF_MEMORY ? -1 : 0;
}

/* The host as curl gives it -> ui->host: no brackets, lowercase, ASCII
 * letters, digits, '.', '-', '_' (':' too for IPv6), one trailing dot
 * removed, no empty label: "files.example.com.." would be recorded as
 * "files.example.com." and then match callbackAllow's files.example.com
 * (which removes a trailing dot too) while libcurl resolves another
 * name. */
static enum url_rc url_host(struct url_info *ui, const char *h)
{
	size_t len = strlen(h);
	int v6 = len >= 2 && h[0] == '[' && h[len - 1] == ']';

	if (v6) {
		h++;
		len -= 2;
	}
	if (len >= sizeof ui->host)
		return refuse(ui, "the host is longer than %d bytes", JOB_SPEC_HOST_MAX - 1);
	for (size_t i = 0; i < len; i++) {
		char ch = ascii_lower(h[i]);
		int ok = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '.' ||
			 (v6 ? ch == ':' : (ch == '-' || ch == '_'));
		if (!ok)
			return refuse(ui, "the host must be an ASCII host name (punycode for "
					  "international names) or an IP address");
		ui->host[i] = ch;
	}
	ui->host[len] = '\0';
	if (!v6 && len && ui->host[len - 1] == '.')
		ui->host[--len] = '\0';
	if (!len)
		return refuse(ui, "the host is empty");
	if (!v6 && (ui->host[0] == '.' || ui->host[len - 1] == '.' || strstr(ui->host, "..")))
		return refuse(ui,
			      "the host has an empty label (a leading dot or two dots in a row)");
	return URL_OK;
}

/* The normalized URL norm is what libcurl is given and parses again when it
 * connects.  libcurl 7.88 normalizes numeric IPv4 hosts before it decodes
 * %-escapes in the host, so a host such as %33 is kept as 3 and written out
 * as http://3/, which the next parse reads as 0.0.0.3.  So norm is parsed
 * once more, and the URL is refused unless that parse gives the host and
 * port of ui: what is checked and recorded is where the connection goes. */
static enum url_rc url_same_endpoint(const char *norm, struct url_info *ui)
{
	struct url_info again;
	enum url_rc ret = URL_OK;
	char *part = NULL;
	CURLU *u;
	CURLUcode rc;
	int same = 0, got = 0;

	if (!(u = curl_url()))
		return URL_NOMEM;
	rc = curl_url_set(u, CURLUPART_URL, norm, 0);
	if (rc == CURLUE_OK && (got = url_part(u, CURLUPART_HOST, 0, &part)) > 0 &&
	    url_host(&again, part) == URL_OK && strcmp(again.host, ui->host) == 0) {
		curl_free(part);
		if ((got = url_part(u, CURLUPART_PORT, CURLU_DEFAULT_PORT, &part)) > 0)
			same = strtoul(part, NULL, 10) == ui->port;
	}
	if (rc == CURLUE_OUT_OF_MEMORY || got < 0)
		ret = URL_NOMEM;
	else if (!same)
		ret = refuse(ui, "the host changes when the normalized URL is read again "
				 "(write the host without %%-escapes)");
	curl_free(part);
	curl_url_cleanup(u);
	return ret;
}

/* Checks url (len bytes as sent) against the URL rules; fills ui, with
 * ui->norm only when want_norm. */
static enum url_rc url_check(const char *url, size_t len, int want_norm, struct url_info *ui)
{
	enum url_rc ret = URL_OK;
	char *part = NULL;
	CURLU *u;
	CURLUcode rc;
	int got;

	ui->norm = NULL;
	ui->host[0] = '\0';
	ui->port = 0;
	ui->why[0] = '\0';
	if (len > JOB_SPEC_MAX_URL)
		return refuse(ui, "longer than %d bytes", JOB_SPEC_MAX_URL);
	if (strlen(url) != len)
		return refuse(ui, "must not contain NUL");
	if (!(u = curl_url()))
		return URL_NOMEM;
	rc = curl_url_set(u, CURLUPART_URL, url, 0);
	switch (rc) {
	case CURLUE_OK: break;
	case CURLUE_OUT_OF_MEMORY: ret = URL_NOMEM; goto out;
	case CURLUE_UNSUPPORTED_SCHEME:
	case CURLUE_BAD_SCHEME:
	case CURLUE_NO_SCHEME: ret = refuse(ui, "the scheme must be http or https"); goto out;
	default: ret = refuse(ui, "not a valid URL (%s)", curl_url_strerror(rc)); goto out;
	}
	if ((got = url_part(u, CURLUPART_SCHEME, 0, &part)) < 0) {
		ret = URL_NOMEM;
		goto out;
	}
	if (!got || (strcasecmp(part, "http") != 0 && strcasecmp(part, "https") != 0)) {
		ret = refuse(ui, "the scheme must be http or https");
		goto out;
	}
	static const CURLUPart cred[] = { CURLUPART_USER, CURLUPART_PASSWORD, CURLUPART_OPTIONS };
	for (size_t i = 0; i < sizeof cred / sizeof cred[0]; i++) {
		curl_free(part);
		if ((got = url_part(u, cred[i], 0, &part)) < 0) {
			ret = URL_NOMEM;
			goto out;
		}
		if (got) {
			ret = refuse(ui, "must not contain a user name or password");
			goto out;
		}
	}
	curl_free(part);
	if ((got = url_part(u, CURLUPART_ZONEID, 0, &part)) < 0) {
		ret = URL_NOMEM;
		goto out;
	}
	if (got) {
		ret = refuse(ui, "IPv6 zone ids are not accepted");
		goto out;
	}
	curl_free(part);
	if ((got = url_part(u, CURLUPART_HOST, 0, &part)) < 0) {
		ret = URL_NOMEM;
		goto out;
	}
	if (!got) {
		ret = refuse(ui, "the URL has no host");
		goto out;
	}
	if ((ret = url_host(ui, part)) != URL_OK)
		goto out;
	curl_free(part);
	if ((got = url_part(u, CURLUPART_PORT, CURLU_DEFAULT_PORT, &part)) < 0) {
		ret = URL_NOMEM;
		goto out;
	}
	char *end = NULL;
	unsigned long port = got ? strtoul(part, &end, 10) : 0;
	if (!got || *end || port < 1 || port > 65535) {
		ret = refuse(ui, "the port must be from 1 to 65535");
		goto out;
	}
	ui->port = (unsigned)port;
	curl_free(part);
	if ((got = url_part(u, CURLUPART_URL, 0, &part)) == 0)
		ret = refuse(ui, "not a valid URL");
	else if (got < 0)
		ret = URL_NOMEM;
	else
		ret = url_same_endpoint(part, ui);
	if (ret == URL_OK && want_norm && !(ui->norm = strdup(part)))
		ret = URL_NOMEM;
out:
	curl_free(part);
	curl_url_cleanup(u);
	return ret;
}

int job_spec_url_host(const char *url, char *host, size_t hostlen)
{
	struct url_info ui;

	if (!url || !host) {
		errno = EINVAL;
		return -1;
	}
	switch (url_check(url, strlen(url), 0, &ui)) {
	case URL_OK: break;
	case URL_NOMEM: errno = ENOMEM; return -1;
	default: errno = EINVAL; return -1;
	}
	if (strlen(ui.host) >= hostlen) {
		errno = ERANGE;
		return -1;
	}
	memcpy(host, ui.host, strlen(ui.host) + 1);
	return 0;
}

/* A URL field: v must be a string; label names it.  Fills *url (malloc'd),
 * host and port. */
static int parse_url(struct ctx *c, struct json_object *v, const char *label, char **url,
		     char *host, unsigned *port)
{
	struct url_info ui;

	if (!json_object_is_type(v, json_type_string))
		return fail(c, PROTO_E_BAD_JOB, "%s: a URL string is required", label);
	switch (url_check(json_object_get_string(v), (size_t)json_object_get_string_len(v), 1,
			  &ui)) {
	case URL_OK: break;
	case URL_NOMEM: return oom(c);
	default: return fail(c, PROTO_E_BAD_JOB, "%s: %s", label, ui.why);
	}
	*url = ui.norm;
	memcpy(host, ui.host, sizeof ui.host);
	*port = ui.port;
	return 0;
}

static int parse_stdio(struct ctx *c, struct json_object *job, const char *key, char **url,
		       char *host, unsigned *port)
{
	struct json_object *v;
	char label[16];

	if (!get_opt(job, key, &v))
		return 0;
	snprintf(label, sizeof label, "job.%s", key);
	if (!json_object_is_type(v, json_type_string))
		return fail(c, PROTO_E_BAD_JOB, "%s: a URL string or null is required", label);
	return parse_url(c, v, label, url, host, port);
}

/* ---- inputs and outputs ---------------------------------------------------- */

/* NULL when name (len bytes) is a plain file name, else why not. */
static const char *file_name_problem(const char *name, size_t len)
{
	const unsigned char *p = (const unsigned char *)name;

	if (len == 0)
		return "empty";
	if (strlen(name) != len)
		return "contains NUL";
	if (len > JOB_SPEC_MAX_NAME)
		return "longer than 255 bytes";
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return ". and .. are not file names";
	for (size_t i = 0; i < len; i++) {
		if (p[i] == '/')
			return "contains /";
		/* C0, DEL, and C1 (U+0080..U+009F, in UTF-8 C2 80..C2 9F) */
		if (p[i] < 0x20 || p[i] == 0x7f ||
		    (p[i] == 0xc2 && i + 1 < len && p[i + 1] >= 0x80 && p[i + 1] <= 0x9f))
			return "contains a control character";
	}
	return NULL;
}

static void files_free(struct job_file *f, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(f[i].name);
		free(f[i].url);
	}
	free(f);
}

static int parse_files(struct ctx *c, struct json_object *job, const char *key,
		       struct job_file **out, size_t *nout)
{
	struct json_object *arr;
	struct job_file *files;
	char label[48];
	size_t n, i;

	if (!get_opt(job, key, &arr))
		return 0;
	if (!json_object_is_type(arr, json_type_array))
		return fail(c, PROTO_E_BAD_JOB, "job.%s: an array of {name, url} is required", key);
	n = json_object_array_length(arr);
	if (n > JOB_SPEC_MAX_FILES)
		return fail(c, PROTO_E_BAD_JOB, "job.%s: at most %d entries", key,
			    JOB_SPEC_MAX_FILES);
	if (n == 0)
		return 0;
	if (!(files = calloc(n, sizeof *files)))
		return oom(c);
	for (i = 0; i < n; i++) {
		struct json_object *e = json_object_array_get_idx(arr, i), *name, *url;
		const char *why;

		if (!json_object_is_type(e, json_type_object)) {
			fail(c, PROTO_E_BAD_JOB, "job.%s[%zu]: an object {name, url} is required",
			     key, i);
			goto err;
		}
		if (!json_object_object_get_ex(e, "name", &name) ||
		    !json_object_is_type(name, json_type_string)) {
			fail(c, PROTO_E_BAD_JOB, "job.%s[%zu].name: a string is required", key, i);
			goto err;
		}
		const char *nm = json_object_get_string(name);
		if ((why = file_name_problem(nm, (size_t)json_object_get_string_len(name)))) {
			fail(c, PROTO_E_BAD_JOB, "job.%s[%zu].name: must be a plain file name (%s)",
			     key, i, why);
			goto err;
		}
		for (size_t j = 0; j < i; j++)
			if (strcmp(files[j].name, nm) == 0) {
				fail(c, PROTO_E_BAD_JOB,
				     "job.%s[%zu].name: duplicate of job.%s[%zu]", key, i, key, j);
				goto err;
			}
		if (!(files[i].name = strdup(nm))) {
			oom(c);
			goto err;
		}
		snprintf(label, sizeof label, "job.%s[%zu].url", key, i);
		if (!json_object_object_get_ex(e, "url", &url)) {
			fail(c, PROTO_E_BAD_JOB, "%s: a URL string is required", label);
			goto err;
		}
		if (parse_url(c, url, label, &files[i].url, files[i].host, &files[i].port) != 0)
			goto err;
	}
	*out = files;
	*nout = n;
	return 0;
err:
	files_free(files, n);
	return -1;
}

/* ---- the whole payload -------------------------------------------------------- */

static int parse_timeout(struct ctx *c, struct json_object *job, unsigned *out)
{
	struct json_object *v;

	if (!get_opt(job, "timeout_sec", &v))
		return 0;
	if (!json_object_is_type(v, json_type_int))
		return fail(c, PROTO_E_BAD_JOB, "job.timeout_sec: an integer is required");
	int64_t t = json_object_get_int64(v);
	if (t < 0 || t > JOB_SPEC_MAX_TIMEOUT)
		return fail(c, PROTO_E_BAD_JOB, "job.timeout_sec: must be from 0 to %d",
			    JOB_SPEC_MAX_TIMEOUT);
	*out = (unsigned)t;
	return 0;
}

static int parse_command(struct ctx *c, struct json_object *job, struct job_spec *s)
{
	struct json_object *v;
	size_t len;

	if (!json_object_object_get_ex(job, "command", &v) ||
	    !json_object_is_type(v, json_type_string))
		return fail(c, PROTO_E_BAD_JOB, "job.command: a string is required");
	if (!plain_string(v, &len))
		return fail(c, PROTO_E_BAD_JOB, "job.command: must not contain NUL");
	s->command = config_find_command(c->svc, json_object_get_string(v));
	if (!s->command)
		return fail(c, PROTO_E_UNKNOWN_COMMAND,
			    "job.command: not configured for "
			    "service %s",
			    c->svc->name);
	return 0;
}

int job_spec_parse(const struct es_config *cfg, const struct config_service *svc,
		   struct json_object *job, const char *jobdir, struct job_spec *out,
		   const char **code, char *msg, size_t msglen)
{
	struct ctx c = { cfg, svc, jobdir, 0, code, msg, msglen };
	struct job_spec s;

	memset(out, 0, sizeof *out);
	memset(&s, 0, sizeof s);
	if (msg && msglen)
		msg[0] = '\0';
	if (!cfg || !svc || !jobdir || jobdir[0] != '/')
		return fail(&c, PROTO_E_INTERNAL, "the job directory must be an absolute path");
	c.jobdir_len = strlen(jobdir);
	if (!json_object_is_type(job, json_type_object))
		return fail(&c, PROTO_E_BAD_JOB, "job: an object is required");
	if (parse_command(&c, job, &s) != 0 || parse_argv(&c, s.command, job, &s) != 0 ||
	    parse_env(&c, s.command, job, &s) != 0 ||
	    parse_stdio(&c, job, "stdin", &s.stdin_url, s.stdin_host, &s.stdin_port) != 0 ||
	    parse_stdio(&c, job, "stdout", &s.stdout_url, s.stdout_host, &s.stdout_port) != 0 ||
	    parse_files(&c, job, "inputs", &s.inputs, &s.ninputs) != 0 ||
	    parse_files(&c, job, "outputs", &s.outputs, &s.noutputs) != 0 ||
	    parse_timeout(&c, job, &s.timeout_sec) != 0) {
		job_spec_free(&s);
		return -1;
	}
	*out = s;
	return 0;
}

void job_spec_free(struct job_spec *spec)
{
	if (!spec)
		return;
	strv_free(spec->argv);
	strv_free(spec->envp);
	free(spec->stdin_url);
	free(spec->stdout_url);
	files_free(spec->inputs, spec->ninputs);
	files_free(spec->outputs, spec->noutputs);
	memset(spec, 0, sizeof *spec);
}
