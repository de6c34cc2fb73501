#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Guest half of tests/bench/run.py: runs inside the Soft-RoCE VM.

    tests/softroce/run-in-vm.sh -- /usr/bin/python3 tests/bench/vm_guest.py \
        JOBS.json RESULTS.json

JOBS.json is a list of jobs written by run.py; each is run in order on the
one rxe device (rxe0, 10.77.0.1: server and client are both this host) and
its result is appended to RESULTS.json, which is rewritten after every job
so a VM that dies half-way still leaves what it measured.  A job never
fails the script: a broken measurement is recorded with "error".

Job kinds:
  {"kind": "ib_write_bw", "size": B, "seconds": S, "tx_depth": D (optional)}
  {"kind": "ib_write_lat" or "ib_read_lat", "size": B, "iters": N}
  {"kind": "sbr_perf", "mechanism": M, "size": B, "seconds": S,
   "rate": R (0 = flat out), "blocks": N, "read_ahead": K,
   "rx_args": [...] (more receiver options, e.g. --poll-mode)}
  {"kind": "sbr_bench", "args": [...]}      (tests/bench/sbr-bench)
  {"kind": "gst_scale", "senders": K, "cameras": N, "video": {...},
   "seconds": S, "warmup": W, "start_gap": G}
      B10: K gst-latency senders of N cameras into one rdmasrc over verbs
      (tests/bench/scale.py; the plugin comes through GST_PLUGIN_PATH)
"""
import json
import math
import os
import platform
import subprocess
import sys
import time

ADDR = os.environ.get("SBR_RDMA_ADDR", "10.77.0.1")
DEV = os.environ.get("SBR_RDMA_DEV", "rxe0")
HEADER = 72
port = 7900


def next_port():
    global port
    port += 1
    return port


def run(cmd, timeout):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=timeout)


def perftest_pair(tool, args, timeout):
    """Server in the background, client against ADDR; returns client stdout."""
    p = next_port()
    server = subprocess.Popen([tool, "-d", DEV, "-F", "-p", str(p), *args],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    try:
        client = run([tool, "-d", DEV, "-F", "-p", str(p), *args, ADDR], timeout)
    finally:
        try:
            server.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.communicate()
    if client.returncode != 0:
        raise RuntimeError(f"{tool} exited {client.returncode}: {client.stderr[-300:]}")
    return client.stdout


def result_row(out):
    """The first line of perftest's table that starts with the byte count."""
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 5 and cols[0].isdigit() and cols[1].isdigit():
            return [float(c) for c in cols]
    raise RuntimeError("no result line in perftest output")


def job_ib_write_bw(j):
    extra = ["-t", str(j["tx_depth"])] if j.get("tx_depth") else []
    out = perftest_pair("ib_write_bw", ["-s", str(j["size"]), "-D", str(j["seconds"]), *extra],
                        j["seconds"] + 60)
    cols = result_row(out)
    # bytes iterations peak avg msgrate(Mpps): MB/s (10^6) from the message
    # rate, so the unit question of perftest's MB (2^20) doesn't arise.
    return {"iterations": cols[1], "msg_rate_mpps": cols[4],
            "throughput_mbps": cols[4] * j["size"], "perftest_avg_MiBps": cols[3]}


def job_ib_lat(j):
    # Under TCG perftest sometimes prints inf for every column (it converts
    # cycles with a CPU frequency it could not read): such a run is tried
    # again, twice at most, and the tries are recorded.
    for attempt in range(1, 4):
        out = perftest_pair(j["kind"], ["-s", str(j["size"]), "-n", str(j["iters"])], 120)
        c = result_row(out)
        if all(math.isfinite(x) for x in c[2:6]):
            break
    else:
        raise RuntimeError(f"{j['kind']} printed no finite latency in 3 runs")
    # bytes iters t_min t_max t_typical t_avg t_stdev p99 p99.9 (ib_write_lat:
    # half a round trip; ib_read_lat: a whole READ, request and response)
    return {"t_min_us": c[2], "t_max_us": c[3], "t_typical_us": c[4], "t_avg_us": c[5],
            "t_stdev_us": c[6], "p99_us": c[7] if len(c) > 7 else None, "attempts": attempt}


