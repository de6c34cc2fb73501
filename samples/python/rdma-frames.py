#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""rdma-frames: every camera from rdmasrc as numpy arrays, with motion.

    samples/python/rdma-frames.py [--transport shm|verbs] [--port N]
        [--devices N] [--seconds N] [--frame-sets [--latency-ms N]]

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
once --devices cameras have ended, or on Ctrl-C.

--frame-sets: cameras 0..N-1 (--devices, default 12) stamped by their
capture instants (rdmasrc timestamp-mode=capture) into rdmaframeset, and
one JSON line per capture instant instead: its sequence number, capture
time, whether every camera made it, the cameras missing, the capture-time
spread, each frame's device, capture time and motion, and "moving" (the
cameras with motion at that instant: a multi-view analysis); a
{"event": "summary", ...} line at the end with rdmaframeset's counts and
the sets this app dropped (it keeps the newest two while an analysis
runs).  Needs python3-gi,
gir1.2-gstreamer-1.0, gir1.2-gst-plugins-base-1.0 and python3-numpy.
"""

import argparse
import json
import signal
import sys
import threading
import warnings

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


def frame_array(buf, caps):
    """A frame's RGB pixels as numpy (a copy by PyGObject's map, see
    on_sample), its size from its caps."""
    s = caps.get_structure(0)
    w, h = s.get_value("width"), s.get_value("height")
    ok, info = buf.map(Gst.MapFlags.READ)
    try:
        stride = len(info.data) // h
        rows = np.ndarray((h, stride), np.uint8, buffer=info.data)
        return rows[:, : w * 3].reshape(h, w, 3).copy()
    finally:
        buf.unmap(info)


def on_frame_set(sink, state):
    """One capture instant: rdmaframeset's buffer list, a buffer per camera
    that made it, each with its "rdma-frame" meta (device-id, caps,
    capture-time), the first also with the set's "rdma-frame-set"."""
    sample = sink.emit("pull-sample")
    frames = sample.get_buffer_list()
    first = frames.get(0)
    info = first.get_custom_meta("GstRdmaFrameSetMeta").get_structure()
    # A GstValueArray, which PyGObject reads only as a GValueArray (GLib
    # deprecated the type, not its use here; get_value can't read it
    # without python3-gst-1.0).
    _, missing = info.get_array("missing")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        missing = [missing.get_nth(i) for i in range(missing.n_values)]
    record = {"set": info.get_value("sequence"),
              "complete": info.get_value("complete"),
              "missing": missing,
              "spread_ms": round(info.get_value("spread") / 1e6, 3),
              "frames": []}
    captures = []
    for i in range(frames.length()):
        buf = frames.get(i)
        meta = buf.get_custom_meta("GstRdmaFrameMeta").get_structure()
        device = meta.get_value("device-id")
        ok, capture = meta.get_uint64("capture-time")
        cam = state["cameras"].setdefault(device, {})
        motion, fraction = analyse(cam, frame_array(buf, meta.get_value("caps")))
        record["frames"].append({"device": device,
                                 "capture_time_ns": capture if ok else None,
                                 "motion": motion,
                                 "changed": round(fraction, 5)})
        if ok:
            captures.append(capture)
    record["capture_time_ns"] = min(captures) if captures else None
    record["moving"] = [f["device"] for f in record["frames"] if f["motion"]]
    state["analysed"] += 1
    emit(record)
    return Gst.FlowReturn.OK


def run_frame_sets(args, loop):
    """--frame-sets: cameras 0..N-1 by capture instant, one line a set."""
    cameras = args.devices or 12
    desc = ("rdmasrc name=r transport=%s port=%d timestamp-mode=capture "
            "rdmaframeset name=fs latency=%d ! appsink name=sink sync=false "
            "emit-signals=true buffer-list=true max-buffers=2 drop=true"
            % (args.transport, args.port, args.latency_ms * 1000000))
    # No queue per camera: a leaky one would drop cameras one by one and
    # break sets up; appsink's drop=true drops whole sets instead.
    for d in range(cameras):
        desc += (" r.src_%d ! videoconvert ! video/x-raw,format=RGB ! "
                 "fs.sink_%d" % (d, d))
    pipeline = Gst.parse_launch(desc)
    state = {"cameras": {}, "analysed": 0}
    pipeline.get_by_name("sink").connect("new-sample", on_frame_set, state)
    return pipeline, state


def frame_sets_summary(pipeline, state):
    stats = pipeline.get_by_name("fs").get_property("stats")
    sets = stats.get_value("sets")
    emit({"event": "summary", "sets": sets,
          "complete": stats.get_value("sets-complete"),
          "partial": stats.get_value("sets-partial"),
          "late_drops": stats.get_value("late-drops"),
          "max_spread_ms": round(stats.get_value("max-spread") / 1e6, 3),
          "analysed": state["analysed"],
          "dropped": sets - state["analysed"]})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--transport", default="shm")
    ap.add_argument("--port", type=int, default=7471)
    ap.add_argument("--devices", type=int, default=0)
    ap.add_argument("--seconds", type=int, default=0)
    ap.add_argument("--frame-sets", action="store_true",
                    help="analyse the cameras' frames of each capture "
                    "instant together (rdmaframeset)")
    ap.add_argument("--latency-ms", type=int, default=100,
                    help="--frame-sets: how long past rdmasrc's latency a "
                    "set waits for a late camera")
    args = ap.parse_args()
    Gst.init(None)
    loop = GLib.MainLoop()
    if args.frame_sets:
        return run(loop, args, *run_frame_sets(args, loop))
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
    return run(loop, args, pipeline, None)


def run(loop, args, pipeline, sets_state):
    bus = pipeline.get_bus()
    bus.add_signal_watch()
    status = [0]
    # Frame sets end when every camera has (rdmaframeset's EOS).
    bus.connect("message::eos", lambda _bus, _msg: loop.quit())

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
    if sets_state is not None:
        frame_sets_summary(pipeline, sets_state)
    pipeline.set_state(Gst.State.NULL)
    return status[0]


if __name__ == "__main__":
    sys.exit(main())
