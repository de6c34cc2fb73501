#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A long run of rdmasrc's skew estimate (issue #29, item 6): one camera
whose pipeline clock runs PPM fast (a GstSystemClock with a calibration),
25 fps into rdmasrc timestamp-mode=skew, for SECONDS.  Prints, per ten
seconds of arrival, the lower envelope of arrival - PTS (the fastest
frame's lateness: what the clocks do, without the host's scheduling
noise) and how far it moved from the first full period to the last, and
the rate rdmasrc estimated.  Without the estimate the envelope moves PPM
of the run (100 ppm over 3 minutes: 18 ms; 1 % over 20 s: 200 ms).

    /usr/bin/python3 tests/bench/skew_long.py --ppm 100 --seconds 180

Run it in a network namespace of its own if other rdmasrcs may listen
(`unshare --net sh -c 'ip link set lo up && exec ...'`).  GST_PLUGIN_PATH
must name the build's gst/ directory (default: build/gst beside this
tree).  A measurement, not a test: its figure goes in the closing note
of the issue and in README's "Timestamp modes".
"""
import argparse
import os
import sys
import threading
import time

import gi

gi.require_version("Gst", "1.0")
from gi.repository import Gst  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ppm", type=float, default=100.0)
    ap.add_argument("--seconds", type=int, default=180)
    ap.add_argument("--period", type=int, default=10)
    ap.add_argument("--transport", default="shm")
    ap.add_argument("--port", type=int, default=7733)
    a = ap.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    os.environ.setdefault("GST_PLUGIN_PATH",
                          os.path.join(here, "..", "..", "build", "gst"))
    Gst.init(None)

    rx = Gst.parse_launch(
        f"rdmasrc name=r transport={a.transport} port={a.port} device-id=0 "
        "timestamp-mode=skew stats-interval=0 ! fakesink name=s sync=false "
        "async=false")
    records = []
    lock = threading.Lock()

    def on_buffer(pad, info):
        clock = rx.get_clock()
        if clock is not None:
            arrival = clock.get_time() - rx.get_base_time()
            with lock:
                records.append((arrival, info.get_buffer().pts))
        return Gst.PadProbeReturn.OK

    rx.get_by_name("s").get_static_pad("sink").add_probe(
        Gst.PadProbeType.BUFFER, on_buffer)

    tx = Gst.parse_launch(
        "videotestsrc is-live=true ! video/x-raw,format=GRAY8,width=64,"
        "height=48,framerate=25/1 ! rdmasink transport="
        f"{a.transport} port={a.port} device-id=0 stats-interval=0")
    clock = Gst.SystemClock()
    clock.set_property("name", "skewed-clock")
    now = clock.get_internal_time()
    denom = 1_000_000
    clock.set_calibration(now, now, int(denom + a.ppm), denom)
    tx.use_clock(clock)

    rx.set_state(Gst.State.PLAYING)
    time.sleep(1)
    tx.set_state(Gst.State.PLAYING)
    time.sleep(a.seconds)
    stats = rx.get_by_name("r").get_property("stats")
    tx.set_state(Gst.State.NULL)
    rx.set_state(Gst.State.NULL)

    ok, dev = stats.get_value("device-0") is not None, stats.get_value(
        "device-0")
    rate = dev.get_value("rate-ppm") if ok else float("nan")
    with lock:
        recs = list(records)
    if not recs:
        print("no frames arrived", file=sys.stderr)
        return 1
    t0 = recs[0][0]
    env = {}
    for arrival, pts in recs:
        k = (arrival - t0) // (a.period * Gst.SECOND)
        env[k] = min(env.get(k, 1 << 62), arrival - pts)
    full = sorted(k for k in env if (k + 1) * a.period <= a.seconds - 1)
    print(f"clock {a.ppm:+.1f} ppm, {a.seconds} s, {len(recs)} frames over "
          f"{a.transport}; rdmasrc's estimate {rate:+.1f} ppm")
    for k in full:
        print(f"  {k * a.period:4d}-{(k + 1) * a.period:4d} s: arrival - PTS "
              f"envelope {env[k] / 1e6:8.3f} ms")
    # The first period holds the estimate's start: drift from the second.
    first, last = full[1] if len(full) > 2 else full[0], full[-1]
    drift = (env[last] - env[first]) / 1e6
    spread = (max(env[k] for k in full[1:]) -
              min(env[k] for k in full[1:])) / 1e6 if len(full) > 2 else 0
    print(f"drift of the envelope {first * a.period}-{(last + 1) * a.period} "
          f"s: {drift:+.3f} ms (spread {spread:.3f} ms); without the "
          f"estimate: {a.ppm * 1e-6 * (last - first) * a.period * 1e3:+.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
