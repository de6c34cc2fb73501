#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""One end of a 12-camera GStreamer benchmark, for tests/bench/run.py (B5, B6).

    gst_peers.py receive --transport T --streams N --port P [--seconds S]
    gst_peers.py send    --transport T --streams N --port P --frames F [--live]

Transports (all on this host):
  rdma-sb / rdma-sw  rdmasink / rdmasrc transport=shm, status-byte or
                     sliding-window: N rdmasinks share one connection (one
                     lane), rdmasrc exposes src_<device-id>
  shm                identity drop-allocation=true ! shmsink / shmsrc, one
                     socket and a 24-frame area per stream (gst-plugins-bad);
                     shmsink copies each frame into its area (see
                     sender_desc for why not videotestsrc drawing into it)
  tcp                tcpclientsink -> tcpserversrc ! rawvideoparse, one TCP
                     connection per stream (the sender connects, so a slow
                     receiver blocks it: TCP's own backpressure; with
                     tcpserversink the server would queue without bound)
  none               (send only) the sources into fakesink: the sender's own
                     cost, to subtract

Video: videotestsrc pattern=solid-color, 640x480 RGB (921,600 bytes a frame),
25/1 caps; --live paces every source at 25 fps, otherwise flat out
(sync=false).  The receiver counts buffers per stream without a Python
call per buffer (GstBaseSink's own count, read every TICK_MS; a pad probe
only for the first buffer and events), so its CPU figure is the transport's
and GStreamer's, not this harness's, and prints one JSON object: frames,
bytes, first/last arrival, CPU (getrusage of this process from PLAYING
on).  Needs /usr/bin/python3 with python3-gi; the rdma plugin is found
through GST_PLUGIN_PATH.
"""
import argparse
import json
import resource
import signal
import sys
import threading
import time

import gi

gi.require_version("Gst", "1.0")
from gi.repository import GLib, Gst  # noqa: E402

W, H = 640, 480
FRAME = W * H * 3
# How often the receiver reads its sinks' counts: the resolution of the last
# arrival (a few ms in spans of seconds), at a cost of one Python call per
# tick instead of one per buffer per stream.
TICK_MS = 10
CAPS = f"video/x-raw,format=RGB,width={W},height={H},framerate=25/1"


def cpu_s():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def sender_desc(a):
    live = "true" if a.live else "false"
    sync = "true" if a.live else "false"
    parts = []
    mech = {"rdma-sb": "status-byte", "rdma-sw": "sliding-window"}.get(a.transport)
    for i in range(a.streams):
        src = (f"videotestsrc is-live={live} pattern=solid-color num-buffers={a.frames} "
               f"! {CAPS} ! ")
        if mech:
            sink = (f"rdmasink transport=shm mechanism={mech} port={a.port} device-id={i} "
                    f"send-blocks={a.send_blocks} sync={sync} stats-interval=0")
        elif a.transport == "shm":
            # Without drop-allocation, videotestsrc draws into shmsink's
            # area through a buffer pool of its own with no maximum (shmsink
            # offers only an allocator).  The pool keeps its buffers, and so
            # their blocks of the area, after shmsrc releases them.  Once
            # the reader lags by a whole area (23 frames fit in 24), the
            # pool's next buffer comes from the heap, shmsink waits for a
            # free block to copy it into, and none is ever freed: the stream
            # stalls for good (in B6, after 56-250 of its 250 frames).  With
            # the query dropped, the source draws into heap memory and
            # shmsink copies each frame into a block that is freed when
            # shmsrc releases it: shmsink's own backpressure, no stall.
            sink = (f"identity drop-allocation=true "
                    f"! shmsink socket-path=/tmp/sbr-bench-shm-{a.port}-{i} "
                    f"shm-size={24 * FRAME} wait-for-connection=true sync={sync}")
        elif a.transport == "tcp":
            sink = f"tcpclientsink host=127.0.0.1 port={a.port + i} sync={sync}"
        else:
            sink = f"fakesink sync={sync}"
        parts.append(src + sink)
    return " ".join(parts)


class Receiver:
    def __init__(self, a):
        self.a = a
        self.frames = [0] * a.streams
        self.bytes = [0] * a.streams
        self.first = None
        self.last = None
        self.frame_size = [0] * a.streams
        self.sinks = [None] * a.streams
        self.lock = threading.Lock()
        self.eos = set()
        self.errors = []
        self.pipeline = Gst.Pipeline.new("rx")
        mech = {"rdma-sb": "status-byte", "rdma-sw": "sliding-window"}.get(a.transport)
        if mech:
            src = Gst.ElementFactory.make("rdmasrc")
            if not src:
                sys.exit("rdmasrc not found (GST_PLUGIN_PATH?)")
            src.set_property("stats-interval", 0)
            for k, v in (("port", a.port), ("blocks", a.blocks),
                         ("block-size", FRAME + 72)):
                if v is not None:
                    src.set_property(k, v)
            Gst.util_set_object_arg(src, "transport", "shm")
            Gst.util_set_object_arg(src, "mechanism", mech)
            self.pipeline.add(src)
            src.connect("pad-added", self.on_pad)
        else:
            for i in range(a.streams):
                if a.transport == "shm":
                    desc = (f"shmsrc socket-path=/tmp/sbr-bench-shm-{a.port}-{i} is-live=true "
                            f"! {CAPS} ! fakesink name=sink{i} sync=false async=false "
                            f"enable-last-sample=false")
                else:
                    desc = (f"tcpserversrc host=127.0.0.1 port={a.port + i} ! rawvideoparse "
                            f"width={W} height={H} format=rgb framerate=25/1 "
                            f"! fakesink name=sink{i} sync=false async=false "
                            f"enable-last-sample=false")
                bin_ = Gst.parse_bin_from_description(desc, False)
                self.pipeline.add(bin_)
                self.watch(bin_.get_by_name(f"sink{i}"), i)

    def on_pad(self, src, pad):
        name = pad.get_name()
        try:
            i = int(name.split("_")[1])
        except (IndexError, ValueError):
            return
        sink = Gst.ElementFactory.make("fakesink")
        sink.set_property("sync", False)
        sink.set_property("async", False)
        # A sink keeping its last sample holds one buffer per stream: with
        # 12 streams that is more than rdmasrc's max-held (8), and it would
        # copy frames it could hand out zero-copy.  No transport here needs
        # the last sample; all receivers drop it alike.
        sink.set_property("enable-last-sample", False)
        self.pipeline.add(sink)
        sink.sync_state_with_parent()
        if i < len(self.sinks):
            self.watch(sink, i)
        pad.link(sink.get_static_pad("sink"))

    def watch(self, sink, i):
        """Counts stream i at its fakesink without a Python call per buffer:
        the first buffer's arrival (a probe that removes itself), the sink's
        own count (GstBaseSink's stats, read by tick), and EOS."""
        self.sinks[i] = sink
        pad = sink.get_static_pad("sink")
        pad.add_probe(Gst.PadProbeType.BUFFER, self.first_buffer, i)
        pad.add_probe(Gst.PadProbeType.EVENT_DOWNSTREAM, self.event, i)

    def first_buffer(self, pad, info, i):
        now = time.monotonic()
        with self.lock:
            if self.first is None:
                self.first = now
                self.cpu_first = cpu_s()
            self.frame_size[i] = info.get_buffer().get_size()
        return Gst.PadProbeReturn.REMOVE

    def event(self, pad, info, i):
        if info.get_event().type == Gst.EventType.EOS:
            self.eos.add(i)
        return Gst.PadProbeReturn.OK

    def count(self, now):
        """Reads each sink's count; a stream whose count grew since the last
        tick had its last buffer at or before now (resolution: the tick)."""
        for i, sink in enumerate(self.sinks):
            if sink is None:
                continue
            st = sink.get_property("stats")
            n = st.get_value("rendered") if st and st.has_field("rendered") else 0
            if n != self.frames[i]:
                self.frames[i] = n
                self.bytes[i] = n * self.frame_size[i]
                self.last = now

    def run(self):
        loop = GLib.MainLoop()
        bus = self.pipeline.get_bus()
        bus.add_signal_watch()

        def on_msg(_bus, msg):
            if msg.type == Gst.MessageType.ERROR:
                err, dbg = msg.parse_error()
                self.errors.append(f"{msg.src.get_name()}: {err.message}")
        bus.connect("message", on_msg)
        t_start = self.t_start = time.monotonic()
        self.cpu_start = cpu_s()
        self.pipeline.set_state(Gst.State.PLAYING)
        print("ready", file=sys.stderr, flush=True)

        def tick():
            now = time.monotonic()
            self.count(now)
            done = len(self.eos) >= self.a.streams
            idle = self.last is not None and now - self.last > self.a.idle
            expect = self.a.expect and sum(self.frames) >= self.a.expect * self.a.streams
            if done or idle or expect or now - t_start > self.a.seconds:
                loop.quit()
                return False
            return True
        GLib.timeout_add(TICK_MS, tick)
        loop.run()
        cpu_end = cpu_s()
        self.count(time.monotonic())
        self.pipeline.set_state(Gst.State.NULL)
        span = (self.last - self.first) if self.first is not None and self.last else 0
        t_end = time.monotonic()
        # Wall time that the CPU figure covers: PLAYING to the last buffer
        # (or to the end when a stream stalled).
        self.wall = (self.last if self.last and len(self.eos) >= self.a.streams
                     else t_end) - t_start
        total = sum(self.bytes)
        return {"transport": self.a.transport, "streams": self.a.streams,
                "frames": sum(self.frames), "per_stream_frames": self.frames, "bytes": total,
                "span_s": span, "frames_per_s": sum(self.frames) / span if span else 0,
                "mbps": total / span / 1e6 if span else 0,
                "cpu_s": cpu_end - self.cpu_start, "wall_s": self.wall,
                "cpu_s_streaming": cpu_end - self.cpu_first if self.first is not None else 0,
                "eos_streams": len(self.eos), "errors": self.errors[:5]}


stop_requested = False


def on_term(_sig, _frame):
    """SIGTERM from run.py: the receiver is done; report what we have."""
    global stop_requested
    stop_requested = True


def run_sender(a):
    signal.signal(signal.SIGTERM, on_term)
    pipeline = Gst.parse_launch(sender_desc(a))
    bus = pipeline.get_bus()
    t0 = time.monotonic()
    c0 = cpu_s()
    pipeline.set_state(Gst.State.PLAYING)
    msg = None
    while not stop_requested and time.monotonic() - t0 < a.seconds:
        msg = bus.timed_pop_filtered(100 * Gst.MSECOND,
                                     Gst.MessageType.EOS | Gst.MessageType.ERROR)
        if msg:
            break
    res = {"transport": a.transport, "streams": a.streams, "frames_each": a.frames,
           "elapsed_s": time.monotonic() - t0, "ok": bool(msg and msg.type == Gst.MessageType.EOS),
           "stopped": stop_requested}
    if msg and msg.type == Gst.MessageType.ERROR:
        err, _ = msg.parse_error()
        res["error"] = f"{msg.src.get_name()}: {err.message}"
    if a.linger:
        time.sleep(a.linger)  # let the receiver drain before the connection goes
    res["cpu_s"] = cpu_s() - c0
    # Drops the rdmasinks counted (backpressure), summed over the sinks.
    drops = 0
    by_device = {}
    it = pipeline.iterate_elements()
    while True:
        ok, el = it.next()
        if ok != Gst.IteratorResult.OK:
            break
        if el.get_factory() and el.get_factory().get_name() == "rdmasink":
            st = el.get_property("stats")
            if st and st.has_field("drops"):
                drops += st.get_value("drops")
                dev = el.get_property("device-id")
                fields = ("frames", "drops", "paused-drops", "direct-blocks",
                          "direct-fallbacks", "kept-copies")
                by_device[dev] = {f: st.get_value(f) for f in fields if st.has_field(f)}
    res["rdmasink_drops"] = drops
    res["rdmasink_by_device"] = by_device
    pipeline.set_state(Gst.State.NULL)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["send", "receive"])
    ap.add_argument("--transport", required=True,
                    choices=["rdma-sb", "rdma-sw", "shm", "tcp", "none"])
    ap.add_argument("--streams", type=int, default=12)
    ap.add_argument("--port", type=int, default=7600)
    ap.add_argument("--frames", type=int, default=100)
    ap.add_argument("--expect", type=int, default=0, help="receive: frames per stream")
    ap.add_argument("--live", action="store_true")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--idle", type=float, default=3.0)
    ap.add_argument("--linger", type=float, default=0.5)
    # rdmasrc's own default unless asked: the element as users run it.
    ap.add_argument("--blocks", type=int, default=None)
    ap.add_argument("--send-blocks", type=int, default=32)
    a = ap.parse_args()
    Gst.init(None)
    res = Receiver(a).run() if a.mode == "receive" else run_sender(a)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
