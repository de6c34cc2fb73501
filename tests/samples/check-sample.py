#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Run one sample against a 12-camera shm sender and check what it says.

    check-sample.py PORT analytics|python|record [ROUNDS] -- SAMPLE-COMMAND...

The sender (one gst-launch-1.0, 12 x rdmasink transport=shm device-id=N,
320x240 RGB 25 fps, FRAMES frames each, then EOS): camera 0 is
videotestsrc pattern=ball (a moving ball: motion), camera 1 pattern=colors
(static colour bars: no motion once the model is warm), the others various
patterns.  Checks: every camera seen, frames per camera, camera 0 has
motion and camera 1 none after warm-up, one EOS per camera, exit 0.
For `record` (rig-frames.py) the checks are on the files it wrote.
ROUNDS (default 1): the sender runs that many times one after the other
(cameras leaving and coming back): one EOS per camera per round, and the
frames of every round.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

CAMERAS, FRAMES, WARM = 12, 75, 25
# Frames a camera must reach the app with, per round.  The apps drop what
# they can't analyse in time, as live analytics should (a leaky queue and
# appsink drop=true keep the newest), so how many arrive depends on the
# CPU they get: 56-85 of 150 per camera in CI beside two emulated VMs, 150
# on a quiet host.  A floor that is a share of FRAMES failed there; this
# one only says the camera's stream went through the app.  Camera 0 needs
# its warm-up and more for the motion checks below.
FLOOR, BALL_FLOOR = 10, WARM + 10
PATTERNS = ["ball", "colors"] + ["smpte", "snow", "checkers-8", "gradient"] * 3


def sender(port):
    desc = []
    for i in range(CAMERAS):
        desc += ["videotestsrc", "is-live=true", "pattern=" + PATTERNS[i],
                 "num-buffers=%d" % FRAMES, "!",
                 "video/x-raw,format=RGB,width=320,height=240,framerate=25/1",
                 "!", "rdmasink", "transport=shm", "port=%d" % port,
                 "device-id=%d" % i]
    return subprocess.Popen(["gst-launch-1.0", "-q"] + desc)


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def check_json(lines, kind, rounds):
    frames = {d: [] for d in range(CAMERAS)}
    eos = {d: 0 for d in range(CAMERAS)}
    for line in lines:
        r = json.loads(line)
        if "packet" in r:
            frames[r["device"]].append(r)
        elif r.get("event") == "eos":
            eos[r["device"]] += 1
    for d in range(CAMERAS):
        n = len(frames[d])
        print("device %2d: %3d frames, %d EOS, %d with motion" %
              (d, n, eos[d], sum(f["motion"] for f in frames[d])))
        floor = BALL_FLOOR if d == 0 else rounds * FLOOR
        if n < floor:
            fail("device %d: %d frames of %d sent, expected at least %d" %
                 (d, n, rounds * FRAMES, floor))
        if eos[d] != rounds:
            fail("device %d: %d EOS reported" % (d, eos[d]))
        if any(f["capture_time_ns"] is None or f["capture_time_ns"] <= 0
               for f in frames[d]):
            fail("device %d: a frame without capture time" % d)
        packets = [f["packet"] for f in frames[d]]
        if rounds == 1 and packets != sorted(packets):
            fail("device %d: packet numbers out of order" % d)
    ball = frames[0][WARM:]
    moving = sum(f["motion"] for f in ball)
    if moving < len(ball) * 0.8:
        fail("ball (device 0): motion in %d of %d frames" % (moving, len(ball)))
    still = [f for f in frames[1][WARM:] if f["motion"]]
    if still:
        fail("colors (device 1): motion in packets %s" %
             [f["packet"] for f in still])
    if kind == "analytics":
        if not any(f["regions"] for f in ball):
            fail("ball: no region reported")
        lat = sorted(f["latency_us"] for d in frames for f in frames[d])
        print("latency p50 %d us, p99 %d us" %
              (lat[len(lat) // 2], lat[int(len(lat) * 0.99)]))


def check_record(out):
    for d in range(CAMERAS):
        path = os.path.join(out, "dev%02d" % d)
        files = sorted(os.listdir(path)) if os.path.isdir(path) else []
        files = [f for f in files if f.startswith("frame-")]
        print("device %2d: %d files, first %s" % (d, len(files), files[:1]))
        if len(files) < FRAMES // 2:
            fail("%s: %d frames written" % (path, len(files)))


def main():
    port, kind = int(sys.argv[1]), sys.argv[2]
    rounds = int(sys.argv[3]) if sys.argv[3] != "--" else 1
    cmd = sys.argv[sys.argv.index("--") + 1:]
    # The app's output goes to a file, read at the end: a pipe nobody reads
    # while the senders run fills after 64 KiB and blocks the app (its
    # cameras then lose frames to rdmasrc's drop-oldest, as a stuck
    # consumer should).
    out_file = tempfile.TemporaryFile(mode="w+")
    app = subprocess.Popen(cmd, stdout=out_file, text=True)
    time.sleep(1.0)  # rdmasrc listening before the sender connects
    for _ in range(rounds - 1):
        if sender(port).wait(timeout=20) != 0:
            fail("sender round failed")
        time.sleep(0.5)
    tx = sender(port)
    try:
        app.wait(timeout=25)
        out_file.seek(0)
        out = out_file.read()
    except subprocess.TimeoutExpired:
        app.kill()
        tx.kill()
        fail("the sample did not end within 25 s")
    tx_status = tx.wait(timeout=10)
    print("sample exit %d, sender exit %d" % (app.returncode, tx_status))
    if app.returncode != 0:
        fail("sample exit status %d" % app.returncode)
    if kind == "record":
        check_record(cmd[cmd.index("--out") + 1])
    else:
        check_json(out.splitlines(), kind, rounds)
    print("PASS")


if __name__ == "__main__":
    main()
