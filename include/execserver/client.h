/*
 * execserver/client.h - libexecclient, the client library of the
 * execserver broker protocol (docs/protocol.md).  API reference.
 *
 * An application links libexecclient (pkg-config: execclient), creates one
 * client on its own libevent event_base, gives it the operator's execserver
 * addresses and submits jobs.  The library parks each job's want on every
 * connected instance whose HELLO lists the job's service, takes the first
 * OFFER (declining the others), sends the JOB with URLs of one-time pipe
 * endpoints it serves itself, streams stdin/stdout and files through them,
 * and calls back with the receipt.
 *
 * Threading: none.  Everything runs on the caller's event_base, in the
 * thread that runs it.  No exc_* function may be called from another
 * thread.  Callbacks run only from the event loop, never from inside an
 * exc_* call (exc_submit never calls on_done before it returns).  Inside
 * on_done, on_position and on_conn the caller may call every exc_*
 * function except exc_client_free (leave the loop first, e.g.
 * event_base_loopbreak, then free).  The log callback is the exception:
 * it may run anywhere, also inside exc_* calls, and must not call exc_*
 * functions.
 *
 * Signals: the library installs no signal handler.  Its own socket writes
 * use MSG_NOSIGNAL, but libevent's (a rest the kernel did not take at
 * once, TLS, the pipe endpoints) raise SIGPIPE when the peer is gone:
 * ignore SIGPIPE in the program (signal(SIGPIPE, SIG_IGN)), as network
 * programs do; execctl does.
 *
 * Errors: functions that can fail return NULL or -1, set errno (EINVAL bad
 * argument, ENOMEM, ENOENT unknown) and keep a one-line message for
 * exc_client_last_error().
 *
 * Strings passed in are copied: the caller may free them after the call
 * returns.  Strings passed to callbacks belong to the library and are
 * valid only during the callback.
 *
 * File descriptors passed in (struct exc_source / exc_sink) stay the
 * caller's: the library never closes them and never changes their flags;
 * it reads or writes them from the event loop while the job runs, and not
 * after the job's on_done.  Pipes, sockets and terminals are polled;
 * regular files are read and written directly.  A blocking pipe or socket
 * may make a write wait until the reader takes PIPE_BUF bytes; give
 * non-blocking descriptors where that matters.
 *
 * Legacy fallback: an address whose GET /broker answers 404 (an
 * execserver without the broker) is served by the legacy token transport
 * (docs/protocol.md section 9): each waiting job polls GET /token/<service>
 * there once per second until it has a slot or connect_timeout_sec passes
 * (then no_slot, retryable), while staying parked on broker instances;
 * the first slot wins.  With a token the job runs as one PUT: its stdin
 * source is the request body, the response body goes to its stdout sink
 * (streamed both ways), named files are served from the library's pipe
 * endpoints as on the broker path, and the receipt comes from the server's
 * X-Execserver-Receipt field (same fields; instance_id NULL).  Not over
 * this path: stdin/stdout as EXC_IO_URL (refused as bad_job), exc_query
 * (returns 0), job descriptions whose encoding exceeds 4 KiB (local_io).
 *
 * Version policy: the shared library follows libtool's -version-info
 * current:revision:age.  Adding functions or fields at the end of the
 * option/spec structures (which are always initialised by the *_init
 * functions below) raises current and age; any removal or change of an
 * existing signature or structure layout raises current and sets age to
 * 0 (a new soname).  EXC_API_VERSION below names the header's level.
 */
#ifndef EXECSERVER_CLIENT_H
#define EXECSERVER_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include <execserver/protocol.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EXC_API_VERSION \
	6 /* 2: wss://, tls_ca_file/dir, tls_verify_failed, EXC_E_TLS_VERIFY;
				 * 3: exc_claim_share_service, claim shares floor(slots / clients) + 1;
				 * 4: protocol 2 (each DONE acknowledged), ping_timeout_ms;
				 * 5: pipe_idle_timeout_ms (pipe endpoints: no idle limit by default),
				 * EXC_AUTH_TOKEN_MAX (auth_token checked), EXC_E_BAD_JOB,
				 * exc_client_id_problem, exc_auth_token_problem;
				 * 6: protocol 3, exc_job_on_progress */

struct event_base;

/* The longest auth_token: with it, the longest request the library sends
 * (a legacy PUT with its 4 KiB target) stays within the server's 8 KiB
 * request head. */
