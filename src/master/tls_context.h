/*
 * tls_context.h - the listener's TLS context (OpenSSL), made by the master
 * before it forks, so the private key is read once, with the master's
 * privileges, and every handler inherits the context.
 *
 * TLS 1.2 or newer, OpenSSL's default cipher list, no client certificates,
 * no session tickets and no session cache (each handler process has its
 * own copy of the context after fork, so resumption could not work).  A
 * change of certificate or key, also in place, takes a restart (a SIGHUP
 * reload warns about it): the handlers cannot re-read a key the master
 * read as root before it dropped its privileges.
 */
#ifndef ES_TLS_CONTEXT_H
#define ES_TLS_CONTEXT_H

#include <stddef.h>

#include "config/config.h"

struct ssl_ctx_st;

/* The context for cfg's tls.cert and tls.key.  NULL with err[0] == '\0'
 * when TLS is not configured; NULL with a message naming the file and the
 * reason in err when a file cannot be used (missing, unreadable, not PEM,
 * key not matching the certificate). */
struct ssl_ctx_st *tls_context_create(const struct es_config *cfg, char *err, size_t errlen);
void tls_context_free(struct ssl_ctx_st *ctx);

/* Which files the context was made from (device, inode, size, mtime), so a
 * reload can tell that a certificate was renewed in place and say that it
 * takes a restart.  A file that cannot be stat'ed notes as zeros. */
struct tls_file_id {
	unsigned long long dev, ino;
	long long size, mtime_ns;
};
struct tls_files {
	struct tls_file_id cert, key;
};
void tls_files_note(const struct es_config *cfg, struct tls_files *f);
/* 1 when either file is not the one noted any more. */
int tls_files_changed(const struct es_config *cfg, const struct tls_files *f);

#endif
