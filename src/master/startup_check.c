/*
 * startup_check.c - see startup_check.h.
 *
 * Invariants: every child is spawned with posix_spawn from a path resolved
 * by spawn_find_program (no shell, no second PATH search), in its own
 * process group, with default signal dispositions and an empty signal
 * mask; every child is reaped before startup_check_command() returns; the
 * parent's pipe ends are close-on-exec so no other child inherits them.
 */
#include "autoconfig.h"
#include "master/startup_check.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <regex.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/utf8.h"
#include "job/spawn.h"

extern char **environ;

/* environ with each K=V of the lists put in (replacing an entry of the same
 * name); later lists win.  Only the array is allocated. */
static char **build_env(const struct strlist *a, const struct strlist *b)
{
	const struct strlist *lists[2] = { a, b };
	size_t n = 0, total;
	char **env;

	while (environ && environ[n])
		n++;
	total = n + a->count + b->count + 1;
	env = calloc(total, sizeof *env);
	if (!env)
		return NULL;
	memcpy(env, environ, n * sizeof *env);
	for (int l = 0; l < 2; l++) {
		for (size_t i = 0; i < lists[l]->count; i++) {
			char *kv = lists[l]->items[i];
			size_t klen = (size_t)(strchr(kv, '=') - kv) + 1; /* validated K=V */
			size_t j;
			for (j = 0; j < n; j++)
				if (strncmp(env[j], kv, klen) == 0)
					break;
			env[j] = kv;
			if (j == n)
				n++;
		}
	}
	env[n] = NULL;
	return env;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Reads fd until EOF or the deadline; keeps the first `cap` bytes in buf
 * and drops the rest, so the child never blocks on a full pipe.  Returns 1
 * on EOF, 0 on timeout. */
static int read_output(int fd, char *buf, size_t cap, size_t *len, uint64_t deadline)
{
	char scratch[4096];

	for (;;) {
		uint64_t now = clock_mono_ms();
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t n;
		int r;

		if (now >= deadline)
			return 0;
		r = poll(&pfd, 1, (int)(deadline - now));
		if (r < 0 && errno != EINTR)
			return 1;
		if (r <= 0)
			continue;
		if (*len < cap)
			n = read(fd, buf + *len, cap - *len);
		else
			n = read(fd, scratch, sizeof scratch);
		if (n == 0)
			return 1;
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return 1;
		}
		if (*len < cap)
			*len += (size_t)n;
	}
}

/* Waits for pid until the deadline; returns 1 with *status, or 0. */
static int wait_until(pid_t pid, int *status, uint64_t deadline)
{
	for (;;) {
		pid_t r = waitpid(pid, status, WNOHANG);

		if (r == pid)
			return 1;
		if (r < 0 && errno != EINTR)
			return -1;
		if (clock_mono_ms() >= deadline)
			return 0;
		sleep_ms(5);
	}
}

static void reap(pid_t pid, int *status)
{
	while (waitpid(pid, status, 0) < 0 && errno == EINTR)
		;
}

/* The first line of the output, printable and short, for messages. */
static void snippet(const char *out, size_t len, char *buf, size_t buflen)
{
	size_t o = 0;

	for (size_t i = 0; i < len && out[i] != '\n' && o + 1 < buflen && i < 60; i++)
		buf[o++] = (out[i] >= 0x20 && out[i] != 0x7f) ? out[i] : '?';
	buf[o] = '\0';
}

/* Runs path with argv; collects output; returns 0 with *status and output,
 * or -1 with why. */
static int run_captured(const char *path, char **argv, char **envp, int timeout_ms, char *out,
			size_t cap, size_t *outlen, int *status, char *why, size_t whylen)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, all;
	int fds[2], rc, got;
	pid_t pid;
	uint64_t deadline;

	*outlen = 0;
	if (pipe2(fds, O_CLOEXEC) < 0) {
		snprintf(why, whylen, "cannot create a pipe: %s", strerror(errno));
		return -1;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
	posix_spawn_file_actions_adddup2(&fa, fds[1], STDERR_FILENO);
	posix_spawnattr_init(&attr);
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &all);
	posix_spawnattr_setpgroup(&attr, 0);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
						POSIX_SPAWN_SETPGROUP);
	rc = posix_spawn(&pid, path, &fa, &attr, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	close(fds[1]);
	if (rc != 0) {
		close(fds[0]);
		snprintf(why, whylen, "cannot run %s: %s", path, strerror(rc));
		return -1;
	}
	deadline = clock_mono_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
	got = read_output(fds[0], out, cap, outlen, deadline);
	close(fds[0]);
	if (got)
		got = wait_until(pid, status, deadline);
	if (got == 1)
		return 0;
	kill(-pid, SIGKILL);
	kill(pid, SIGKILL);
	reap(pid, status);
	if (got < 0)
		snprintf(why, whylen, "lost track of process %d", (int)pid);
	else
		snprintf(why, whylen, "timed out after %d ms (killed)", timeout_ms);
	return -1;
}

