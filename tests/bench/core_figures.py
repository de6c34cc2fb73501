#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Core-library figures, each next to its baseline measured in the same run.

  host (shm back end): throughput at 4 KiB, 64 KiB and 1 MiB for the
      status-byte mechanism and the sliding-window baseline; receiver CPU
      idle (no sender, and a connected sender sending 1 frame/s); CPU at 12
      devices x 640x480 RGB (921600 B) x 25 fps.
  VM (Soft-RoCE, EMULATED CPU): ib_write_bw vs sbr-perf status-byte and
      sliding-window at 4 KiB and 64 KiB, in one VM boot.

Prints Markdown.  It never fails on a figure: it is a benchmark, not a test.
Usage: tests/bench/core_figures.py [--build build] [--no-vm] [--seconds 3]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HEADER = 72  # block header + trailer bytes
SIZES = [4096, 65536, 1048576]
VM_SIZES = [4096, 65536]


def perf_pair(perf, backend, mech, size, seconds, port, extra_tx=(), addr="127.0.0.1",
              devices=1, rate=0):
    """One sbr-perf receiver + sender; returns (tx, rx) JSON dicts."""
    block = size + HEADER  # one frame = one block = one WRITE of size+72
    common = ["--backend", backend, "--mechanism", mech, "--port", str(port), "--json"]
    rx = subprocess.Popen([perf, "receive", *common, "--block-size", str(max(block, 4096)),
                           "--devices", str(devices), "--timeout", "30"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.3)
    tx_cmd = [perf, "send", addr, *common, "--size", str(size), "--devices", str(devices),
              "--duration", str(seconds), *extra_tx]
    if rate:
        tx_cmd += ["--rate", str(rate)]
    tx = subprocess.run(tx_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                        timeout=seconds + 60)
    out, err = rx.communicate(timeout=60)
    try:
        return json.loads(tx.stdout), json.loads(out)
    except json.JSONDecodeError:
        sys.stderr.write(f"sbr-perf failed: {tx.stderr}\n{err}\n")
        return None, None


def idle_cpu(perf, seconds, port):
    """Receiver CPU with nobody connected (seconds of CPU per second)."""
    t0 = time.time()
    r = subprocess.run(["/usr/bin/time", "-f", "%U %S", perf, "receive", "--backend", "shm",
                        "--port", str(port), "--timeout", str(seconds)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.time() - t0
    user, sys_ = map(float, r.stderr.strip().splitlines()[-1].split())
    return (user + sys_) / wall


def host_figures(perf, seconds):
    print("## Host, shm back end (same host, across processes)\n")
    print("| payload | status-byte MB/s | sliding-window MB/s | ratio | sync READ mean us |")
    print("|---:|---:|---:|---:|---:|")
    port = 7800
    for size in SIZES:
        sb, _ = perf_pair(perf, "shm", "status-byte", size, seconds, port)
        sw, _ = perf_pair(perf, "shm", "sliding-window", size, seconds, port + 1)
        port += 2
        if not sb or not sw:
            print(f"| {size} | failed | | | |")
            continue
        print(f"| {size} | {sb['throughput_mbps']:.0f} | {sw['throughput_mbps']:.0f} | "
              f"{sb['throughput_mbps'] / sw['throughput_mbps']:.2f} | "
              f"{sb['sync_read_mean_us']:.1f} |")
    print()
    idle = idle_cpu(perf, seconds, port)
    tx, rx = perf_pair(perf, "shm", "status-byte", 1000, seconds, port + 1, rate=1)
    print("| CPU (shm) | receiver | sender |")
    print("|---|---:|---:|")
    print(f"| idle, no sender | {idle * 100:.2f} % | - |")
    if tx and rx:
        print(f"| sender connected, 1 frame/s | {rx['cpu_percent']:.2f} % | "
              f"{tx['cpu_percent']:.2f} % |")
    tx, rx = perf_pair(perf, "shm", "status-byte", 921600, max(seconds, 5), port + 2,
                       devices=12, rate=25)
    if tx and rx:
        print(f"| 12 x 921600 B x 25 fps ({rx['frames']} frames, {rx['drops']} drops, "
              f"{rx['gaps']} gaps) | {rx['cpu_percent']:.1f} % | {tx['cpu_percent']:.1f} % |")
    print("\nCPU percent is of one core (user + system, getrusage).\n")


VM_SCRIPT = r"""#!/bin/sh
# Runs inside the Soft-RoCE VM: perftest and sbr-perf on the same rxe link.
perf=$1; seconds=$2; shift 2
for size in "$@"; do
  ib_write_bw -d rxe0 -s $size -D $seconds -F >/dev/null 2>&1 &
  sleep 1
  echo "PERFTEST $size"
  ib_write_bw -d rxe0 -s $size -D $seconds -F 10.77.0.1 2>&1 | grep -E '^ *[0-9]+ +[0-9]+ '
  wait
  for mech in status-byte sliding-window; do
    block=$((size + 72)); [ $block -lt 4096 ] && block=4096
    $perf receive --backend verbs --mechanism $mech --address 10.77.0.1 --port 7900 \
      --block-size $block --json --timeout 30 > /tmp/rx.json 2>/dev/null &
    sleep 1
    echo "SBR $mech $size"
    $perf send 10.77.0.1 --backend verbs --mechanism $mech --port 7900 --size $size \
      --duration $seconds --json 2>/dev/null
    echo
    wait
  done
done
"""


def vm_figures(perf, seconds):
    print("## Soft-RoCE VM (EMULATED CPU under TCG: ratios only, not speeds)\n")
    with tempfile.NamedTemporaryFile("w", suffix=".sh", delete=False, dir=TOP) as f:
        f.write(VM_SCRIPT)
        script = f.name
    os.chmod(script, 0o755)
    try:
        r = subprocess.run([os.path.join(TOP, "tests/softroce/run-in-vm.sh"), "--", script,
                            perf, str(seconds), *map(str, VM_SIZES)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           cwd=TOP, timeout=1200)
    finally:
        os.unlink(script)
    results = {}
    lines = r.stdout.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("PERFTEST") and i + 1 < len(lines):
            size = int(line.split()[1])
            cols = lines[i + 1].split()
            # bytes iterations peak avg msgrate(Mpps): bytes/s from the message rate
            if len(cols) >= 5:
                results[("perftest", size)] = float(cols[4]) * 1e6 * size / 1e6
        elif line.startswith("SBR") and i + 1 < len(lines):
            _, mech, size = line.split()
            try:
                results[(mech, int(size))] = json.loads(lines[i + 1])["throughput_mbps"]
            except (json.JSONDecodeError, KeyError):
                pass
    print("| message | ib_write_bw MB/s | status-byte MB/s | ratio | sliding-window MB/s | "
          "ratio |")
    print("|---:|---:|---:|---:|---:|---:|")
    for size in VM_SIZES:
        pt = results.get(("perftest", size))
        sb = results.get(("status-byte", size))
        sw = results.get(("sliding-window", size))
        fmt = lambda v: f"{v:.1f}" if v else "n/a"
        ratio = lambda v: f"{v / pt:.2f}" if v and pt else "n/a"
        print(f"| {size} | {fmt(pt)} | {fmt(sb)} | {ratio(sb)} | {fmt(sw)} | {ratio(sw)} |")
    print("\nib_write_bw figures come from its message rate x message size; sbr-perf "
          "moves one block (payload + 72 B header/trailer) per message. MB = 10^6 bytes.")
    if r.returncode != 0:
        print(f"\n(the VM run exited {r.returncode}: {r.stderr.strip()[-300:]})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(TOP, "build"))
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--no-vm", action="store_true")
    args = ap.parse_args()
    perf = os.path.join(os.path.abspath(args.build), "tools/sbr-perf")
    print(f"# Core figures, {time.strftime('%Y-%m-%d %H:%M')}, {os.uname().nodename}, "
          f"{os.cpu_count()} CPUs\n")
    host_figures(perf, args.seconds)
    if not args.no_vm:
        vm_figures(perf, args.seconds)


if __name__ == "__main__":
    main()
