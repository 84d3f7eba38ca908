/*
 * credentials.c - what a client id and a bearer token may hold: the one
 * check behind exc_client_new (which refuses any other with EINVAL) and
 * execctl's options (which refuse them first, naming the option), exported
 * as exc_client_id_problem and exc_auth_token_problem.  The id goes into
 * the upgrade URL's query as it is, the token into a header line
 * (protocol.md: no CR/LF, no space).
 */
#include "autoconfig.h"

#include <string.h>

#include "execserver/client.h"

#define TEXT_OF(x) #x
#define NUMBER_TEXT(x) TEXT_OF(x) /* a macro's value as a string literal */
#define ID_RULE "expected 1 to " NUMBER_TEXT(EXC_CLIENT_ID_MAX) " visible ASCII characters"

/* 1 if s holds a character outside 0x21-0x7e or one of banned. */
static int has_other(const char *s, const char *banned)
{
	for (; *s; s++)
		if (*s < 0x21 || *s > 0x7e || strchr(banned, *s))
			return 1;
	return 0;
}

const char *exc_client_id_problem(const char *id)
{
	if (!*id || strlen(id) > EXC_CLIENT_ID_MAX || has_other(id, "&%#+="))
		return ID_RULE " other than & % # + =";
	return NULL;
}

const char *exc_auth_token_problem(const char *t)
{
	if (!*t)
		return "the token is empty";
	if (strlen(t) > EXC_AUTH_TOKEN_MAX)
		return "the token is longer than the library takes";
	if (has_other(t, ""))
		return "the token holds a character other than visible ASCII (a space, a control "
		       "character)";
	return NULL;
}
