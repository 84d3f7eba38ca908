/*
 * testca.h - a private certificate authority for TLS tests, made with the
 * openssl command in a fresh /tmp directory: a CA certificate, and server
 * certificates it signs for the subject-alternative names a test asks
 * for (e.g. "IP:127.0.0.1,DNS:localhost").  A second, unrelated CA lets a
 * test present a certificate a client does not trust.
 */
#ifndef ES_TESTCA_H
#define ES_TESTCA_H

struct testca {
	char dir[32];
	char ca[96], ca_key[96]; /* the CA certificate (PEM) and its key */
};

/* Makes the directory and the CA; 0 or -1. */
int testca_new(struct testca *ca);
/* A P-256 key at <dir>/<name>.key and a certificate signed by ca at
 * <dir>/<name>.pem for san (openssl's subjectAltName syntax); the paths
 * into cert and key (96 bytes each).  0 or -1. */
int testca_server(const struct testca *ca, const char *name, const char *san, char *cert,
		  char *key);
/* Removes every file of the directory and the directory. */
void testca_remove(struct testca *ca);

#endif