#define EXC_AUTH_TOKEN_MAX 3072
/* The longest client_id. */
#define EXC_CLIENT_ID_MAX 64

/* A client: its addresses, connection pools, pipe server and jobs. */
typedef struct exc_client exc_client;
/* One submitted job, valid from exc_submit() until its on_done returns. */
typedef struct exc_job exc_job;

/* ---- client ------------------------------------------------------------ */

enum exc_log_level {
	EXC_LOG_ERROR = 0,
	EXC_LOG_WARN = 1,
	EXC_LOG_INFO = 2,
	EXC_LOG_DEBUG = 3,
};

/* What happened to a connection (on_conn). */
enum exc_conn_event {
	EXC_CONN_UP,        /* HELLO received: instance_id, services known */
	EXC_CONN_DOWN,      /* an established connection closed (close code in
				 * info->code; 1006 when it just dropped) */
	EXC_CONN_FAILED,    /* connecting failed: TCP error, timeout, or an
				 * HTTP answer other than 101 (info->code holds
				 * the HTTP status: 401 wrong token, 503
				 * draining/full); the address is retried with
				 * back-off, except after 401 (retried every
				 * re-probe only); 404 is EXC_CONN_LEGACY */
	EXC_CONN_DUPLICATE, /* a new connection reached an instance already in
				 * the pool; it was closed and the address is
				 * "covered" (pool growth stops until re-probe) */
	EXC_CONN_LEGACY,    /* GET /broker answered 404 (code 404): an
				 * execserver without the broker.  From now on
				 * the address is served by the legacy token
				 * transport (see "Legacy fallback" below); the
				 * broker is probed again every
				 * reprobe_interval_ms, and a HELLO ends the
				 * fallback (EXC_CONN_UP).  Sent once per switch. */
};

struct exc_conn_info {
	const char *address;     /* the address as given to exc_client_add_address */
	const char *instance_id; /* HELLO's (1-64 of A-Za-z0-9_.-), or NULL (FAILED) */
	int code;                /* DOWN: close code; FAILED: HTTP status, or 0 for
				 * a network error; else 0 */
	const char *message;     /* for humans: why */
	unsigned connections;    /* live connections of the address, after the event */
	unsigned instances;      /* distinct instances among them */
	int covered;             /* the address is marked covered */
	/* FAILED on a wss:// address: 1 when the server's certificate did not
	 * verify (untrusted issuer, expired, or not issued for the host of
	 * the address); message then reads "certificate verify failed: ...".
	 * Such an address is retried only every reprobe_interval_ms. */
	int tls_verify_failed;
};

