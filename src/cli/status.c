/* status.c - see status.h.  The request is one blocking libcurl transfer
 * per address: a command-line tool has nothing else to do meanwhile, and
 * libcurl says exactly why a connection failed. */
#include "autoconfig.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "cli/exit_codes.h"
#include "cli/outcome.h"
#include "cli/status.h"
#include "cli/table.h"

#define STATUS_MAX_BYTES (4 << 20)

char *status_url(const char *address)
{
	static const struct {
		const char *prefix, *scheme;
	} schemes[] = {
		{ "ws://", "http" },
		{ "http://", "http" },
		{ "wss://", "https" },
		{ "https://", "https" },
	};
	const char *rest = NULL, *scheme = NULL;
	for (size_t i = 0; i < sizeof schemes / sizeof schemes[0] && !rest; i++)
		if (strncmp(address, schemes[i].prefix, strlen(schemes[i].prefix)) == 0) {
			rest = address + strlen(schemes[i].prefix);
			scheme = schemes[i].scheme;
		}
	if (!rest)
		return NULL;
	size_t hostlen = strcspn(rest, "/?#");
	if (hostlen == 0)
		return NULL;
	char *url = malloc(hostlen + 20);
	if (url)
		sprintf(url, "%s://%.*s/status", scheme, (int)hostlen, rest);
	return url;
}

/* A libcurl result that means the server's certificate was not trusted. */
static int tls_untrusted(CURLcode res)
{
	return res == CURLE_PEER_FAILED_VERIFICATION || res == CURLE_SSL_ISSUER_ERROR;
}

/* ---- tables -------------------------------------------------------------- */

static const char *str_field(struct json_object *o, const char *key)
{
	struct json_object *v;
	return json_object_object_get_ex(o, key, &v) && v ? json_object_get_string(v) : NULL;
}

/* A number field as text ("-" when absent or null). */
static void num_field(char *buf, size_t len, struct json_object *o, const char *key)
{
	struct json_object *v;
	if (json_object_object_get_ex(o, key, &v) && v && json_object_is_type(v, json_type_int))
		snprintf(buf, len, "%" PRId64, json_object_get_int64(v));
	else
		snprintf(buf, len, "-");
}

static int64_t int_field(struct json_object *o, const char *key)
{
	struct json_object *v;
	return json_object_object_get_ex(o, key, &v) && v ? json_object_get_int64(v) : 0;
}

static int bool_field(struct json_object *o, const char *key)
{
	struct json_object *v;
	return json_object_object_get_ex(o, key, &v) && v && json_object_get_boolean(v);
}

static void print_waitgroups(FILE *out, struct json_object *wgs)
{
	static const char *const head[] = { "WAITGROUP", "SLOTS", "RUNNING", "OFFERED", "WAITING" };
	static const char *const keys[] = { "processes", "running", "offered", "waiting" };
	struct table *t = table_new(5, head, 0);
	json_object_object_foreach(wgs, name, wg)
	{
		char v[4][24];
		const char *row[5] = { name, v[0], v[1], v[2], v[3] };
		for (int i = 0; i < 4; i++)
			num_field(v[i], sizeof v[i], wg, keys[i]);
		table_add(t, row);
	}
	table_print(t, out);
	table_free(t);
}

static void print_services(FILE *out, struct json_object *svcs)
{
	/* SAMPLES and CLASS: what auto-balance learned (class "-" with
	 * fixed waitgroups) */
	static const char *const head[] = { "SERVICE", "WAITGROUP", "ENABLED",  "RUNNING",
					    "WAITING", "STARTED",   "FINISHED", "FAILED",
					    "MEAN",    "SAMPLES",   "CLASS" };
	static const char *const keys[] = { "running",  "waiting", "started",
					    "finished", "failed",  "samples" };
	struct table *t = table_new(11, head, (1u << 1) | (1u << 2) | (1u << 10));
	json_object_object_foreach(svcs, name, svc)
	{
		char v[6][24], mean[32] = "-";
		const char *klass = str_field(svc, "class");
		const char *row[11] = { name,
					str_field(svc, "waitgroup"),
					bool_field(svc, "enabled") ? "yes" : "no",
					v[0],
					v[1],
					v[2],
					v[3],
					v[4],
					mean,
					v[5],
					klass ? klass : "-" };
		for (int i = 0; i < 6; i++)
			num_field(v[i], sizeof v[i], svc, keys[i]);
		struct json_object *m;
		int64_t ms = json_object_object_get_ex(svc, "mean_runtime_ms", &m) && m
				     ? json_object_get_int64(m)
				     : -1;
		if (ms >= 1000)
			snprintf(mean, sizeof mean, "%.1f s", (double)ms / 1000.0);
		else if (ms >= 0)
			snprintf(mean, sizeof mean, "%" PRId64 " ms", ms);
		table_add(t, row);
	}
	table_print(t, out);
	table_free(t);
}

void status_print_tables(FILE *out, struct json_object *st)
{
	struct json_object *wgs, *svcs;
	fprintf(out, "instance %s  version %s  listen %s%s\n",
		str_field(st, "instance_id") ? str_field(st, "instance_id") : "?",
		str_field(st, "version") ? str_field(st, "version") : "?",
		str_field(st, "listen") ? str_field(st, "listen") : "?",
		bool_field(st, "draining") ? "  DRAINING" : "");
	fprintf(out,
		"clients %" PRId64 "  connections %" PRId64 "  jobs %" PRId64 "  grants %" PRId64
		"\n\n",
		int_field(st, "clients"), int_field(st, "connections"), int_field(st, "wants"),
		int_field(st, "grants"));
	if (json_object_object_get_ex(st, "waitgroups", &wgs) &&
	    json_object_is_type(wgs, json_type_object))
		print_waitgroups(out, wgs);
	if (json_object_object_get_ex(st, "services", &svcs) &&
	    json_object_is_type(svcs, json_type_object)) {
		fputc('\n', out);
		print_services(out, svcs);
	}
}