int startup_check_command(const struct es_config *cfg, const struct config_command *cmd,
			  int timeout_ms, char *why, size_t whylen)
{
	const struct config_startup_check *sc = &cmd->startup_check;
	char path[4096], first[80];
	char **argv = NULL, **envp = NULL, *out = NULL;
	size_t outlen = 0;
	regex_t re;
	int have_re = 0, status = 0, rc = -1;

	if (spawn_find_program(cmd->prog, path, sizeof path) < 0) {
		if (strchr(cmd->prog, '/'))
			snprintf(why, whylen, "program %s is not an executable file", cmd->prog);
		else
			snprintf(why, whylen, "program %s not found in PATH", cmd->prog);
		return -1;
	}
	if (!sc->present)
		return 0;
	if (sc->regex) {
		int e = regcomp(&re, sc->regex, REG_EXTENDED | REG_NOSUB | REG_NEWLINE);
		if (e != 0) {
			char msg[128];
			regerror(e, &re, msg, sizeof msg);
			snprintf(why, whylen, "invalid regex: %s", msg);
			return -1;
		}
		have_re = 1;
	}
	argv = calloc(sc->args.count + 2, sizeof *argv);
	envp = build_env(&cfg->env, &cmd->env);
	out = malloc(STARTUP_CHECK_MAX_OUTPUT + 1);
	if (!argv || !envp || !out) {
		snprintf(why, whylen, "out of memory");
		goto done;
	}
	argv[0] = cmd->prog;
	for (size_t i = 0; i < sc->args.count; i++)
		argv[i + 1] = sc->args.items[i];
	if (run_captured(path, argv, envp, timeout_ms, out, STARTUP_CHECK_MAX_OUTPUT, &outlen,
			 &status, why, whylen) < 0)
		goto done;
	for (size_t i = 0; i < outlen; i++)
		if (out[i] == '\0')
			out[i] = ' '; /* regexec stops at NUL */
	out[outlen] = '\0';
	if (have_re) {
		if (regexec(&re, out, 0, NULL, 0) != 0) {
			snippet(out, outlen, first, sizeof first);
			snprintf(why, whylen, "output of %s did not match /%s/ (it began: \"%s\")",
				 cmd->prog, sc->regex, first);
			goto done;
		}
	} else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		if (WIFSIGNALED(status))
			snprintf(why, whylen, "%s was killed by signal %d", cmd->prog,
				 WTERMSIG(status));
		else
			snprintf(why, whylen, "%s exited with status %d", cmd->prog,
				 WEXITSTATUS(status));
		goto done;
	}
	rc = 0;
done:
	if (have_re)
		regfree(&re);
	free(argv);
	free(envp);
	free(out);
	return rc;
}

int startup_check_run(struct es_config *cfg, int strict)
{
	for (size_t s = 0; s < cfg->nservices; s++) {
		struct config_service *svc = &cfg->services[s];

		for (size_t c = 0; c < svc->ncommands && svc->enabled; c++) {
			const struct config_command *cmd = &svc->commands[c];
			char why[512];

			if (startup_check_command(cfg, cmd, STARTUP_CHECK_TIMEOUT_MS, why,
						  sizeof why) == 0) {
				log_debug("service %s: command %s: startup check passed", svc->name,
					  cmd->name);
				continue;
			}
			if (strict) {
				log_error("%s:%d:%d: service %s: command %s: %s", cfg->file,
					  cmd->line, cmd->column, svc->name, cmd->name, why);
				return -1;
			}
			svc->enabled = 0;
			int n = snprintf(svc->disabled_why, sizeof svc->disabled_why,
					 "command %s: ", cmd->name);
			if (n > 0 && (size_t)n < sizeof svc->disabled_why) { /* cut if long */
				size_t w = utf8_cut(why, sizeof svc->disabled_why - (size_t)n - 1);
				memcpy(svc->disabled_why + n, why, w);
				svc->disabled_why[(size_t)n + w] = '\0';
			}
			svc->disabled_line = cmd->line;
			svc->disabled_column = cmd->column;
		}
	}
	return 0;
}

void startup_check_report(const struct es_config *cfg)
{
	size_t enabled = 0;

	for (size_t s = 0; s < cfg->nservices; s++) {
		const struct config_service *svc = &cfg->services[s];
		if (svc->enabled)
			enabled++;
		else
			log_warn("%s:%d:%d: service %s disabled: %s", cfg->file, svc->disabled_line,
				 svc->disabled_column, svc->name, svc->disabled_why);
	}
	if (cfg->nservices > 0 && enabled == 0)
		log_warn("no service passed its startup check: every service is disabled");
}
