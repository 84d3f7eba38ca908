/*
 * secret_file.h - a configuration file that holds a secret (an authToken,
 * a database password) should not be readable by every user of the host:
 * the daemons warn at start (installed files are 0640, group of the
 * service).  A warning, not a refusal: the file may be on a host with no
 * other users, and refusing would stop a running service at its next start.
 */
#ifndef ES_SECRET_FILE_H
#define ES_SECRET_FILE_H

/* Logs a warning when secret (what the file holds, "authToken"; NULL:
 * nothing, no check) is in path and path is readable by others. */
void secret_file_check(const char *path, const char *secret);

#endif