struct exc_options {
	/* Stable client id (protocol section 6), 1-64 printable ASCII
	 * characters other than & % # + = (it goes into the upgrade URL's
	 * query as it is); NULL: 32 random hex digits.  Running jobs are resumed
	 * with it after a reconnect. */
	const char *client_id;
	/* Sent as "Authorization: Bearer <token>"; NULL: none.  1 to
	 * EXC_AUTH_TOKEN_MAX visible ASCII characters (0x21-0x7e, as the
	 * server's authToken); any other token makes exc_client_new fail
	 * with EINVAL. */
	const char *auth_token;
	/* Default for jobs whose spec leaves connect_timeout_sec 0: a job that
	 * has no slot after this many seconds is UNWANTed everywhere and
	 * done with the retryable error "no_slot".  0 here: wait forever.
	 * Default 0. */
	unsigned connect_timeout_sec;
	/* Most connections per address.  Default 8. */
	unsigned pool_cap;
	/* Back-pressure test period: a want that stayed parked without any
	 * offer for a whole tick lets its addresses grow.  Default 1000 ms. */
	unsigned retry_tick_ms;
	/* At most one new connection per address this often (growth, owner
	 * seeking, reconnects).  Default 2000 ms. */
	unsigned grow_interval_ms;
	/* A covered address loses its mark after this long, so that the next
	 * back-pressure probes it again (one more connection, kept only if it
	 * reaches a new instance).  Default 30000 ms. */
	unsigned reprobe_interval_ms;
	/* Reconnecting: when an address's last connection drops, a new one is
	 * opened at once (grow_interval_ms permitting); failed attempts back
	 * off from grow_interval_ms, doubling, to at most this.  Default
	 * 30000 ms. */
	unsigned reconnect_max_ms;
	/* How long a running job whose owner instance cannot be reached is
	 * sought before it is done with the retryable error "lost" (and a held
	 * cancel ends "cancel not confirmed").  "lost" comes no earlier than
	 * the instance's HELLO says it may still run the job
	 * (ping_timeout_sec + ping_interval_sec + resume_grace_sec + 5 s),
	 * so that a retry never overlaps it.  Default 30 s. */
	unsigned owner_grace_sec;
	/* Socket connect + websocket upgrade deadline.  Default 10000 ms. */
	unsigned handshake_timeout_ms;
	/* Log lines of the library (one line, no newline).  NULL: nothing is
	 * logged.  Lines above log_level are not produced.  Every line of
	 * this client, those of its connections' websocket sessions
	 * included, goes here and to no other client's callback. */
	void (*log)(void *arg, enum exc_log_level level, const char *line);
	enum exc_log_level log_level; /* default EXC_LOG_WARN */
	/* Connection events, for status displays and tests.  NULL: none. */
	void (*on_conn)(void *arg, enum exc_conn_event ev, const struct exc_conn_info *info);
	void *arg; /* passed to log and on_conn */
	/* wss:// addresses: the certificates trusted to sign the servers'
	 * certificates, as a PEM file (one or more CA certificates) and/or a
	 * directory prepared with `openssl rehash`.  Both NULL: the system's
	 * trust store (OpenSSL's default paths, on Debian /etc/ssl/certs).
	 * The server's certificate is always verified, and so is the host
	 * of the address against it (a name: its DNS entries, also sent as
	 * SNI; an IP address: its IP entries); there is no switch to turn
	 * verification off.  The files are read when the first wss:// address
	 * is added (exc_client_add_address fails if they cannot be loaded). */
	const char *tls_ca_file;
	const char *tls_ca_dir;
	/* The ping deadline: a connection on which nothing (not even a pong)
	 * arrived for this long is taken for dead and closed, and its running
	 * jobs are sought again (owner_grace_sec), so that a server that
	 * vanished without closing (a half-open connection) is noticed.  The
	 * library pings every ping_timeout_ms / 3 (at most every 15 s), unless
	 * the server sent a frame other than a pong meanwhile.  At least 300.
	 * Default 30000 ms. */
	unsigned ping_timeout_ms;
	/* Idle limit of a pipe endpoint's transfer (the stdin/stdout and file
	 * streams the execserver fetches and sends, docs/client.md): a GET
	 * whose peer took no byte of what is waiting for it, or a PUT whose
	 * peer sent no byte, for this long is cut (a stdout cut that way ends
	 * the job failed).  0: no limit, the default: a program may be quiet,
	 * or leave its stdin unread, for as long as it runs; the job's
	 * timeout_sec and its DONE end its streams. */
	unsigned pipe_idle_timeout_ms;
};

/* Fills o with the defaults above (every pointer NULL). */
void exc_options_init(struct exc_options *o);

/*
 * Creates a client on base (which must outlive it).  o NULL: defaults.
 * Nothing connects until an address is added.  Returns NULL (errno) on a
 * bad option or out of memory.
 */
exc_client *exc_client_new(struct event_base *base, const struct exc_options *o);

/*
 * Adds an execserver address: "ws://host:port" (every service), or
 * "ws://host:port/job/<service>" (used only for that service: the
 * static per-service filter); "wss://" instead of "ws://" speaks TLS and
 * verifies the server's certificate and host (exc_options.tls_ca_file).
 * A trailing "/broker" is accepted and means the same as none.  host is a
 * name, an IPv4 address or a bracketed IPv6 address; a name is resolved
 * with getaddrinfo at each connection attempt, which blocks the event
 * loop while the resolver works (use addresses or /etc/hosts names where
 * that matters).  The pool of the address opens its first connection at
 * once (from the event loop).  Only this address is ever connected to: no
 * per-instance address is learned.  Returns 0, or -1 (EINVAL: not such a
 * URL; or, for the first wss:// address, the CA file or directory could
 * not be loaded: the message names it).  The one-time pipe endpoints stay
 * plain HTTP for wss:// addresses too (docs/client.md, "TLS").
 */
int exc_client_add_address(exc_client *c, const char *url);

/* The client id in use (the given one or the random one). */
const char *exc_client_id(const exc_client *c);

