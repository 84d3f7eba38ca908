#!/usr/bin/env python3
"""row7split.py - where a row 7 job's start goes (bench/notes/row3-throughput.md, "Row 7 at
K = 8 with more handlers").  Reads `perf script -F
comm,pid,tid,cpu,time,event,trace` of a `perf record -p` of dispatcher
processes (the execserver's handlers, or the gm_workers) with their jobs
inherited: sched_switch, sched_wakeup(_new), sched_process_fork/exec/exit,
and raw_syscalls enter/exit filtered to recvfrom, clone, clone3, epoll_wait,
epoll_pwait, poll, ppoll and write.  Per job (a clone by a dispatcher): its
wake-up and loop turn, the recvfrom of the job before the clone, the clone,
the child's first run, its exec, its first write (stamp's printf, just after
its start); prints the median and p90 of each step.

Usage: row7split.py TRACE.txt PIDS   (PIDS: "esbench N master N handlers
P1,P2,..." as one line; the handlers are the dispatcher processes)"""
import re, sys, statistics as st
path, pids = sys.argv[1], open(sys.argv[2]).read().split()
es = int(pids[1]); handlers = set(int(x) for x in pids[5].split(','))
rx = re.compile(r'^\s*(.*?)\s+(\d+)/(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\S+):\s*(.*)$')
ev = []  # (t, pid, cpu, event, rest)
for line in open(path):
    m = rx.match(line)
    if m:
        ev.append((float(m.group(5)) * 1e6, int(m.group(3)), int(m.group(4)), m.group(6), m.group(7)))
ev.sort(key=lambda e: e[0])
children = {}   # child pid -> dict
hstate = {h: {'wake': None, 'woken': None, 'read': None, 'turn_clones': 0, 'reads': 0} for h in handlers}
runq = {}  # pid -> time it became runnable
esb_w = []
for t, pid, cpu, name, rest in ev:
    if name == 'sched:sched_wakeup' or name == 'sched:sched_wakeup_new':
        p = int(re.search(r' pid=(\d+)', rest).group(1))
        runq.setdefault(p, t)
        if p in hstate and hstate[p].get('sleeping') and hstate[p]['woken'] is None:
            hstate[p]['woken'] = t
    elif name == 'sched:sched_switch':
        prev = int(re.search(r'prev_pid=(\d+)', rest).group(1))
        nxt = int(re.search(r'next_pid=(\d+)', rest).group(1))
        if 'prev_state=R' in rest:
            runq[prev] = t
        else:
            runq.pop(prev, None)
        if nxt in children and 'run1' not in children[nxt]:
            children[nxt]['run1'] = t
        if nxt in children:
            c = children[nxt]
            if nxt in runq:
                c['waitq'] = c.get('waitq', 0) + t - runq[nxt]
        runq.pop(nxt, None)
    elif name == 'sched:sched_process_fork':
        par = int(re.search(r' pid=(\d+)', rest).group(1))
        ch = int(re.search(r'child_pid=(\d+)', rest).group(1))
        if par in hstate:
            h = hstate[par]
            children[ch] = {'h': par, 'fork': t, 'read': h['read'], 'wake': h['wake'],
                            'woken': h['woken'], 'nth': h['turn_clones'], 'nreads': h['reads']}
            h['turn_clones'] += 1
    elif name == 'sched:sched_process_exec':
        if pid in children:
            children[pid]['exec'] = t
    elif name == 'raw_syscalls:sys_enter':
        nr = int(rest.split()[1])
        if pid in hstate and nr == 45:
            hstate[pid]['pending_read'] = t
        if pid in hstate and nr in (232, 281, 441, 7, 271):
            hstate[pid]['sleeping'] = True; hstate[pid]['woken'] = None
        if pid in children and nr == 1 and 'write' not in children[pid] and 'exec' in children[pid]:
            children[pid]['write'] = t
    elif name == 'raw_syscalls:sys_exit':
        nr = int(rest.split()[1]); ret = int(rest.split('=')[1])
        if pid in hstate:
            h = hstate[pid]
            if nr in (232, 281, 441, 7, 271):
                h['wake'] = t; h['turn_clones'] = 0; h['reads'] = 0; h['sleeping'] = False
                if h['woken'] is None: h['woken'] = t
            if nr == 45 and ret > 0:
                h['read'] = h.get('pending_read'); h['reads'] += 1
jobs = [c for c in children.values() if all(k in c for k in ('read', 'exec', 'write', 'run1')) and c['read'] and c['wake']]
def med(xs):
    xs = [x for x in xs if x is not None]
    return (st.median(xs), sorted(xs)[int(0.9 * len(xs))]) if xs else (0, 0)
segs = [
    ('handler woken -> its epoll_wait returns', [c['wake'] - c['woken'] if c['woken'] and c['woken'] <= c['wake'] else None for c in jobs]),
    ('epoll_wait returns -> recvfrom of the JOB', [c['read'] - c['wake'] for c in jobs]),
    ('recvfrom of the JOB -> clone', [c['fork'] - c['read'] for c in jobs]),
    ('clone -> child first runs', [c['run1'] - c['fork'] for c in jobs]),
    ('clone -> exec', [c['exec'] - c['fork'] for c in jobs]),
    ('exec -> stamp writes (start)', [c['write'] - c['exec'] for c in jobs]),
    ('recvfrom -> start', [c['write'] - c['read'] for c in jobs]),
    ('child waiting for a CPU, clone -> start', [c.get('waitq', 0) for c in jobs]),
]
print('jobs', len(jobs))
for n, xs in segs:
    m, p90 = med(xs)
    print('%-45s p50 %7.0f us  p90 %7.0f us' % (n, m, p90))
from collections import Counter
print('clones before this one in the same loop turn:', sorted(Counter(c['nth'] for c in jobs).items()))
print('recvfroms before the clone in its turn:', sorted(Counter(c['nreads'] for c in jobs).items()))