/* ---- the request ------------------------------------------------------------ */

struct body {
	char *data;
	size_t len;
	int too_big;
};

static size_t collect(char *p, size_t size, size_t n, void *arg)
{
	struct body *b = arg;
	size_t add = size * n;
	if (b->len + add > STATUS_MAX_BYTES) {
		b->too_big = 1;
		return 0;
	}
	char *grown = realloc(b->data, b->len + add + 1);
	if (!grown)
		return 0;
	memcpy(grown + b->len, p, add);
	b->data = grown;
	b->len += add;
	b->data[b->len] = '\0';
	return add;
}

/* One address: prints its status, returns an exit status. */
static int status_one(const struct cli_status *o, const char *address)
{
	char *url = status_url(address);
	char errbuf[CURL_ERROR_SIZE] = "";
	struct body body = { 0 };
	struct curl_slist *headers = NULL;
	long code = 0;
	int rc;

	if (!url) {
		fprintf(stderr, "execctl: %s: not a ws://, wss://, http:// or https:// address\n",
			address);
		return EXECCTL_USAGE;
	}
	if (o->c.verbose)
		fprintf(stderr, "execctl: GET %s\n", url);
	CURL *h = curl_easy_init();
	if (!h) {
		free(url);
		fprintf(stderr, "execctl: out of memory\n");
		return EXECCTL_FAILED;
	}
	if (o->c.token) {
		char *auth = malloc(strlen(o->c.token) + 32);
		if (auth) {
			sprintf(auth, "Authorization: Bearer %s", o->c.token);
			headers = curl_slist_append(headers, auth);
			free(auth);
		}
	}
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 15000L);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	/* https: the peer and the host name are always verified (libcurl's
	 * defaults, set anyway so that no environment can weaken them) */
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
	if (o->c.cacert)
		curl_easy_setopt(h, CURLOPT_CAINFO, o->c.cacert);
	CURLcode res = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);

	if (res == CURLE_SSL_CACERT_BADFILE) {
		fprintf(stderr, "execctl: --cacert %s: cannot be loaded: %s\n",
			o->c.cacert ? o->c.cacert : "(system store)",
			errbuf[0] ? errbuf : curl_easy_strerror(res));
		rc = EXECCTL_USAGE;
	} else if (tls_untrusted(res)) {
		fprintf(stderr, "execctl: %s: certificate verify failed: %s (%s)\n", address,
			errbuf[0] ? errbuf : curl_easy_strerror(res),
			outcome_tls_hint(errbuf, o->c.cacert != NULL));
		rc = EXECCTL_TLS_VERIFY;
	} else if (res != CURLE_OK && !body.too_big) {
		fprintf(stderr, "execctl: cannot reach %s: %s\n", address,
			errbuf[0] ? errbuf : curl_easy_strerror(res));
		rc = EXECCTL_UNREACHABLE;
	} else if (code == 401) {
		fprintf(stderr, "execctl: %s refused the request (401): %s\n", address,
			o->c.token ? "the token is wrong"
				   : "it needs a token (--token-file or EXECCTL_TOKEN)");
		rc = EXECCTL_UNAUTHORIZED;
	} else if (code == 403) {
		fprintf(stderr,
			"execctl: %s refused the request (403): without an authToken it answers "
			"/status only to an IP address or localhost in the URL\n",
			address);
		rc = EXECCTL_UNAUTHORIZED;
	} else if (code != 200 || body.too_big) {
		fprintf(stderr,
			"execctl: %s answered HTTP %ld to GET /status%s: not an execserver?\n",
			address, code, body.too_big ? " (too large)" : "");
		rc = EXECCTL_BAD_ANSWER;
	} else {
		struct json_object *st = json_tokener_parse(body.data ? body.data : "");
		if (!st || !json_object_is_type(st, json_type_object) ||
		    !str_field(st, "instance_id")) {
			fprintf(stderr,
				"execctl: %s: GET /status did not answer an execserver status "
				"object\n",
				address);
			rc = EXECCTL_BAD_ANSWER;
		} else {
			if (o->json)
				printf("%s\n", json_object_to_json_string_ext(
						       st, JSON_C_TO_STRING_PLAIN |
								   JSON_C_TO_STRING_NOSLASHESCAPE));
			else
				status_print_tables(stdout, st);
			rc = EXECCTL_OK;
		}
		json_object_put(st);
	}
	curl_slist_free_all(headers);
	curl_easy_cleanup(h);
	free(body.data);
	free(url);
	return rc;
}

int cli_status_run(const struct cli_status *o)
{
	int worst = EXECCTL_OK;
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) {
		fprintf(stderr, "execctl: libcurl failed to initialise\n");
		return EXECCTL_FAILED;
	}
	for (size_t i = 0; i < o->c.naddresses; i++) {
		if (i > 0 && !o->json)
			printf("\n");
		int rc = status_one(o, o->c.addresses[i]);
		if (worst == EXECCTL_OK)
			worst = rc;
		fflush(stdout);
	}
	curl_global_cleanup();
	return worst;
}
