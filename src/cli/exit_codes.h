/*
 * exit_codes.h - the exit status of execctl (execctl(1), EXIT STATUS).
 *
 * `execctl run` exits with the job's own exit code when the program ran
 * and exited (0-255), 128+N when signal N ended it, and with one of the
 * codes below when execctl itself could not get the job run to an end.
 * The codes sit above what programs commonly use and below the 126-255
 * range shells give meaning to; a job that exits with one of them itself
 * cannot be told apart by the status alone (execctl's message on stderr
 * tells).  The values are part of the interface: never renumber them.
 */
#ifndef ES_CLI_EXIT_CODES_H
#define ES_CLI_EXIT_CODES_H

enum execctl_exit {
	EXECCTL_OK = 0,
	EXECCTL_USAGE = 2,             /* bad option or argument: nothing was sent */
	EXECCTL_UNREACHABLE = 111,     /* no address could be connected (network
					 * error, or not an execserver) */
	EXECCTL_UNAUTHORIZED = 112,    /* the server refused the token (401), or a name (403) */
	EXECCTL_UNKNOWN_SERVICE = 113, /* no reached instance offers the service,
					 * or the command is not configured */
	EXECCTL_NO_SLOT = 114,         /* no slot within --timeout */
	EXECCTL_FAILED = 115,          /* the job failed around its program
					 * (receipt error, not retryable) */
	EXECCTL_RETRYABLE = 116,       /* the job failed in a way worth retrying
					 * (instance stopped or lost) */
	EXECCTL_LOCAL_IO = 117,        /* a local file, stdin or stdout failed */
	EXECCTL_BAD_ANSWER = 118,      /* status: the server answered, but not
					 * with its status JSON */
	EXECCTL_TLS_VERIFY = 119,      /* wss/https: the server's certificate did
					 * not verify (untrusted issuer, expired,
					 * or not for the host given); see
					 * --cacert */
	EXECCTL_CANCELLED = 120,       /* wait: the job was cancelled */
	EXECCTL_WAIT_TIMEOUT = 121,    /* wait: not finished within --timeout */
	EXECCTL_NOT_FOUND = 122,       /* show/wait/position: no such job; cancel:
					 * not_found_or_finished */
	EXECCTL_INTERRUPTED = 130,     /* SIGINT/SIGTERM: the job was cancelled */
};

#endif
