#!/usr/bin/env python3
"""Join BenchmarkBichannelTestbed's stamped round trips (BICH_STAGES_FILE:
t0 t1 t2 t3 t4 per line, CLOCK_MONOTONIC ns) with a perf trace
(perf script --ns -F comm,tid,pid,cpu,time,event,trace; recorded with
-k CLOCK_MONOTONIC) of the vNIC variant, and print where the round trip
goes. See scripts/bichstages.sh and docs/bichannel.md.

usage: bichstages.py TRACE STAMPS VNICD_PID SERVER_PID CLIENT_PID

vnicd's engine thread is the one that makes the AF_XDP TX kicks
(sendto with a NULL buffer); its tenant wake-ups are sendto of one byte.
"""
import bisect
import re
import statistics
import sys
from collections import Counter, defaultdict

trace, stamps = sys.argv[1], sys.argv[2]
vpid, spid, cpid = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
rx = re.compile(r'^\s*(\S+)\s+(\d+)/(\d+)\s+\[(\d+)\]\s+(\d+)\.(\d+):\s+(\S+):\s*(.*)$')
ev = []
for line in open(trace):
    m = rx.match(line)
    if m:
        comm, pid, tid, cpu, s, ns, name, rest = m.groups()
        ev.append((int(s) * 10**9 + int(ns), name, int(pid), int(tid), int(cpu), rest, comm))
ev.sort()
ts = [e[0] for e in ev]
lo, hi = ts[0], ts[-1]
KICK = 'len: 0x00000000'
WAKE = 'len: 0x00000001'
eng = Counter(e[3] for e in ev if e[2] == vpid and e[1] == 'syscalls:sys_enter_sendto' and KICK in e[5]).most_common(1)[0][0]
tid2pid = {e[3]: e[2] for e in ev}


def first(after, before, pred):
    i = bisect.bisect_left(ts, after)
    while i < len(ev) and ev[i][0] <= before:
        if pred(ev[i]):
            return ev[i]
        i += 1
    return None


def woken(tid, a, b):
    return first(a, b, lambda e: e[1] == 'sched:sched_wakeup' and (' pid=%d ' % tid) in e[5])


def switched_in(tid, a, b):
    return first(a, b, lambda e: e[1] == 'sched:sched_switch' and ('next_pid=%d ' % tid) in e[5])


S = defaultdict(list)
cnt = Counter()
for line in open(stamps):
    t0, t1, t2, t3, t4 = map(int, line.split())
    if t0 < lo or t4 > hi:
        continue
    kin = first(t0, t2, lambda e: e[3] == eng and e[1] == 'syscalls:sys_enter_sendto' and KICK in e[5])
    kout = kin and first(kin[0], t2, lambda e: e[3] == eng and e[1] == 'syscalls:sys_exit_sendto')
    xr = first(t3, t4, lambda e: e[1] == 'xdp:xdp_redirect')
    if not (kin and kout and xr):
        continue
    cnt['round trips'] += 1
    S['rtt'].append(t4 - t0)
    S['0 client Send'].append(t1 - t0)
    db = first(t0, kin[0], lambda e: e[2] == cpid and e[1] == 'syscalls:sys_enter_sendto' and WAKE in e[5])
    if db:
        cnt['engine asleep at Send (doorbell)'] += 1
        s = switched_in(eng, db[0], kin[0])
        if s:
            S['A1 doorbell -> engine on a CPU'].append(s[0] - db[0])
            S['A2 engine on a CPU -> TX kick'].append(kin[0] - s[0])
    else:
        S['A0 Send returned -> TX kick (engine polling)'].append(kin[0] - t1)
    S['B TX kick syscall (veth xmit, peer softirq)'].append(kout[0] - kin[0])
    S['C kick done -> server receive returned'].append(t2 - kout[0])
    S['D server send -> XDP redirect'].append(xr[0] - t3)
    sig = first(xr[0], t4, lambda e: e[3] == eng and e[1] == 'syscalls:sys_enter_sendto' and WAKE in e[5])
    if not sig:
        cnt['client polling at arrival (no signal)'] += 1
        S['E XDP redirect -> client receive returned (no signal)'].append(t4 - xr[0])
        continue
    we = woken(eng, xr[0] - 1000, sig[0])
    if we:
        cnt['engine asleep at arrival'] += 1
        s = switched_in(eng, we[0], sig[0])
        S['E1 XDP redirect -> engine woken'].append(we[0] - xr[0])
        if s:
            S['E2 engine woken -> on a CPU'].append(s[0] - we[0])
            S['E3 engine on a CPU -> signal to the client'].append(sig[0] - s[0])
    else:
        S['E0 XDP redirect -> signal to the client (engine polling)'].append(sig[0] - xr[0])
    wc = first(sig[0], t4, lambda e: e[1] == 'sched:sched_wakeup' and tid2pid.get(int(e[5].split(' pid=')[1].split()[0])) == cpid)
    if wc:
        tid = int(wc[5].split(' pid=')[1].split()[0])
        s = switched_in(tid, wc[0], t4)
        S['F1 signal -> client thread woken'].append(wc[0] - sig[0])
        if s:
            S['F2 client woken -> on a CPU'].append(s[0] - wc[0])
            S['F3 client on a CPU -> receive returned'].append(t4 - s[0])

print('engine thread %d, client pid %d, server pid %d, vnicd pid %d' % (eng, cpid, spid, vpid))
print(dict(cnt))
for k in sorted(S):
    v = sorted(S[k])
    print('%-58s n=%5d  p50 %7.1f µs  p90 %7.1f  mean %7.1f' % (k, len(v), v[len(v) // 2] / 1e3, v[int(len(v) * .9)] / 1e3, statistics.mean(v) / 1e3))

# Who had each CPU, and how often each process was switched in per round trip.
names = {vpid: 'vnicd', spid: 'server', cpid: 'client'}
occ = defaultdict(Counter)
last = {}
swin = Counter()
for e in ev:
    if e[1] != 'sched:sched_switch':
        continue
    cpu = e[4]
    prev = e[6]
    key = names.get(e[2], 'idle' if prev.startswith('swapper') else 'others')
    if cpu in last:
        occ[cpu][key] += e[0] - last[cpu]
    last[cpu] = e[0]
    nxt = int(e[5].split('next_pid=')[1].split()[0])
    if tid2pid.get(nxt) in names:
        swin[names[tid2pid[nxt]]] += 1
for cpu in sorted(occ):
    tot = sum(occ[cpu].values())
    print('CPU %d: ' % cpu + ', '.join('%s %.0f%%' % (k, v * 100 / tot) for k, v in occ[cpu].most_common()))
dur = (hi - lo) / 1e9
rts = sum(1 for line in open(stamps) if lo <= int(line.split()[0]) and int(line.split()[4]) <= hi)
if rts:
    print('switches in per round trip (%d round trips in %.2f s): ' % (rts, dur) + ', '.join('%s %.1f' % (k, v / rts) for k, v in swin.most_common()))
