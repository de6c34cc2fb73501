#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The soak: twelve cameras for a given time, with faults, every frame checked.

    tests/soak/soak.py --minutes 60 --transport shm --out /work/soak-out/shm
    tests/soak/soak.py --minutes 1 ...            # quick mode, for development

Runs build/tests/soak/sbr-soak as a receiver and a sender (twelve camera
threads, one connection), injects a fault every --fault-every minutes,
cycling through --faults:

    stall          the receiver's consumer holds every block it receives for
                   --stall-s seconds, then releases them (SIGUSR1)
    sender-kill    SIGKILL the sender, start a new one --down-s later
    receiver-kill  SIGKILL the receiver, start a new one --down-s later
                   (the sender reconnects by itself)
    link-down      verbs only: `ip link set NETDEV down`, --link-down-s
                   later `up` (in the Soft-RoCE VM: veth0 under rxe0)

and every --sample-every seconds records each process's RSS, open fds,
threads, memfd mappings, CPU and the receiver's lanes.  At the end it
writes into --out: report.md, windows.csv (frames per fault window),
samples.csv, and keeps the two ends' logs and state files.

Frames are named by camera tick (sbr-soak.c explains), so every lost frame
has a time, and each loss is attributed to the fault window it fell in and
to the fault itself when it happened between shortly before the fault and
shortly after the stream resumed.  Losses anywhere else count against the
run.  Exit status: 0 when the verdict holds (no bad frame, no loss outside
injected faults, every fault resumed, RSS growth after warm-up under 1 %),
1 otherwise, 2 on bad options.
"""

import argparse
import csv
import json
import os
import signal
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
NS = 1_000_000_000

# sbr-soak.c's state layouts (static_assert'ed there).
TX_HDR_SIZE = 128
RX_HDR_SIZE = 256
HEAP = struct.Struct("<3Q")  # in_use arena mmapped (mallinfo2)
TX_HEAP_AT = 64
RX_HEAP_AT = 128
TX_HDR = struct.Struct("<II7Q")  # magic version devices pid starts connected
#                                  reconnects disconnects epoch_ns
TX_DEV = struct.Struct("<8Q")
RX_HDR = struct.Struct("<II14Q")
RX_DEV = struct.Struct("<16Q")
TX_DEV_FIELDS = ("next_tick", "handed", "drop_eagain", "drop_notconn",
                 "drop_late", "drop_down", "drop_other")
RX_HDR_FIELDS = ("devices", "pid", "starts", "listening", "lanes_active",
                 "lanes_opened", "lanes_closed", "blocks_held", "stalls",
                 "stalled", "stall_end_ns", "frames_copied", "lib_rejected",
                 "refused")
RX_DEV_FIELDS = ("last_tick", "received", "verified", "errors", "lost",
                 "eos_tick", "last_arrival", "first_tick", "lib_gaps",
                 "lib_drops", "lib_rejected")

# A fault's span, for attributing losses: frames already queued or landed
# when the fault hit are a little older than it.
SPAN_BEFORE_NS = 2 * NS
SPAN_AFTER_NS = 2 * NS


def mono_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def read_tx(path, devices):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if len(data) < TX_HDR_SIZE + TX_DEV.size * devices:
        return None
    h = TX_HDR.unpack_from(data, 0)
    st = dict(zip(("magic", "version", "devices", "pid", "starts",
                   "connected", "reconnects", "disconnects", "epoch_ns"), h))
    st["heap"] = dict(zip(("in_use", "arena", "mmapped"),
                          HEAP.unpack_from(data, TX_HEAP_AT)))
    st["dev"] = [dict(zip(TX_DEV_FIELDS,
                          TX_DEV.unpack_from(data,
                                             TX_HDR_SIZE + i * TX_DEV.size)))
                 for i in range(devices)]
    return st


def read_rx(path, devices):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    # Files of the first version had a 128-byte header and no heap.
    hdr_size = RX_HDR_SIZE if len(data) == RX_HDR_SIZE + 64 * RX_DEV.size \
        else 128
    if len(data) < hdr_size + RX_DEV.size * devices:
        return None
    h = RX_HDR.unpack_from(data, 0)
    st = dict(zip(("magic", "version") + RX_HDR_FIELDS, h))
    st["heap"] = dict(zip(("in_use", "arena", "mmapped"),
                          HEAP.unpack_from(data, RX_HEAP_AT))) \
        if hdr_size == RX_HDR_SIZE else {}
    st["dev"] = [dict(zip(RX_DEV_FIELDS,
                          RX_DEV.unpack_from(data,
                                             hdr_size + i * RX_DEV.size)))
                 for i in range(devices)]
    return st


def proc_sample(pid):
    """RSS (kB), fds, threads, memfd mappings and CPU seconds of pid."""
    s = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "RssAnon", "RssFile", "RssShmem"):
                    s[k] = int(v.split()[0])
                elif k == "Threads":
                    s[k] = int(v)
        s["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
        with open(f"/proc/{pid}/maps") as f:
            s["memfd_maps"] = sum(1 for line in f if "/memfd:" in line)
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        tck = os.sysconf("SC_CLK_TCK")
        s["cpu_s"] = (int(fields[11]) + int(fields[12])) / tck
    except (OSError, ValueError, IndexError):
        return None
    return s


class Soak:
    def __init__(self, a):
        self.a = a
        self.out = a.out
        os.makedirs(self.out, exist_ok=True)
        self.p = lambda name: os.path.join(self.out, name)
        for name in ("tx.state", "rx.state", "tx.log", "rx.log", "tx.out",
                     "rx.out", "driver.log", "samples.csv", "run.json"):
            if os.path.exists(self.p(name)) and not a.reanalyse:
                os.unlink(self.p(name))
        self.period_ns = int(round(NS / a.rate))
        self.tx = None
        self.rx = None
        self.incarnations = []  # dicts: role pid start_ns end_ns how
        self.samples = []
        self.faults = []
        self.unexpected = []
        self.last_cpu = {}
        self.next_sample = 0

    def log(self, msg):
        line = f"{(mono_ns() - self.t0) / NS:9.3f} {msg}"
        print(line, flush=True)
        with open(self.p("driver.log"), "a") as f:
            f.write(line + "\n")

    # -------------------------------------------------------- processes

    def common_args(self):
        a = self.a
        return ["--backend", a.transport, "--port", str(a.port),
                "--devices", str(a.devices), "--size", str(a.size),
                "--rate", str(a.rate), "--block-size", str(a.block_size),
                "--blocks", str(a.blocks)]

    def spawn(self, role):
        a = self.a
        if role == "rx":
            args = [a.binary, "receive", "--address", a.address,
                    "--stall-ms", str(int(a.stall_s * 1000))]
        else:
            args = [a.binary, "send", "--host", a.host,
                    "--epoch-ns", str(self.epoch_ns),
                    "--max-lag-ms", str(a.max_lag_ms),
                    "--wait-timeout-ms", str(a.wait_timeout_ms)]
        args += self.common_args() + ["--state", self.p(f"{role}.state"),
                                      "--log", self.p(f"{role}.log")]
        out = open(self.p(f"{role}.out"), "ab")
        nice = self.a.nice
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL,
                                preexec_fn=(lambda: os.nice(nice))
                                if nice else None)
        out.close()
        self.incarnations.append({"role": role, "pid": proc.pid,
                                  "start_ns": mono_ns(), "end_ns": None,
                                  "how": None})
        setattr(self, role, proc)
        self.log(f"started {role} pid {proc.pid}")
        if role == "rx":
            self.wait_for(lambda: (lambda s: s and s["pid"] == proc.pid
                                   and s["listening"])(self.rxs()),
                          30, "the receiver to listen")
        return proc

    def ended(self, proc, how):
        for inc in self.incarnations:
            if inc["pid"] == proc.pid and inc["end_ns"] is None:
                inc["end_ns"] = mono_ns()
                inc["how"] = how

    def kill(self, role):
        proc = getattr(self, role)
        self.sample(force=True)  # the victim's last figures
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        self.ended(proc, "SIGKILL")
        self.log(f"killed {role} pid {proc.pid}")

    def check_alive(self):
        for role in ("rx", "tx"):
            proc = getattr(self, role)
            if proc is not None and proc.poll() is not None:
                self.ended(proc, f"exit {proc.returncode}")
                msg = f"{role} pid {proc.pid} exited by itself " \
                      f"({proc.returncode}); restarted"
                self.unexpected.append(msg)
                self.log(msg)
                self.spawn(role)

    def rxs(self):
        return read_rx(self.p("rx.state"), self.a.devices)

    def txs(self):
        return read_tx(self.p("tx.state"), self.a.devices)

    def wait_for(self, cond, timeout_s, what):
        until = mono_ns() + int(timeout_s * NS)
        while mono_ns() < until:
            if cond():
                return True
            self.sample()
            time.sleep(0.01)
        self.log(f"gave up waiting for {what} after {timeout_s} s")
        return False

    def pause(self, seconds):
        """Sleeps, sampling on time meanwhile."""
        until = mono_ns() + int(seconds * NS)
        while mono_ns() < until:
            self.sample()
            time.sleep(0.01)

    # --------------------------------------------------------- sampling

    def sample(self, force=False):
        now = mono_ns()
        if not force and now < self.next_sample:
            return
        if not force:
            self.next_sample += int(self.a.sample_every * NS)
        rxs = self.rxs() or {"dev": []}
        txs = self.txs() or {"dev": []}
        received = sum(d["received"] for d in rxs["dev"])
        handed = sum(d["handed"] for d in txs["dev"])
        # How far the slowest camera is behind its clock, in frames.
        lag = ""
        if txs.get("epoch_ns") and now > txs["epoch_ns"]:
            cur = (now - txs["epoch_ns"]) // self.period_ns
            lag = max(cur - d["next_tick"] + 1 for d in txs["dev"])
        for role in ("rx", "tx"):
            proc = getattr(self, role)
            if proc is None or proc.poll() is not None:
                continue
            s = proc_sample(proc.pid)
            if s is None:
                continue
            st = rxs if role == "rx" else txs
            heap = st.get("heap", {}) if st.get("pid") == proc.pid else {}
            prev = self.last_cpu.get(proc.pid)
            cpu_pct = ""
            if prev:
                dt = (now - prev[0]) / NS
                cpu_pct = round((s["cpu_s"] - prev[1]) / dt * 100, 1) \
                    if dt > 0 else ""
            self.last_cpu[proc.pid] = (now, s["cpu_s"])
            self.samples.append({
                "t_s": round((now - self.t0) / NS, 3), "role": role,
                "pid": proc.pid, "rss_kb": s.get("VmRSS", 0),
                "anon_kb": s.get("RssAnon", 0), "file_kb": s.get("RssFile", 0),
                "shmem_kb": s.get("RssShmem", 0), "threads": s.get("Threads"),
                "fds": s["fds"], "memfd_maps": s["memfd_maps"],
                "cpu_s": round(s["cpu_s"], 2), "cpu_pct": cpu_pct,
                "lanes_active": rxs.get("lanes_active", ""),
                "lanes_opened": rxs.get("lanes_opened", ""),
                "lanes_closed": rxs.get("lanes_closed", ""),
                "frames_received": received, "frames_handed": handed,
                "sender_lag_frames": lag,
                "heap_in_use_kb": heap.get("in_use", 0) // 1024 if heap
                else "",
                "heap_arena_kb": heap.get("arena", 0) // 1024 if heap
                else "",
                "forced": int(force),
                "loadavg_1min": float(open("/proc/loadavg").read().split()[0])})
            # Written as it goes: a run that dies still leaves its samples.
            new = not os.path.exists(self.p("samples.csv"))
            with open(self.p("samples.csv"), "a", newline="") as f:
                w = csv.DictWriter(f, list(self.samples[-1].keys()))
                if new:
                    w.writeheader()
                w.writerow(self.samples[-1])

    # ----------------------------------------------------------- faults

    def inject(self, kind):
        a = self.a
        f = {"kind": kind, "start_ns": mono_ns()}
        self.log(f"fault {len(self.faults) + 1}: {kind}")
        if kind == "stall":
            stalls = self.rxs()["stalls"]
            self.rx.send_signal(signal.SIGUSR1)
            self.wait_for(lambda: self.rxs()["stalls"] > stalls,
                          a.stall_s + 30, "the stall to end")
            f["end_ns"] = self.rxs()["stall_end_ns"] or mono_ns()
        elif kind in ("sender-kill", "receiver-kill"):
            role = "tx" if kind == "sender-kill" else "rx"
            self.kill(role)
            self.pause(a.down_s)
            f["end_ns"] = mono_ns()
            self.spawn(role)
        elif kind == "link-down":
            subprocess.run(["ip", "link", "set", a.netdev, "down"],
                           check=True)
            self.pause(a.link_down_s)
            subprocess.run(["ip", "link", "set", a.netdev, "up"], check=True)
            f["end_ns"] = mono_ns()
        else:
            raise ValueError(kind)
        # Resumed once every camera delivered a frame after the fault ended.
        first = {}

        def resumed():
            st = self.rxs()
            if not st:
                return False
            for d, dv in enumerate(st["dev"]):
                if d not in first and dv["last_arrival"] > f["end_ns"]:
                    first[d] = dv["last_arrival"]
            return len(first) == a.devices

        if self.wait_for(resumed, a.resume_timeout, "the stream to resume"):
            f["resume_ns"] = max(first.values())
        else:
            f["resume_ns"] = None
        self.faults.append(f)
        self.log(f"fault {len(self.faults)} over: resumed "
                 + (f"{(f['resume_ns'] - f['end_ns']) / NS:.3f} s after it "
                    "ended" if f["resume_ns"] else "NEVER"))

    # -------------------------------------------------------------- run

    def run(self):
        a = self.a
        self.t0 = mono_ns()
        self.epoch_ns = self.t0
        self.next_sample = self.t0
        self.log(f"soak: {a.devices} cameras, {a.size} B at {a.rate} fps, "
                 f"{a.transport}, {a.minutes} min, a fault every "
                 f"{a.fault_every} min from {a.faults}")
        self.spawn("rx")
        self.spawn("tx")
        self.wait_for(lambda: all(d["first_tick"]
                                  for d in self.rxs()["dev"]), 60,
                      "every camera's first frame")
        self.run_start = mono_ns()
        end = self.run_start + int(a.minutes * 60 * NS)
        every = int(a.fault_every * 60 * NS)
        kinds = a.faults
        k = 0
        while True:
            now = mono_ns()
            if now >= end:
                break
            due = self.run_start + (k + 1) * every if every else None
            kind = kinds[k % len(kinds)] if kinds else None
            # A fault must end, and the stream resume, before the run does.
            if due and now >= due and due + int(a.fault_budget_s * NS) < end:
                self.inject(kind)
                k += 1
            elif due and now >= due:
                k += 1
            self.check_alive()
            self.sample()
            time.sleep(0.05)
        self.sample(force=True)
        self.stop()
        with open(self.p("run.json"), "w") as f:
            json.dump({"t0": self.t0, "run_start": self.run_start,
                       "stop_ns": self.stop_ns, "faults": self.faults,
                       "incarnations": self.incarnations,
                       "unexpected": self.unexpected}, f, indent=1)
        return self.analyse()

    def load(self):
        """Reads back a finished run (--reanalyse): run.json, or for a run
        made before it existed, driver.log and the ends' logs."""
        self.samples = []
        with open(self.p("samples.csv")) as f:
            for row in csv.DictReader(f):
                for k, v in row.items():
                    if k != "role" and v not in ("", None):
                        row[k] = float(v) if "." in v else int(v)
                self.samples.append(row)
        if os.path.exists(self.p("run.json")):
            with open(self.p("run.json")) as f:
                r = json.load(f)
            self.t0, self.run_start = r["t0"], r["run_start"]
            self.stop_ns, self.faults = r["stop_ns"], r["faults"]
            self.incarnations = r["incarnations"]
            self.unexpected = r["unexpected"]
            return
        # driver.log times are seconds from t0, the sender's epoch.
        self.t0 = self.txs()["epoch_ns"]
        stall_ends = []
        with open(self.p("rx.log")) as f:
            for line in f:
                w = line.split()
                if w[:1] == ["event"] and "stall ends" in line:
                    stall_ends.append(int(w[1]))
        firsts = []
        with open(self.p("rx.log")) as f:
            firsts = [int(line.split()[3]) for line in f
                      if line.startswith("first ")]
        self.run_start = max(firsts)
        self.incarnations, self.faults, self.unexpected = [], [], []
        ns = lambda t: self.t0 + int(float(t) * NS)  # noqa: E731
        with open(self.p("driver.log")) as f:
            lines = [ln.split() for ln in f]
        for w in lines:
            if len(w) < 2:
                continue
            t = ns(w[0])
            if w[1] == "started":
                role, pid = w[2], int(w[4])
                self.incarnations.append({"role": role, "pid": pid,
                                          "start_ns": t, "end_ns": None,
                                          "how": None})
                if self.faults and self.faults[-1].get("end_ns") is None:
                    self.faults[-1]["end_ns"] = t
            elif w[1] == "killed":
                for inc in self.incarnations:
                    if inc["pid"] == int(w[4]):
                        inc["end_ns"], inc["how"] = t, "SIGKILL"
            elif w[1] == "fault" and w[2].endswith(":"):
                self.faults.append({"kind": w[3], "start_ns": t,
                                    "end_ns": None})
            elif w[1] == "fault" and w[3] == "over:":
                f = self.faults[-1]
                if f["kind"] == "stall":
                    f["end_ns"] = min((e for e in stall_ends
                                       if e > f["start_ns"]),
                                      default=t)
                f["resume_ns"] = (f["end_ns"] + int(float(w[5]) * NS)
                                  if w[4] == "resumed" and w[5] != "NEVER"
                                  else None)
            elif w[1] == "stopping:":
                self.stop_ns = t
        for inc in self.incarnations:
            if inc["end_ns"] is None:
                inc["end_ns"], inc["how"] = self.stop_ns, "end of run"

    def stop(self):
        self.log("stopping: SIGTERM to the sender, the receiver ends at EOS")
        self.stop_ns = mono_ns()
        self.tx.send_signal(signal.SIGTERM)
        try:
            rc = self.tx.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.tx.kill()
            rc = "hung, killed"
            self.unexpected.append("the sender did not stop within 60 s")
        self.ended(self.tx, f"SIGTERM, exit {rc}")
        try:
            rc = self.rx.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.rx.send_signal(signal.SIGTERM)
            rc = self.rx.wait(timeout=30)
            self.unexpected.append("the receiver did not see every EOS")
        self.ended(self.rx, f"exit {rc}")
        self.log(f"stopped (receiver exit {rc})")

    # --------------------------------------------------------- analysis

    def analyse(self):
        a = self.a
        P = self.period_ns
        txs = self.txs()
        rxs = self.rxs()
        epoch = txs["epoch_ns"]
        gaps, drops, errors, firsts = [], [], [], {}
        with open(self.p("rx.log")) as f:
            for line in f:
                w = line.split()
                if w[0] == "gap":
                    gaps.append((int(w[1]), int(w[2]), int(w[3])))
                elif w[0] == "first":
                    firsts[int(w[1])] = int(w[2])
                elif w[0] == "error":
                    errors.append(line.strip())
        with open(self.p("tx.log")) as f:
            for line in f:
                w = line.split()
                if w[0] == "drop":
                    drops.append((int(w[1]), int(w[2]), int(w[3]), w[4]))

        def tick_at(t_ns):  # first tick due at or after t_ns
            return max(0, -((epoch - t_ns) // P))

        def overlap(a0, a1, b0, b1):
            return max(0, min(a1, b1) - max(a0, b0))

        # Windows: before the first fault, then one per fault.  Counting
        # starts --settle-s after every camera's first frame: what is lost
        # while two fresh processes fault their memory in on a busy host
        # is start-up, reported apart.
        count_from = self.run_start + int(a.settle_s * NS)
        # A fault's window opens a little before it, with its span, so the
        # frames already queued when it hit count with it.
        bounds = [count_from] + [max(count_from, f["start_ns"] - SPAN_BEFORE_NS)
                                 for f in self.faults] + [None]
        windows = []
        for i in range(len(bounds) - 1):
            lo = tick_at(bounds[i])
            hi = tick_at(bounds[i + 1]) if bounds[i + 1] else 1 << 62
            fault = self.faults[i - 1] if i else None
            windows.append({"lo": lo, "hi": hi, "fault": fault})
        startup_lost = sum(overlap(0, tick_at(count_from), first, first + n)
                           for _, first, n in gaps)

        spans = []
        for f in self.faults:
            end = f["resume_ns"] or (f["end_ns"] + a.resume_timeout * NS)
            spans.append((tick_at(f["start_ns"] - SPAN_BEFORE_NS),
                          tick_at(end + SPAN_AFTER_NS)))

        rows = []
        outside_total = 0
        outside_detail = []
        outside_why = {}
        for i, w in enumerate(windows):
            r = {"window": i, "fault": w["fault"]["kind"] if w["fault"]
                 else "none (start)",
                 "start_s": round(((w["fault"]["start_ns"] if w["fault"]
                                    else count_from) - self.t0) / NS, 1),
                 "expected": 0, "lost": 0, "lost_in_fault": 0,
                 "lost_outside_fault": 0}
            for reason in ("eagain", "notconn", "late", "down", "other"):
                r["sender_" + reason] = 0
            for d in range(a.devices):
                dv = rxs["dev"][d]
                if not dv["first_tick"]:
                    continue
                d0 = dv["first_tick"] - 1
                d1 = (dv["eos_tick"] - 1) if dv["eos_tick"] \
                    else dv["last_tick"]
                r["expected"] += overlap(w["lo"], w["hi"], d0, d1)
            for d, first, n in gaps:
                lost = overlap(w["lo"], w["hi"], first, first + n)
                if not lost:
                    continue
                r["lost"] += lost
                # The parts that no fault's span covers, and why the
                # sender did not send them (none: lost in transport).
                pieces = [(max(first, w["lo"]), min(first + n, w["hi"]))]
                for s0, s1 in spans:
                    pieces = [q for p0, p1 in pieces
                              for q in ((p0, min(p1, s0)), (max(p0, s1), p1))
                              if q[0] < q[1]]
                outside = sum(p1 - p0 for p0, p1 in pieces)
                r["lost_in_fault"] += lost - outside
                r["lost_outside_fault"] += outside
                why = {}
                for dd, f0, fn, reason in drops:
                    if dd == d:
                        for p0, p1 in pieces:
                            why[reason] = why.get(reason, 0) + overlap(
                                p0, p1, f0, f0 + fn)
                why["transport"] = outside - sum(why.values())
                for k, v in why.items():
                    outside_why[k] = outside_why.get(k, 0) + v
                if outside:
                    outside_detail.append(
                        f"device {d}: {outside} of ticks {first}.."
                        f"{first + n - 1} (t = "
                        f"{(epoch + first * P - self.t0) / NS:.1f} s): "
                        + ", ".join(f"{k} {v}" for k, v in why.items() if v))
            for d, first, n, reason in drops:
                key = "sender_" + reason
                r[key] = r.get(key, 0) + overlap(w["lo"], w["hi"], first,
                                                 first + n)
            sender_dropped = sum(r["sender_" + x] for x in
                                 ("eagain", "notconn", "late", "down",
                                  "other"))
            r["received"] = r["expected"] - r["lost"]
            r["sent"] = r["expected"] - sender_dropped
            r["lost_in_transport"] = r["lost"] - sender_dropped
            f = w["fault"]
            r["fault_s"] = round((f["end_ns"] - f["start_ns"]) / NS, 3) \
                if f else ""
            r["resume_s"] = (round((f["resume_ns"] - f["end_ns"]) / NS, 3)
                             if f["resume_ns"] else "never") if f else ""
            r["outage_s"] = (round((f["resume_ns"] - f["start_ns"]) / NS, 3)
                             if f["resume_ns"] else "never") if f else ""
            outside_total += r["lost_outside_fault"]
            rows.append(r)

        # Memory and fds per process incarnation, after warm-up.
        incs = []
        for inc in self.incarnations:
            ss = [s for s in self.samples if s["pid"] == inc["pid"]]
            if not ss:
                continue
            warm_at = (inc["start_ns"] - self.t0) / NS + a.warmup_min * 60
            warm = [s for s in ss if s["t_s"] >= warm_at]
            lived = ((inc["end_ns"] or mono_ns()) - inc["start_ns"]) / NS
            g = None
            if len(warm) >= 2:
                g = (warm[-1]["rss_kb"] - warm[0]["rss_kb"]) \
                    / warm[0]["rss_kb"] * 100
            incs.append({
                "role": "receiver" if inc["role"] == "rx" else "sender",
                "pid": inc["pid"], "lived_min": round(lived / 60, 1),
                "ended": inc["how"], "samples": len(ss),
                "rss_first_kb": ss[0]["rss_kb"],
                "rss_warm_kb": warm[0]["rss_kb"] if warm else "",
                "rss_last_kb": ss[-1]["rss_kb"],
                "rss_max_kb": max(s["rss_kb"] for s in ss),
                "growth_pct": round(g, 2) if g is not None else "",
                "fds_first": ss[0]["fds"], "fds_last": ss[-1]["fds"],
                "memfd_first": ss[0]["memfd_maps"],
                "memfd_last": ss[-1]["memfd_maps"],
                "threads_first": ss[0]["threads"],
                "threads_last": ss[-1]["threads"],
                # malloc's live bytes (mallinfo2): a leak shows here even
                # when it is too small for RSS.
                "heap_warm_kb": next((x["heap_in_use_kb"] for x in warm
                                      if x.get("heap_in_use_kb", "") != ""),
                                     ""),
                "heap_last_kb": next((x["heap_in_use_kb"]
                                      for x in reversed(ss)
                                      if x.get("heap_in_use_kb", "") != ""),
                                     "")})

        totals = {k: sum(d[k] for d in rxs["dev"])
                  for k in ("received", "verified", "errors", "lost",
                            "lib_rejected")}
        handed = sum(d["handed"] for d in txs["dev"])
        growths = [i["growth_pct"] for i in incs if i["growth_pct"] != ""]
        verdict = []
        if totals["errors"] or errors:
            verdict.append(f"{totals['errors']} bad frames")
        if totals["verified"] != totals["received"]:
            verdict.append("not every received frame verified")
        if outside_total:
            verdict.append(
                f"{outside_total} frames lost outside injected faults ("
                + ", ".join(f"{k} {v}" for k, v in sorted(outside_why.items())
                            if v) + ")")
        if any(f["resume_ns"] is None for f in self.faults):
            verdict.append("a fault after which the stream never resumed")
        if any(g >= 1.0 for g in growths):
            verdict.append("RSS grew 1 % or more after warm-up")
        if not growths:
            verdict.append("no process lived long enough past warm-up to "
                           "judge RSS")
        verdict += self.unexpected
        self.write_report(rows, incs, totals, handed, errors, outside_detail,
                          verdict, rxs, txs, startup_lost)
        return 0 if not verdict else 1

    def write_report(self, rows, incs, totals, handed, errors,
                     outside_detail, verdict, rxs, txs, startup_lost):
        a = self.a
        cols = ["window", "fault", "start_s", "fault_s", "resume_s",
                "outage_s", "expected", "sent", "received", "lost",
                "lost_in_fault", "lost_outside_fault", "lost_in_transport",
                "sender_eagain", "sender_notconn", "sender_late",
                "sender_down", "sender_other"]
        with open(self.p("windows.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, cols, extrasaction="ignore")
            w.writeheader()
            w.writerows(rows)
        icols = list(incs[0].keys()) if incs else []
        with open(self.p("processes.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, icols)
            w.writeheader()
            w.writerows(incs)

        dur = (self.stop_ns - self.run_start) / NS / 60
        L = []
        L.append("<!-- SPDX-License-Identifier: LGPL-2.1-or-later -->")
        L.append(f"# Soak: {a.devices} cameras over {a.transport}, "
                 f"{dur:.1f} min")
        L.append("")
        L.append(f"Written by tests/soak/soak.py on "
                 f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
                 f"{' (' + a.note + ')' if a.note else ''}.")
        L.append("")
        L.append(f"* Cameras: {a.devices} x {a.size} B frames at {a.rate} "
                 f"fps ({a.devices * a.size * a.rate / 1e6:.1f} MB/s), one "
                 f"sender process, one connection; lanes of {a.blocks} x "
                 f"{a.block_size} B blocks.")
        L.append(f"* Faults: one every {a.fault_every} min, cycling "
                 f"{', '.join(a.faults)}; kill-to-restart {a.down_s} s, stall "
                 f"{a.stall_s} s" + (f", link down {a.link_down_s} s"
                                     if "link-down" in a.faults else "")
                 + ".")
        if a.nice:
            L.append(f"* Both ends ran at niceness {a.nice}.")
        loads = [x["loadavg_1min"] for x in self.samples
                 if x.get("loadavg_1min", "") != ""]
        if loads:
            L.append(f"* Host: {os.cpu_count()} CPUs, 1-minute load average "
                     f"{sum(loads) / len(loads):.1f} on average over the "
                     f"samples, {max(loads):.1f} at most (other work on the "
                     "machine included).")
        L.append(f"* Samples every {a.sample_every} s; RSS growth measured "
                 f"from {a.warmup_min} min after each process started.")
        L.append(f"* Every frame's payload checked byte for byte; order "
                 "checked per camera.")
        L.append("")
        L.append("## Verdict")
        L.append("")
        if verdict:
            L.append("**FAILED**: " + "; ".join(verdict) + ".")
        else:
            L.append("**Passed**: no bad frame, 0 frames lost outside the "
                     "injected faults, the stream resumed after every fault, "
                     "RSS growth after warm-up under 1 % in every process.")
        L.append("")
        L.append(f"* Frames received {totals['received']}, verified "
                 f"{totals['verified']}, bad {totals['errors']}, lost "
                 f"{totals['lost']} (start-up {startup_lost}, the rest in the "
                 "windows below); handed to "
                 f"libsbr {handed}.")
        L.append(f"* Receiver: {rxs['starts']} starts, lanes opened "
                 f"{rxs['lanes_opened']} / closed {rxs['lanes_closed']} in "
                 f"the last one; sender: {txs['starts']} starts, "
                 f"{txs['reconnects']} reconnects.")
        if growths := [i for i in incs if i["growth_pct"] != ""]:
            worst = max(growths, key=lambda i: i["growth_pct"])
            longest = max(growths, key=lambda i: i["lived_min"])
            L.append(f"* RSS growth after warm-up: worst "
                     f"{worst['growth_pct']} % ({worst['role']} pid "
                     f"{worst['pid']}, {worst['lived_min']} min); longest-"
                     f"lived process {longest['growth_pct']} % ({longest['role']}, "
                     f"{longest['lived_min']} min).")
        L.append("")
        L.append("## Fault windows")
        L.append("")
        L.append(f"A window runs from {SPAN_BEFORE_NS // NS} s before its "
                 "fault to that before the next one.  Frames "
                 "are counted by camera tick: *expected* is what the cameras "
                 "produced, *sent* what libsbr accepted, *lost in fault* "
                 f"what went missing between {SPAN_BEFORE_NS // NS} s before "
                 f"the fault and {SPAN_AFTER_NS // NS} s after every camera "
                 "delivered again; *resume* is from the end of the fault "
                 "(restart, release, link up) to every camera delivering "
                 "again; *outage* from its start.  Sender-side drops: "
                 "eagain = no free block within the wait, notconn = "
                 "connection down, down = no sender running, late = a camera "
                 f"more than {a.max_lag_ms} ms behind its clock skipped it; "
                 "in the verdict, transport = accepted by libsbr and never "
                 "delivered.")
        L.append("")
        hdr = ["#", "fault", "at s", "fault s", "resume s", "outage s",
               "expected", "sent", "received", "lost in fault",
               "lost outside", "sender drops (eagain/notconn/down/late)"]
        L.append("| " + " | ".join(hdr) + " |")
        L.append("|" + "---|" * len(hdr))
        for r in rows:
            L.append("| " + " | ".join(str(x) for x in (
                r["window"], r["fault"], r["start_s"], r["fault_s"],
                r["resume_s"], r["outage_s"], r["expected"], r["sent"],
                r["received"], r["lost_in_fault"], r["lost_outside_fault"],
                f"{r['sender_eagain']}/{r['sender_notconn']}/"
                f"{r['sender_down']}/{r['sender_late']}")) + " |")
        if outside_detail:
            L.append("")
            L.append("Lost outside any fault:")
            L.append("")
            L += ["* " + x for x in outside_detail[:30]]
        L.append("")
        L.append(f"Counting starts {a.settle_s} s after every camera's first "
                 f"frame; frames lost before that (start-up): {startup_lost}.")
        L.append("")
        L.append("## Processes")
        L.append("")
        L.append("One line per process (each kill starts a new one).  RSS in "
                 "kB; growth from the first sample after warm-up to the "
                 "last.  memfd = shared-memory mappings (shm lanes); heap = "
                 "bytes in live malloc allocations (mallinfo2; glibc's "
                 "per-thread cache of up to 7 freed chunks per size counts "
                 "as live).")
        L.append("")
        hdr = ["role", "pid", "lived min", "ended", "RSS first", "RSS warm",
               "RSS last", "RSS max", "growth %", "fds first/last",
               "memfd first/last", "threads first/last",
               "heap kB warm/last"]
        L.append("| " + " | ".join(hdr) + " |")
        L.append("|" + "---|" * len(hdr))
        for i in incs:
            L.append("| " + " | ".join(str(x) for x in (
                i["role"], i["pid"], i["lived_min"], i["ended"],
                i["rss_first_kb"], i["rss_warm_kb"], i["rss_last_kb"],
                i["rss_max_kb"], i["growth_pct"],
                f"{i['fds_first']}/{i['fds_last']}",
                f"{i['memfd_first']}/{i['memfd_last']}",
                f"{i['threads_first']}/{i['threads_last']}",
                f"{i['heap_warm_kb']}/{i['heap_last_kb']}")) + " |")
        L.append("")
        L.append("## CPU")
        L.append("")
        for role, name in (("rx", "receiver"), ("tx", "sender")):
            pct = [s["cpu_pct"] for s in self.samples
                   if s["role"] == role and s["cpu_pct"] != ""
                   and not s["forced"]]
            if pct:
                L.append(f"* {name}: {sum(pct) / len(pct):.1f} % of a core "
                         f"on average over {len(pct)} sample intervals, max "
                         f"{max(pct):.1f} %.")
        if errors:
            L.append("")
            L.append("## Bad frames (first 20)")
            L.append("")
            L += ["    " + e for e in errors[:20]]
        L.append("")
        L.append("Files: windows.csv (the table above), processes.csv, "
                 "samples.csv (every sample), rx.log / tx.log (events, "
                 "gaps, drops), driver.log.")
        with open(self.p("report.md"), "w") as f:
            f.write("\n".join(L) + "\n")
        with open(self.p("summary.json"), "w") as f:
            json.dump({"verdict": verdict, "totals": totals, "handed": handed,
                       "faults": len(self.faults), "minutes": round(dur, 2),
                       "windows": rows, "processes": incs}, f, indent=1)
        self.log(f"report: {self.p('report.md')}: "
                 + ("FAILED: " + "; ".join(verdict) if verdict else "passed"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=60)
    ap.add_argument("--transport", choices=("shm", "verbs"), default="shm")
    ap.add_argument("--devices", type=int, default=12)
    ap.add_argument("--width", type=int, default=640)
    ap.add_argument("--height", type=int, default=480)
    ap.add_argument("--bytes-per-pixel", type=int, default=3)
    ap.add_argument("--size", type=int, help="frame bytes (default WxHxBPP)")
    ap.add_argument("--rate", type=float, default=25)
    ap.add_argument("--fault-every", type=float, help="minutes [5; quick 0.2]")
    ap.add_argument("--faults", help="comma list [stall,sender-kill,"
                    "receiver-kill, +link-down for verbs]")
    ap.add_argument("--down-s", type=float, default=2)
    ap.add_argument("--stall-s", type=float, default=5)
    ap.add_argument("--link-down-s", type=float, default=5)
    ap.add_argument("--resume-timeout", type=float, default=60)
    ap.add_argument("--sample-every", type=float,
                    help="seconds [60; quick 5]")
    ap.add_argument("--warmup-min", type=float, help="[2; quick 0.25]")
    ap.add_argument("--settle-s", type=float, default=5,
                    help="start counting this long after the first frames")
    ap.add_argument("--nice", type=int, default=0,
                    help="run both ends at this niceness (< 0 shields them "
                    "from a busy host's other work)")
    ap.add_argument("--max-lag-ms", type=int, default=1000,
                    help="a camera further behind its clock skips frames")
    ap.add_argument("--wait-timeout-ms", type=int, default=1000,
                    help="how long a camera waits for a free block")
    ap.add_argument("--block-size", type=int, default=1 << 20)
    ap.add_argument("--blocks", type=int, default=16)
    ap.add_argument("--port", type=int, default=7480)
    ap.add_argument("--host", default=os.environ.get("SBR_RDMA_ADDR",
                                                     "127.0.0.1"))
    ap.add_argument("--address", help="receiver bind [the host]")
    ap.add_argument("--netdev", default="veth0")
    ap.add_argument("--binary", default=os.path.join(
        ROOT, "build", "tests", "soak", "sbr-soak"))
    ap.add_argument("--out", default="soak-out")
    ap.add_argument("--note", default="", help="a line for the report")
    ap.add_argument("--reanalyse", action="store_true",
                    help="write the report of the finished run in --out "
                    "again (give the run's options too)")
    a = ap.parse_args()
    quick = a.minutes <= 2
    if a.size is None:
        a.size = a.width * a.height * a.bytes_per_pixel
    if a.fault_every is None:
        a.fault_every = 0.2 if quick else 5
    if a.sample_every is None:
        a.sample_every = 5 if quick else 60
    if a.warmup_min is None:
        a.warmup_min = 0.25 if quick else 2
    if a.address is None:
        a.address = a.host
    a.faults = a.faults.split(",") if a.faults else (
        ["stall", "sender-kill", "receiver-kill"]
        + (["link-down"] if a.transport == "verbs" else []))
    for k in a.faults:
        if k not in ("stall", "sender-kill", "receiver-kill", "link-down"):
            ap.error(f"unknown fault {k}")
    if "link-down" in a.faults and a.transport != "verbs":
        ap.error("link-down needs --transport verbs")
    a.fault_budget_s = max(a.down_s, a.stall_s, a.link_down_s) + 10
    if not os.access(a.binary, os.X_OK):
        ap.error(f"{a.binary} is not built (meson setup build && ninja -C "
                 "build)")
    soak = Soak(a)
    if a.reanalyse:
        soak.load()
        sys.exit(soak.analyse())
    try:
        rc = soak.run()
    finally:
        for role in ("rx", "tx"):
            proc = getattr(soak, role)
            if proc is not None and proc.poll() is None:
                proc.kill()
    sys.exit(rc)


if __name__ == "__main__":
    main()
