/*
 * bed.h - a test bed of hosts on one machine: each host is a network
 * namespace with its own address on one bridge, so that a client, a
 * balancer and execservers see each other at different addresses, as in
 * a real fleet, and links can be slowed, made lossy or cut.
 *
 * API in short (a test that uses the bed, see test_bed.c):
 *
 *     static struct bed B;
 *     int main(void) {                       // hosts a, b, c, d:
 *         return bed_run_suite("test_x", "x", cases, &B, 4);
 *     }                                      // B.host[i].addr 10.250.0.11+i;
 *                                            // when not root: one line and
 *                                            // exit 77 (SKIP)
 *     harness_start_on(&d, &B.host[2], 1, body, NULL);  // execserver on c,
 *                                            // listening on c's address;
 *                                            // harness_status(&d) works from
 *                                            // anywhere (it looks from c)
 *     bed_enter(&B.host[0]);                 // this thread is on host a now:
 *     ... wsclient / libexecclient to ws://10.250.0.13:port ...
 *     bed_leave();                           // back where the test began
 *     pid = bed_spawn(&B.host[0], log, env, argv);   // a program on host a
 *     pid = bed_fork(&B.host[0]);            // fork; the child is on host a
 *     balancer_start_at(&lb, &spec);         // haproxy on a host (balancer.h)
 *     pipe_server_start_on(&ps, &B.host[0]); // pipe server on a's address
 *     bed_cut(&B.host[0]); bed_mend(&B.host[0]);   // link down / up at the
 *                                            // bridge: no FIN, no RST
 *     bed_loss(&B.host[0], 30);              // 30 % of packets dropped both
 *                                            // ways (100: a cut; 0: none)
 *     bed_delay(&B.host[0], 20);             // 20 ms each way (tc netem;
 *                                            // -1 where the kernel has none)
 *     bed_destroy(&B);                       // also done at exit and on a
 *                                            // fatal signal
 *
 * Owns: the namespaces "esbed<pid>-sw" (the switch: one bridge, one veth
 * end per host) and "esbed<pid>-<letter>" (a host: lo and eth0 with
 * 10.250.0.<11+i>/24), the processes inside them (killed by bed_destroy),
 * and the nftables table "bed" in a host that bed_loss shapes.
 *
 * Invariants: every name holds the creating process's pid, so parallel
 * runs never meet, and bed_create first removes the namespaces of runs
 * whose process is gone (a run killed by SIGKILL).  The addresses exist
 * only inside this run's namespaces; no route leads from them to the
 * machine's own network, and nothing outside the bed dials them: a thread
 * talks to a bed address only after bed_enter (harness_status enters the
 * daemon's own host for the duration of its request).  A network
 * namespace belongs to a thread, not a process: bed_enter moves only the
 * calling thread, and threads or children created after it start on that
 * host; sockets keep the namespace they were made in.  Only the creating
 * process destroys the bed (children that exit leave it alone); one bed
 * per process at a time (the names hold only the pid).
 *
 * This machine's kernel has no sch_netem: bed_loss uses nftables for that
 * reason, and delay is only where netem is (test_bed says which).
 */
#ifndef ES_BED_H
#define ES_BED_H

#include <sys/types.h>

#define BED_MAX_HOSTS 8

struct bed_host {
	char label;       /* 'a', 'b', ... */
	char netns[40];   /* esbed<pid>-<label> */
	char addr[16];    /* 10.250.0.<11 + index> */
	char port_if[16]; /* the host's veth end in the switch: h-<label> */
	char sw[40];      /* the switch's namespace */
};

struct bed {
	int n;
	pid_t owner; /* the process that created it */
	char sw[40]; /* esbed<pid>-sw */
	struct bed_host host[BED_MAX_HOSTS];
};

/* Whether this run can build a bed (root, iproute2, nftables, and network
 * namespaces can be made: a container may deny them to root).  When it
 * cannot, prints one line "<prog>: <ntests> tests left out: <why>" and
 * returns 0; the program then exits 77, which make check counts as
 * skipped. */
int bed_usable(const char *prog, int ntests);

struct test_case;
/* The main() of a test program on the bed: when bed_usable (the count of
 * cases is the number left out), creates b with nhosts hosts, runs the
 * suite, destroys b.  Returns the exit status (77: left out). */
int bed_run_suite(const char *prog, const char *suite, const struct test_case *cases, struct bed *b,
		  int nhosts);

/* Creates n hosts (1..BED_MAX_HOSTS) on one bridge.  0, or -1 (what failed
 * is printed, and whatever was made is removed). */
int bed_create(struct bed *b, int n);
/* Kills every process in the bed's namespaces and removes them.  Safe to
 * call twice. */
void bed_destroy(struct bed *b);

/* The calling thread joins host h (its new sockets leave from h->addr) /
 * goes back to the namespace it was in before its first bed_enter.  0 or
 * -1. */
int bed_enter(const struct bed_host *h);
int bed_leave(void);
/* fork(), the child on host h (it _exits 127 when it cannot get there). */
pid_t bed_fork(const struct bed_host *h);
/* harness_spawn on host h. */
pid_t bed_spawn(const struct bed_host *h, const char *log, const char *extra_env,
		char *const argv[]);

/* Link faults, at the host's one link (so they act on every connection to
 * and from it, and never on the host's own loopback traffic):
 * bed_cut takes the switch's end of the link down (frames are dropped
 * silently: no FIN, no RST; connections go half-open), bed_mend brings it
 * back.  bed_loss drops percent % of the packets in each direction at
 * random (nftables numgen); 0 removes the rule.  bed_delay adds ms of
 * delay in each direction with tc netem; 0 removes it; -1 when this
 * kernel has no netem (bed_has_netem).  All return 0 or -1. */
int bed_cut(const struct bed_host *h);
int bed_mend(const struct bed_host *h);
int bed_loss(const struct bed_host *h, int percent);
int bed_delay(const struct bed_host *h, int ms);
int bed_has_netem(void);

struct es_daemon;
/* harness_start with the daemon on host h, listening on h->addr. */
int harness_start_on(struct es_daemon *d, const struct bed_host *h, int handlers, const char *body,
		     const char *extra_env);

#endif
