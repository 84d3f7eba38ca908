/*
 * test_profile.c - the auto-balance profile snapshot file (src/master/
 * profile.c): a round trip, the atomic write (no temporary file left, an
 * existing snapshot replaced whole), and every reason to discard one
 * (another architecture, another pool size, another format version, not a
 * snapshot, a malformed entry, a mean above UINT32_MAX ms, a FIFO, a
 * symbolic link), each with the reason the log will show, and that no
 * symbolic link is followed on reading or writing.
 */
#include "autoconfig.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include "book/book_class.h"
#include "master/profile.h"
#include "suite.h"

static char g_dir[64], g_path[128];

static int setup(void)
{
	snprintf(g_dir, sizeof g_dir, "/tmp/es-profile-XXXXXX");
	if (!mkdtemp(g_dir))
		return -1;
	snprintf(g_path, sizeof g_path, "%s/%s", g_dir, PROFILE_FILE);
	return 0;
}

/* The names in g_dir, sorted, joined by ','. */
static void dir_list(char *buf, size_t len)
{
	struct dirent **ents;
	int n = scandir(g_dir, &ents, NULL, alphasort);
	buf[0] = '\0';
	for (int i = 0; i < n; i++) {
		if (strcmp(ents[i]->d_name, ".") && strcmp(ents[i]->d_name, ".."))
			snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", buf[0] ? "," : "",
				 ents[i]->d_name);
		free(ents[i]);
	}
	if (n >= 0)
		free(ents);
}

static int teardown(void)
{
	struct dirent **ents;
	int n = scandir(g_dir, &ents, NULL, alphasort);
	for (int i = 0; i < n; i++) {
		char p[512];
		snprintf(p, sizeof p, "%s/%s", g_dir, ents[i]->d_name);
		if (strcmp(ents[i]->d_name, ".") && strcmp(ents[i]->d_name, ".."))
			unlink(p);
		free(ents[i]);
	}
	if (n >= 0)
		free(ents);
	return rmdir(g_dir);
}

static void put(const char *text)
{
	FILE *f = fopen(g_path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs(text, f);
	fclose(f);
}

static const struct profile_entry E[] = {
	{ "video", { 61234.5, 12, SVC_HEAVY } },
	{ "iiif", { 12.25, 400, SVC_LIGHT } },
	{ "new", { 0, 0, SVC_UNKNOWN } },
};

static void test_round_trip(void)
{
	char why[256] = "";
	struct profile_entry *e;
	size_t n;
	CU_ASSERT_EQUAL(profile_read(g_path, "x86_64", 8, &e, &n, why, sizeof why),
			0); /* none yet */
	CU_ASSERT_EQUAL_FATAL(profile_write(g_path, "x86_64", 8, E, 3, why, sizeof why), 0);
	char names[512];
	dir_list(names, sizeof names);
	CU_ASSERT_STRING_EQUAL(names, PROFILE_FILE); /* no temporary file left */
	CU_ASSERT_EQUAL_FATAL(profile_read(g_path, "x86_64", 8, &e, &n, why, sizeof why), 1);
	CU_ASSERT_EQUAL_FATAL(n, 3);
	for (size_t i = 0; i < n; i++) {
		CU_ASSERT_STRING_EQUAL(e[i].name, E[i].name);
		CU_ASSERT_DOUBLE_EQUAL(e[i].p.ema_ms, E[i].p.ema_ms, 1e-9);
		CU_ASSERT_EQUAL(e[i].p.samples, E[i].p.samples);
		CU_ASSERT_EQUAL(e[i].p.klass, E[i].p.klass);
	}
	free(e);
	/* a second write replaces the first whole */
	CU_ASSERT_EQUAL(profile_write(g_path, "x86_64", 8, E + 1, 1, why, sizeof why), 0);
	CU_ASSERT_EQUAL(profile_read(g_path, "x86_64", 8, &e, &n, why, sizeof why), 1);
	CU_ASSERT_EQUAL(n, 1);
	CU_ASSERT_STRING_EQUAL(e[0].name, "iiif");
	free(e);
	CU_ASSERT_PTR_NOT_NULL(profile_arch());
	CU_ASSERT(strlen(profile_arch()) > 0);
}

static void discarded(const char *arch, uint32_t pool, const char *reason)
{
	char why[256] = "";
	struct profile_entry *e = (struct profile_entry *)1;
	size_t n = 7;
	CU_ASSERT_EQUAL(profile_read(g_path, arch, pool, &e, &n, why, sizeof why), -1);
	CU_ASSERT_PTR_NULL(e);
	CU_ASSERT_EQUAL(n, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, reason));
	if (!strstr(why, reason))
		printf("\n  why: %s (want %s)\n", why, reason);
}

