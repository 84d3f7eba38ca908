/*
 * tls.c - the TLS side of wss:// addresses: one SSL_CTX per client, made
 * when the first wss:// address is added and freed with the client; one
 * SSL per connection that always verifies the peer (SSL_VERIFY_PEER) and
 * the host of the address (a name: DNS entries of the certificate and
 * SNI; an IP literal: its IP entries); texts for failed handshakes.
 *
 * Invariant: nothing here leaves an error on OpenSSL's per-thread error
 * queue.  libevent reads SSL_get_error after its own SSL calls, and that
 * reads the queue: a stale entry of one connection must never make
 * another connection (of this client, another client, or the caller's
 * own TLS code on the same thread) look failed.
 */
#include "autoconfig.h"
#include "client/client_impl.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

/* OpenSSL's newest queued error as text, or fallback; empties the queue. */
static const char *queued_reason(char *buf, size_t len, const char *fallback)
{
	unsigned long e = ERR_peek_last_error();

	if (e == 0) {
		snprintf(buf, len, "%s", fallback);
	} else {
		const char *r = ERR_reason_error_string(e);

		if (r)
			snprintf(buf, len, "%s", r);
		else
			ERR_error_string_n(e, buf, len);
	}
	ERR_clear_error();
	return buf;
}

int tls_client_ctx(exc_client *c)
{
	char why[200];
	SSL_CTX *ctx;
	int ok;

	if (c->tls_ctx)
		return 0;
	ERR_clear_error();
	ctx = SSL_CTX_new(TLS_client_method());
	if (ctx == NULL) {
		client_fail(c, ENOMEM, "cannot create a TLS context: %s",
			    queued_reason(why, sizeof why, "out of memory"));
		return -1;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
	if (c->tls_ca_file || c->tls_ca_dir)
		ok = SSL_CTX_load_verify_locations(ctx, c->tls_ca_file, c->tls_ca_dir) == 1;
	else
		ok = SSL_CTX_set_default_verify_paths(ctx) == 1;
	if (!ok) {
		client_fail(c, EINVAL, "cannot load the trusted CA certificates (%s%s%s): %s",
			    c->tls_ca_file ? c->tls_ca_file : "",
			    c->tls_ca_file && c->tls_ca_dir ? ", " : "",
			    c->tls_ca_dir ? c->tls_ca_dir : (c->tls_ca_file ? "" : "system store"),
			    queued_reason(why, sizeof why, "unknown reason"));
		SSL_CTX_free(ctx);
		return -1;
	}
	/* a success may still leave entries (a default path that is missing) */
	ERR_clear_error();
	c->tls_ctx = ctx;
	return 0;
}

struct ssl_st *tls_new_ssl(exc_client *c, const char *host, char *why, size_t whylen)
{
	char reason[200];
	SSL *ssl;
	int ok;

	ERR_clear_error();
	ssl = SSL_new(c->tls_ctx);
	if (ssl == NULL) {
		snprintf(why, whylen, "cannot start TLS: %s",
			 queued_reason(reason, sizeof reason, "out of memory"));
		return NULL;
	}
	/* an IP literal is checked against the certificate's IP entries;
	 * X509_VERIFY_PARAM_set1_ip_asc refuses anything else (a name) */
	if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host) == 1) {
		ok = 1;
	} else {
		ERR_clear_error();
		ok = SSL_set1_host(ssl, host) == 1 && SSL_set_tlsext_host_name(ssl, host) == 1;
	}
	if (!ok) {
		snprintf(why, whylen, "cannot set up TLS for %s: %s", host,
			 queued_reason(reason, sizeof reason, "unknown reason"));
		SSL_free(ssl);
		return NULL;
	}
	ERR_clear_error();
	return ssl;
}

int tls_failure(struct bufferevent *bev, int sock_err, char *why, size_t whylen)
{
	SSL *ssl = bufferevent_openssl_get_ssl(bev);
	long vr = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;
	unsigned long e, last = 0, code = 0;

	/* libevent keeps the errors of its own SSL calls, OpenSSL's queue
	 * followed by SSL_get_error's code (a small number, no library):
	 * take them all, keep the newest of each kind */
	while ((e = bufferevent_get_openssl_error(bev)) != 0) {
		if (ERR_GET_LIB(e) == 0 && e <= SSL_ERROR_WANT_CLIENT_HELLO_CB)
			code = e;
		else
			last = e;
	}
	ERR_clear_error();
	if (vr != X509_V_OK) {
		snprintf(why, whylen, "certificate verify failed: %s",
			 X509_verify_cert_error_string(vr));
		return 1;
	}
	if (last && ERR_GET_LIB(last) == ERR_LIB_SYS) {
		/* a system call failed under OpenSSL: the reason is the errno */
		snprintf(why, whylen, "TLS handshake failed: %s", strerror(ERR_GET_REASON(last)));
	} else if (last) {
		char text[160];
		const char *r = ERR_reason_error_string(last);

		if (r == NULL)
			ERR_error_string_n(last, text, sizeof text);
		snprintf(why, whylen, "TLS handshake failed: %s", r ? r : text);
	} else if (code == SSL_ERROR_SYSCALL && sock_err) {
		snprintf(why, whylen, "TLS handshake failed: %s", strerror(sock_err));
	} else {
		snprintf(why, whylen,
			 "TLS handshake failed: the connection closed "
			 "(not a TLS port?)");
	}
	return 0;
}

void tls_client_free(exc_client *c)
{
	SSL_CTX_free(c->tls_ctx);
	c->tls_ctx = NULL;
}