/* Why id would be refused as exc_options.client_id, or token as
 * exc_options.auth_token: a static sentence ("expected 1 to 64 visible
 * ASCII characters other than & % # + =", "the token is empty", ...);
 * NULL when it is taken.  exc_client_new checks both the same way, so a
 * program can name the option at fault first (execctl does).  API level
 * 5. */
const char *exc_client_id_problem(const char *id);
const char *exc_auth_token_problem(const char *token);

/*
 * Claim share: how many jobs this client should hold at most (waiting +
 * running) to take its fair part of the reached instances, so that an
 * application claiming work from a shared queue neither hoards slots nor
 * leaves one idle (docs/client.md, "Claim share").  Per instance, from its
 * latest HELLO:
 *   floor(slots / clients) + 1
 * where clients is HELLO.clients and the + 1 keeps a want parked for the
 * moment a slot frees: the clients' shares add up to the slots plus one
 * per client, never to a slot left idle while work waits.  Summed over the
 * distinct reached instances (by instance_id); draining instances count 0;
 * 0 when no instance is connected.  Updated from every HELLO.
 *
 * exc_claim_share_service: for jobs of one service.  slots are those of
 * the waitgroup that runs the service on each instance, and only the
 * instances whose HELLO lists the service (through addresses that serve
 * it) count; 0 for a service no reached instance runs.  This is the share
 * to use with several waitgroups: claim each service's jobs up to its own
 * share.  Services that share a waitgroup share its slots, so an
 * application that claims them separately should divide that share (or
 * claim them as one queue).
 *
 * exc_claim_share: for a queue of any services, the same over every
 * waitgroup of each instance together (slots = their sum).  It says how
 * much work fits, not which: with one pool per instance (one waitgroup, or
 * auto-balance) it equals the per-service share; with several waitgroups
 * it is a bound only, since a client holding that many jobs of one service
 * waits for that service's waitgroup alone.
 */
unsigned exc_claim_share_service(const exc_client *c, const char *service);
unsigned exc_claim_share(const exc_client *c);

/* Pool figures of the address added n-th (0-based); -1 (ENOENT) if none. */
struct exc_address_stats {
	unsigned connections; /* live websocket connections (HELLO received) */
	unsigned connecting;  /* connections being opened */
	unsigned instances;   /* distinct instance_ids among the live ones */
	int covered;          /* growth stopped: a new connection repeated an
				 * instance_id */
	unsigned opened;      /* connections opened since the start (attempts) */
	unsigned duplicates;  /* connections closed for a repeated instance_id */
};
int exc_address_stats(const exc_client *c, unsigned n, struct exc_address_stats *st);

/* The message of the last failed exc_* call on c ("" if none). */
const char *exc_client_last_error(const exc_client *c);

/*
 * Frees the client: every job still waiting is UNWANTed, every running
 * job is CANCELled (best effort: the messages are written to the sockets
 * before they close), connections and pipe endpoints are closed, all
 * memory is freed.  No callback is called (no on_done for the jobs that
 * were still open).  Not from inside a callback of this client.  NULL ok.
 * libevent finishes releasing the freed sockets in the base's next loop
 * iteration or in event_base_free.
 */
void exc_client_free(exc_client *c);

/* ---- job sources and sinks ---------------------------------------------- */

enum exc_io_kind {
	EXC_IO_NONE = 0, /* stdin: empty.  stdout: not streamed; the receipt
				 * carries its first 4000 bytes, the rest is
				 * discarded.  Not valid for files. */
	EXC_IO_FD,       /* fd: read until EOF (source) or written (sink) */
	EXC_IO_BUFFER,   /* source only: len bytes at data (copied at
				 * exc_submit) */
	EXC_IO_FILE,     /* path of a local file: opened at exc_submit
				 * (source: read; sink: a temporary file
				 * beside it, renamed to path when the job
				 * succeeded, else removed: docs/client.md) */
	EXC_IO_URL,      /* a URL the execserver fetches/PUTs itself; the
				 * library serves nothing for it */
	EXC_IO_DISCARD,  /* sink only: streamed and thrown away (the
				 * receipt then has no stdout) */
};

struct exc_io {
	enum exc_io_kind kind;
	int fd;           /* EXC_IO_FD */
	const void *data; /* EXC_IO_BUFFER */
	size_t len;       /* EXC_IO_BUFFER */
	const char *path; /* EXC_IO_FILE */
	const char *url;  /* EXC_IO_URL */
};

