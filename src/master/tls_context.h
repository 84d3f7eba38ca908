/*
 * tls_context.h - the listener's TLS context (OpenSSL), made by the master
 * before it forks, so the private key is read once, with the master's
 * privileges, and every handler inherits the context.
 *
 * TLS 1.2 or newer, OpenSSL's default cipher list, no client certificates,
 * no session tickets across handlers (each handler process has its own
 * copy of the context after fork).  A change of certificate or key takes a
 * restart (a SIGHUP reload says so): the handlers cannot re-read a key the
 * master may have read as root.
 */
#ifndef ES_TLS_CONTEXT_H
#define ES_TLS_CONTEXT_H

#include <stddef.h>

#include "common/config.h"

struct ssl_ctx_st;

/* The context for cfg's tls.cert and tls.key.  NULL with err[0] == '\0'
 * when TLS is not configured; NULL with a message naming the file and the
 * reason in err when a file cannot be used (missing, unreadable, not PEM,
 * key not matching the certificate). */
struct ssl_ctx_st *tls_context_create(const struct es_config *cfg, char *err, size_t errlen);
void tls_context_free(struct ssl_ctx_st *ctx);

#endif
