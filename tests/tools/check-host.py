#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Tests `sbr-perf check` (tools/sbr-check.c).

    check-host.py SBR_PERF host   on a host without RDMA (suite unit): the
                                  "no RDMA here, use shm" line, the memlock
                                  verdicts, the exit statuses
    check-host.py SBR_PERF vm     in the Soft-RoCE VM (suite verbs): rxe0's
                                  lines are OK, rdma_cm resolves
                                  $SBR_RDMA_ADDR, a lowered memlock limit
                                  and an unreachable peer are FAILs

The memlock checks run the tool with RLIMIT_MEMLOCK lowered to 8 MiB (the
Linux default) and, when we are root, without CAP_IPC_LOCK (setpriv drops
it from the bounding set), as a non-root user would run it.
"""
import os
import re
import resource
import shutil
import subprocess
import sys

MIB = 1 << 20
LINE = re.compile(r"^(OK  |WARN|FAIL) \S")


def fail(msg, out=""):
    sys.stderr.write("FAIL: %s\n%s" % (msg, out))
    sys.exit(1)


def run(sbr_perf, args, memlock=None):
    cmd = [sbr_perf, "check"] + args
    pre = None
    if memlock is not None:
        if os.geteuid() == 0:
            setpriv = shutil.which("setpriv")
            if not setpriv:
                fail("setpriv (util-linux) is needed to drop CAP_IPC_LOCK")
            cmd = [setpriv, "--bounding-set", "-ipc_lock"] + cmd

        def pre():
            hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
            soft = memlock if hard == resource.RLIM_INFINITY else min(memlock, hard)
            resource.setrlimit(resource.RLIMIT_MEMLOCK, (soft, hard))

    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                       preexec_fn=pre)
    sys.stderr.write("$ %s -> %d\n%s%s" % (" ".join(cmd), p.returncode,
                                            p.stdout, p.stderr))
    for line in p.stdout.splitlines():
        if not LINE.match(line):
            fail("not an OK/WARN/FAIL line: %r" % line)
    return p.returncode, p.stdout.splitlines()


def expect(lines, pattern, what):
    for line in lines:
        if re.search(pattern, line):
            return line
    fail("no line for %s (/%s/)" % (what, pattern), "\n".join(lines) + "\n")


def memlock_verdicts(sbr_perf, rc_expected):
    # 8 MiB is below one default lane (16 x 1 MiB).
    rc, lines = run(sbr_perf, [], memlock=8 * MIB)
    if rc != rc_expected:
        fail("exit status %d with a memlock FAIL, wanted %d" % (rc, rc_expected))
    expect(lines, r"^FAIL memlock: the limit, 8 MiB, is below one lane "
           r"\(16 x 1 MiB\).*ulimit -l unlimited.*LimitMEMLOCK=infinity"
           r".*IPC_LOCK", "memlock below a lane")
    # 64 KiB blocks: 7 lanes fit in 8 MiB, a receiver may take 8.
    rc, lines = run(sbr_perf, ["--block-size", "64k"], memlock=8 * MIB)
    expect(lines, r"^WARN memlock: the limit, 8 MiB, holds 7 lane\(s\) of "
           r"16 x 64 KiB, a receiver takes up to 8", "memlock below 8 lanes")
    rc, lines = run(sbr_perf, ["--block-size", "64k", "--lanes", "1"],
                    memlock=8 * MIB)
    expect(lines, r"^OK   memlock: 8 MiB, enough for 1 lane\(s\) of 16 x 64 KiB$", "memlock enough")


def host(sbr_perf):
    if os.path.isdir("/sys/class/infiniband") and os.listdir("/sys/class/infiniband"):
        print("SKIP: this host has RDMA devices; the VM test covers them")
        sys.exit(77)
    rc, lines = run(sbr_perf, [])
    if rc != 3:
        fail("exit status %d without RDMA, wanted 3" % rc)
    expect(lines, r"^WARN RDMA: none on this host .*transport=shm", "no RDMA")
    expect(lines, r"^(OK  |WARN) huge pages: ", "huge pages")
    memlock_verdicts(sbr_perf, 3)
    rc, _ = run(sbr_perf, ["one", "two"])
    if rc != 2:
        fail("exit status %d for two peers, wanted 2" % rc)


def vm(sbr_perf):
    addr = os.environ.get("SBR_RDMA_ADDR", "10.77.0.1")
    dev = os.environ.get("SBR_RDMA_DEV", "rxe0")
    rc, lines = run(sbr_perf, [addr])
    fails = [line for line in lines if line.startswith("FAIL")]
    if rc != 0 or fails:
        fail("exit status %d, FAIL lines %s" % (rc, fails))
    d = re.escape(dev)
    kind = expect(lines, r"^OK   %s port 1: (RoCE v2|iWARP)" % d, "transport")
    expect(lines, r"^OK   %s port 1: ACTIVE$" % d, "port state")
    if "iWARP" in kind:
        # The same suite runs over soft-iWARP too (issue 18 item 7).
        expect(lines, r"^OK   %s port 1 MTU: iWARP runs over TCP" % d, "MTU")
        expect(lines, r"^OK   %s: no type-2 memory windows" % d, "windows")
    else:
        expect(lines, r"^OK   %s port 1: RoCE v2, netdev veth0$" % d,
               "transport")
        expect(lines, r"^OK   %s port 1 MTU: active 4096, netdev veth0 MTU "
               r"9000$" % d, "MTU")
        expect(lines, r"^OK   %s port 1: RoCE v2 GIDs for .*%s \(GID \d+\)"
               % (d, re.escape(addr)), "RoCE v2 GID")
        expect(lines, r"^OK   %s: type-2B memory windows" % d, "windows")
    expect(lines, r"^OK   %s: inline data: \d+ bytes" % d, "inline")
    # rxe and siw have a completion vector per CPU.
    expect(lines, r"^OK   %s: no NUMA node \(lanes' memory is not bound\), "
           r"\d+ completion vector" % d, "NUMA node and vectors")
    expect(lines, r"^(OK  |WARN) huge pages: ", "huge pages")
    expect(lines, r"^OK   rdma_cm: %s resolves through %s port 1, from %s$"
           % (re.escape(addr), d, re.escape(addr)), "rdma_cm")
    expect(lines, r"^OK   memlock", "memlock (root in the VM)")
    # TEST-NET-1: no RDMA device routes there.
    rc, lines = run(sbr_perf, ["192.0.2.1"])
    if rc != 1:
        fail("exit status %d for an unreachable peer, wanted 1" % rc)
    expect(lines, r"^FAIL rdma_cm: no address to 192\.0\.2\.1 .*ip route get",
           "unreachable peer")
    memlock_verdicts(sbr_perf, 1)


if __name__ == "__main__":
    {"host": host, "vm": vm}[sys.argv[2]](sys.argv[1])
    print("ok")
