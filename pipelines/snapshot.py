#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Saves one frame of a video file as PNG.

    pipelines/snapshot.py VIDEO OUT.png [--at SECONDS | --fraction F]

By default the frame halfway through (F = 0.5), so every camera of a rig
recording is in it.  Any file decodebin reads (the mosaic's AVI/MJPEG).
Runs with Debian's python3 (python3-gi, gir1.2-gstreamer-1.0).
"""

import argparse
import sys

import gi

gi.require_version("Gst", "1.0")
from gi.repository import Gst  # noqa: E402


def wait_preroll(pipeline):
    ret, _, _ = pipeline.get_state(30 * Gst.SECOND)
    if ret == Gst.StateChangeReturn.FAILURE:
        msg = pipeline.get_bus().pop_filtered(Gst.MessageType.ERROR)
        detail = msg.parse_error()[0].message if msg else "unknown error"
        raise RuntimeError("cannot read the file: %s" % detail)
    if ret != Gst.StateChangeReturn.SUCCESS:
        raise RuntimeError("the file did not preroll")


def main():
    ap = argparse.ArgumentParser(description="Save one frame of a video as PNG.")
    ap.add_argument("video")
    ap.add_argument("png")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--at", type=float, metavar="SECONDS", help="position in seconds")
    g.add_argument("--fraction", type=float, default=0.5, help="position as a fraction of the duration")
    args = ap.parse_args()

    Gst.init(None)
    pipeline = Gst.parse_launch(
        "filesrc name=src ! decodebin ! videoconvert ! video/x-raw,format=RGB "
        "! pngenc ! appsink name=sink sync=false"
    )
    pipeline.get_by_name("src").set_property("location", args.video)
    sink = pipeline.get_by_name("sink")
    pipeline.set_state(Gst.State.PAUSED)
    try:
        wait_preroll(pipeline)
        if args.at is not None:
            pos = int(args.at * Gst.SECOND)
        else:
            ok, dur = pipeline.query_duration(Gst.Format.TIME)
            pos = int(dur * args.fraction) if ok and dur > 0 else 0
        if pos > 0:
            pipeline.seek_simple(Gst.Format.TIME, Gst.SeekFlags.FLUSH | Gst.SeekFlags.ACCURATE, pos)
            wait_preroll(pipeline)
        sample = sink.emit("pull-preroll")
        if sample is None:
            raise RuntimeError("no frame there")
        buf = sample.get_buffer()
        data = buf.extract_dup(0, buf.get_size())
        with open(args.png, "wb") as f:
            f.write(data)
        print("%s: frame at %.2f s -> %s" % (args.video, buf.pts / Gst.SECOND, args.png))
        return 0
    except RuntimeError as e:
        print("snapshot: %s: %s" % (args.video, e), file=sys.stderr)
        return 1
    finally:
        pipeline.set_state(Gst.State.NULL)


if __name__ == "__main__":
    sys.exit(main())
