#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The 12-camera rig's frame recorder: every camera into its own directory.

    pipelines/rig-frames.py [--transport verbs|shm] [--address ADDR]
        [--port N] [--cameras N] [--out DIR] [--format ppm|jpeg]
        [--quality N] [--src-props "blocks=64 ..."] [--stats FILE]
        [--ready FILE]

One rdmasrc; for each of its pads src_N (camera N, added when its caps
arrive): queue ! videoconvert ! video/x-raw,format=RGB [! jpegenc] !
appsink, and each frame is written to DIR/devNN/frame-PPPPPP.ppm (or .jpg),
PPPPPP being the sender's per-device packet number of the frame (rdmasrc
puts it in GST_BUFFER_OFFSET), unwrapped past 65535 - as the paper
(section 3.2.7) stores each camera's frames in a folder of its own, named by
packet number.  When a camera's numbering starts again (a new sender
process), its later frames go to devNN/run-2/, run-3/ ...  A missing number is a frame that did not arrive (packet
numbers count blocks: the caps take packet 0, so the first frame is 1; a
frame of n blocks takes n numbers).  multifilesink can't do this (it names
files by its own counter), hence this small application.

It ends when --cameras devices have ended (each rdmasrc pad pushes EOS when
its rdmasink sent EOS), or with --cameras 0 when the pipeline is EOS; on
SIGINT/SIGTERM it ends every branch with EOS (a second one stops at once).
Then it prints a line per device and, with --stats, writes a JSON file
(the rdmasrc stats, frames written per device, CPU and wall time).  Exit
status 0, 1 on an error, 2 on usage errors.

Example (receiver first; then `pipelines/rig-send.sh --seconds 4`):
    pipelines/rig-frames.py --out /tmp/frames

Runs with Debian's python3: python3-gi, gir1.2-gstreamer-1.0,
gir1.2-gst-plugins-base-1.0.  The plugin is found through GST_PLUGIN_PATH,
else in build/gst of this source tree.
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
gi.require_version("GstVideo", "1.0")
from gi.repository import GLib, Gst, GstVideo  # noqa: E402

PACKET_WRAP = 1 << 16


def structure_to_dict(s):
    """A GstStructure as a dict; rdmasrc's per-device fields ("device-<N>")
    are structures and become dicts."""
    out = {"name": s.get_name()}
    for i in range(s.n_fields()):
        name = s.nth_field_name(i)
        v = s.get_value(name)
        out[name] = structure_to_dict(v) if isinstance(v, Gst.Structure) else v
    return out


def device_stats(stats):
    """rdmasrc's per-device stats by device number."""
    return {v["device-id"]: v for v in stats.values()
            if isinstance(v, dict) and v.get("name") == "rdmasrc-device-stats"}


def cpu_seconds():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


