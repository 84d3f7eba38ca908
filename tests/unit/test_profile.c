/*
 * test_profile.c - the auto-balance profile snapshot file (src/master/
 * profile.c): a round trip, the atomic write (no temporary file left, an
 * existing snapshot replaced whole), and every reason to discard one
 * (another architecture, another pool size, another format version, not a
 * snapshot, a malformed entry), each with the reason the log will show.
 */
#include "autoconfig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

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

static int teardown(void)
{
	char tmp[160];
	snprintf(tmp, sizeof tmp, "%s.tmp", g_path);
	unlink(g_path);
	unlink(tmp);
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
	CU_ASSERT_EQUAL(profile_read(g_path, "x86_64", 8, &e, &n, why, sizeof why), 0); /* none yet */
	CU_ASSERT_EQUAL_FATAL(profile_write(g_path, "x86_64", 8, E, 3, why, sizeof why), 0);
	char tmp[160];
	snprintf(tmp, sizeof tmp, "%s.tmp", g_path);
	CU_ASSERT_NOT_EQUAL(access(tmp, F_OK), 0);
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
	CU_ASSERT_EQUAL(profile_write("/nonexistent-dir/profile.json", "x86_64", 1, E, 1, why,
				      sizeof why), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "/nonexistent-dir/profile.json.tmp"));
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "round trip, atomic replace", test_round_trip },
		{ "discarded snapshots", test_discarded },
		{ "a failed write", test_write_fails_cleanly },
		{ NULL, NULL },
	};
	if (setup() != 0)
		return 2;
	int rc = run_suite("profile snapshot", cases);
	return teardown() != 0 ? 1 : rc;
}