def job_sbr_perf(j, perf):
    p = next_port()
    size = j["size"]
    block = size + HEADER
    common = ["--backend", "verbs", "--mechanism", j["mechanism"], "--port", str(p), "--json"]
    blocks = ["--blocks", str(j.get("blocks", 16))]
    rx = subprocess.Popen([perf, "receive", *common, *blocks, "--address", ADDR,
                           "--block-size", str(block), "--timeout", "30",
                           *j.get("rx_args", [])],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    tx_cmd = [perf, "send", ADDR, *common, *blocks, "--size", str(size), "--zero-copy",
              "--duration", str(j["seconds"])]
    if j.get("rate"):
        tx_cmd += ["--rate", str(j["rate"])]
    if j.get("read_ahead"):
        tx_cmd += ["--read-ahead", str(j["read_ahead"])]
    if j.get("status_batch"):
        tx_cmd += ["--status-batch", str(j["status_batch"])]
    try:
        tx = run(tx_cmd, j["seconds"] + 90)
    finally:
        try:
            rx_out, rx_err = rx.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            rx.kill()
            rx_out, rx_err = rx.communicate()
    res = {}
    try:
        res["tx"] = json.loads(tx.stdout)
    except json.JSONDecodeError:
        raise RuntimeError(f"sbr-perf send: {tx.stderr[-300:]}")
    try:
        res["rx"] = json.loads(rx_out)
    except json.JSONDecodeError:
        res["rx_error"] = rx_err[-300:]
    return res


def job_sbr_bench(j, bench):
    out = run([bench, *j["args"], "--backend", "verbs", "--address", ADDR,
               "--port", str(next_port())], 180)
    if out.returncode != 0:
        raise RuntimeError(f"sbr-bench: {out.stderr[-300:]}")
    return json.loads(out.stdout)


def job_gst_scale(j, perf):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import scale
    # sbr-perf is build/tools/sbr-perf; gst-latency is in the same build.
    build = os.path.dirname(os.path.dirname(os.path.abspath(perf)))
    tool = os.path.join(build, "tests/bench/gst-latency")
    res = scale.run_point(tool, j["senders"], j["cameras"], j["video"], j["seconds"],
                          j["warmup"], next_port(), dict(os.environ), backend="verbs",
                          address=ADDR, start_gap=j.get("start_gap", 0.3))
    if "error" in res:
        raise RuntimeError(f"gst-latency: {res['error']}")
    return res


def guest_info():
    info = {"kernel": platform.release(), "nproc": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        out = run(["ibv_devinfo", "-d", DEV], 30).stdout
        for line in out.splitlines():
            if "active_mtu" in line:
                info["active_mtu"] = line.split(":", 1)[1].strip()
                break
    except (OSError, subprocess.TimeoutExpired):
        pass
    return info


def main():
    jobs_path, out_path, perf, bench = sys.argv[1:5]
    with open(jobs_path) as f:
        jobs = json.load(f)
    doc = {"guest": guest_info(), "results": []}
    t_start = time.time()
    for j in jobs:
        t0 = time.time()
        entry = {"job": j}
        try:
            if j["kind"] == "ib_write_bw":
                entry["result"] = job_ib_write_bw(j)
            elif j["kind"] in ("ib_write_lat", "ib_read_lat"):
                entry["result"] = job_ib_lat(j)
            elif j["kind"] == "sbr_perf":
                entry["result"] = job_sbr_perf(j, perf)
            elif j["kind"] == "sbr_bench":
                entry["result"] = job_sbr_bench(j, bench)
            elif j["kind"] == "gst_scale":
                entry["result"] = job_gst_scale(j, perf)
            else:
                entry["error"] = "unknown job kind"
        except Exception as e:  # recorded, never fatal: it's a benchmark
            entry["error"] = str(e)
        entry["wall_s"] = round(time.time() - t0, 2)
        doc["results"].append(entry)
        doc["total_s"] = round(time.time() - t_start, 2)
        tmp = out_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(tmp, out_path)
        print(f"vm: {j['kind']} {j.get('mechanism', '')} {j.get('size', j.get('senders', ''))} "
              f"{'ERROR ' + entry['error'] if 'error' in entry else 'ok'} ({entry['wall_s']} s)",
              flush=True)


if __name__ == "__main__":
    main()