class Device:
    """One camera: its branch, its directory, its packet numbering."""

    def __init__(self, app, number):
        self.app = app
        self.number = number
        self.dir = os.path.join(app.out, "dev%02d" % number)
        os.makedirs(self.dir, exist_ok=True)
        self.lock = threading.Lock()
        self.written = 0
        self.no_offset = 0
        self.first = None  # unwrapped packet numbers
        self.last = None
        self.wraps = 0
        self.runs = 1
        self.last_raw = None
        self.pts_packets = {}  # jpeg: PTS -> packet, taken before the encoder
        self.eos = False
        self.t_first = None  # first and last frame written (monotonic)
        self.t_last = None

    def unwrap(self, raw):
        """Unwrapped packet number of a 16-bit one (in packet order)."""
        if self.last_raw is not None and raw <= self.last_raw:
            if self.last_raw - raw > PACKET_WRAP // 2:
                self.wraps += 1
            else:
                # Numbering started again: a new sender for this device.
                # Its frames go to run-2/, run-3/ ... rather than over the
                # earlier ones.
                self.runs += 1
                self.wraps = 0
                self.dir = os.path.join(self.app.out, "dev%02d" % self.number, "run-%d" % self.runs)
                os.makedirs(self.dir, exist_ok=True)
                print("rig-frames: camera %d restarted its numbering: now into %s" % (self.number, self.dir),
                      file=sys.stderr)
        self.last_raw = raw
        return self.wraps * PACKET_WRAP + raw

    def place_of(self, buf):
        """(directory, packet number) of a buffer from rdmasrc (its OFFSET)."""
        if buf.offset == Gst.BUFFER_OFFSET_NONE or buf.offset >= PACKET_WRAP:
            return self.dir, None
        packet = self.unwrap(buf.offset)
        return self.dir, packet

    def path_for(self, place, ext):
        directory, packet = place
        if packet is None:
            # An rdmasrc that doesn't set the offset: number by arrival.
            self.no_offset += 1
            return os.path.join(directory, "arrival-%06d%s" % (self.no_offset, ext))
        return os.path.join(directory, "frame-%06d%s" % (packet, ext))

    def note(self, packet):
        now = time.monotonic()
        if self.t_first is None:
            self.t_first = now
        self.t_last = now
        self.written += 1
        if packet is not None:
            if self.first is None:
                self.first = packet
            self.last = packet

    # jpeg: remember each frame's packet by PTS before the encoder drops the
    # offset (video encoders don't keep it).
    def before_encoder(self, pad, info):
        buf = info.get_buffer()
        if buf is not None:
            with self.lock:
                self.pts_packets[buf.pts] = self.place_of(buf)
        return Gst.PadProbeReturn.OK

    def on_sample(self, sink):
        sample = sink.emit("pull-sample")
        if sample is None:
            return Gst.FlowReturn.EOS
        buf = sample.get_buffer()
        try:
            if self.app.format == "jpeg":
                with self.lock:
                    place = self.pts_packets.pop(buf.pts, (self.dir, None))
                with open(self.path_for(place, ".jpg"), "wb") as f:
                    f.write(buf.extract_dup(0, buf.get_size()))
            else:
                place = self.place_of(buf)
                write_ppm(self.path_for(place, ".ppm"), sample)
        except OSError as e:
            self.app.fail("device %d: cannot write a frame: %s" % (self.number, e))
            return Gst.FlowReturn.ERROR
        self.note(place[1])
        return Gst.FlowReturn.OK

    def on_eos(self, sink):
        self.eos = True
        GLib.idle_add(self.app.device_ended)


def write_ppm(path, sample):
    """Binary PPM (P6) of an RGB sample, row padding dropped."""
    info = GstVideo.VideoInfo.new_from_caps(sample.get_caps())
    w, h = info.width, info.height
    stride = info.stride[0]
    buf = sample.get_buffer()
    ok, m = buf.map(Gst.MapFlags.READ)
    if not ok:
        raise OSError("cannot map the buffer")
    try:
        data = m.data
        with open(path, "wb") as f:
            f.write(b"P6\n%d %d\n255\n" % (w, h))
            if stride == w * 3:
                f.write(data[: w * 3 * h])
            else:
                for y in range(h):
                    f.write(data[y * stride : y * stride + w * 3])
    finally:
        buf.unmap(m)


