/*
 * test_job_dir.c - unit tests of the job directories (src/job/job_dir.c).
 *
 * Owns: the proof that a new directory is private (mode 0700, named after
 * the slot), that a directory its job left empty is handed to the next job
 * and one with anything left in it is removed, that a spare is checked
 * again when it is taken (a file written into it later, a changed mode, a
 * symlink put in its place: never handed out, and a symlink's target is
 * left alone), that a spare whose times are 3 s old is checked by one
 * lstat and still found out when written into, that at most JOB_DIR_SPARES are kept, that the janitor's
 * in-use question knows the spares, and that dropping them removes them.
 */
#include "autoconfig.h"

#include <CUnit/Basic.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "job/janitor.h"
#include "job/job_dir.h"
#include "suite.h"

static char root[256];

static void make_root(void)
{
	char job[300];
	snprintf(root, sizeof root, "/tmp/es-jobdir-XXXXXX");
	CU_ASSERT_FATAL(mkdtemp(root) != NULL);
	snprintf(job, sizeof job, "%s/job", root);
	CU_ASSERT_FATAL(mkdir(job, 0700) == 0);
}

static void remove_root(void)
{
	job_dir_drop_spares();
	janitor_remove_tree(root);
}

static int exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

static void touch(const char *dir, const char *name)
{
	char path[700];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CU_ASSERT_FATAL(fd >= 0);
	close(fd);
}

static const char *base(const char *path)
{
	return strrchr(path, '/') + 1;
}

static void test_new_and_reused(void)
{
	char a[512], b[512];
	struct job_dir_seen sa, sb;
	struct stat st;

	make_root();
	CU_ASSERT_FATAL(job_dir_take(root, 3, a, sizeof a, &sa) == 0);
	CU_ASSERT(strncmp(base(a), "3-", 2) == 0);
	CU_ASSERT_FATAL(stat(a, &st) == 0);
	CU_ASSERT(S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 0700);

	/* left empty: the next job gets it */
	job_dir_release(a, 1, &sa);
	CU_ASSERT(exists(a));
	CU_ASSERT(job_dir_is_spare(base(a)));
	CU_ASSERT_FATAL(job_dir_take(root, 3, b, sizeof b, &sb) == 0);
	CU_ASSERT_STRING_EQUAL(a, b);
	CU_ASSERT(!job_dir_is_spare(base(a)));

	/* files left: removed, a new one next time */
	touch(b, "out.png");
	job_dir_release(b, 1, &sb);
	CU_ASSERT(!exists(b));
	CU_ASSERT_FATAL(job_dir_take(root, 3, a, sizeof a, &sa) == 0);
	CU_ASSERT_STRING_NOT_EQUAL(a, b);

	/* reuse not allowed (a descendant may still use it): removed */
	job_dir_release(a, 0, &sa);
	CU_ASSERT(!exists(a));
	remove_root();
}

static void test_checked_when_taken(void)
{
	char a[512], b[512], other[512];
	struct job_dir_seen sa, sb;

	make_root();
	/* a stray process writes into a spare */
	CU_ASSERT_FATAL(job_dir_take(root, 0, a, sizeof a, &sa) == 0);
	job_dir_release(a, 1, &sa);
	touch(a, "stray");
	CU_ASSERT_FATAL(job_dir_take(root, 0, b, sizeof b, &sb) == 0);
	CU_ASSERT_STRING_NOT_EQUAL(a, b);
	CU_ASSERT(!exists(a));

	/* a job changed its directory's mode */
	job_dir_release(b, 1, &sb);
	CU_ASSERT_FATAL(chmod(b, 0755) == 0);
	CU_ASSERT_FATAL(job_dir_take(root, 0, a, sizeof a, &sa) == 0);
	CU_ASSERT_STRING_NOT_EQUAL(a, b);
	CU_ASSERT(!exists(b));

	/* a symlink in place of a spare: not followed, its target kept */
	job_dir_release(a, 1, &sa);
	snprintf(other, sizeof other, "%s/elsewhere", root);
	CU_ASSERT_FATAL(mkdir(other, 0700) == 0);
	CU_ASSERT_FATAL(rmdir(a) == 0 && symlink(other, a) == 0);
	CU_ASSERT_FATAL(job_dir_take(root, 0, b, sizeof b, &sb) == 0);
	CU_ASSERT_STRING_NOT_EQUAL(a, b);
	CU_ASSERT(!exists(a));
	CU_ASSERT(exists(other));
	remove_root();
}

/* A spare found empty while its times were at least 3 s old is checked
 * with one lstat from then on (no read of its entries), and that lstat
 * still notices a file written into it (its times change). */
static void test_trusted_by_its_times(void)
{
	char a[512], b[512];
	struct job_dir_seen sa, sb;

	make_root();
	CU_ASSERT_FATAL(job_dir_take(root, 0, a, sizeof a, &sa) == 0);
	CU_ASSERT_FALSE(sa.trusted); /* new */
	job_dir_release(a, 1, &sa);  /* read: changed just now, not trusted */
	usleep(3100000); /* sleep: trust needs times 3 s old; ctime cannot be set back */
	CU_ASSERT_FATAL(job_dir_take(root, 0, b, sizeof b, &sb) == 0);
	CU_ASSERT_STRING_EQUAL(a, b);
	CU_ASSERT_TRUE(sb.trusted); /* read again, 3 s after its last change */
	unsigned long reads = job_dir_reads();
	for (int i = 0; i < 5; i++) {
		job_dir_release(b, 1, &sb);
		CU_ASSERT_FATAL(job_dir_take(root, 0, b, sizeof b, &sb) == 0);
		CU_ASSERT_STRING_EQUAL(a, b);
	}
	CU_ASSERT_EQUAL(job_dir_reads(), reads); /* lstat only */
	job_dir_release(b, 1, &sb);
	touch(b, "stray");
	CU_ASSERT_FATAL(job_dir_take(root, 0, a, sizeof a, &sa) == 0);
	CU_ASSERT_STRING_NOT_EQUAL(a, b);
	CU_ASSERT(!exists(b));
	CU_ASSERT_EQUAL(job_dir_reads(), reads + 1);
	remove_root();
}

static void test_bounded(void)
{
	char d[JOB_DIR_SPARES + 2][512];
	struct job_dir_seen sd[JOB_DIR_SPARES + 2];

	make_root();
	for (int i = 0; i < JOB_DIR_SPARES + 2; i++)
		CU_ASSERT_FATAL(job_dir_take(root, 1, d[i], sizeof d[i], &sd[i]) == 0);
	for (int i = 0; i < JOB_DIR_SPARES + 2; i++)
		job_dir_release(d[i], 1, &sd[i]);
	int kept = 0;
	for (int i = 0; i < JOB_DIR_SPARES + 2; i++)
		kept += exists(d[i]) && job_dir_is_spare(base(d[i]));
	CU_ASSERT_EQUAL(kept, JOB_DIR_SPARES);
	CU_ASSERT(!exists(d[JOB_DIR_SPARES]) && !exists(d[JOB_DIR_SPARES + 1]));

	job_dir_drop_spares();
	for (int i = 0; i < JOB_DIR_SPARES + 2; i++)
		CU_ASSERT(!exists(d[i]));
	remove_root();
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "new directories are private; empty ones are reused", test_new_and_reused },
		{ "a spare is checked again when taken", test_checked_when_taken },
		{ "a spare unchanged for 3 s is checked by its times", test_trusted_by_its_times },
		{ "at most JOB_DIR_SPARES spares", test_bounded },
		{ NULL, NULL },
	};
	return run_suite("job_dir", cases);
}
