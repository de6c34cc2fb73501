#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""B8: one slow, then stuck, camera beside eleven others (tests/bench/run.py).

    independence.py --port P --scenario none|slow [--policy drop-oldest|pause]
                    [--seconds 15] [--plugin DIR]

Starts the 12-camera sender (gst_peers.py send: 640x480 RGB at 25 fps,
live, one connection) and, in this process, the receiver of the issue
"Every camera its own stream":

    rdmasrc r.src_0 ! queue ! identity sleep-time=200000 ! fakesink
            r.src_N ! queue ! fakesink                 (N = 1..11)

With --scenario slow, camera 0's consumer runs at 5 fps (identity sleeps
200 ms a frame); from 5 s to 10 s after its first frame it is stuck (a
probe holds its streaming thread), then runs at 5 fps again.  With
--scenario none every branch is fast (the baseline).  --plugin points
GST_PLUGIN_PATH at another build (the "before" run with the single
streaming thread: both ends load it).

Prints one JSON object: per camera the frames received and per-second
arrival counts from the first frame on, the frames each rdmasink sent and
dropped, rdmasrc's per-device stats where it has them, and both processes'
CPU (getrusage).  Measures; asserts nothing.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import threading
import time

import gi

gi.require_version("Gst", "1.0")
from gi.repository import Gst  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CAMERAS = 12
FRAME = 640 * 480 * 3
BLOCK_FROM, BLOCK_TO = 5.0, 10.0  # camera 0 stuck, seconds after its first frame


def cpu_s():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


class Receiver:
    def __init__(self, a):
        self.lock = threading.Lock()
        self.arrivals = [[] for _ in range(CAMERAS)]
        self.t0 = None
        self.blocked = False
        props = f"transport=shm port={a.port} block-size={FRAME + 72} stats-interval=0"
        if a.policy:
            props += f" src_0::over-budget={a.policy}"
        branches = []
        for d in range(CAMERAS):
            slow = d == 0 and a.scenario == "slow"
            mid = "identity name=slow sleep-time=200000 ! " if slow else ""
            branches.append(f"r.src_{d} ! queue ! {mid}fakesink name=s{d} sync=false")
        self.pipeline = Gst.parse_launch(f"rdmasrc name=r {props} " + " ".join(branches))
        for d in range(CAMERAS):
            pad = self.pipeline.get_by_name(f"s{d}").get_static_pad("sink")
            pad.add_probe(Gst.PadProbeType.BUFFER, self.on_buffer, d)
        if a.scenario == "slow":
            pad = self.pipeline.get_by_name("slow").get_static_pad("sink")
            pad.add_probe(Gst.PadProbeType.BUFFER, self.maybe_block, None)

    def on_buffer(self, pad, info, d):
        now = time.monotonic()
        with self.lock:
            if self.t0 is None:
                self.t0 = now
            self.arrivals[d].append(now)
        return Gst.PadProbeReturn.OK

    def maybe_block(self, pad, info, _):
        # Camera 0's consumer stuck from 5 s to 10 s: its thread held here.
        with self.lock:
            t0 = self.t0
        if t0 is not None and not self.blocked:
            t = time.monotonic() - t0
            if BLOCK_FROM <= t < BLOCK_TO:
                self.blocked = True
                time.sleep(BLOCK_TO - t)
        return Gst.PadProbeReturn.OK

    def stats(self):
        r = self.pipeline.get_by_name("r")
        st = r.get_property("stats")
        out = {}
        if st is None:
            return out
        # One field per device with a pad: "device-<N>", a structure.
        for i in range(st.n_fields()):
            ds = st.get_value(st.nth_field_name(i))
            if not isinstance(ds, Gst.Structure) or ds.get_name() != "rdmasrc-device-stats":
                continue
            d = ds.get_value("device-id")
            out[d] = {f: ds.get_value(f) for f in (
                "frames", "pushed", "copies", "drops-leaky", "pauses", "paused-time",
                "lane-blocks") if ds.has_field(f)}
        return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--scenario", choices=["none", "slow"], default="slow")
    ap.add_argument("--policy", default="", help="camera 0's over-budget policy")
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--plugin", default="", help="GST_PLUGIN_PATH for both ends")
    a = ap.parse_args()
    if a.plugin:
        os.environ["GST_PLUGIN_PATH"] = a.plugin
    Gst.init(None)
    frames = int(a.seconds * 25)

    rx = Receiver(a)
    c0 = cpu_s()
    rx.pipeline.set_state(Gst.State.PLAYING)
    time.sleep(0.5)
    tx = subprocess.Popen(
        ["/usr/bin/python3", os.path.join(HERE, "gst_peers.py"), "send", "--transport",
         "rdma-sb", "--streams", str(CAMERAS), "--port", str(a.port), "--frames",
         str(frames), "--live", "--seconds", str(a.seconds + 30)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        out, err = tx.communicate(timeout=a.seconds + 60)
    except subprocess.TimeoutExpired:
        tx.kill()
        out, err = tx.communicate()
    # Camera 0 drains what it queued at 5 fps: give it a few seconds.
    time.sleep(3.0)
    res = {"scenario": a.scenario, "policy": a.policy or "default",
           "plugin": a.plugin or "this build", "frames_each": frames,
           "rx_cpu_s": cpu_s() - c0, "rdmasrc": rx.stats()}
    rx.pipeline.set_state(Gst.State.NULL)
    try:
        res["tx"] = json.loads(out.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        res["tx"] = None
        res["tx_error"] = err.strip()[-300:]
    t0 = rx.t0 or 0
    res["received"] = [len(x) for x in rx.arrivals]
    res["per_second"] = []
    for arr in rx.arrivals:
        buckets = [0] * int(a.seconds + 4)
        for t in arr:
            i = int(t - t0)
            if 0 <= i < len(buckets):
                buckets[i] += 1
        res["per_second"].append(buckets)
    span = (max((x[-1] for x in rx.arrivals if x), default=t0) - t0) or 1
    res["span_s"] = span
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
