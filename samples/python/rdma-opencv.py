#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""One cv2.VideoCapture per camera over rdmasrc, and cv2.VideoWriter senders.

    rdma-opencv.py receive --devices 12 [--port 7471] [--transport shm]
                           [--release DEV --release-after FRAMES]
    rdma-opencv.py send --devices 12 --frames 100 [--port 7471] [--fps 25]
                        [--hold]

receive opens one capture per camera in one process, each its own pipeline
"rdmasrc device-id=N ! videoconvert ! appsink": every rdmasrc of the
process on one port shares one receiver (one listener, one lane per
sender).  Each capture reads on a thread of its own; --release closes one
capture mid-stream.  It prints {"event": "opened"} once every capture
has opened (each has had its first frame), and at the end (every camera's
EOS) one JSON line per camera: frames read, the first and last frame
numbers, whether each frame followed the one before.

send writes synthetic frames through one cv2.VideoWriter per camera,
"appsrc ! videoconvert ! rdmasink device-id=N": the writers of the process
share one connection.  --hold sends until a line comes on stdin, then
--frames more (for a receiver whose captures open only once frames
come); the last line is {"last": k}, the last frame's number.  Frame k of
camera d is grey level 16*d + 40 with k
in the first pixel (blue: k & 255, green: k >> 8, red: d), which receive
reads back.  Needs Debian's python3-opencv (its cv2 is built with
GStreamer; use /usr/bin/python3).
"""

import argparse
import json
import sys
import threading
import time

import cv2
import numpy as np

WIDTH, HEIGHT = 160, 120


def receive(args):
    lock = threading.Lock()
    results = {}
    # A VideoCapture is constructed once its first frame came (OpenCV
    # reads the frame size from it), so the "opened" line says every
    # capture has joined the receiver and gets every frame from then on.
    opened = threading.Barrier(args.devices + 1)

    def camera(device):
        # Every frame, however slowly this thread reads: over-budget=pause
        # tells the sender to wait rather than losing frames here (up to
        # max-queued copies while the pause takes effect), and appsink
        # drop=false blocks rather than dropping (OpenCV sets max-buffers=1
        # but leaves drop as asked).  sync=false: read as fast as it comes.
        pipeline = (
            "rdmasrc transport=%s address=%s port=%d device-id=%d "
            "over-budget=pause max-queued=300 stats-interval=0 ! "
            "videoconvert ! video/x-raw,format=BGR ! "
            "appsink drop=false sync=false"
            % (args.transport, args.address, args.port, device))
        cap = cv2.VideoCapture(pipeline, cv2.CAP_GSTREAMER)
        r = {"device": device, "opened": cap.isOpened(), "frames": 0,
             "first": None, "last": None, "in_order": True,
             "wrong_device": 0, "released": False, "missing": []}
        opened.wait()
        while cap.isOpened():
            ok, img = cap.read()
            if not ok:
                break  # EOS
            k = int(img[0, 0, 0]) | int(img[0, 0, 1]) << 8
            if int(img[0, 0, 2]) != device:
                r["wrong_device"] += 1
            if r["last"] is not None and k != r["last"] + 1:
                r["in_order"] = False
                r["missing"] += list(range(r["last"] + 1, k))
            if r["first"] is None:
                r["first"] = k
            r["last"] = k
            r["frames"] += 1
            if device == args.release and r["frames"] == args.release_after:
                r["released"] = True
                break
        cap.release()
        with lock:
            results[device] = r

    threads = [threading.Thread(target=camera, args=(d,))
               for d in range(args.devices)]
    for t in threads:
        t.start()
    print(json.dumps({"event": "opening", "devices": args.devices}),
          flush=True)
    opened.wait()
    print(json.dumps({"event": "opened", "devices": args.devices}),
          flush=True)
    for t in threads:
        t.join()
    for d in range(args.devices):
        print(json.dumps(results[d]), flush=True)
    return 0


def send(args):
    writers = []
    # sync=false: write() paces the frames; wait-timeout: a receiver that
    # paused a camera is waited for (60 s), not dropped after a second.
    for d in range(args.devices):
        pipeline = (
            "appsrc ! videoconvert ! rdmasink transport=%s host=%s port=%d "
            "device-id=%d stats-interval=0 sync=false wait-timeout=60000"
            % (args.transport, args.address, args.port, d))
        w = cv2.VideoWriter(pipeline, cv2.CAP_GSTREAMER, 0, float(args.fps),
                            (WIDTH, HEIGHT), True)
        if not w.isOpened():
            print("could not open the writer of camera %d" % d,
                  file=sys.stderr)
            return 1
        writers.append(w)
    go = threading.Event()
    if args.hold:
        threading.Thread(target=lambda: (sys.stdin.readline(), go.set()),
                         daemon=True).start()
    else:
        go.set()
    period = 1.0 / args.fps
    start = time.monotonic()
    k, end = 0, None
    while end is None or k < end:
        if end is None and go.is_set():
            end = k + args.frames
        for d, w in enumerate(writers):
            img = np.full((HEIGHT, WIDTH, 3), 16 * d + 40, np.uint8)
            img[0, 0] = (k & 255, (k >> 8) & 255, d)
            w.write(img)
        # Paced like a camera.
        delay = start + (k + 1) * period - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        k += 1
    for w in writers:
        w.release()  # EOS to each camera's capture
    print(json.dumps({"last": k - 1}), flush=True)
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("mode", choices=["receive", "send"])
    p.add_argument("--devices", type=int, default=12)
    p.add_argument("--port", type=int, default=7471)
    p.add_argument("--transport", default="verbs")
    p.add_argument("--address", default="127.0.0.1",
                   help="send: the receiver's host; receive: where to listen")
    p.add_argument("--frames", type=int, default=100, help="send: per camera")
    p.add_argument("--fps", type=int, default=25, help="send")
    p.add_argument("--hold", action="store_true",
                   help="send: until a line on stdin, then --frames more")
    p.add_argument("--release", type=int, default=-1,
                   help="receive: the camera whose capture closes early")
    p.add_argument("--release-after", type=int, default=25,
                   help="receive: after this many of its frames")
    args = p.parse_args()
    if args.mode == "receive" and args.address == "127.0.0.1":
        args.address = "0.0.0.0"
    return receive(args) if args.mode == "receive" else send(args)


if __name__ == "__main__":
    sys.exit(main())