/* A named file of the job's directory (job-payload.md inputs/outputs). */
struct exc_file {
	const char *name; /* file name in the job directory (no '/') */
	struct exc_io io; /* input: FD, BUFFER, FILE or URL;
				 * output: FD, FILE, URL or DISCARD */
};

/* ---- receipts, positions ------------------------------------------------ */

/*
 * Error codes of a receipt: the server's (protocol section 2, DONE:
 * exec_failed, cancelled, timeout, exec_stopped, input_failed,
 * stdin_failed, stdout_failed, output_failed, exec_lost), the refusals of
 * the JOB (bad_job, unknown_command, with retryable 0), and the library's:
 */
#define EXC_E_NO_SLOT \
	"no_slot" /* no slot within connect_timeout_sec
					 * (retryable) */
#define EXC_E_LOST \
	"lost" /* the instance running the job was not
					 * reached again within owner_grace_sec,
					 * or within the time the instance may
					 * still run it (its HELLO's
					 * ping_timeout_sec + resume_grace_sec
					 * + 5 s) if that is longer, or its DONE
					 * had no readable receipt (retryable:
					 * it may have run, and has stopped);
					 * after exc_cancel each of these ends
					 * EXC_E_CANCELLED instead */
#define EXC_E_UNKNOWN_SERVICE \
	"unknown_service" /* no address serves the
					 * service, or every one that does was
					 * explored to the end (reached, and
					 * covered or full) and no instance
					 * offers it (not retryable) */
#define EXC_E_SERVICE_DISABLED \
	"service_disabled" /* no reached instance offers
					 * the service, and one has it but
					 * disabled it (its startup check
					 * failed: the message says why; not
					 * retryable) */
#define EXC_E_UNAUTHORIZED \
	"unauthorized" /* every address refused the
					 * token (401; not retryable) */
#define EXC_E_TLS_VERIFY \
	"tls_verify" /* every wss:// address serving the
					 * service presented a certificate that
					 * did not verify (not retryable; the
					 * job never ran) */
#define EXC_E_LOCAL_IO \
	"local_io"                  /* a local source or sink failed (a read
					 * or write error on a caller fd or
					 * file, or a stream ended early); the
					 * message names it; not retryable */
#define EXC_E_CANCELLED "cancelled" /* exc_cancel (also the server's code) */
#define EXC_E_BAD_JOB \
	"bad_job" /* also the library's: the JOB message would be
					 * larger than the instance's
					 * HELLO.max_frame_bytes (not checked when absent);
					 * not sent, the connection untouched
					 * (not retryable) */

struct exc_receipt {
	const char *job_id;
	const char *instance_id; /* where it ran; NULL if it never ran or ran
					 * over the legacy fallback */
	int ok;                  /* 1: exited 0, no error, every local stream
				 * complete */
	int exited;              /* 1: exit_code is valid */
	int exit_code;
	int signal;              /* 0: none */
	int64_t duration_ms;     /* -1 unknown */
	const char *stdout_text; /* receipt "stdout", or NULL */
	int stdout_truncated;
	const char *stderr_line;   /* the decisive stderr line, or NULL */
	const char *error_code;    /* NULL: no error */
	const char *error_message; /* NULL when error_code is NULL */
	int retryable;             /* 1: requeue the job (no_slot, lost,
				 * exec_lost, exec_stopped, ...) */
	int receipt_lost;
	uint64_t stdin_bytes;  /* bytes served to the stdin endpoint */
	uint64_t stdout_bytes; /* bytes received on the stdout endpoint,
				 * also when the job's end cut the
				 * transfer short (then the sink holds a
				 * prefix of the job's output) */
	const char *json;      /* the server's receipt object as JSON text,
				 * or NULL for a receipt made by the library */
};

struct exc_position {
	const char *instance_id; /* which instance answered */
	const char *state;       /* "waiting", "offered" or "running" */
	int64_t running;         /* slots of the waitgroup in use */
	int64_t ahead;           /* wants served before this one */
	int64_t capacity;        /* slots of the waitgroup */
	int64_t eta_ms;          /* -1: unknown */
};

/* The job ended (any way).  r and its strings are valid during the call;
 * the job handle is freed when the callback returns. */
