/* tls_context.c - see tls_context.h. */
#include "autoconfig.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

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
	/* no resumption: handlers are separate processes, each with its own
	 * copy of the context, so neither a session cache nor tickets could
	 * be used across connections; TLS 1.3 would still send tickets
	 * unless told to send none */
	SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_num_tickets(ctx, 0);
	/* idle connections give their read and write buffers back (about
	 * 32 KiB of handler memory per idle TLS connection otherwise) */
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
	if (SSL_CTX_use_certificate_chain_file(ctx, cfg->tls_cert) != 1) {
		snprintf(err, errlen, "tls.cert: %s: %s", cfg->tls_cert,
			 last_reason(why, sizeof why));
		goto fail;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, cfg->tls_key, SSL_FILETYPE_PEM) != 1 &&
	    ERR_GET_REASON(ERR_peek_last_error()) != X509_R_KEY_VALUES_MISMATCH) {
		snprintf(err, errlen, "tls.key: %s: %s", cfg->tls_key,
			 last_reason(why, sizeof why));
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

static void note_one(const char *path, struct tls_file_id *id)
{
	struct stat st;

	memset(id, 0, sizeof *id);
	if (path && stat(path, &st) == 0) {
		id->dev = (unsigned long long)st.st_dev;
		id->ino = (unsigned long long)st.st_ino;
		id->size = (long long)st.st_size;
		id->mtime_ns = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
	}
}

void tls_files_note(const struct es_config *cfg, struct tls_files *f)
{
	note_one(cfg->tls_cert, &f->cert);
	note_one(cfg->tls_key, &f->key);
}

int tls_files_changed(const struct es_config *cfg, const struct tls_files *f)
{
	struct tls_files now;

	tls_files_note(cfg, &now);
	return memcmp(&now, f, sizeof now) != 0;
}
