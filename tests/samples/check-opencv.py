#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""samples/python/rdma-opencv.py end to end, over shm.

    check-opencv.py SAMPLE PORT

Twelve cv2.VideoCapture("rdmasrc device-id=N ! ... ! appsink") in one
process (one receiver shared by the twelve rdmasrcs), twelve
cv2.VideoWriter("appsrc ! videoconvert ! rdmasink ...") in another.  The
capture of camera 5 is released after 25 frames.  Checks: every capture
opened and read its own camera only; every frame from the first it got to
the sender's last, in order, none missing (camera 5's until it was
released), so releasing one capture cost the others nothing.
"""

import json
import subprocess
import sys
import time

CAMERAS, FRAMES, RELEASED, RELEASE_AFTER = 12, 100, 5, 25


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def main():
    sample, port = sys.argv[1], sys.argv[2]
    common = ["--transport", "shm", "--port", port, "--devices", str(CAMERAS)]
    rx = subprocess.Popen([sys.executable, sample, "receive"] + common +
                          ["--release", str(RELEASED),
                           "--release-after", str(RELEASE_AFTER)],
                          stdout=subprocess.PIPE, text=True)
    first = rx.stdout.readline()
    if "opening" not in first:
        fail("receiver said %r" % first)
    # The captures join the receiver as they open; the sender connects to
    # the first.  Frames sent before a capture joined are not its to get:
    # the checks below start at the first frame each capture got.
    time.sleep(3)
    tx = subprocess.run([sys.executable, sample, "send", "--frames",
                         str(FRAMES)] + common, timeout=60)
    if tx.returncode != 0:
        fail("sender exited %d" % tx.returncode)
    try:
        out, _ = rx.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        rx.kill()
        fail("receiver did not end (no EOS?)")
    if rx.returncode != 0:
        fail("receiver exited %d" % rx.returncode)
    results = {}
    for line in out.splitlines():
        r = json.loads(line)
        results[r["device"]] = r
    for d in range(CAMERAS):
        r = results.get(d)
        if r is None:
            fail("camera %d: no result" % d)
        print("camera %2d: %3d frames, %s..%s, in order: %s%s" %
              (d, r["frames"], r["first"], r["last"], r["in_order"],
               ", released" if r["released"] else ""))
        if not r["opened"] or r["frames"] == 0:
            fail("camera %d: no frames" % d)
        if r["wrong_device"]:
            fail("camera %d: %d frames of another camera" %
                 (d, r["wrong_device"]))
        if not r["in_order"]:
            fail("camera %d: frames missing: %s" % (d, r["missing"]))
        if r["first"] > FRAMES // 2:
            fail("camera %d: joined late (first frame %d)" % (d, r["first"]))
        if d == RELEASED:
            if not r["released"] or r["frames"] != RELEASE_AFTER:
                fail("camera %d: not released after %d frames" %
                     (d, RELEASE_AFTER))
        elif r["last"] != FRAMES - 1:
            fail("camera %d: last frame %d, sent %d" % (d, r["last"], FRAMES))
    print("OK")


if __name__ == "__main__":
    main()
