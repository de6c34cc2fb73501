#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Runs a gst-launch-1.0 pipeline description and reports statistics.

    pipelines/rig-run.py [--stats FILE] [--ready FILE] [--label NAME]
        -- ELEMENT ! ELEMENT ...

The description is parsed exactly as gst-launch-1.0 parses its arguments
(gst_parse_launchv, delayed linking of sometimes pads included) and run like
`gst-launch-1.0 -e`: until EOS or an error; SIGINT/SIGTERM send EOS first, a
second one stops at once.  Afterwards (with --stats) it writes a JSON file
with the final "stats" of every rdmasink and rdmasrc in the pipeline, the
buffers and arrival times seen on every rdmasrc pad (requested on the
command line or added later), on every compositor input pad (with the
rdmasrc pad that feeds it, so a camera's frames can be followed into a
mosaic) and on every compositor output, the process's CPU time and the
wall time while PLAYING.  rig-send.sh and rig-mosaic.sh use it for
their --stats option; gst-launch-1.0 -m only shows the periodic
"rdma*-stats" messages, not the final counts.

--ready FILE is created once the pipeline is PLAYING (an rdmasrc accepts
senders from then on).  Exit status: 0 after EOS, 1 after an error, 2 on
usage errors, 130 when interrupted twice.

Runs with Debian's python3 (python3-gi, gir1.2-gstreamer-1.0).  The plugin
is found through GST_PLUGIN_PATH, else in build/gst of this source tree.
"""

import argparse
import json
import os
import resource
import signal
import sys
import threading
import time

import gi

gi.require_version("Gst", "1.0")
from gi.repository import GLib, Gst  # noqa: E402


def structure_to_dict(s):
    """A GstStructure as a dict, nested structures (rdmasrc's
    "device-<N>") as dicts too."""
    out = {"name": s.get_name()}
    for i in range(s.n_fields()):
        name = s.nth_field_name(i)
        out[name] = value_to_py(s.get_value(name))
    return out


def value_to_py(v):
    if isinstance(v, Gst.Structure):
        return structure_to_dict(v)
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    return str(v)


class PadCounter:
    """Counts buffers on a pad and remembers first/last arrival."""

    def __init__(self, name, on_first=None):
        self.name = name
        self.on_first = on_first
        self.buffers = 0
        self.first = None
        self.last = None
        self.offsets = None  # first and last GST_BUFFER_OFFSET
        self.errors = 0  # probes that failed: the counts are not exact
        self.lock = threading.Lock()

    def probe(self, pad, info):
        # An exception in a probe makes PyGObject return DROP: a counter
        # that fails must not take frames from the pipeline it measures.
        try:
            self.count(info)
        except Exception as e:  # noqa: BLE001 (counted and reported)
            with self.lock:
                self.errors += 1
                if self.errors == 1:
                    print("probe on %s: %r" % (self.name, e), file=sys.stderr)
        return Gst.PadProbeReturn.OK

    def count(self, info):
        buf = info.get_buffer()
        now = time.monotonic()
        with self.lock:
            self.buffers += 1
            if self.first is None:
                self.first = now
                if self.on_first:
                    self.on_first(now)
            self.last = now
            if buf is not None and buf.offset != Gst.BUFFER_OFFSET_NONE:
                if self.offsets is None:
                    self.offsets = [buf.offset, buf.offset]
                self.offsets[1] = buf.offset


class Runner:
    def __init__(self, argv, label):
        self.label = label
        self.pipeline = Gst.parse_launchv(argv)
        if not isinstance(self.pipeline, Gst.Pipeline):
            # A single element: gst-launch wraps it as well.
            p = Gst.Pipeline.new(None)
            p.add(self.pipeline)
            self.pipeline = p
        self.loop = GLib.MainLoop()
        self.status = None
        self.eos_sent = False
        self.errors = []
        self.warnings = []
        self.pads = {}  # "element:pad" -> PadCounter: rdmasrc pads
        self.outputs = {}  # the same for compositor outputs (mosaic frames)
        self.inputs = {}  # the same for compositor inputs (per camera)
        self.t_first = None  # first buffer of any rdmasrc pad
        self.cpu_first = None
        self.t_playing = None
        self.t_end = None
        self.cpu_playing = None
        self.cpu_end = None
        self.ready_file = None
        self.lock = threading.Lock()
        # "PLAYING" means: every rdmasrc is, else the pipeline is.
        self.watch = set()
        self.playing = set()
        for e in self.elements():
            if factory_name(e) == "rdmasrc":
                e.connect("pad-added", self.on_pad_added)
                self.watch.add(e)
                # Pads named on the command line exist already: no
                # pad-added for them.
                for pad in e.srcpads:
                    self.on_pad_added(e, pad)
            elif factory_name(e) == "compositor":
                key = "%s:src" % e.get_name()
                self.outputs[key] = PadCounter(key)
                e.get_static_pad("src").add_probe(Gst.PadProbeType.BUFFER, self.outputs[key].probe)
                for pad in e.sinkpads:
                    key = "%s:%s" % (e.get_name(), pad.get_name())
                    self.inputs[key] = PadCounter(key)
                    self.inputs[key].pad = pad
                    pad.add_probe(Gst.PadProbeType.BUFFER, self.inputs[key].probe)
        if not self.watch:
            self.watch.add(self.pipeline)
        bus = self.pipeline.get_bus()
        bus.add_signal_watch()
        bus.connect("message", self.on_message)

    def elements(self):
        it = self.pipeline.iterate_recurse()
        out = []
        while True:
            res, e = it.next()
            if res == Gst.IteratorResult.OK:
                out.append(e)
            elif res == Gst.IteratorResult.RESYNC:
                it.resync()
                out = []
            else:
                return out

    def on_pad_added(self, element, pad):
        key = "%s:%s" % (element.get_name(), pad.get_name())
        if key in self.pads:
            return
        counter = PadCounter(key, self.on_first_buffer)
        self.pads[key] = counter
        pad.add_probe(Gst.PadProbeType.BUFFER, counter.probe)

    def on_first_buffer(self, now):
        # Streaming threads: the first of them wins.
        with self.lock:
            if self.t_first is None:
                self.t_first = now
                self.cpu_first = cpu_seconds()

    def on_message(self, bus, msg):
        t = msg.type
        if t == Gst.MessageType.EOS:
            self.finish(0)
        elif t == Gst.MessageType.ERROR:
            err, dbg = msg.parse_error()
            text = "%s: %s (%s)" % (msg.src.get_name(), err.message, dbg)
            self.errors.append(text)
            print("%s: ERROR from %s" % (self.label, text), file=sys.stderr)
            self.finish(1)
        elif t == Gst.MessageType.WARNING:
            err, dbg = msg.parse_warning()
            text = "%s: %s (%s)" % (msg.src.get_name(), err.message, dbg)
            self.warnings.append(text)
            print("%s: WARNING from %s" % (self.label, text), file=sys.stderr)
        elif t == Gst.MessageType.LATENCY:
            self.pipeline.recalculate_latency()
        elif t == Gst.MessageType.STATE_CHANGED and msg.src in self.watch:
            _, new, _ = msg.parse_state_changed()
            if new == Gst.State.PLAYING:
                self.playing.add(msg.src)
            if self.t_playing is None and self.playing == self.watch:
                self.on_playing()

    def on_playing(self):
        # A live pipeline whose sinks preroll on the first buffer (filesink,
        # rdmasink) only reports PLAYING once data flows; an rdmasrc accepts
        # senders as soon as it is PLAYING itself.
        self.t_playing = time.monotonic()
        self.cpu_playing = cpu_seconds()
        if self.ready_file:
            with open(self.ready_file, "w") as f:
                f.write("playing\n")

    def finish(self, status):
        if self.status is None:
            self.status = status
            self.t_end = time.monotonic()
            self.cpu_end = cpu_seconds()
        self.loop.quit()

    def on_signal(self):
        if not self.eos_sent:
            print("%s: interrupt: sending EOS" % self.label, file=sys.stderr)
            self.eos_sent = True
            self.send_eos()
            GLib.timeout_add_seconds(10, self.eos_timeout)
        else:
            self.finish(130)
        return GLib.SOURCE_CONTINUE

    def send_eos(self):
        # What gst-launch-1.0 -e does: EOS into every source ...
        self.pipeline.send_event(Gst.Event.new_eos())
        # ... but rdmasrc ignores an EOS sent to the element (it has no
        # send_event), and a branch whose rdmasrc pad never appeared has
        # no source at all: inject EOS right downstream of both.
        for e in self.elements():
            for pad in e.sinkpads:
                peer = pad.get_peer()
                if peer is None or factory_name(peer.get_parent_element()) == "rdmasrc":
                    pad.send_event(Gst.Event.new_eos())

    def eos_timeout(self):
        if self.status is None:
            print("%s: no EOS 10 s after the interrupt: stopping" % self.label, file=sys.stderr)
            self.finish(130)
        return GLib.SOURCE_REMOVE

    def run(self, ready_file):
        self.ready_file = ready_file
        for sig in (signal.SIGINT, signal.SIGTERM):
            GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, sig, self.on_signal)
        self.cpu_start = cpu_seconds()
        ret = self.pipeline.set_state(Gst.State.PLAYING)
        if ret == Gst.StateChangeReturn.FAILURE:
            # The error message on the bus says why.
            GLib.timeout_add(100, lambda: self.finish(1) or False)
        self.loop.run()

    def report(self):
        """Statistics; call before the pipeline goes to NULL."""
        elements = {}
        for e in self.elements():
            if factory_name(e) in ("rdmasink", "rdmasrc"):
                elements[e.get_name()] = {
                    "factory": factory_name(e),
                    "stats": structure_to_dict(e.get_property("stats")),
                }
        end = self.t_end if self.t_end is not None else time.monotonic()
        cpu_end = self.cpu_end if self.cpu_end is not None else cpu_seconds()
        playing = (end - self.t_playing) if self.t_playing is not None else 0.0
        cpu_playing = (cpu_end - self.cpu_playing) if self.cpu_playing is not None else 0.0
        # A receiver from its first frame on (not while it waited for the
        # senders); a sender from PLAYING (its sinks preroll on the first
        # frame, after connecting).
        with self.lock:
            t0, c0 = (self.t_first, self.cpu_first) if self.t_first is not None else (self.t_playing, self.cpu_playing)
        streaming = end - t0 if t0 is not None else 0.0
        cpu_streaming = cpu_end - c0 if c0 is not None else 0.0
        return {
            "label": self.label,
            "status": self.status,
            "errors": self.errors,
            "warnings": self.warnings,
            "wall-playing": playing,
            "cpu-playing": cpu_playing,
            "wall-streaming": streaming,
            "cpu-streaming": cpu_streaming,
            "cpu-percent-streaming": 100.0 * cpu_streaming / streaming if streaming > 0 else 0.0,
            "cpu-total": cpu_end,
            "elements": elements,
            "pads": self.counts(self.pads),
            "outputs": self.counts(self.outputs),
            "inputs": self.input_counts(),
        }

    def input_counts(self):
        """Compositor inputs, each with the rdmasrc pad upstream of it
        ("r:src_3") as "from", or None when none is."""
        out = self.counts(self.inputs)
        for key, c in self.inputs.items():
            out[key]["from"] = rdmasrc_pad_upstream(c.pad)
        return out

    def counts(self, counters):
        out = {}
        for key, c in sorted(counters.items()):
            with c.lock:
                span = (c.last - c.first) if c.first is not None else 0.0
                out[key] = {
                    "buffers": c.buffers,
                    "first-arrival": (c.first - self.t_playing)
                    if c.first is not None and self.t_playing is not None
                    else None,
                    "span": span,
                    "fps": (c.buffers - 1) / span if span > 0 else 0.0,
                    "first-offset": c.offsets[0] if c.offsets else None,
                    "last-offset": c.offsets[1] if c.offsets else None,
                    "probe-errors": c.errors,
                }
        return out


def rdmasrc_pad_upstream(pad):
    """The rdmasrc pad ("element:pad") feeding pad through elements of one
    sink pad each (queue, videoscale, videoconvert, capsfilter), or None."""
    for _ in range(32):
        peer = pad.get_peer()
        if peer is None:
            return None
        e = peer.get_parent_element()
        if e is None:
            return None
        if factory_name(e) == "rdmasrc":
            return "%s:%s" % (e.get_name(), peer.get_name())
        if len(e.sinkpads) != 1:
            return None
        pad = e.sinkpads[0]
    return None


def factory_name(e):
    f = e.get_factory()
    return f.get_name() if f else ""


def cpu_seconds():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def main():
    ap = argparse.ArgumentParser(
        description="Run a gst-launch-1.0 description; write statistics.",
        usage="%(prog)s [--stats FILE] [--ready FILE] [--label NAME] -- DESCRIPTION...",
    )
    ap.add_argument("--stats", metavar="FILE", help="write JSON statistics here at the end")
    ap.add_argument("--ready", metavar="FILE", help="create FILE once PLAYING")
    ap.add_argument("--label", default="rig-run", help="name in messages and the stats")
    ap.add_argument("description", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    desc = args.description
    if desc and desc[0] == "--":
        desc = desc[1:]
    if not desc:
        ap.error("no pipeline description")

    if not os.environ.get("GST_PLUGIN_PATH"):
        build = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "build", "gst")
        if os.path.exists(os.path.join(build, "libgstrdma.so")):
            os.environ["GST_PLUGIN_PATH"] = build
    Gst.init(None)
    # PyGObject builds a wrapper class and its field accessors on first
    # use, and not safely from several threads at once: twelve streaming
    # threads racing into the first probe saw Gst.Buffer without "offset"
    # (the Soft-RoCE VM).  Build what the probes use here, first.
    assert Gst.Buffer.new().offset == Gst.BUFFER_OFFSET_NONE
    assert Gst.PadProbeReturn.OK is not None and Gst.PadProbeInfo is not None
    try:
        runner = Runner(desc, args.label)
    except GLib.Error as e:
        print("%s: could not build the pipeline: %s" % (args.label, e.message), file=sys.stderr)
        return 1
    runner.run(args.ready)
    report = runner.report()
    runner.pipeline.set_state(Gst.State.NULL)
    if args.stats:
        tmp = args.stats + ".tmp"
        with open(tmp, "w") as f:
            json.dump(report, f, indent=1)
            f.write("\n")
        os.replace(tmp, args.stats)
    return runner.status if runner.status is not None else 1


if __name__ == "__main__":
    sys.exit(main())
