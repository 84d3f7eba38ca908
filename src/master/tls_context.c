/* tls_context.c - see tls_context.h. */
#include "autoconfig.h"

#include <stdio.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "master/tls_context.h"

/* The reason of OpenSSL's latest error, or "unknown". */
static const char *last_reason(char *buf, size_t len)
{
	unsigned long e = ERR_peek_last_error();

	if (e == 0)
		return "unknown";
	ERR_error_string_n(e, buf, len);
	ERR_clear_error();
	return buf;
}

struct ssl_ctx_st *tls_context_create(const struct es_config *cfg, char *err, size_t errlen)
{
	char why[256];
	SSL_CTX *ctx;

	err[0] = '\0';
	if (!cfg->tls_cert)
		return NULL;
	ctx = SSL_CTX_new(TLS_server_method());
	if (!ctx) {
		snprintf(err, errlen, "tls: cannot create a context: %s",
			 last_reason(why, sizeof why));
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	/* no resumption state shared across requests: handlers are separate
	 * processes, and a ticket key per process would only confuse */
	SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	if (SSL_CTX_use_certificate_chain_file(ctx, cfg->tls_cert) != 1) {
		snprintf(err, errlen, "tls.cert: %s: %s", cfg->tls_cert,
			 last_reason(why, sizeof why));
		goto fail;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, cfg->tls_key, SSL_FILETYPE_PEM) != 1 &&
	    ERR_GET_REASON(ERR_peek_last_error()) != X509_R_KEY_VALUES_MISMATCH) {
		snprintf(err, errlen, "tls.key: %s: %s", cfg->tls_key, last_reason(why, sizeof why));
		goto fail;
	}
	if (SSL_CTX_check_private_key(ctx) != 1) {
		snprintf(err, errlen, "tls.key: %s does not belong to the certificate in %s",
			 cfg->tls_key, cfg->tls_cert);
		ERR_clear_error();
		goto fail;
	}
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

void tls_context_free(struct ssl_ctx_st *ctx)
{
	SSL_CTX_free(ctx);
}