static void test_discarded(void)
{
	char why[256];
	CU_ASSERT_EQUAL_FATAL(profile_write(g_path, "x86_64", 8, E, 3, why, sizeof why), 0);
	discarded("aarch64", 8, "taken on another architecture (x86_64, this host is aarch64)");
	discarded("x86_64", 6, "taken with a pool of 8 slots, this pool has 6");
	put("{\"format\":\"execserver-profile\",\"version\":2,\"arch\":\"x86_64\",\"pool\":8,"
	    "\"services\":{}}");
	discarded("x86_64", 8, "another version");
	put("{\"format\":\"something\",\"version\":1}");
	discarded("x86_64", 8, "not an execserver profile snapshot");
	put("not json at all");
	discarded("x86_64", 8, "not an execserver profile snapshot");
	put("{\"format\":\"execserver-profile\",\"version\":1,\"arch\":\"x86_64\",\"pool\":8,"
	    "\"services\":{\"a\":{\"class\":\"medium\",\"mean_runtime_ms\":1,\"samples\":1}}}");
	discarded("x86_64", 8, "service \"a\": malformed entry");
	put("{\"format\":\"execserver-profile\",\"version\":1,\"arch\":\"x86_64\",\"pool\":8,"
	    "\"services\":{\"a\":{\"class\":\"light\",\"mean_runtime_ms\":-5,\"samples\":1}}}");
	discarded("x86_64", 8, "malformed entry");
	put("{\"format\":\"execserver-profile\",\"version\":1,\"arch\":\"x86_64\",\"pool\":8}");
	discarded("x86_64", 8, "no \"services\" object");
	/* an integer mean is fine */
	put("{\"format\":\"execserver-profile\",\"version\":1,\"arch\":\"x86_64\",\"pool\":8,"
	    "\"services\":{\"a\":{\"class\":\"heavy\",\"mean_runtime_ms\":20000,\"samples\":3}}}");
	struct profile_entry *e;
	size_t n;
	CU_ASSERT_EQUAL(profile_read(g_path, "x86_64", 8, &e, &n, why, sizeof why), 1);
	CU_ASSERT_EQUAL(n, 1);
	CU_ASSERT_DOUBLE_EQUAL(e[0].p.ema_ms, 20000.0, 1e-9);
	free(e);
}

static void test_write_fails_cleanly(void)
{
	char why[256] = "";
	CU_ASSERT_EQUAL(
		profile_write("/nonexistent-dir/profile.json", "x86_64", 1, E, 1, why, sizeof why),
		-1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "/nonexistent-dir/profile.json: cannot create a "
					   "temporary file next to it: No such file or directory"));
}

static void put_mean(const char *mean)
{
	char text[512];
	snprintf(text, sizeof text,
		 "{\"format\":\"execserver-profile\",\"version\":1,"
		 "\"arch\":\"x86_64\",\"pool\":8,\"services\":{\"a\":{\"class\":\"heavy\","
		 "\"mean_runtime_ms\":%s,\"samples\":5}}}",
		 mean);
	put(text);
}

/* Durations are uint32_t milliseconds: no average of them is larger, and
 * a larger one would later be converted out of range. */
static void test_mean_range(void)
{
	put_mean("1e300");
	discarded("x86_64", 8, "service \"a\": malformed entry");
	put_mean("4294967296");
	discarded("x86_64", 8, "service \"a\": malformed entry");
	put_mean("4294967295.5");
	discarded("x86_64", 8, "service \"a\": malformed entry");
	put_mean("4294967295");
	char why[256] = "";
	struct profile_entry *e;
	size_t n;
	CU_ASSERT_EQUAL_FATAL(profile_read(g_path, "x86_64", 8, &e, &n, why, sizeof why), 1);
	CU_ASSERT_EQUAL(n, 1);
	CU_ASSERT_DOUBLE_EQUAL(e[0].p.ema_ms, 4294967295.0, 0);
	free(e);
}

