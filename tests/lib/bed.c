/* bed.c - see bed.h.  The namespaces, links and rules are made with the
 * real tools (ip, tc, nft), each command checked. */
#include "autoconfig.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bed.h"
#include "harness.h"
#include "suite.h"

#define PREFIX "esbed"

/* The bed the exit and signal handlers remove (one per process). */
static struct bed *live;
/* This thread's namespace before its first bed_enter (-2: not moved). */
static __thread int home = -2;

/* Runs a shell command made from fmt; its output goes to stderr only when
 * it fails.  0 or -1. */
static int sh(const char *fmt, ...)
{
	char cmd[1024], full[1100];
	va_list ap;

	va_start(ap, fmt);
	int n = vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof cmd)
		return -1;
	snprintf(full, sizeof full, "( %s ) >/dev/null 2>&1", cmd);
	int status = system(full);
	if (status == 0)
		return 0;
	fprintf(stderr, "bed: failed (status %d): %s\n", status, cmd);
	return -1;
}

static int have(const char *tool)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", tool);
	return system(cmd) == 0;
}

/* Root in a container may still lack the privilege. */
static int can_make_netns(void)
{
	char cmd[200];
	snprintf(cmd, sizeof cmd,
		 "ip netns add " PREFIX "%ld-probe >/dev/null 2>&1 && "
		 "ip netns del " PREFIX "%ld-probe >/dev/null 2>&1",
		 (long)getpid(), (long)getpid());
	return system(cmd) == 0;
}

int bed_usable(const char *prog, int ntests)
{
	const char *why = NULL;

	if (geteuid() != 0)
		why = "not root (network namespaces need root)";
	else if (!have("ip"))
		why = "no ip (iproute2)";
	else if (!have("nft"))
		why = "no nft (nftables)";
	else if (!can_make_netns())
		why = "root, but no network namespace can be made here (ip netns add failed)";
	if (!why)
		return 1;
	suite_left_out(prog, ntests, why);
	return 0;
}

int bed_run_suite(const char *prog, const char *suite, const struct test_case *cases, struct bed *b,
		  int nhosts)
{
	int ncases = 0;
	while (cases[ncases].name)
		ncases++;
	if (!bed_usable(prog, ncases))
		return 77;
	if (bed_create(b, nhosts) != 0)
		return 1;
	int rc = run_suite(suite, cases);
	bed_destroy(b);
	return rc;
}

/* Kills the processes in namespace ns and removes it (quietly: it may not
 * exist). */
static void remove_netns(const char *ns)
{
	char cmd[256];
	snprintf(cmd, sizeof cmd,
		 "pids=$(ip netns pids %s 2>/dev/null); [ -z \"$pids\" ] || kill -9 $pids; "
		 "ip netns del %s >/dev/null 2>&1",
		 ns, ns);
	if (system(cmd) != 0) {
		/* already gone */
	}
}

/* Removes the namespaces of earlier runs whose process is gone. */
static void sweep_stale(void)
{
	DIR *dir = opendir("/run/netns");
	struct dirent *e;

	if (!dir)
		return;
	while ((e = readdir(dir)) != NULL) {
		long pid;
		if (sscanf(e->d_name, PREFIX "%ld-", &pid) != 1 || pid <= 0)
			continue;
		if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		remove_netns(e->d_name);
	}
	closedir(dir);
}

void bed_destroy(struct bed *b)
{
	if (!b || b->owner != getpid())
		return;
	for (int i = 0; i < b->n; i++)
		remove_netns(b->host[i].netns);
	if (b->sw[0])
		remove_netns(b->sw);
	b->n = 0;
	b->sw[0] = '\0';
	if (live == b)
		live = NULL;
}

static void destroy_live(void)
{
	bed_destroy(live);
}

static void on_fatal(int sig)
{
	destroy_live();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void guard_once(void)
{
	static int done;
	if (done)
		return;
	done = 1;
	atexit(destroy_live);
	const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGSEGV, SIGABRT, SIGBUS, SIGFPE };
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
		signal(sigs[i], on_fatal);
}

static int make_host(struct bed *b, int i)
{
	struct bed_host *h = &b->host[i];

	h->label = (char)('a' + i);
	snprintf(h->netns, sizeof h->netns, PREFIX "%ld-%c", (long)b->owner, h->label);
	snprintf(h->addr, sizeof h->addr, "10.250.0.%d", 11 + i);
	snprintf(h->port_if, sizeof h->port_if, "h-%c", h->label);
	snprintf(h->sw, sizeof h->sw, "%s", b->sw);
	b->n = i + 1;
	/* the pair is made directly in the two namespaces: no name ever
	 * appears in the machine's own namespace */
	return sh("ip netns add %s", h->netns) ||
			       sh("ip link add %s netns %s type veth peer name eth0 netns %s",
				  h->port_if, b->sw, h->netns) ||
			       sh("ip -n %s link set %s master br0 up", b->sw, h->port_if) ||
			       sh("ip -n %s addr add %s/24 dev eth0", h->netns, h->addr) ||
			       sh("ip -n %s link set eth0 up", h->netns) ||
			       sh("ip -n %s link set lo up", h->netns)
		       ? -1
		       : 0;
}

