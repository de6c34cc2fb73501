#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""samples/python/rdma-opencv.py end to end, over shm.

    check-opencv.py SAMPLE PORT

Twelve cv2.VideoCapture("rdmasrc device-id=N ! ... ! appsink") in one
process (one receiver shared by the twelve rdmasrcs), twelve
cv2.VideoWriter("appsrc ! videoconvert ! rdmasink ...") in another.  The
capture of camera 5 is released after 25 frames.  Checks: every capture
opened and read its own camera only; every frame from its first to the
sender's last, in order, none missing (camera 5's until it was
released), at least the FRAMES the sender sent once every capture had
opened, so releasing one capture cost the others nothing.
"""

import json
import subprocess
import sys

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
    # A capture opens once its first frame came, so the sender sends
    # until the receiver says every capture has opened, then FRAMES more:
    # each capture gets at least those, whatever the CPU it got.
    tx = subprocess.Popen([sys.executable, sample, "send", "--hold",
                           "--frames", str(FRAMES)] + common,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          text=True)
    second = rx.stdout.readline()
    if "opened" not in second:
        fail("receiver said %r" % second)
    tx.stdin.write("go\n")
    tx.stdin.flush()
    try:
        sent, _ = tx.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        tx.kill()
        fail("sender did not end")
    if tx.returncode != 0:
        fail("sender exited %d" % tx.returncode)
    last = json.loads(sent.splitlines()[-1])["last"]
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
        if d != RELEASED and r["frames"] < FRAMES:
            fail("camera %d: %d frames, %d sent after all opened" %
                 (d, r["frames"], FRAMES))
        if d == RELEASED:
            if not r["released"] or r["frames"] != RELEASE_AFTER:
                fail("camera %d: not released after %d frames" %
                     (d, RELEASE_AFTER))
        elif r["last"] != last:
            fail("camera %d: last frame %d, the sender's %d" %
                 (d, r["last"], last))
    print("OK")


if __name__ == "__main__":
    main()
