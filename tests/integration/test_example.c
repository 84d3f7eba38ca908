/*
 * test_example.c - the example of docs/client.md can never rot: the tree is
 * installed with `make install DESTDIR=<tmp>`, docs/examples/run_job.c is
 * compiled exactly as the document says, `cc run_job.c $(pkg-config
 * --cflags --libs execclient)`, with PKG_CONFIG_PATH (and the sysroot)
 * pointing into that tree and nothing from the build tree, then run against
 * a real daemon with bytes compared; the listing in docs/client.md must be
 * the file, byte for byte.  Also checks what the installation holds
 * (headers, soname, pkg-config file, execctl and its man page).
 */
#include "autoconfig.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include "harness.h"
#include "suite.h"

static char root[256];

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	char *buf = NULL;
	size_t cap = 0, n = 0, got;
	do {
		if (n + 65536 > cap) {
			char *grown = realloc(buf, cap = n + 65536 + 1);
			if (!grown)
				break;
			buf = grown;
		}
		got = fread(buf + n, 1, cap - n - 1, f);
		n += got;
	} while (got > 0);
	fclose(f);
	if (buf)
		buf[n] = '\0';
	if (len)
		*len = n;
	return buf;
}

static int installed(const char *dir, const char *name)
{
	char path[1024];
	struct stat st;
	snprintf(path, sizeof path, "%s%s/%s", root, dir, name);
	if (stat(path, &st) != 0) {
		fprintf(stderr, "\nnot installed: %s\n", path);
		return 0;
	}
	return 1;
}

/* Runs argv with stdin/stdout from/to files (NULL: /dev/null, the log);
 * returns the exit status, or -1. */
static int run_argv(char *const argv[], const char *in, const char *out, const char *log)
{
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int i = open(in ? in : "/dev/null", O_RDONLY);
		int o = out ? open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644) : -1;
		int l = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		dup2(i, 0);
		dup2(o >= 0 ? o : l, 1);
		dup2(l, 2);
		execvp(argv[0], argv);
		_exit(127);
	}
	int ws = harness_reap(&pid, 0, 120000);
	return ws >= 0 && WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
}