typedef void (*exc_done_cb)(exc_job *job, const struct exc_receipt *r, void *arg);
/* A POSITION arrived (answer to exc_query); one per instance asked. */
typedef void (*exc_position_cb)(exc_job *job, const struct exc_position *p, void *arg);

/* ---- jobs --------------------------------------------------------------- */

struct exc_job_spec {
	const char *job_id;  /* NULL: generated (unique in the client) */
	const char *service; /* required */
	int priority;        /* protocol WANT priority (default 0) */
	/* The job description, a JSON object as in docs/job-payload.md
	 * (command, args, env, timeout_sec, ...).  The library sets "stdin"
	 * and "stdout" from in/out (unless they are EXC_IO_NONE, when a value
	 * given here stays) and appends its entries to "inputs"/"outputs". */
	const char *job_json;
	struct exc_io in;  /* stdin source */
	struct exc_io out; /* stdout sink */
	const struct exc_file *inputs;
	size_t ninputs;
	const struct exc_file *outputs;
	size_t noutputs;
	/* 0: the client's connect_timeout_sec. */
	unsigned connect_timeout_sec;
	exc_done_cb on_done;         /* required */
	exc_position_cb on_position; /* NULL: POSITIONs are dropped */
	void *arg;
};

/* Zeroes s (kinds EXC_IO_NONE, fds -1). */
void exc_job_spec_init(struct exc_job_spec *s);

/*
 * Submits a job: validates the spec (job_json must be a JSON object with
 * a string "command"; file names non-empty without '/'; sources and sinks
 * of valid kinds), opens EXC_IO_FILE paths, and parks the want on every
 * live connection whose instance lists the service (at once, or as soon
 * as such a connection is up).  Returns the job, or NULL (errno,
 * exc_client_last_error): EINVAL bad spec, EEXIST job_id in use, ENOENT/
 * EACCES a FILE path, ENOMEM.  on_done follows exactly once, from the loop.
 */
exc_job *exc_submit(exc_client *c, const struct exc_job_spec *s);

/* The job's id. */
const char *exc_job_id(const exc_job *j);

/* "waiting" (no slot yet), "running" (an OFFER was taken and the JOB
 * sent), "seeking" (the connection to its instance dropped: looking for
 * that instance again), or "done" (only seen inside on_done). */
const char *exc_job_state(const exc_job *j);

/*
 * Cancels the job: a waiting one is UNWANTed everywhere; an offered or
 * running one gets CANCEL.  on_done follows (error "cancelled", or the
 * outcome the job already had).  Returns 0, or -1 when it is already done.
 */
int exc_cancel(exc_job *j);

/*
 * The job left "waiting": an instance's slot was taken and the JOB sent
 * (or, over the legacy fallback, its PUT began).  Called once, from the
 * loop, before any byte of the job's stdout can reach the sink (a
 * terminal's status line is erased here); not for a job that ends
 * without starting.  arg: the spec's arg.
 */
typedef void (*exc_start_cb)(exc_job *job, void *arg);
/* Sets j's start callback (NULL: none).  Call it right after exc_submit:
 * no callback runs inside an exc_* call, so no start is missed. */
void exc_job_on_start(exc_job *j, exc_start_cb cb);

/*
 * How far the running job is, as its program reported it (docs/progress.md:
 * lines on its EXECSERVER_PROGRESS_FD; protocol 3's PROGRESS): fraction 0
 * to 1, text the line's text ("" when it had none; UTF-8, at most 200
 * bytes, no control characters C0, DEL or C1: checked by the library,
 * "" for a text from the server that breaks it).  At most 4 calls a second per job (the
 * execserver keeps only the latest value), in the order the program wrote
 * them, all before on_done; none for a job that never started, none from
 * an execserver older than protocol 3, and none after the job was resumed
 * on another connection (the DONE still comes).  Called from the loop.
 */
typedef void (*exc_progress_cb)(exc_job *job, double fraction, const char *text, void *arg);
/* Sets j's progress callback and its arg (cb NULL: none).  Call it right
 * after exc_submit: no callback runs inside an exc_* call. */
void exc_job_on_progress(exc_job *j, exc_progress_cb cb, void *arg);

/*
 * Sends QUERY to every instance holding the job (each parked copy, or the
 * one running it); each POSITION goes to on_position.  Returns the number
 * of instances asked (0: none reachable right now).
 */
int exc_query(exc_job *j);

#ifdef __cplusplus
}
#endif

#endif
