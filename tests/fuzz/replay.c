/*
 * replay.c - runs a fuzz target over files without libFuzzer (see fuzz.h).
 *
 * Usage: fuzz_NAME [FILE|DIR]...  Each file, and each regular file of each
 * directory, is one input.  Without arguments the seed corpus of the
 * target is replayed: $TOP_SRCDIR/tests/fuzz/corpus/NAME/, NAME being the
 * program name without its "fuzz_" prefix (make check sets TOP_SRCDIR).
 * Exits 0 when every input ran (a finding aborts), 1 when a file cannot be
 * read or no input was found (an empty corpus proves nothing).
 */
#include "autoconfig.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0;

	if (f == NULL) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	for (;;) {
		if (len == cap) {
			uint8_t *n = realloc(buf, cap ? cap * 2 : 4096);

			if (n == NULL) {
				fprintf(stderr, "replay: %s: out of memory\n", path);
				free(buf);
				fclose(f);
				return -1;
			}
			buf = n;
			cap = cap ? cap * 2 : 4096;
		}
		size_t n = fread(buf + len, 1, cap - len, f);

		len += n;
		if (n == 0)
			break;
	}
	if (ferror(f)) {
		fprintf(stderr, "replay: %s: read error\n", path);
		free(buf);
		fclose(f);
		return -1;
	}
	fclose(f);
	/* an exact-size copy, so that ASan sees any read past the input */
	uint8_t *exact = malloc(len ? len : 1);

	if (exact == NULL) {
		free(buf);
		return -1;
	}
	memcpy(exact, buf, len);
	free(buf);
	LLVMFuzzerTestOneInput(exact, len);
	free(exact);
	return 0;
}

/* Runs path (a file, or the files of a directory); adds to *count. */
static int run_path(const char *path, unsigned *count)
{
	struct stat st;
	DIR *d;
	struct dirent *e;
	int rc = 0;

	if (stat(path, &st) != 0) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		(*count)++;
		return run_file(path);
	}
	d = opendir(path);
	if (d == NULL) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	while ((e = readdir(d)) != NULL) {
		char sub[4096];

		if (e->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
		if (stat(sub, &st) != 0 || !S_ISREG(st.st_mode))
			continue;
		(*count)++;
		if (run_file(sub) != 0)
			rc = -1;
	}
	closedir(d);
	return rc;
}

int main(int argc, char **argv)
{
	unsigned count = 0;
	int rc = 0;

	if (argc > 1) {
		for (int i = 1; i < argc; i++)
			if (run_path(argv[i], &count) != 0)
				rc = 1;
	} else {
		const char *top = getenv("TOP_SRCDIR");
		const char *name = strrchr(argv[0], '/');
		char dir[4096];

		name = name ? name + 1 : argv[0];
		/* libtool-free build: the program is called fuzz_NAME */
		if (strncmp(name, "fuzz_", 5) == 0)
			name += 5;
		snprintf(dir, sizeof dir, "%s/tests/fuzz/corpus/%s", top ? top : ".", name);
		if (run_path(dir, &count) != 0)
			rc = 1;
	}
	if (count == 0) {
		fprintf(stderr, "replay: no input found\n");
		rc = 1;
	}
	printf("replay: %u inputs, %s\n", count, rc ? "errors" : "all passed");
	return rc;
}