int bed_create(struct bed *b, int n)
{
	memset(b, 0, sizeof *b);
	if (n < 1 || n > BED_MAX_HOSTS)
		return -1;
	sweep_stale();
	b->owner = getpid();
	guard_once();
	live = b;
	snprintf(b->sw, sizeof b->sw, PREFIX "%ld-sw", (long)b->owner);
	if (sh("ip netns add %s", b->sw) || sh("ip -n %s link add br0 type bridge", b->sw) ||
	    sh("ip -n %s link set br0 up", b->sw)) {
		bed_destroy(b);
		return -1;
	}
	for (int i = 0; i < n; i++)
		if (make_host(b, i) != 0) {
			bed_destroy(b);
			return -1;
		}
	return 0;
}

int bed_enter(const struct bed_host *h)
{
	int prev = harness_netns_enter(h->netns);
	if (prev < 0)
		return -1;
	if (home == -2)
		home = prev;
	else
		close(prev);
	return 0;
}

int bed_leave(void)
{
	if (home == -2)
		return 0;
	harness_netns_return(home);
	home = -2;
	return 0;
}

pid_t bed_fork(const struct bed_host *h)
{
	pid_t pid = fork();
	if (pid == 0 && harness_netns_enter(h->netns) < 0)
		_exit(127);
	return pid;
}

pid_t bed_spawn(const struct bed_host *h, const char *log, const char *extra_env,
		char *const argv[])
{
	return harness_spawn_in(h->netns, log, extra_env, argv);
}

int bed_cut(const struct bed_host *h)
{
	return sh("ip -n %s link set %s down", h->sw, h->port_if);
}

int bed_mend(const struct bed_host *h)
{
	return sh("ip -n %s link set %s up", h->sw, h->port_if);
}

int bed_loss(const struct bed_host *h, int percent)
{
	if (percent < 0 || percent > 100)
		return -1;
	sh("ip netns exec %s nft delete table inet bed 2>/dev/null || true", h->netns);
	if (percent == 0)
		return 0;
	char rule[64];
	if (percent == 100)
		snprintf(rule, sizeof rule, "drop");
	else
		snprintf(rule, sizeof rule, "numgen random mod 100 \\< %d drop", percent);
	/* on eth0 only: the host's loopback traffic (a status request from
	 * inside) is not the link's */
	return sh("ip netns exec %s nft add table inet bed", h->netns) ||
			       sh("ip netns exec %s nft add chain inet bed in "
				  "\\{ type filter hook input priority 0 \\; \\}",
				  h->netns) ||
			       sh("ip netns exec %s nft add chain inet bed out "
				  "\\{ type filter hook output priority 0 \\; \\}",
				  h->netns) ||
			       sh("ip netns exec %s nft add rule inet bed in iifname eth0 %s",
				  h->netns, rule) ||
			       sh("ip netns exec %s nft add rule inet bed out oifname eth0 %s",
				  h->netns, rule)
		       ? -1
		       : 0;
}

int bed_has_netem(void)
{
	static int known = -1;
	char cmd[400];

	if (known >= 0)
		return known;
	snprintf(cmd, sizeof cmd,
		 "ns=" PREFIX "%ld-probe; ip netns add $ns >/dev/null 2>&1 || exit 1; "
		 "tc -n $ns qdisc add dev lo root netem delay 1ms >/dev/null 2>&1; r=$?; "
		 "ip netns del $ns >/dev/null 2>&1; exit $r",
		 (long)getpid());
	known = system(cmd) == 0;
	return known;
}

int bed_delay(const struct bed_host *h, int ms)
{
	if (ms < 0)
		return -1;
	if (ms == 0) {
		sh("tc -n %s qdisc del dev eth0 root 2>/dev/null || true", h->netns);
		sh("tc -n %s qdisc del dev %s root 2>/dev/null || true", h->sw, h->port_if);
		return 0;
	}
	if (!bed_has_netem())
		return -1;
	return sh("tc -n %s qdisc replace dev eth0 root netem delay %dms", h->netns, ms) ||
			       sh("tc -n %s qdisc replace dev %s root netem delay %dms", h->sw,
				  h->port_if, ms)
		       ? -1
		       : 0;
}

int harness_start_on(struct es_daemon *d, const struct bed_host *h, int handlers, const char *body,
		     const char *extra_env)
{
	return harness_start_at(d, h->netns, h->addr, handlers, body, extra_env, NULL);
}
