/* testca.c - see testca.h.  Certificates live two days: a test never
 * depends on a fixed date. */
#include "autoconfig.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testca.h"

#define KEYGEN "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"

static int sh(const char *cmd)
{
	return system(cmd) == 0 ? 0 : -1;
}

int testca_new(struct testca *ca)
{
	char cmd[1024];

	snprintf(ca->dir, sizeof ca->dir, "/tmp/es-ca-XXXXXX");
	if (!mkdtemp(ca->dir))
		return -1;
	snprintf(ca->ca, sizeof ca->ca, "%s/ca.pem", ca->dir);
	snprintf(ca->ca_key, sizeof ca->ca_key, "%s/ca.key", ca->dir);
	snprintf(cmd, sizeof cmd,
		 "openssl req -x509 " KEYGEN " -keyout '%s' -out '%s' -days 2 "
		 "-subj /CN=execserver-test-ca -addext basicConstraints=critical,CA:TRUE "
		 "-addext keyUsage=critical,keyCertSign,cRLSign >/dev/null 2>&1",
		 ca->ca_key, ca->ca);
	return sh(cmd);
}

int testca_server(const struct testca *ca, const char *name, const char *san, char *cert, char *key)
{
	char cmd[2048];

	snprintf(cert, 96, "%s/%s.pem", ca->dir, name);
	snprintf(key, 96, "%s/%s.key", ca->dir, name);
	snprintf(cmd, sizeof cmd,
		 "openssl req -new " KEYGEN " -keyout '%s' -subj /CN=execserver-test "
		 "-addext 'subjectAltName=%s' 2>/dev/null | "
		 "openssl x509 -req -CA '%s' -CAkey '%s' -set_serial %ld -days 2 "
		 "-copy_extensions copy -out '%s' >/dev/null 2>&1",
		 key, san, ca->ca, ca->ca_key, (long)getpid() * 100 + (long)strlen(name), cert);
	return sh(cmd);
}

void testca_remove(struct testca *ca)
{
	DIR *d = ca->dir[0] ? opendir(ca->dir) : NULL;
	struct dirent *e;
	char path[400];

	while (d && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			snprintf(path, sizeof path, "%s/%s", ca->dir, e->d_name);
			unlink(path);
		}
	if (d)
		closedir(d);
	if (ca->dir[0])
		rmdir(ca->dir);
	ca->dir[0] = '\0';
}
