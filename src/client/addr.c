/*
 * addr.c - the address URLs an operator gives: "ws://host:port",
 * "ws://host:port/broker" (the same), "ws://host:port/job/<service>" (only
 * for that service), and the same with "wss://" (TLS, the certificate
 * verified against host).  host: a name, IPv4, or [IPv6].  The port is
 * required (an execserver has no well-known port).
 */
#include "autoconfig.h"
#include "client/client_impl.h"

#include <stdlib.h>
#include <string.h>

static int service_char(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       ch == '-' || ch == '_' || ch == '.';
}

int url_parse(const char *url, struct exc_url *u)
{
	const char *p, *host, *hend, *path;
	char *end;
	long port;
	size_t hlen;

	memset(u, 0, sizeof *u);
	if (url == NULL)
		return -1;
	if (strncmp(url, "ws://", 5) == 0) {
		host = url + 5;
	} else if (strncmp(url, "wss://", 6) == 0) {
		host = url + 6;
		u->tls = 1;
	} else {
		return -1;
	}
	if (*host == '[') {
		hend = strchr(host, ']');
		if (hend == NULL || hend[1] != ':')
			return -1;
		hlen = (size_t)(hend - host - 1);
		host++;
		p = hend + 2;
	} else {
		hend = strchr(host, ':');
		if (hend == NULL)
			return -1;
		hlen = (size_t)(hend - host);
		p = hend + 1;
	}
	if (hlen == 0 || hlen >= sizeof u->host)
		return -1;
	memcpy(u->host, host, hlen);
	if (*p < '0' || *p > '9')
		return -1;
	port = strtol(p, &end, 10);
	if (port < 1 || port > 65535)
		return -1;
	u->port = (int)port;
	path = end;
	if (*path == '\0' || strcmp(path, "/") == 0 || strcmp(path, PROTO_BROKER_PATH) == 0)
		return 0;
	if (strncmp(path, "/job/", 5) != 0)
		return -1;
	path += 5;
	hlen = strlen(path);
	if (hlen > 0 && path[hlen - 1] == '/')
		hlen--;
	if (hlen == 0 || hlen >= sizeof u->service)
		return -1;
	for (size_t i = 0; i < hlen; i++)
		if (!service_char(path[i]))
			return -1;
	memcpy(u->service, path, hlen);
	return 0;
}
