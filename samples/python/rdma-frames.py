#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""rdma-frames: every camera from rdmasrc as numpy arrays, with motion.

    samples/python/rdma-frames.py [--transport shm|verbs] [--port N]
        [--devices N] [--seconds N]

One JSON line per frame on stdout: device, packet number, capture time
(the sender's wall clock, ns), motion (yes/no) and the changed fraction;
{"device": N, "event": "eos", ...} when a camera ends, with what became of
that camera's frames since its stream started: "received" from rdmasrc,
"analysed", "dropped" by this app (its leaky queue keeps the newest two
while an analysis runs, as live analytics should) and "rdmasrc_dropped"
(what the camera's rdmasrc pad dropped: its drop-oldest over the camera's
budget, frames before PLAYING or after EOS; its stats' drops-*).
Every frame sent is in exactly one of analysed, dropped and
rdmasrc_dropped.  Ends after --seconds,
once --devices cameras have ended, or on Ctrl-C.  Needs python3-gi,
gir1.2-gstreamer-1.0, gir1.2-gst-plugins-base-1.0 and python3-numpy.
"""

import argparse
import json
import signal
import sys
import threading

import gi
import numpy as np

gi.require_version("Gst", "1.0")
from gi.repository import GLib, Gst  # noqa: E402

# --- What a user changes: the analysis, and its thresholds. -------------
PIXEL_CHANGE = 25  # a pixel "changed" when it moves by more than this
MOTION_FRACTION = 0.001  # motion when more than 0.1 % of pixels changed


def analyse(state, frame):
    """frame: height x width x 3 uint8 (RGB). Returns (motion, fraction)."""
    grey = frame.mean(axis=2, dtype=np.float32)
    prev, state["prev"] = state.get("prev"), grey
    if prev is None:
        return False, 0.0
    fraction = float((np.abs(grey - prev) > PIXEL_CHANGE).mean())
    return fraction > MOTION_FRACTION, fraction
# ------------------------------------------------------------------------


UNIX_CAPS = Gst.Caps.from_string("timestamp/x-unix")
OUT = threading.Lock()  # each camera calls back from its own thread


def emit(record):
    with OUT:
        sys.stdout.write(json.dumps(record) + "\n")
        sys.stdout.flush()


def on_sample(sink, dev):
    sample = sink.emit("pull-sample")
    dev["analysed"] += 1
    buf, s = sample.get_buffer(), sample.get_caps().get_structure(0)
    w, h = s.get_value("width"), s.get_value("height")
    ok, info = buf.map(Gst.MapFlags.READ)  # one contiguous block
    try:
        # PyGObject hands the mapped bytes over as one bytes object (a copy;
        # python3-gst-1.0 would give a memoryview); numpy views it without
        # another.  Rows may be padded to a multiple of 4.
        stride = len(info.data) // h
        rows = np.ndarray((h, stride), np.uint8, buffer=info.data)
        frame = rows[:, : w * 3].reshape(h, w, 3)
        motion, fraction = analyse(dev, frame)
    finally:
        buf.unmap(info)
    meta = buf.get_reference_timestamp_meta(UNIX_CAPS)
    emit({"device": dev["number"], "packet": buf.offset,
          "capture_time_ns": meta.timestamp if meta else None,
          "motion": motion, "changed": round(fraction, 5)})
    return Gst.FlowReturn.OK


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--transport", default="shm")
    ap.add_argument("--port", type=int, default=7471)
    ap.add_argument("--devices", type=int, default=0)
    ap.add_argument("--seconds", type=int, default=0)
    args = ap.parse_args()
    Gst.init(None)
    loop = GLib.MainLoop()
    pipeline = Gst.Pipeline.new("rdma-frames")
    src = Gst.ElementFactory.make("rdmasrc")
    src.set_property("port", args.port)
    Gst.util_set_object_arg(src, "transport", args.transport)
    pipeline.add(src)
    ended = set()

    def rdmasrc_drops(number):  # what the camera's pad dropped so far
        # The stats stay referenced while their device structure is read:
        # it lives inside them.
        stats = src.get_property("stats")
        device = stats.get_value("device-%d" % number)
        if not device:
            return 0
        return sum(device.get_value(f) for f in
                   ("drops-leaky", "drops-not-playing", "drops-ended"))

    def on_received(pad, info, dev):  # on rdmasrc's pad, its thread
        if info.type & Gst.PadProbeType.BUFFER:
            dev["received"] += 1
        elif info.get_event().type == Gst.EventType.EOS:
            # What this stream brought, before the next one's frames count.
            dev["received_at_eos"].append(dev["received"])
        return Gst.PadProbeReturn.OK

    def on_eos(pad, info, dev):  # report a camera's end, keep its branch
        number = dev["number"]
        if info.get_event().type == Gst.EventType.EOS:
            # EOS follows the stream's last frame through the queue: each
            # frame it brought has been analysed or dropped by now.
            received = dev["received_at_eos"].pop(0)
            drops = rdmasrc_drops(number)
            last = dev["reported"]
            emit({"device": number, "event": "eos",
                  "received": received - last["received"],
                  "analysed": dev["analysed"] - last["analysed"],
                  "dropped": (received - dev["analysed"]) -
                  (last["received"] - last["analysed"]),
                  "rdmasrc_dropped": drops - last["rdmasrc_dropped"]})
            dev["reported"] = {"received": received,
                               "analysed": dev["analysed"],
                               "rdmasrc_dropped": drops}
            ended.add(number)
            if args.devices and len(ended) >= args.devices:
                GLib.idle_add(loop.quit)
            return Gst.PadProbeReturn.DROP
        if info.get_event().type == Gst.EventType.STREAM_START:
            ended.discard(number)
        return Gst.PadProbeReturn.OK

    def on_pad_added(_src, pad):  # camera N arrived: pad src_N
        number = int(pad.get_name().split("_")[1])
        branch = Gst.parse_bin_from_description(
            "queue max-size-buffers=2 leaky=downstream ! videoconvert ! "
            "video/x-raw,format=RGB ! appsink name=sink sync=false "
            "emit-signals=true max-buffers=2 drop=true", True)
        sink = branch.get_by_name("sink")
        dev = {"number": number, "received": 0, "analysed": 0,
               "received_at_eos": [],
               "reported": {"received": 0, "analysed": 0,
                            "rdmasrc_dropped": 0}}
        sink.connect("new-sample", on_sample, dev)
        sink.get_static_pad("sink").add_probe(
            Gst.PadProbeType.EVENT_DOWNSTREAM, on_eos, dev)
        pad.add_probe(Gst.PadProbeType.BUFFER |
                      Gst.PadProbeType.EVENT_DOWNSTREAM, on_received, dev)
        pipeline.add(branch)
        branch.sync_state_with_parent()
        pad.link(branch.get_static_pad("sink"))

    src.connect("pad-added", on_pad_added)
    bus = pipeline.get_bus()
    bus.add_signal_watch()
    status = [0]

    def on_error(_bus, msg):
        print("rdma-frames: %s" % msg.parse_error()[0].message, file=sys.stderr)
        status[0] = 1
        loop.quit()

    bus.connect("message::error", on_error)
    GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGINT, loop.quit)
    if args.seconds:
        GLib.timeout_add_seconds(args.seconds, loop.quit)
    pipeline.set_state(Gst.State.PLAYING)
    loop.run()
    pipeline.set_state(Gst.State.NULL)
    return status[0]


if __name__ == "__main__":
    sys.exit(main())