static void test_install_build_run(void)
{
	char log[300], path[1024];
	snprintf(root, sizeof root, "/tmp/es-install-XXXXXX");
	CU_ASSERT_FATAL(mkdtemp(root) != NULL);
	snprintf(log, sizeof log, "%s/log", root);

	/* make install DESTDIR=root, as a fresh make (not our caller's jobs) */
	char destdir[300];
	snprintf(destdir, sizeof destdir, "DESTDIR=%s", root);
	unsetenv("MAKEFLAGS");
	unsetenv("MFLAGS");
	unsetenv("MAKELEVEL");
	char *make[] = { TEST_MAKE, "-s", "-C", TEST_TOP_BUILDDIR, "install", destdir, NULL };
	int rc = run_argv(make, NULL, NULL, log);
	CU_ASSERT_EQUAL(rc, 0);
	if (rc != 0)
		harness_tail("make install", log, 30);
	CU_ASSERT(installed(TEST_INCLUDEDIR, "execserver/client.h"));
	CU_ASSERT(installed(TEST_INCLUDEDIR, "execserver/protocol.h"));
	CU_ASSERT(installed(TEST_LIBDIR, "libexecclient.so.0"));
	CU_ASSERT(installed(TEST_LIBDIR, "libexecclient.a"));
	CU_ASSERT(installed(TEST_PKGCONFIGDIR, "execclient.pc"));
	CU_ASSERT(installed(TEST_BINDIR, "execctl"));
	CU_ASSERT(installed(TEST_MANDIR, "man1/execctl.1"));

	/* cc run_job.c $(pkg-config --cflags --libs execclient) */
	snprintf(path, sizeof path, "%s%s", root, TEST_PKGCONFIGDIR);
	setenv("PKG_CONFIG_PATH", path, 1);
	setenv("PKG_CONFIG_SYSROOT_DIR", root, 1);
	FILE *p = popen("pkg-config --cflags --libs execclient", "r");
	char flags[2048] = "";
	CU_ASSERT_FATAL(p != NULL);
	CU_ASSERT(fgets(flags, sizeof flags, p) != NULL);
	CU_ASSERT_EQUAL(pclose(p), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(flags, "-lexecclient"));
	CU_ASSERT_PTR_NOT_NULL(strstr(flags, root)); /* the installed tree's paths */
	CU_ASSERT_PTR_NULL(strstr(flags, TEST_TOP_BUILDDIR));

	char *argv[64], exe[300], src[600];
	int argc = 0;
	snprintf(exe, sizeof exe, "%s/run_job", root);
	snprintf(src, sizeof src, "%s/docs/examples/run_job.c", TEST_TOP_SRCDIR);
	argv[argc++] = TEST_CC;
	char san[] = TEST_SAN_CFLAGS; /* the sanitizer build's library needs its runtime */
	for (char *t = strtok(san, " "); t && argc < 40; t = strtok(NULL, " "))
		argv[argc++] = t;
	argv[argc++] = src;
	for (char *t = strtok(flags, " \n"); t && argc < 60; t = strtok(NULL, " \n"))
		argv[argc++] = t;
	argv[argc++] = "-o";
	argv[argc++] = exe;
	argv[argc] = NULL;
	rc = run_argv(argv, NULL, NULL, log);
	CU_ASSERT_EQUAL(rc, 0);
	if (rc != 0)
		harness_tail("cc", log, 30);

	/* run it against a daemon, with only the installed library to load */
	struct es_daemon d;
	CU_ASSERT_FATAL(harness_start(&d, 2, harness_default_body(2), NULL) == 0);
	char url[64], in[400], out[400];
	snprintf(url, sizeof url, "ws://127.0.0.1:%d", d.port);
	snprintf(in, sizeof in, "%s/in.bin", root);
	snprintf(out, sizeof out, "%s/out.bin", root);
	FILE *f = fopen(in, "wb");
	CU_ASSERT_FATAL(f != NULL);
	for (unsigned i = 0; i < 300000; i++)
		fputc((int)((i * 2654435761u) >> 13) & 0xff, f);
	fclose(f);
	snprintf(path, sizeof path, "%s%s", root, TEST_LIBDIR);
	setenv("LD_LIBRARY_PATH", path, 1);
	char *job[] = { exe, url, "cat", "cat", NULL };
	CU_ASSERT_EQUAL(run_argv(job, in, out, log), 0);
	size_t inlen = 0, outlen = 0;
	char *a = slurp(in, &inlen), *b = slurp(out, &outlen);
	CU_ASSERT(a && b && inlen == 300000 && outlen == inlen && memcmp(a, b, inlen) == 0);
	free(a);
	free(b);
	/* its exit code is the job's; an unknown service is its error */
	char *fail[] = { exe, url, "cat", "false", NULL };
	CU_ASSERT_EQUAL(run_argv(fail, NULL, NULL, log), 1);
	char *unknown[] = { exe, url, "nosuch", "cat", NULL };
	CU_ASSERT_EQUAL(run_argv(unknown, NULL, NULL, log), 1);
	char *text = slurp(log, NULL);
	CU_ASSERT_PTR_NOT_NULL(text && strstr(text, "run_job: unknown_service:"));
	free(text);
	unsetenv("LD_LIBRARY_PATH");
	harness_stop(&d, 15000);
	harness_cleanup(&d);
	harness_remove_dir(root);
}

/* docs/client.md shows the example as it is. */
static void test_document_listing(void)
{
	char path[600];
	snprintf(path, sizeof path, "%s/docs/client.md", TEST_TOP_SRCDIR);
	char *doc = slurp(path, NULL);
	snprintf(path, sizeof path, "%s/docs/examples/run_job.c", TEST_TOP_SRCDIR);
	char *code = slurp(path, NULL);
	CU_ASSERT_FATAL(doc && code);
	const char *start = strstr(doc, "```c\n/*\n * run_job.c");
	CU_ASSERT_FATAL(start != NULL);
	start += strlen("```c\n");
	const char *end = strstr(start, "\n```\n");
	CU_ASSERT_FATAL(end != NULL);
	CU_ASSERT_EQUAL((size_t)(end + 1 - start), strlen(code));
	CU_ASSERT(strncmp(start, code, strlen(code)) == 0);
	free(doc);
	free(code);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "the example builds against the installed library and runs",
		  test_install_build_run },
		{ "docs/client.md lists the example verbatim", test_document_listing },
		{ NULL, NULL },
	};
	return run_suite("docs/client.md example", cases);
}
