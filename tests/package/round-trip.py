#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Twelve cameras over shm into one rdmasrc, every camera's frames counted.

    round-trip.py PORT [CAMERAS] [FRAMES]

The receiver is this process: one rdmasrc, a fakesink on each pad
src_0..src_<CAMERAS-1>, a probe counting the buffers and the EOS of each.
Once it is PLAYING it starts the sender, one gst-launch-1.0 with CAMERAS
videotestsrc num-buffers=FRAMES, each into rdmasink device-id=N.  The
cameras are not live: rdmasrc then holds a sender back rather than drop
its frames for a slow consumer, so on a loaded machine too every camera
must deliver exactly FRAMES frames, then EOS.  Caps travel in-band: each
pad must carry the sender's 160x120.

Exit 0 when every camera delivered FRAMES frames and EOS and the sender
exited 0; 1 otherwise, with the counts.  A hang fails after 120 s.
"""
import subprocess
import sys

import gi

gi.require_version("Gst", "1.0")
from gi.repository import GLib, Gst  # noqa: E402

TIMEOUT_S = 120


def main():
    port = int(sys.argv[1])
    cameras = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    frames = int(sys.argv[3]) if len(sys.argv) > 3 else 30
    Gst.init(None)

    launch = f"rdmasrc transport=shm port={port} name=r " + " ".join(
        f"r.src_{i} ! fakesink name=cam{i} sync=false" for i in range(cameras)
    )
    pipeline = Gst.parse_launch(launch)
    counts = [0] * cameras
    eos = [False] * cameras
    widths = [None] * cameras
    loop = GLib.MainLoop()
    failure = []

    def probe(pad, info, cam):
        if info.type & Gst.PadProbeType.BUFFER:
            counts[cam] += 1
        elif info.get_event().type == Gst.EventType.CAPS:
            s = info.get_event().parse_caps().get_structure(0)
            widths[cam] = s.get_value("width")
        elif info.get_event().type == Gst.EventType.EOS:
            eos[cam] = True
            if all(eos):
                GLib.idle_add(loop.quit)
        return Gst.PadProbeReturn.OK

    for i in range(cameras):
        sinkpad = pipeline.get_by_name(f"cam{i}").get_static_pad("sink")
        sinkpad.add_probe(
            Gst.PadProbeType.BUFFER | Gst.PadProbeType.EVENT_DOWNSTREAM, probe, i
        )

    def on_message(bus, msg):
        if msg.type == Gst.MessageType.ERROR:
            err, dbg = msg.parse_error()
            failure.append(f"receiver error: {err.message} ({dbg})")
            loop.quit()

    bus = pipeline.get_bus()
    bus.add_signal_watch()
    bus.connect("message", on_message)

    def on_timeout():
        failure.append(f"no EOS from every camera within {TIMEOUT_S} s")
        loop.quit()
        return False

    GLib.timeout_add_seconds(TIMEOUT_S, on_timeout)
    if pipeline.set_state(Gst.State.PLAYING) == Gst.StateChangeReturn.FAILURE:
        print("round trip: FAILED: the receiver did not start")
        return 1
    # rdmasink keeps trying to connect for connect-timeout ms, so the
    # sender may start before the receiver listens.
    sender_args = ["gst-launch-1.0", "-q"]
    for i in range(cameras):
        sender_args += (
            f"videotestsrc num-buffers={frames} pattern={i % 20} ! "
            "video/x-raw,format=RGB,width=160,height=120,framerate=25/1 ! "
            f"rdmasink transport=shm port={port} device-id={i} "
            "connect-timeout=60000"
        ).split()
    sender = subprocess.Popen(sender_args)
    loop.run()
    pipeline.set_state(Gst.State.NULL)
    try:
        sender_rc = sender.wait(timeout=30)
    except subprocess.TimeoutExpired:
        sender.kill()
        sender_rc = "timed out"

    bad = [
        f"camera {i}: {counts[i]} frames, EOS {eos[i]}, width {widths[i]}"
        for i in range(cameras)
        if counts[i] != frames or not eos[i] or widths[i] != 160
    ]
    if sender_rc != 0:
        failure.append(f"sender exit status {sender_rc}")
    if bad or failure:
        print("round trip: FAILED: " + "; ".join(failure + bad))
        print("round trip: counts per camera: " + " ".join(map(str, counts)))
        return 1
    print(f"round trip: {cameras} cameras x {frames} frames, each counted, "
          "caps in-band, EOS from each")
    return 0


if __name__ == "__main__":
    sys.exit(main())