class App:
    def __init__(self, args):
        self.out = args.out
        self.format = args.format
        self.quality = args.quality
        self.cameras = args.cameras
        self.ready_file = args.ready
        self.devices = {}
        self.errors = []
        self.status = None
        self.interrupted = False
        self.t_playing = None
        self.cpu_playing = None
        self.t_end = None
        self.cpu_end = None
        self.t_first = None  # the first camera's pad: frames start
        self.cpu_first = None
        os.makedirs(self.out, exist_ok=True)

        self.pipeline = Gst.Pipeline.new("rig-frames")
        self.src = Gst.ElementFactory.make("rdmasrc", "r")
        if self.src is None:
            raise RuntimeError("no rdmasrc element: set GST_PLUGIN_PATH to the plugin's directory")
        Gst.util_set_object_arg(self.src, "transport", args.transport)
        self.src.set_property("address", args.address)
        self.src.set_property("port", args.port)
        for prop in args.src_props.split():
            name, _, value = prop.partition("=")
            Gst.util_set_object_arg(self.src, name, value)
        self.pipeline.add(self.src)
        self.src.connect("pad-added", self.on_pad_added)
        self.loop = GLib.MainLoop()
        bus = self.pipeline.get_bus()
        bus.add_signal_watch()
        bus.connect("message", self.on_message)

    def make(self, factory, **props):
        e = Gst.ElementFactory.make(factory, None)
        if e is None:
            raise RuntimeError("missing element %s" % factory)
        for k, v in props.items():
            e.set_property(k.replace("_", "-"), v)
        return e

    def on_pad_added(self, src, pad):
        # Streaming thread of rdmasrc; the pad's caps are already set.
        name = pad.get_name()
        if not name.startswith("src_"):
            return
        number = int(name[4:])
        if self.t_first is None:
            self.t_first = time.monotonic()
            self.cpu_first = cpu_seconds()
        dev = Device(self, number)
        self.devices[number] = dev
        chain = [
            self.make("queue"),
            self.make("videoconvert"),
            self.make("capsfilter", caps=Gst.Caps.from_string("video/x-raw,format=RGB")),
        ]
        if self.format == "jpeg":
            enc = self.make("jpegenc", quality=self.quality)
            enc.get_static_pad("sink").add_probe(Gst.PadProbeType.BUFFER, dev.before_encoder)
            chain.append(enc)
        sink = self.make("appsink", sync=False, emit_signals=True, max_buffers=0, drop=False)
        sink.connect("new-sample", dev.on_sample)
        sink.connect("eos", dev.on_eos)
        chain.append(sink)
        for e in chain:
            self.pipeline.add(e)
        for a, b in zip(chain, chain[1:]):
            a.link(b)
        for e in reversed(chain):
            e.sync_state_with_parent()
        if pad.link(chain[0].get_static_pad("sink")) != Gst.PadLinkReturn.OK:
            self.fail("cannot link %s" % name)
        print("rig-frames: camera %d -> %s" % (number, dev.dir), file=sys.stderr)

    def device_ended(self):
        ended = sum(1 for d in self.devices.values() if d.eos)
        if self.cameras and ended >= self.cameras:
            self.finish(0)
        return GLib.SOURCE_REMOVE

    def on_message(self, bus, msg):
        t = msg.type
        if t == Gst.MessageType.EOS:
            if not self.cameras or self.interrupted:
                self.finish(0)
        elif t == Gst.MessageType.ERROR:
            err, dbg = msg.parse_error()
            self.fail("%s: %s (%s)" % (msg.src.get_name(), err.message, dbg))
        elif t == Gst.MessageType.WARNING:
            err, dbg = msg.parse_warning()
            print("rig-frames: WARNING from %s: %s" % (msg.src.get_name(), err.message), file=sys.stderr)
        elif t == Gst.MessageType.STATE_CHANGED and msg.src == self.src:
            _, new, _ = msg.parse_state_changed()
            if new == Gst.State.PLAYING and self.t_playing is None:
                self.t_playing = time.monotonic()
                self.cpu_playing = cpu_seconds()
                if self.ready_file:
                    with open(self.ready_file, "w") as f:
                        f.write("playing\n")

    def fail(self, text):
        print("rig-frames: ERROR: %s" % text, file=sys.stderr)
        self.errors.append(text)
        GLib.idle_add(lambda: self.finish(1) and False)

    def finish(self, status):
        if self.status is None:
            self.status = status
            self.t_end = time.monotonic()
            self.cpu_end = cpu_seconds()
        self.loop.quit()
        return False

    def on_signal(self):
        if self.interrupted:
            self.finish(130)
            return GLib.SOURCE_CONTINUE
        self.interrupted = True
        print("rig-frames: interrupt: ending every camera's branch", file=sys.stderr)
        # rdmasrc ignores an EOS sent to the element: end each branch.
        for pad in self.src.srcpads:
            peer = pad.get_peer()
            if peer is not None:
                peer.send_event(Gst.Event.new_eos())
        if not self.src.srcpads:
            self.finish(0)
        GLib.timeout_add_seconds(10, lambda: self.finish(130))
        return GLib.SOURCE_CONTINUE

    def run(self):
        for sig in (signal.SIGINT, signal.SIGTERM):
            GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, sig, self.on_signal)
        if self.pipeline.set_state(Gst.State.PLAYING) == Gst.StateChangeReturn.FAILURE:
            GLib.timeout_add(100, lambda: self.finish(1))
        self.loop.run()

    def report(self):
        stats = structure_to_dict(self.src.get_property("stats"))
        end = self.t_end if self.t_end is not None else time.monotonic()
        cpu_end = self.cpu_end if self.cpu_end is not None else cpu_seconds()
        wall = end - self.t_playing if self.t_playing is not None else 0.0
        cpu = cpu_end - (self.cpu_playing or 0.0)
        # From the first camera on, not while waiting for the sender.
        streaming = end - self.t_first if self.t_first is not None else 0.0
        cpu_streaming = cpu_end - self.cpu_first if self.cpu_first is not None else 0.0
        devices = {}
        pads = {}
        for n, d in sorted(self.devices.items()):
            devices["dev%02d" % n] = {
                "written": d.written,
                "first-packet": d.first,
                "last-packet": d.last,
                "eos": d.eos,
                "dir": d.dir,
            }
            span = d.t_last - d.t_first if d.t_first is not None else 0.0
            pads["r:src_%d" % n] = {
                "buffers": d.written,
                "span": span,
                "fps": (d.written - 1) / span if span > 0 else 0.0,
            }
        return {
            "label": "rig-frames",
            "status": self.status,
            "errors": self.errors,
            "wall-playing": wall,
            "cpu-playing": cpu,
            "wall-streaming": streaming,
            "cpu-streaming": cpu_streaming,
            "cpu-percent-streaming": 100.0 * cpu_streaming / streaming if streaming > 0 else 0.0,
            "cpu-total": cpu_end,
            "format": self.format,
            "devices": devices,
            "pads": pads,
            "elements": {"r": {"factory": "rdmasrc", "stats": stats}},
        }


