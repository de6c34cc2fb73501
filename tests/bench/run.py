#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The benchmark suite: runs everything, regenerates docs/benchmarks.md.

    tests/bench/run.py              # everything, ~17 min (one VM boot)
    tests/bench/run.py --quick      # fewer points, shorter runs, ~5 min
    tests/bench/run.py --no-vm      # host (shm) parts only
    tests/bench/run.py --only B2,B4 # some parts (B1 B2 B2X B3 B4 B7 B56 B8 B9 B10
                                    # B11 B12 VM);
                                    # the others keep the figures of the
                                    # last run in docs/bench/results.json
    tests/bench/run.py --render     # re-render the doc from the saved JSON

Writes docs/benchmarks.md, docs/bench/*.png and docs/bench/results.json
(every raw measurement).  Every figure is measured in the same run as its
baseline and printed as a ratio next to the absolute value.  It never fails
on a figure: this is a benchmark, not a test (the exit status is non-zero
only when the tools could not be run at all).

Parts (see docs/benchmarks.md for what each measures and how):
  B1  throughput and latency vs block size: shm (host) and verbs on
      Soft-RoCE (VM, emulated CPU) next to ib_write_bw / ib_write_lat
  B2  sync control latency vs number of blocks (sbr-bench sync)
  B3  sender CPU per GB (sbr-perf cpu_s) and engine instructions per block
      (callgrind)
  B4  one block held from 100 to 200 ms: throughput per 10 ms
      (sbr-bench timeline)
  B7  added round-trip delay (shm --delay-us) with sync-when-empty vs
      read-ahead sync
  B5  12 x 640x480 RGB at 25 fps through rdmasink/rdmasrc (shm): frames
      lost, CPU (tests/bench/gst_peers.py)
  B6  the same 12 streams flat out: rdmasink/rdmasrc vs shmsink/shmsrc vs
      TCP, frames/s and CPU per GB
  B8  12 live cameras, one consumer at 5 fps then stuck 5 s: the other
      eleven's frames/s over time and loss, per rdmasrc policy, next to
      the no-slow-consumer run and the single-streaming-thread rdmasrc
      (tests/bench/independence.py)

  B9  latency: capture -> delivery p50/p90/p99/max and the receiver's CPU,
      1 and 12 cameras at 640x480@25 RGB and 1920x1080@30 I420, per
      receiver waiting mode (busy/adaptive/backoff where the build has
      them): sbr-perf, and rdmasink -> rdmasrc -> appsink next to
      shmsink/shmsrc and tcp with the same pipelines
      (tests/bench/gst-latency), all over shm on the host; verbs in the
      VM (its own boot, unless --no-vm) as ratios to ib_write_lat /
      ib_read_lat.  tests/bench/run.py --only B9 re-runs just this part

  B10 many senders into one receiver: 1, 2, 4, 8 sender processes of 12
      live cameras (320x240@25 RGB) into one rdmasrc over shm, frames
      lost, receiver CPU per frame and p99 latency against the number of
      cameras (tests/bench/scale.py); the same with 3 cameras of 160x120
      a sender over verbs in the VM (its own boot, unless --no-vm)

  B11 big frames: 1, 6 and 12 cameras at 1080p and 4K, NV12 and RGB, flat
      out, each frame mapped once by the consumer: rdmasink/rdmasrc at
      their defaults against shmsink/shmsrc, frames/s, CPU per frame at
      both ends, maps that merged, memory pinned; and 6 x 1080p NV12 live,
      default against 4 MiB blocks (tests/bench/gst-frames, bigframes.py)

  B12 instructions per frame under callgrind, both ends, 12 x 640x480 RGB,
      6 x 1080p NV12 and 1 x 4K NV12, ours against shmsink/shmsrc, split
      into the pixel fill, copies and the rest (tests/bench/instructions.py)

  B2X how much of B2 is polling back-off: the library's back-off knobs and
      the threads' timer slack varied (evidence for the analysis)

Needs: a build (ninja -C build; sbr-bench is compiled here if the build has
none), /usr/bin/python3 with python3-matplotlib, valgrind (B3), python3-gi +
the rdma plugin (B5/B6; gstreamer1.0-plugins-bad for the shmsink row), the
Soft-RoCE VM runner and perftest (VM part).  The hand-written analysis is
tests/bench/analysis.md, appended to the generated file.
"""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
HEADER = 72  # block header + trailer bytes
KIB, MIB = 1024, 1024 * 1024

# ------------------------------------------------------------- plumbing


class Ctx:
    def __init__(self, args):
        self.args = args
        self.quick = args.quick
        self.build = os.path.abspath(args.build)
        self.perf = os.path.join(self.build, "tools/sbr-perf")
        self.bench = None
        self.port = 40000 + (os.getpid() % 500) * 40
        self.log_lines = []

    def next_port(self):
        self.port += 1
        if self.port > 60000:
            self.port = 40000
        return self.port

    def log(self, msg):
        sys.stderr.write(f"[bench {time.strftime('%H:%M:%S')}] {msg}\n")
        sys.stderr.flush()


def size_label(n):
    if n >= MIB and n % MIB == 0:
        return f"{n // MIB} MiB"
    if n >= KIB and n % KIB == 0:
        return f"{n // KIB} KiB"
    return f"{n} B"


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def fmt(v, digits=1, none="n/a"):
    if v is None:
        return none
    if isinstance(v, float) and abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.{digits}f}"


def fmt_ratio(v):
    return "n/a" if v is None else f"{v:.2f}"


def build_bench(ctx):
    """sbr-bench from the meson build if it is there, else compiled here."""
    meson_built = os.path.join(ctx.build, "tests/bench/sbr-bench")
    if os.path.exists(meson_built):
        return meson_built
    out = os.path.join(ctx.build, "bench/sbr-bench")
    src = os.path.join(HERE, "sbr-bench.c")
    lib = os.path.join(ctx.build, "lib")
    if (os.path.exists(out) and os.path.getmtime(out) > os.path.getmtime(src)
            and os.path.getmtime(out) > os.path.getmtime(os.path.join(lib, "libsbr.so"))):
        return out
    os.makedirs(os.path.dirname(out), exist_ok=True)
    cmd = [os.environ.get("CC", "cc"), "-O2", "-g", "-std=c11", "-D_GNU_SOURCE", "-Wall",
           "-I", os.path.join(TOP, "lib"), src, "-L", lib, "-lsbr", "-lpthread", "-lm",
           f"-Wl,-rpath,{lib}", "-o", out]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        ctx.log(f"cannot compile sbr-bench: {r.stdout[-500:]}")
        return None
    return out


def perf_pair(ctx, mech, size, seconds=None, count=None, blocks=16, rate=0, read_ahead=0,
              delay_us=0, devices=1, zero_copy=True, tx_blocks=None, hold_ms=0,
              wrap_tx=(), status_batch=0, rx_extra=()):
    """One sbr-perf receiver and sender over shm; returns (tx, rx) dicts or
    (None, None) with the error logged."""
    port = ctx.next_port()
    block = size + HEADER
    common = ["--backend", "shm", "--mechanism", mech, "--port", str(port), "--json"]
    rx_cmd = [ctx.perf, "receive", *common, "--block-size", str(block), "--blocks", str(blocks),
              "--devices", str(devices), "--timeout", "30"]
    if hold_ms:
        rx_cmd += ["--hold-ms", str(hold_ms)]
    rx_cmd += list(rx_extra)
    rx = subprocess.Popen(rx_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.2)
    tx_cmd = [*wrap_tx, ctx.perf, "send", "x", *common, "--size", str(size),
              "--devices", str(devices), "--blocks", str(tx_blocks or blocks)]
    if seconds:
        tx_cmd += ["--duration", str(seconds)]
    if count:
        tx_cmd += ["--count", str(count)]
    if rate:
        tx_cmd += ["--rate", str(rate)]
    if read_ahead:
        tx_cmd += ["--read-ahead", str(read_ahead)]
    if status_batch:
        tx_cmd += ["--status-batch", str(status_batch)]
    if delay_us:
        tx_cmd += ["--delay-us", str(delay_us)]
    if zero_copy:
        tx_cmd += ["--zero-copy"]
    try:
        tx = subprocess.run(tx_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            timeout=(seconds or 30) + 120)
        out, err = rx.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        rx.kill()
        rx.communicate()
        ctx.log(f"sbr-perf timed out: {' '.join(tx_cmd)}")
        return None, None
    try:
        txj = json.loads(tx.stdout)
    except json.JSONDecodeError:
        ctx.log(f"sbr-perf send failed ({' '.join(tx_cmd[-12:])}): {tx.stderr.strip()[-300:]}")
        return None, None
    try:
        rxj = json.loads(out)
    except json.JSONDecodeError:
        ctx.log(f"sbr-perf receive failed: {err.strip()[-300:]}")
        rxj = None
    if not txj.get("ok", False):
        ctx.log(f"sbr-perf send reported a failure: {txj.get('error')}")
    return txj, rxj


def run_bench(ctx, mode, args):
    if not ctx.bench:
        return None
    cmd = [ctx.bench, mode, "--port", str(ctx.next_port()), *map(str, args)]
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=120)
    except subprocess.TimeoutExpired:
        ctx.log(f"sbr-bench timed out: {' '.join(cmd)}")
        return None
    try:
        return json.loads(r.stdout)
    except json.JSONDecodeError:
        ctx.log(f"sbr-bench failed: {r.stderr.strip()[-300:]}")
        return None


def machine_info():
    info = {"date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M %Z").strip(),
            "nproc": os.cpu_count(), "kernel": platform.release(), "host": platform.node()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        with open("/proc/loadavg") as f:
            info["loadavg_start"] = f.read().split()[:3]
    except OSError:
        pass
    try:
        info["timer_slack_ns"] = int(open("/proc/self/timerslack_ns").read())
    except OSError:
        pass
    q = shutil.which("qemu-system-x86_64")
    if q:
        r = subprocess.run([q, "--version"], stdout=subprocess.PIPE, text=True)
        info["qemu"] = r.stdout.splitlines()[0] if r.stdout else "?"
    try:
        info["git"] = subprocess.run(["git", "-C", TOP, "rev-parse", "--short", "HEAD"],
                                     stdout=subprocess.PIPE, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", TOP, "status", "--porcelain", "lib", "tools"],
                               stdout=subprocess.PIPE, text=True).stdout.strip()
        info["git_dirty_lib"] = bool(dirty)
    except OSError:
        pass
    return info


# ------------------------------------------------------------------ B1


def b1_host(ctx):
    sizes = ([256, 4 * KIB, 64 * KIB, MIB] if ctx.quick else
             [64, 256, KIB, 4 * KIB, 16 * KIB, 64 * KIB, 256 * KIB, MIB, 4 * MIB, 8 * MIB])
    reps = 1 if ctx.quick else 2
    seconds = 1 if ctx.quick else 1.5
    rows = []
    for size in sizes:
        row = {"size": size, "status-byte": [], "sliding-window": [], "sb_cpu": [], "sw_cpu": [],
               "chain": []}
        # Up to 64 KiB also status-byte with one status WRITE per block (the
        # paper's two-WR chain, status_batch_bytes = 1): the same run's
        # before/after of status runs.
        kinds = ["status-byte", "sliding-window"] + (["chain"] if size <= 64 * KIB else [])
        for rep in range(reps):
            for kind in (kinds if rep % 2 == 0 else kinds[::-1]):
                mech = "status-byte" if kind == "chain" else kind
                tx, rx = perf_pair(ctx, mech, size, seconds=seconds,
                                   status_batch=1 if kind == "chain" else 0)
                row[kind].append(tx["throughput_mbps"] if tx and tx.get("ok") else None)
                if tx and kind == "status-byte":
                    row.setdefault("sb_sync", []).append(
                        (tx["sync_reads"], tx["frames"], tx["sync_read_mean_us"]))
        row["sb"] = median(row["status-byte"])
        row["sw"] = median(row["sliding-window"])
        row["sb_chain"] = median(row["chain"]) if row["chain"] else None
        ctx.log(f"B1 shm {size_label(size)}: status-byte {fmt(row['sb'])} MB/s, "
                f"sliding-window {fmt(row['sw'])} MB/s")
        rows.append(row)
    # Latency at a low rate: capture (sender's realtime clock before the
    # block is filled) to the receiving application (same host clock).
    lat_sizes = [64, 64 * KIB] if ctx.quick else [64, 4 * KIB, 64 * KIB, MIB]
    lat = []
    for size in lat_sizes:
        row = {"size": size}
        for mech in ["status-byte", "sliding-window"]:
            tx, rx = perf_pair(ctx, mech, size, seconds=2 if not ctx.quick else 1, rate=100)
            row[mech] = ({"mean_us": rx["latency_mean_us"], "max_us": rx["latency_max_us"],
                          "frames": rx["frames"]} if rx else None)
        ctx.log(f"B1 shm latency {size_label(size)}: {row}")
        lat.append(row)
    return {"throughput": rows, "latency": lat, "seconds": seconds, "reps": reps}


# In the VM the stats poller sleeps between polls: spinning on the emulated
# CPU (clock_gettime is a system call there) would starve what it measures.
VM_POLL_SLEEP_US = 50


def vm_jobs(ctx):
    """Everything the VM runs, in one list (one boot).  Each B1 point runs
    ib_write_bw and both mechanisms back to back (three times, in alternating
    order, in a full run): the VM's speed drifts with the host's load."""
    sizes = [256, 4 * KIB, 64 * KIB] if ctx.quick else [64, 256, 4 * KIB, 64 * KIB, 256 * KIB, MIB]
    secs = 2 if ctx.quick else 3
    # Three runs a point: two runs of one point in the VM differed by 20-40 %,
    # more than some of the gaps the targets ask about.
    reps = 1 if ctx.quick else 3
    jobs = []
    for rep in range(reps):
        for size in sizes:
            trio = [{"kind": "ib_write_bw", "size": size, "seconds": secs},
                    {"kind": "sbr_perf", "mechanism": "status-byte", "size": size,
                     "seconds": secs},
                    {"kind": "sbr_perf", "mechanism": "sliding-window", "size": size,
                     "seconds": secs}]
            if size <= 256:
                # Both mechanisms with 64 lane blocks: at small blocks both
                # are bound by one round trip per window.
                for mech in ("status-byte", "sliding-window"):
                    trio.append({"kind": "sbr_perf", "mechanism": mech, "size": size,
                                 "seconds": secs, "blocks": 64, "variant": "N=64"})
            if size <= 64 * KIB:
                # One status WRITE per block (the paper's two-WR chain): the
                # same run's before/after of status runs.
                trio.append({"kind": "sbr_perf", "mechanism": "status-byte", "size": size,
                             "seconds": secs, "status_batch": 1, "variant": "chain"})
            if size in (4 * KIB, 64 * KIB):
                # The window: the same with 64 lane blocks instead of 16; and
                # 16 blocks with read-ahead (READs while writing).
                trio.append({"kind": "sbr_perf", "mechanism": "status-byte", "size": size,
                             "seconds": secs, "blocks": 64, "variant": "N=64"})
                trio.append({"kind": "sbr_perf", "mechanism": "status-byte", "size": size,
                             "seconds": secs, "read_ahead": 8, "variant": "ra8"})
            if size >= 64 * KIB:
                # perftest's default keeps 128 WRITEs in flight; rxe copes badly with
                # 128 MiB outstanding: the same with 16 in flight, our window.
                trio.append({"kind": "ib_write_bw", "size": size, "seconds": secs,
                             "tx_depth": 16, "variant": "t16"})
            for j in (trio if rep % 2 == 0 else trio[::-1]):
                j.update({"part": "B1", "rep": rep})
                jobs.append(j)
    for size in ([64, 4 * KIB] if ctx.quick else [64, 4 * KIB, 64 * KIB]):
        jobs.append({"kind": "ib_write_lat", "size": size, "iters": 300, "part": "B1lat"})
        for mech in ["status-byte", "sliding-window"]:
            jobs.append({"kind": "sbr_perf", "mechanism": mech, "size": size, "seconds": 2,
                         "rate": 100, "part": "B1lat"})
    for n in ([4, 16] if ctx.quick else [3, 8, 16, 64]):
        for mech in ["status-byte", "sliding-window"]:
            jobs.append({"kind": "sbr_bench", "part": "B2", "mechanism": mech, "blocks": n,
                         "args": ["sync", "--mechanism", mech, "--blocks", str(n), "--size",
                                  "4096", "--duration-ms", "2000", "--warmup-ms", "200",
                                  "--poll-sleep-us", str(VM_POLL_SLEEP_US)]})
    for name, extra in [("timer slack 1 ns", ["--timer-slack-ns", "1"]),
                        ("max sleep 50 us", ["--max-sleep-us", "50"])]:
        for mech in ["status-byte", "sliding-window"]:
            jobs.append({"kind": "sbr_bench", "part": "B2X", "mechanism": mech, "variant": name,
                         "blocks": 16,
                         "args": ["sync", "--mechanism", mech, "--blocks", "16", "--size",
                                  "4096", "--duration-ms", "2000", "--warmup-ms", "200",
                                  "--poll-sleep-us", str(VM_POLL_SLEEP_US), *extra]})
    if not ctx.quick:
        for mech in ["status-byte", "sliding-window"]:
            jobs.append({"kind": "sbr_bench", "part": "B4", "mechanism": mech,
                         "args": ["timeline", "--mechanism", mech, "--blocks", "16", "--size",
                                  "4096", "--duration-ms", "400", "--interval-ms", "10",
                                  "--warmup-ms", "100", "--hold-from-ms", "100",
                                  "--hold-to-ms", "200"]})
    return jobs


def run_vm(ctx):
    return vm_boot(ctx, vm_jobs(ctx), "vm")


def vm_boot(ctx, jobs, tag, env=None):
    """Boots the Soft-RoCE VM once and runs jobs there (vm_guest.py); env:
    the runner's environment (it passes GST_* and SBR_* into the guest)."""
    runner = os.path.join(TOP, "tests/softroce/run-in-vm.sh")
    if not os.path.exists(runner):
        return {"error": "tests/softroce/run-in-vm.sh is missing"}
    workdir = os.path.join(ctx.build, "bench")
    os.makedirs(workdir, exist_ok=True)
    jobs_path = os.path.join(workdir, f"{tag}-jobs.json")
    out_path = os.path.join(workdir, f"{tag}-results.json")
    with open(jobs_path, "w") as f:
        json.dump(jobs, f, indent=1)
    if os.path.exists(out_path):
        os.unlink(out_path)
    ctx.log(f"VM: {len(jobs)} jobs in one boot (emulated CPU, expect a few minutes)")
    t0 = time.time()
    cmd = [runner, "--timeout", "1500", "--", "/usr/bin/python3",
           os.path.relpath(os.path.join(HERE, "vm_guest.py"), TOP),
           os.path.relpath(jobs_path, TOP), os.path.relpath(out_path, TOP),
           os.path.relpath(ctx.perf, TOP), os.path.relpath(ctx.bench or "/bin/false", TOP)]
    r = subprocess.run(cmd, cwd=TOP, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    wall = time.time() - t0
    for line in r.stdout.splitlines():
        ctx.log(line)
    res = {"wall_s": round(wall, 1), "exit": r.returncode}
    boot = re.search(r"VM ready in ([0-9.]+) s \((\w+)\)", r.stderr)
    if boot:
        res["boot_s"], res["accel"] = float(boot.group(1)), boot.group(2)
    try:
        with open(out_path) as f:
            res.update(json.load(f))
    except (OSError, json.JSONDecodeError):
        res["error"] = f"no results from the VM (exit {r.returncode}): {r.stderr.strip()[-400:]}"
    return res


# ------------------------------------------------------------------ B2


def b2(ctx):
    ns = [3, 8, 16, 64] if ctx.quick else [3, 4, 8, 16, 32, 64]
    dur = 800 if ctx.quick else 1500
    rows = []
    for n in ns:
        row = {"blocks": n}
        for mech in ["status-byte", "sliding-window"]:
            row[mech] = run_bench(ctx, "sync", ["--mechanism", mech, "--blocks", n, "--size",
                                                4096, "--duration-ms", dur,
                                                "--warmup-ms", 100])
        sb, sw = row["status-byte"], row["sliding-window"]
        ctx.log(f"B2 N={n}: READ {fmt(sb and sb['sync_read']['mean_us'])} us, "
                f"ACK {fmt(sw and sw['ack']['mean_us'])} us")
        rows.append(row)
    return {"rows": rows, "size": 4096, "duration_ms": dur}


def b2x(ctx):
    """How much of the sync latency is the polling back-off: the same N=16
    sync run with the library's back-off knobs (public config) and the
    threads' timer slack changed.  Evidence for the analysis."""
    variants = [("default", []), ("timer slack 1 ns", ["--timer-slack-ns", 1]),
                ("max sleep 50 us", ["--max-sleep-us", 50]),
                ("spin 100 us", ["--spin-us", 100])]
    sizes = [4096] if ctx.quick else [256, 4096]
    reps = 1 if ctx.quick else 2
    rows = []
    for size in sizes:
        for name, extra in variants:
            row = {"size": size, "variant": name}
            runs = {"status-byte": [], "sliding-window": []}
            for rep in range(reps):
                for mech in ["status-byte", "sliding-window"]:
                    runs[mech].append(run_bench(ctx, "sync", [
                        "--mechanism", mech, "--blocks", 16, "--size", size,
                        "--duration-ms", 800, *extra]))
            for mech, rs in runs.items():
                # The run with the median throughput stands for the variant.
                rs = sorted([r for r in rs if r], key=lambda r: r["throughput_mbps"])
                row[mech] = rs[(len(rs) - 1) // 2] if rs else None
                row[mech + "_all_mbps"] = [r["throughput_mbps"] for r in rs]
            sb, sw = row["status-byte"], row["sliding-window"]
            ctx.log(f"B2x {size} {name}: SB {fmt(sb and sb['throughput_mbps'])} MB/s READ "
                    f"{fmt(sb and sb['sync_read']['mean_us'])} us; SW "
                    f"{fmt(sw and sw['throughput_mbps'])} MB/s ACK "
                    f"{fmt(sw and sw['ack']['mean_us'])} us")
            rows.append(row)
    return {"rows": rows}


# ------------------------------------------------------------------ B3


def callgrind_costs(path):
    """Inclusive Ir per function name and call counts, from callgrind_annotate."""
    inc = {}
    r = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100",
                        "--auto=no", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    total = None
    for line in r.stdout.splitlines():
        m = re.match(r"\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(.*)$", line)
        if not m:
            continue
        ir = int(m.group(1).replace(",", ""))
        rest = m.group(2)
        if rest.startswith("PROGRAM TOTALS"):
            total = ir
            continue
        fm = re.match(r"(\S+):(\S+)", rest)
        if not fm:
            continue
        fn = fm.group(2)
        # Each function is listed per file it has code in (inlined headers
        # too); keep the largest, which is the function's own entry.
        inc[fn] = max(inc.get(fn, 0), ir)
    # Call counts from the calling tree: "* caller" then "> callee (Nx)".
    pairs = {}
    r = subprocess.run(["callgrind_annotate", "--tree=calling", "--threshold=100", "--auto=no",
                        path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    caller = None
    for line in r.stdout.splitlines():
        m = re.match(r"\s*[\d,]+\s+\(\s*[\d.]+%\)\s+\*\s+\S+:(\S+)", line)
        if m:
            caller = m.group(1)
            continue
        m = re.match(r"\s*[\d,]+\s+\(\s*[\d.]+%\)\s+>\s+\S+:(\S+)\s+\(([\d,]+)x\)", line)
        if m and caller:
            key = (caller, m.group(1))
            pairs[key] = max(pairs.get(key, 0), int(m.group(2).replace(",", "")))
    calls = {}
    for (_, callee), n in pairs.items():
        calls[callee] = calls.get(callee, 0) + n
    return total, inc, calls


def b3(ctx):
    sizes = [4 * KIB, 64 * KIB, MIB]
    secs = 1 if ctx.quick else 2
    cpu = []
    for size in sizes:
        row = {"size": size}
        for mech in ["status-byte", "sliding-window"]:
            tx, rx = perf_pair(ctx, mech, size, seconds=secs)
            if tx and tx["bytes"]:
                gb = tx["bytes"] / 1e9
                row[mech] = {"tx_cpu_s_per_gb": tx["cpu_s"] / gb,
                             "rx_cpu_s_per_gb": rx["cpu_s"] / gb if rx else None,
                             "throughput_mbps": tx["throughput_mbps"]}
            else:
                row[mech] = None
        ctx.log(f"B3 cpu {size_label(size)}: {row}")
        cpu.append(row)
    # Idle cost: a receiver with nobody connected, and with a sender
    # connected that sends one frame a second (both ends' CPU).
    idle = {}
    t0 = time.time()
    r = subprocess.run(["/usr/bin/time", "-f", "%U %S", ctx.perf, "receive", "--backend", "shm",
                        "--port", str(ctx.next_port()), "--timeout", str(secs * 2)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        user, sys_ = map(float, r.stderr.strip().splitlines()[-1].split())
        idle["receiver_alone_cpu_pct"] = 100 * (user + sys_) / (time.time() - t0)
    except (ValueError, IndexError):
        pass
    for mech in ["status-byte", "sliding-window"]:
        tx, rx = perf_pair(ctx, mech, 1000, seconds=secs * 2, rate=1)
        if tx and rx:
            idle[mech] = {"receiver_cpu_pct": rx["cpu_percent"], "sender_cpu_pct": tx["cpu_percent"]}
    ctx.log(f"B3 idle: {idle}")
    cg = {}
    if shutil.which("valgrind") and shutil.which("callgrind_annotate"):
        count = 5000 if ctx.quick else 20000
        outdir = os.path.join(ctx.build, "bench")
        os.makedirs(outdir, exist_ok=True)
        for size in [256, 4 * KIB]:
            for mech in ["status-byte", "sliding-window"]:
                out = os.path.join(outdir, f"callgrind-{mech}-{size}.out")
                if os.path.exists(out):
                    os.unlink(out)
                tx, rx = perf_pair(ctx, mech, size, count=count,
                                   wrap_tx=["valgrind", "--tool=callgrind",
                                            f"--callgrind-out-file={out}"])
                if not tx or not os.path.exists(out):
                    cg[f"{mech}/{size}"] = None
                    continue
                total, inc, calls = callgrind_costs(out)
                blocks = count + 1  # + EOS
                engine_fns = (["sb_progress"] if mech == "status-byte"
                              else ["sw_progress", "ack_thread"])
                engine = sum(inc.get(f, 0) for f in engine_fns)
                memcpy_in_engine = 0  # the payload is copied by the shm NIC thread only
                res = {
                    "blocks": blocks, "total_ir": total,
                    "engine_ir_per_block": (engine - memcpy_in_engine) / blocks,
                    "engine_fns": engine_fns,
                    "sender_thread_ir_per_block": inc.get("sender_thread", 0) / blocks,
                    "ack_thread_ir_per_block": inc.get("ack_thread", 0) / blocks,
                    "progress_calls_per_block":
                        calls.get(engine_fns[0], 0) / blocks,
                    "fill_ir_per_block": (inc.get("sbr_sender_acquire", 0) +
                                          inc.get("sbr_sender_submit", 0)) / blocks,
                    "block_encode_ir_per_block": inc.get("sbr__block_encode", 0) / blocks,
                    "nic_ir_per_block": inc.get("shm_nic_main", 0) / blocks,
                    "memcpy_ir_per_block": inc.get("__memcpy_avx_unaligned_erms", 0) / blocks,
                    "poll_cq_ir_per_block": inc.get("shm_poll_cq", 0) / blocks,
                    "post_send_ir_per_block": inc.get("shm_post_send", 0) / blocks,
                    "mutex_lock_ir_per_block":
                        inc.get("pthread_mutex_lock@@GLIBC_2.2.5", 0) / blocks,
                }
                cg[f"{mech}/{size}"] = res
                ctx.log(f"B3 callgrind {mech} {size_label(size)}: engine "
                        f"{res['engine_ir_per_block']:.0f} Ir/block")
    else:
        cg["error"] = "valgrind not installed"
    return {"cpu": cpu, "callgrind": cg, "seconds": secs, "idle": idle}


# ------------------------------------------------------------------ B4


def timeline_stats(d):
    """Dip and stall of one timeline run."""
    iv = d["interval_ms"]
    rates = [b / (iv / 1e3) / 1e6 for b in d["interval_bytes"]]  # MB/s
    lo, hi = d["hold_from_ms"] or 100, d["hold_to_ms"] or 200
    base = [r for k, r in enumerate(rates) if 0 <= k * iv < lo]
    hold = [r for k, r in enumerate(rates) if lo <= k * iv < hi]
    after = [r for k, r in enumerate(rates) if hi + 20 <= k * iv < hi + 100]
    b = statistics.mean(base) if base else 0
    h = statistics.mean(hold) if hold else 0
    run, longest = 0, 0
    for r in rates:
        run = run + 1 if r == 0 else 0
        longest = max(longest, run)
    return {"baseline_mbps": b, "hold_mbps": h,
            "after_mbps": statistics.mean(after) if after else 0,
            "dip": 1 - h / b if b else None,
            "worst_interval_dip": 1 - min(hold) / b if b and hold else None,
            "longest_zero_ms": longest * iv, "rates": rates}


B4_RATE = 20000  # blocks/s of 4 KiB (82 MB/s): well under what shm moves flat out


def b4(ctx):
    reps = 3 if ctx.quick else 5
    res = {"size": 4096, "blocks": 16, "rate": B4_RATE, "warmup_ms": 100, "runs": {}}
    loads = [("", 0), ("@rate", B4_RATE)]
    for mech in ["status-byte", "sliding-window"]:
        for variant in ["hold", "control"]:
            for suffix, _ in loads:
                res["runs"][f"{mech}/{variant}{suffix}"] = []
    for rep in range(reps):
        for suffix, rate in loads:
            if suffix and rep >= 3:
                continue  # the paced runs are steadier: 3 are plenty
            for mech in ["status-byte", "sliding-window"]:
                for variant in ["hold", "control"]:
                    args = ["--mechanism", mech, "--blocks", 16, "--size", 4096,
                            "--duration-ms", 400, "--interval-ms", 10, "--warmup-ms", 100]
                    if rate:
                        args += ["--rate", rate]
                    if variant == "hold":
                        args += ["--hold-from-ms", 100, "--hold-to-ms", 200]
                    d = run_bench(ctx, "timeline", args)
                    if d:
                        d["stats"] = timeline_stats(d)
                        res["runs"][f"{mech}/{variant}{suffix}"].append(d)
    for key, runs in res["runs"].items():
        dips = [r["stats"]["dip"] for r in runs if r["stats"]["dip"] is not None]
        ctx.log(f"B4 {key}: dips {[round(x, 3) for x in dips]}, zero runs "
                f"{[r['stats']['longest_zero_ms'] for r in runs]} ms")
    return res


# ------------------------------------------------------------------ B7


def b7(ctx):
    delays = [0, 100, 500, 1000, 2000]
    sizes = [4 * KIB, 64 * KIB, MIB]
    secs = 1 if ctx.quick else 1.5
    blocks = 16
    rows = []
    # Each point runs reps times, the two modes alternating: at 1 MiB a single
    # 1.5 s run over shm moves with the memory bandwidth other jobs leave
    # (one run saw 10 and 19 GB/s with no delay, back to back).
    reps = 1 if ctx.quick else 3
    for size in sizes:
        for delay in delays:
            row = {"size": size, "delay_us": delay, "blocks": blocks}
            modes = [("sync_when_empty", 0), ("read_ahead", blocks // 2)]
            runs = {m: [] for m, _ in modes}
            for rep in range(reps):
                for mode, ra in (modes if rep % 2 == 0 else modes[::-1]):
                    tx, rx = perf_pair(ctx, "status-byte", size, seconds=secs,
                                       delay_us=delay, read_ahead=ra, blocks=blocks)
                    if tx:
                        runs[mode].append(tx)
            for mode, _ in modes:
                txs = runs[mode]
                mid = sorted(txs, key=lambda t: t["throughput_mbps"])[len(txs) // 2] \
                    if txs else None
                row[mode] = ({"throughput_mbps": median([t["throughput_mbps"] for t in txs]),
                              "runs_mbps": [t["throughput_mbps"] for t in txs],
                              "sync_reads": mid["sync_reads"],
                              "sync_read_mean_us": mid["sync_read_mean_us"],
                              "no_free_waits": mid["no_free_waits"],
                              "frames": mid["frames"]} if mid else None)
            ctx.log(f"B7 {size_label(size)} +{delay} us: "
                    f"{fmt(row['sync_when_empty'] and row['sync_when_empty']['throughput_mbps'])}"
                    f" / {fmt(row['read_ahead'] and row['read_ahead']['throughput_mbps'])} MB/s")
            rows.append(row)
    # What helps at 1 ms: more blocks (the bandwidth-delay product).
    more = []
    for size, ns in ([(4 * KIB, [128]), (MIB, [64])] if ctx.quick else
                     [(4 * KIB, [64, 256]), (64 * KIB, [64, 256]), (MIB, [32, 64])]):
        for n in ns:
            row = {"size": size, "delay_us": 1000, "blocks": n}
            # The no-delay baseline at the same N: a bigger lane is a bigger
            # working set (memcpy speed changes with it).
            for mode, ra, delay in [("sync_when_empty", 0, 1000), ("read_ahead", n // 2, 1000),
                                    ("no_delay", n // 2, 0)]:
                tx, rx = perf_pair(ctx, "status-byte", size, seconds=secs, delay_us=delay,
                                   read_ahead=ra, blocks=n)
                row[mode] = {"throughput_mbps": tx["throughput_mbps"]} if tx else None
            ctx.log(f"B7 more blocks {size_label(size)} N={n}: {row}")
            more.append(row)
    return {"rows": rows, "more_blocks": more, "seconds": secs, "reps": reps}


# ------------------------------------------------------------- B5 / B6


def gst_env(ctx):
    env = dict(os.environ)
    env["GST_PLUGIN_PATH"] = os.path.join(ctx.build, "gst")
    return env


def gst_status(ctx):
    so = os.path.join(ctx.build, "gst/libgstrdma.so")
    if not os.path.exists(so):
        return {"plugin": False}
    st = {"plugin": True}
    for el in ["rdmasink", "rdmasrc", "shmsink", "tcpclientsink", "rawvideoparse"]:
        r = subprocess.run(["gst-inspect-1.0", el], env=gst_env(ctx), stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL) if shutil.which("gst-inspect-1.0") else None
        st[el] = bool(r and r.returncode == 0)
    try:
        import gi  # noqa: F401
        st["python_gi"] = True
    except ImportError:
        st["python_gi"] = False
    return st


def gst_pair(ctx, transport, frames, live=False, streams=12):
    """One gst_peers.py receiver and sender; returns (tx, rx) dicts."""
    peers = os.path.join(HERE, "gst_peers.py")
    port = ctx.next_port()
    ctx.port += streams  # tcp uses port .. port + streams - 1
    budget = frames / 25 + 60
    common = ["--transport", transport, "--streams", str(streams), "--port", str(port)]
    rx_cmd = ["/usr/bin/python3", peers, "receive", *common, "--expect", str(frames),
              "--seconds", str(budget)]
    tx_cmd = ["/usr/bin/python3", peers, "send", *common, "--frames", str(frames),
              "--seconds", str(budget)] + (["--live"] if live else [])
    env = gst_env(ctx)
    if transport == "none":
        tx = subprocess.run(tx_cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, timeout=budget + 30)
        return (json.loads(tx.stdout) if tx.stdout.strip() else None), None
    procs = {}
    # shmsrc needs shmsink's socket: that sender starts first; the others
    # need their receiver listening.
    order = ["tx", "rx"] if transport == "shm" else ["rx", "tx"]
    for which in order:
        procs[which] = subprocess.Popen(rx_cmd if which == "rx" else tx_cmd, env=env,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True)
        time.sleep(1.0)
    out = {}
    outs = {}
    try:
        outs["rx"] = procs["rx"].communicate(timeout=budget + 30)
    except subprocess.TimeoutExpired:
        procs["rx"].kill()
        outs["rx"] = procs["rx"].communicate()
    try:
        # The receiver is done: a sender still waiting (shmsink waits for its
        # reader to release buffers) is told to report and stop.
        outs["tx"] = procs["tx"].communicate(timeout=5)
    except subprocess.TimeoutExpired:
        procs["tx"].terminate()
    for which in ["tx", "rx"]:
        try:
            o, e = outs[which] if which in outs else procs[which].communicate(timeout=30)
        except subprocess.TimeoutExpired:
            procs[which].kill()
            o, e = procs[which].communicate()
        try:
            out[which] = json.loads(o.strip().splitlines()[-1])
        except (json.JSONDecodeError, IndexError):
            ctx.log(f"gst_peers {which} {transport} failed: {e.strip()[-300:]}")
            out[which] = None
    return out["tx"], out["rx"]


def b56(ctx):
    st = gst_status(ctx)
    if not (st.get("plugin") and st.get("rdmasink") and st.get("rdmasrc") and
            st.get("python_gi")):
        return {"skipped": "the rdma GStreamer plugin (build/gst) or python3-gi is missing",
                "status": st}
    res = {"status": st, "B6": [], "B5": []}
    transports = ["rdma-sb", "rdma-sw", "tcp"] + (["shm"] if st.get("shmsink") else [])
    # Flat out a run of 250 frames a stream lasted 0.2-0.5 s, as long as the
    # connecting of 12 streams: 1,000 make it seconds.
    frames = 100 if ctx.quick else 1000
    base, _ = gst_pair(ctx, "none", frames)
    res["source_only"] = base
    reps = 1 if ctx.quick else 3
    for rep in range(reps):
        for t in (transports if rep % 2 == 0 else transports[::-1]):
            tx, rx = gst_pair(ctx, t, frames)
            res["B6"].append({"transport": t, "rep": rep, "tx": tx, "rx": rx})
            if rx:
                ctx.log(f"B6 {t}: {rx['frames']} frames, {rx['frames_per_s']:.0f} frames/s, "
                        f"{rx['mbps']:.0f} MB/s")
    live_frames = 100 if ctx.quick else 200  # at 25 fps: 4 or 8 s
    for t in transports:
        tx, rx = gst_pair(ctx, t, live_frames, live=True)
        res["B5"].append({"transport": t, "tx": tx, "rx": rx, "frames_each": live_frames})
        if rx:
            ctx.log(f"B5 {t}: {rx['frames']} of {12 * live_frames} frames")
    return res


# The last commit whose rdmasrc pushed every pad from one streaming thread:
# B8's "before" run builds it aside.
B8_BEFORE_COMMIT = "346091b"


def b8_before_plugin(ctx):
    """Builds the plugin of B8_BEFORE_COMMIT in build/bench/before (once)."""
    wt = os.path.join(ctx.build, "bench", "before")
    so = os.path.join(wt, "build", "gst", "libgstrdma.so")
    if os.path.exists(so):
        return os.path.dirname(so)
    if not shutil.which("git") or not os.path.isdir(os.path.join(TOP, ".git")):
        return None
    if not os.path.isdir(wt):
        r = subprocess.run(["git", "-C", TOP, "worktree", "add", "--detach", wt,
                            B8_BEFORE_COMMIT], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if r.returncode != 0:
            ctx.log(f"B8: no worktree for {B8_BEFORE_COMMIT}: {r.stderr.decode()[-200:]}")
            return None
    for cmd in (["meson", "setup", "build", "-Dtests=disabled"], ["ninja", "-C", "build"]):
        if cmd[0] == "meson" and os.path.isdir(os.path.join(wt, "build")):
            continue
        r = subprocess.run(cmd, cwd=wt, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if r.returncode != 0:
            ctx.log(f"B8: building {B8_BEFORE_COMMIT} failed: {r.stderr.decode()[-200:]}")
            return None
    return os.path.dirname(so) if os.path.exists(so) else None


def b8(ctx):
    """One camera slow (5 fps), then stuck 5 s, beside eleven at 25 fps."""
    st = gst_status(ctx)
    if not (st.get("rdmasrc") and st.get("python_gi")):
        return {"skipped": "the rdma GStreamer plugin (build/gst) or python3-gi is missing"}
    seconds = 10 if ctx.quick else 15
    script = os.path.join(HERE, "independence.py")
    runs = []
    plans = [("baseline", "none", "", None), ("drop-oldest", "slow", "", None),
             ("pause", "slow", "pause", None)]
    before = b8_before_plugin(ctx)
    if before:
        plans.append(("before", "slow", "", before))
    for label, scenario, policy, plugin in plans:
        cmd = ["/usr/bin/python3", script, "--port", str(ctx.next_port()), "--scenario",
               scenario, "--seconds", str(seconds)]
        if policy:
            cmd += ["--policy", policy]
        if plugin:
            cmd += ["--plugin", plugin]
        r = subprocess.run(cmd, env=gst_env(ctx), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=seconds + 120)
        try:
            res = json.loads(r.stdout.strip().splitlines()[-1])
        except (json.JSONDecodeError, IndexError):
            res = {"error": r.stderr.strip()[-300:]}
        res["label"] = label
        runs.append(res)
        ctx.log(f"B8 {label}: received {res.get('received')}")
    return {"runs": runs, "seconds": seconds, "before_commit": B8_BEFORE_COMMIT,
            "before_built": bool(before)}


# ------------------------------------------------------------------ B9

# The receiver's waiting modes (issue #11): busy, adaptive, backoff.  A
# binary or element that predates them waits the way "backoff" names.
POLL_MODES = ["busy", "adaptive", "backoff"]
B9_VIDEO = [{"name": "640x480@25", "width": 640, "height": 480, "fps": 25, "format": "RGB"},
            {"name": "1920x1080@30", "width": 1920, "height": 1080, "fps": 30,
             "format": "I420"}]


def video_bytes(v):
    px = v["width"] * v["height"]
    return px * 3 // 2 if v["format"] == "I420" else px * 3


def b9_modes(ctx):
    """Which waiting modes sbr-perf and rdmasrc take: (lib, gst), each a
    list of modes and whether the mode is chosen (False: the build has no
    modes and runs what "backoff" names, today's behaviour)."""
    r = subprocess.run([ctx.perf, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    lib = "--poll-mode" in r.stdout
    gst = False
    if shutil.which("gst-inspect-1.0"):
        r = subprocess.run(["gst-inspect-1.0", "rdmasrc"], env=gst_env(ctx),
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        gst = "poll-mode" in r.stdout
    return ((POLL_MODES, True) if lib else (["backoff"], False),
            (POLL_MODES, True) if gst else (["backoff"], False))


def b9_lib_point(ctx, v, streams, mode, chosen, secs):
    size = video_bytes(v)
    rx_extra = ["--poll-mode", mode] if chosen else []
    tx, rx = perf_pair(ctx, "status-byte", size, seconds=secs, rate=v["fps"], devices=streams,
                       blocks=32, rx_extra=rx_extra)
    if not rx:
        return {"error": "sbr-perf failed"}
    keys = ["frames", "latency_mean_us", "latency_p50_us", "latency_p90_us", "latency_p99_us",
            "latency_max_us", "latency_samples", "cpu_s", "cpu_percent", "elapsed_s", "ok"]
    return {k: rx.get(k) for k in keys}


def b9_gst_point(ctx, tool, transport, v, streams, mode, chosen, secs, warmup=1.0):
    """One gst-latency receiver and sender; returns the receiver's JSON."""
    port = ctx.next_port()
    ctx.port += streams  # tcp: port .. port + streams - 1
    common = ["--transport", transport, "--streams", str(streams), "--port", str(port),
              "--width", str(v["width"]), "--height", str(v["height"]), "--fps", str(v["fps"]),
              "--format", v["format"]]
    rx_cmd = [tool, "receive", *common, "--seconds", str(secs), "--warmup", str(warmup)]
    if transport == "rdma" and chosen:
        rx_cmd += ["--poll-mode", mode]
    tx_cmd = [tool, "send", *common, "--seconds", str(secs + warmup + 20)]
    env = gst_env(ctx)
    procs = {}
    # shmsrc needs shmsink's socket: that sender starts first; the other
    # receivers listen and their sender connects.
    for which in (["tx", "rx"] if transport == "shm" else ["rx", "tx"]):
        procs[which] = subprocess.Popen(rx_cmd if which == "rx" else tx_cmd, env=env,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True)
        time.sleep(0.5)
    try:
        out, err = procs["rx"].communicate(timeout=secs + warmup + 60)
    except subprocess.TimeoutExpired:
        procs["rx"].kill()
        out, err = procs["rx"].communicate()
    procs["tx"].terminate()
    try:
        tx_out, tx_err = procs["tx"].communicate(timeout=15)
    except subprocess.TimeoutExpired:
        procs["tx"].kill()
        tx_out, tx_err = procs["tx"].communicate()
    try:
        res = json.loads(out.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        ctx.log(f"B9 gst-latency {transport} failed: {err.strip()[-300:]}")
        return {"error": (err.strip() or "no output")[-300:]}
    if streams == 1:
        res.pop("per_stream", None)  # the same figures again
    try:
        res["sender"] = json.loads(tx_out.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        res["sender"] = {"error": tx_err.strip()[-200:]}
    if transport == "rdma":
        res["poll_mode_chosen"] = chosen
    return res


def b9_vm_jobs(ctx, modes, chosen):
    """Verbs in the VM: sbr-perf one-way latency per waiting mode at 64 B
    and at the two frame sizes, with ib_write_lat / ib_read_lat (64 B, and
    ib_write_lat at the frame sizes) in the same boot."""
    secs = 3 if ctx.quick else 5
    # The references at 64 B run before and after the sbr-perf jobs: under
    # TCG on a shared host one ib_write_lat run (both ends busy polling on
    # 2 vCPUs) measured 2 ms typical where the others measured 12-14 us.
    ref = [{"kind": "ib_write_lat", "size": 64, "iters": 1000},
           {"kind": "ib_read_lat", "size": 64, "iters": 1000}]
    jobs = [dict(j) for j in ref]
    sizes = [(64, 100, 16)] + [(video_bytes(v), 5, 4) for v in B9_VIDEO]
    for size, rate, blocks in sizes:
        if size > 64:
            jobs.append({"kind": "ib_write_lat", "size": size, "iters": 50})
        for mode in modes:
            jobs.append({"kind": "sbr_perf", "mechanism": "status-byte", "size": size,
                         "seconds": secs, "rate": rate, "blocks": blocks, "poll_mode": mode,
                         "rx_args": ["--poll-mode", mode] if chosen else []})
    jobs += [dict(j) for j in ref[::-1]]
    for j in jobs:
        j["part"] = "B9"
    return jobs


def b9(ctx):
    """Capture-to-delivery latency and the receiver's CPU, per waiting mode,
    at the library (sbr-perf) and through the elements next to shmsink/shmsrc
    and tcp, 1 and 12 cameras; verbs in the VM (issue #11)."""
    secs = 4 if ctx.quick else 10
    (lib_modes, lib_chosen), (gst_modes, gst_chosen) = b9_modes(ctx)
    res = {"seconds": secs, "warmup_s": 1.0, "lib_modes": lib_modes,
           "lib_modes_chosen": lib_chosen, "gst_modes": gst_modes,
           "gst_modes_chosen": gst_chosen, "video": B9_VIDEO, "lib": [], "gst": []}
    ctx.log(f"B9 waiting modes: sbr-perf {lib_modes if lib_chosen else 'none (backoff)'}, "
            f"rdmasrc {gst_modes if gst_chosen else 'none (backoff)'}")
    t0 = time.time()
    for v in B9_VIDEO:
        for streams in [1, 12]:
            for mode in lib_modes:
                r = b9_lib_point(ctx, v, streams, mode, lib_chosen, secs)
                r.update({"video": v["name"], "streams": streams, "mode": mode})
                res["lib"].append(r)
                ctx.log(f"B9 lib {v['name']} x{streams} {mode}: p50 "
                        f"{fmt(r.get('latency_p50_us'))} p99 {fmt(r.get('latency_p99_us'))} us, "
                        f"cpu {fmt(r.get('cpu_percent'))} %")
    res["lib_s"] = round(time.time() - t0, 1)
    tool = os.path.join(ctx.build, "tests/bench/gst-latency")
    st = gst_status(ctx)
    if not os.path.exists(tool) or not st.get("rdmasrc"):
        res["gst_skipped"] = "build/tests/bench/gst-latency or the rdma plugin is missing"
    else:
        t0 = time.time()
        k = 0
        for v in B9_VIDEO:
            for streams in [1, 12]:
                runs = [("rdma", m) for m in gst_modes] + [("shm", None), ("tcp", None)]
                if not st.get("shmsink"):
                    runs.remove(("shm", None))
                for transport, mode in (runs if k % 2 == 0 else runs[::-1]):
                    r = b9_gst_point(ctx, tool, transport, v, streams, mode, gst_chosen, secs)
                    r.update({"video": v["name"], "streams": streams, "peer": transport,
                              "mode": r.get("poll_mode", mode)})
                    res["gst"].append(r)
                    ctx.log(f"B9 gst {v['name']} x{streams} {transport} {mode or ''}: p50 "
                            f"{fmt(r.get('p50_us'))} p99 {fmt(r.get('p99_us'))} us, cpu "
                            f"{fmt(r.get('cpu_percent'))} %, frames {r.get('samples')}")
                k += 1
        res["gst_s"] = round(time.time() - t0, 1)
    if ctx.args.no_vm:
        res["vm"] = {"skipped": "--no-vm"}
    else:
        t0 = time.time()
        res["vm"] = vm_boot(ctx, b9_vm_jobs(ctx, lib_modes, lib_chosen), "b9-vm")
        res["vm_s"] = round(time.time() - t0, 1)
    return res


# ----------------------------------------------------------------- B10

# Issue #21 item 4: K sender processes of 12 live cameras each into one
# rdmasrc.  The VM runs the same shape at reduced size, 3 cameras a sender
# at 160x120: Soft-RoCE copies every byte on the emulated CPU, which also
# runs the senders and the receiver, and 320x240 fell behind from 12
# cameras there (the figure would be the emulator's, not the receiver's).
B10_VIDEO = {"name": "320x240@25", "width": 320, "height": 240, "fps": 25, "format": "RGB"}
B10_VM_VIDEO = {"name": "160x120@25", "width": 160, "height": 120, "fps": 25, "format": "RGB"}
B10_SENDERS = [1, 2, 4, 8]
B10_CAMERAS = 12
B10_VM_CAMERAS = 3
B10_START_GAP = 0.3  # s between two senders' starts
# Each host point also runs with device-blocks=2, the share one sender's 12
# cameras get automatically: the automatic share is per lane (three
# quarters of a sender's lane over that lane's pads), so the pair should
# agree; a difference is a cost of the automatic share itself.
B10_FIXED_SHARE = 2


def b10_vm_jobs(ctx, secs):
    return [{"kind": "gst_scale", "part": "B10", "senders": k, "cameras": B10_VM_CAMERAS,
             "video": B10_VM_VIDEO, "seconds": secs, "warmup": 1 + B10_START_GAP * k,
             "start_gap": B10_START_GAP}
            for k in B10_SENDERS]


def b10(ctx):
    """1, 2, 4 and 8 sender processes of 12 cameras (320x240@25 RGB, live)
    into one rdmasrc over shm: frames lost, receiver CPU per frame, p99
    latency; the same at 3 cameras a sender of 160x120 over verbs in the
    VM."""
    sys.path.insert(0, HERE)
    import scale
    tool = os.path.join(ctx.build, "tests/bench/gst-latency")
    st = gst_status(ctx)
    if not os.path.exists(tool) or not st.get("rdmasrc"):
        return {"skipped": "build/tests/bench/gst-latency or the rdma plugin is missing"}
    secs = 4 if ctx.quick else 10
    res = {"seconds": secs, "video": B10_VIDEO, "cameras_per_sender": B10_CAMERAS,
           "vm_cameras_per_sender": B10_VM_CAMERAS, "vm_video": B10_VM_VIDEO,
           "start_gap_s": B10_START_GAP, "fixed_share": B10_FIXED_SHARE,
           "host": [], "host_fixed_share": []}
    for n, k in enumerate(B10_SENDERS):
        # The two variants alternate which goes first: the load drifts.
        for share in ([0, B10_FIXED_SHARE] if n % 2 == 0 else [B10_FIXED_SHARE, 0]):
            r = scale.run_point(tool, k, B10_CAMERAS, B10_VIDEO, secs, 1 + B10_START_GAP * k,
                                ctx.next_port(), gst_env(ctx), start_gap=B10_START_GAP,
                                device_blocks=share)
            res["host_fixed_share" if share else "host"].append(r)
            ctx.log(f"B10 shm {k} x {B10_CAMERAS} device-blocks {share or 'auto'}: lost "
                    f"{r.get('lost')}, unseen {r.get('cameras_unseen')}, cpu/frame "
                    f"{fmt(r.get('cpu_us_per_frame'))} us, p99 {fmt(r.get('p99_us'))} us "
                    f"{r.get('error', '')}")
    if ctx.args.no_vm:
        res["vm"] = {"skipped": "--no-vm"}
    else:
        res["vm"] = vm_boot(ctx, b10_vm_jobs(ctx, secs), "b10-vm", env=gst_env(ctx))
    return res


# ---------------------------------------------------------- B11 / B12


def b11(ctx):
    """Big frames flat out (tests/bench/bigframes.py)."""
    sys.path.insert(0, HERE)
    import bigframes
    if not os.path.exists(os.path.join(ctx.build, "tests/bench/gst-frames")) or \
            not gst_status(ctx).get("rdmasrc"):
        return {"skipped": "build/tests/bench/gst-frames or the rdma plugin is missing"}
    return bigframes.b11(ctx, gst_env(ctx))


def b12(ctx):
    """Instructions per frame under callgrind (tests/bench/bigframes.py)."""
    sys.path.insert(0, HERE)
    import bigframes
    if not os.path.exists(os.path.join(ctx.build, "tests/bench/gst-frames")) or \
            not gst_status(ctx).get("rdmasrc"):
        return {"skipped": "build/tests/bench/gst-frames or the rdma plugin is missing"}
    return bigframes.b12(ctx, gst_env(ctx))


# ------------------------------------------------------------ rendering


def import_render():
    """tests/bench/render.py needs matplotlib: a python3 without it (pyenv...)
    hands over to the system one (Debian's python3-matplotlib)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        system = "/usr/bin/python3"
        if os.path.realpath(sys.executable) != os.path.realpath(system) and \
                os.path.exists(system):
            os.execv(system, [system, os.path.abspath(__file__), *sys.argv[1:]])
        sys.exit("matplotlib is missing: apt-get install python3-matplotlib")
    sys.path.insert(0, HERE)
    import render
    return render


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(TOP, "build"))
    ap.add_argument("--quick", action="store_true", help="fewer points, shorter runs")
    ap.add_argument("--no-vm", action="store_true", help="skip the Soft-RoCE VM part")
    ap.add_argument("--only", default="",
                    help="comma-separated parts: B1,B2,B2X,B3,B4,B7,B56,B8,B9,B10,B11,B12,VM")
    ap.add_argument("--caveat", default="",
                    help="a sentence printed in bold at the head of the section of every "
                         "part this run measures (B10 also marks its target verdicts "
                         "provisional), e.g. \"measured on a loaded machine; to be re-run "
                         "on a quiet host\"; a part re-run without it loses its old one")
    ap.add_argument("--render", action="store_true",
                    help="only re-render docs/benchmarks.md from docs/bench/results.json")
    ap.add_argument("--out", default=os.path.join(TOP, "docs/benchmarks.md"))
    args = ap.parse_args()
    render = import_render()
    results_path = os.path.join(os.path.dirname(args.out), "bench", "results.json")
    os.makedirs(os.path.dirname(results_path), exist_ok=True)

    if args.render:
        with open(results_path) as f:
            results = json.load(f)
        render.render(results, args.out)
        return 0

    ctx = Ctx(args)
    if not os.path.exists(ctx.perf):
        sys.exit(f"{ctx.perf} is missing: build first (ninja -C build tools/sbr-perf)")
    ctx.bench = build_bench(ctx)
    only = {p.strip().upper() for p in args.only.split(",") if p.strip()}
    want = lambda p: not only or p in only  # noqa: E731

    results = {}
    if only and os.path.exists(results_path):
        with open(results_path) as f:
            results = json.load(f)  # keep the parts not re-run
    t_start = time.time()
    machine = machine_info()
    if not (only and results.get("machine")):
        results["machine"] = machine
    # else the header keeps the machine of the run that measured the rest;
    # each part re-run records its own commit (and load, below)
    results.setdefault("part_git", {})
    results["quick"] = args.quick
    results["timings"] = results.get("timings", {})

    def keep_vm_figures(before, now):
        """--no-vm keeps the previous run's VM figures of B9 (a VM boot
        costs minutes and measures the emulated link, which a host-side
        change doesn't move), saying when and at which commit they were
        measured, rather than dropping them from the targets."""
        vm = (before or {}).get("vm") or {}
        if not vm.get("results"):
            return
        kept = dict(vm)
        kept.setdefault("kept_from", {"started": prev_started.get("B9", "?"),
                                      "git": prev_git.get("B9", "?")})
        now["vm"] = kept

    prev_started = dict(results.get("part_started", {}))
    prev_git = dict(results.get("part_git", {}))

    def part(name, fn):
        if not want(name):
            return
        t0 = time.time()
        results.setdefault("loadavg", {})[name] = [round(x, 2) for x in os.getloadavg()]
        results.setdefault("part_started", {})[name] = time.strftime("%Y-%m-%d %H:%M")
        results["part_git"][name] = machine.get("git", "?") + \
            (" with uncommitted changes in lib/ or tools/" if machine.get("git_dirty_lib") else "")
        ctx.log(f"{name} ...")
        before = results.get(name)
        try:
            results[name] = fn(ctx)
            if name == "B9" and args.no_vm:
                keep_vm_figures(before, results[name])
        except Exception as e:  # a broken part is reported, the rest goes on
            import traceback
            traceback.print_exc()
            results[name] = {"error": f"{type(e).__name__}: {e}"}
        results["timings"][name] = round(time.time() - t0, 1)
        caveats = results.setdefault("caveats", {})
        if args.caveat:
            caveats[name] = args.caveat
        else:
            caveats.pop(name, None)

    part("B1", b1_host)
    part("B2", b2)
    part("B2X", b2x)
    part("B3", b3)
    part("B4", b4)
    part("B7", b7)
    part("B56", b56)
    part("B8", b8)
    part("B9", b9)
    part("B10", b10)
    part("B11", b11)
    part("B12", b12)
    if not args.no_vm:
        part("VM", run_vm)
    elif "VM" not in results:
        results["VM"] = {"skipped": "--no-vm"}
    results["total_s"] = round(time.time() - t_start, 1)
    with open(results_path, "w") as f:
        json.dump(results, f, indent=1)
    render.render(results, args.out)
    ctx.log(f"done in {results['total_s']:.0f} s: {os.path.relpath(args.out, TOP)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