static void on_alarm(int sig)
{
	(void)sig;
	static const char msg[] = "\n  profile_read hung on a FIFO\n";
	ssize_t w = write(2, msg, sizeof msg - 1);
	(void)w;
	_exit(1);
}

/* tempDir may be writable by others: a FIFO at the snapshot's path is
 * discarded at once (the master used to block in open for ever), a
 * directory too. */
static void test_not_a_regular_file(void)
{
	unlink(g_path);
	CU_ASSERT_EQUAL_FATAL(mkfifo(g_path, 0600), 0);
	signal(SIGALRM, on_alarm);
	alarm(5);
	discarded("x86_64", 8, "not a regular file");
	alarm(0);
	unlink(g_path);
	CU_ASSERT_EQUAL_FATAL(mkdir(g_path, 0700), 0);
	discarded("x86_64", 8, "not a regular file");
	rmdir(g_path);
}

static void read_text(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	buf[0] = '\0';
	if (f) {
		size_t n = fread(buf, 1, len - 1, f);
		buf[n] = '\0';
		fclose(f);
	}
}

/* Symbolic links are never followed: a link at the snapshot's path is
 * discarded on read and replaced (not written through) on write; a link at
 * the old predictable temporary name is left alone. */
static void test_symlinks_not_followed(void)
{
	char victim[160], victim2[160], tmp[160], text[256], why[256] = "";
	snprintf(victim, sizeof victim, "%s/victim", g_dir);
	snprintf(victim2, sizeof victim2, "%s/victim2", g_dir);
	snprintf(tmp, sizeof tmp, "%s.tmp", g_path);
	/* read: a valid snapshot behind a link is still refused */
	CU_ASSERT_EQUAL_FATAL(profile_write(victim, "x86_64", 8, E, 3, why, sizeof why), 0);
	unlink(g_path);
	CU_ASSERT_EQUAL_FATAL(symlink(victim, g_path), 0);
	discarded("x86_64", 8, "a symbolic link (not followed)");
	/* write: neither link is written through */
	FILE *f = fopen(victim2, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs("precious", f);
	fclose(f);
	CU_ASSERT_EQUAL_FATAL(symlink(victim2, tmp), 0);
	CU_ASSERT_EQUAL(profile_write(g_path, "x86_64", 8, E + 1, 1, why, sizeof why), 0);
	read_text(victim2, text, sizeof text);
	CU_ASSERT_STRING_EQUAL(text, "precious");
	struct stat st;
	CU_ASSERT_EQUAL(lstat(g_path, &st), 0);
	CU_ASSERT(S_ISREG(st.st_mode)); /* the link was replaced */
	struct profile_entry *e;
	size_t n;
	CU_ASSERT_EQUAL_FATAL(profile_read(victim, "x86_64", 8, &e, &n, why, sizeof why), 1);
	CU_ASSERT_EQUAL(n, 3); /* the link's target untouched */
	free(e);
	CU_ASSERT_EQUAL_FATAL(profile_read(g_path, "x86_64", 8, &e, &n, why, sizeof why), 1);
	CU_ASSERT_EQUAL(n, 1);
	free(e);
	unlink(tmp);
	unlink(victim);
	unlink(victim2);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "round trip, atomic replace", test_round_trip },
		{ "discarded snapshots", test_discarded },
		{ "a failed write", test_write_fails_cleanly },
		{ "mean runtime above UINT32_MAX ms", test_mean_range },
		{ "a FIFO or directory is discarded, not hung on", test_not_a_regular_file },
		{ "symbolic links are not followed", test_symlinks_not_followed },
		{ NULL, NULL },
	};
	if (setup() != 0)
		return 2;
	int rc = run_suite("profile snapshot", cases);
	return teardown() != 0 ? 1 : rc;
}