def main():
    ap = argparse.ArgumentParser(
        description="Write each camera of the rig into its own directory, frames named by packet number."
    )
    ap.add_argument("--transport", choices=("verbs", "shm"), default=os.environ.get("RIG_TRANSPORT", "verbs"))
    ap.add_argument("--address", default=os.environ.get("RIG_ADDRESS", "0.0.0.0"), help="listen address (verbs)")
    ap.add_argument("--port", type=int, default=int(os.environ.get("RIG_PORT", "7471")))
    ap.add_argument(
        "--cameras",
        type=int,
        default=int(os.environ.get("RIG_CAMERAS", "12")),
        help="end when this many cameras have ended (0: when the pipeline is EOS) [12]",
    )
    ap.add_argument("--out", default=os.environ.get("RIG_OUT", "frames"), help="directory [frames]")
    ap.add_argument("--format", choices=("ppm", "jpeg"), default="ppm", help="ppm (raw RGB) or jpeg [ppm]")
    ap.add_argument("--quality", type=int, default=90, help="JPEG quality [90]")
    ap.add_argument("--src-props", default=os.environ.get("RIG_SRC_PROPS", ""), help='extra rdmasrc properties, "blocks=64 ..."')
    ap.add_argument("--stats", metavar="FILE", help="write JSON statistics here at the end")
    ap.add_argument("--ready", metavar="FILE", help="create FILE once rdmasrc is PLAYING (senders may connect)")
    args = ap.parse_args()

    if not os.environ.get("GST_PLUGIN_PATH"):
        build = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "build", "gst")
        if os.path.exists(os.path.join(build, "libgstrdma.so")):
            os.environ["GST_PLUGIN_PATH"] = build
    Gst.init(None)
    try:
        app = App(args)
    except (RuntimeError, GLib.Error) as e:
        print("rig-frames: %s" % e, file=sys.stderr)
        return 1
    print(
        "rig-frames: %s port %d, %s frames into %s/devNN/" % (args.transport, args.port, args.format, args.out),
        file=sys.stderr,
    )
    app.run()
    report = app.report()
    app.pipeline.set_state(Gst.State.NULL)
    rs = device_stats(report["elements"]["r"]["stats"])
    for name, d in report["devices"].items():
        s = rs.get(int(name[3:]), {})
        print(
            "rig-frames: %s: %d frame(s) written, packets %s..%s; rdmasrc: %s frames, %s drops, %s gaps"
            % (name, d["written"], d["first-packet"], d["last-packet"], s.get("frames"), s.get("drops"), s.get("gaps")),
            file=sys.stderr,
        )
    if args.stats:
        with open(args.stats + ".tmp", "w") as f:
            json.dump(report, f, indent=1)
            f.write("\n")
        os.replace(args.stats + ".tmp", args.stats)
    return app.status if app.status is not None else 1


if __name__ == "__main__":
    sys.exit(main())
