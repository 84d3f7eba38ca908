/*
 * credentials.h - what a client id and a bearer token may hold: the one
 * check behind libexecclient's exc_client_new (which refuses any other
 * with EINVAL) and execctl's options (which refuse them first, naming the
 * option).  The id goes into the upgrade URL's query as it is, the token
 * into a header line (protocol.md: no CR/LF, no space).
 */
#ifndef ES_CREDENTIALS_H
#define ES_CREDENTIALS_H

/* The longest client id (exc_options.client_id). */
#define CLIENT_ID_MAX 64

/* Why id is not a client id (1 to CLIENT_ID_MAX visible ASCII characters,
 * none of & % # + =), as "expected ..."; NULL when it is one. */
const char *client_id_problem(const char *id);

/* Why t is not a bearer token (1 to EXC_AUTH_TOKEN_MAX visible ASCII
 * characters, 0x21-0x7e), as "the token ..."; NULL when it is one. */
const char *auth_token_problem(const char *t);

#endif
