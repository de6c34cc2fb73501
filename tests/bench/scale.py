# SPDX-License-Identifier: LGPL-2.1-or-later
"""One point of B10 (many senders into one receiver), for tests/bench/run.py
on the host (shm) and tests/bench/vm_guest.py in the Soft-RoCE VM (verbs).

A point is one gst-latency receiver (one rdmasrc, --streams K*N) and K
gst-latency sender processes of N live cameras each, the k-th with
--first-device k*N: K connections (lanes) into one receiver, which is how
K camera-ingest processes feed one analytics process.  The receiver's JSON
is returned with the senders' beside it; the figures B10 plots are taken
from it by run.py/render.py:

  lost          frame numbers missing between each camera's first and
                last frame received (gst-latency stamps them in the frame);
                cameras_unseen: cameras with no frame at all
  cpu_us_per_frame  the receiving process's CPU (user + system) over the
                counted span / the frames counted in it
  p99_us        capture -> appsink, every frame of the counted span

No Python GStreamer here: the guest and the host run the same C tool.
"""
import json
import subprocess
import tempfile
import time


def run_point(tool, senders, cameras, video, seconds, warmup, port, env,
              backend="shm", address="127.0.0.1", poll_mode=None, start_gap=0.3,
              device_blocks=0):
    """Runs one point; returns a dict (with "error" when it couldn't run).
    device_blocks: rdmasrc's device-blocks, 0 = its automatic share."""
    streams = senders * cameras
    common = ["--transport", "rdma", "--backend", backend, "--address", address,
              "--port", str(port), "--width", str(video["width"]),
              "--height", str(video["height"]), "--fps", str(video["fps"]),
              "--format", video["format"]]
    rx_cmd = [tool, "receive", *common, "--streams", str(streams), "--senders", str(senders),
              "--seconds", str(seconds), "--warmup", str(warmup)]
    if poll_mode:
        rx_cmd += ["--poll-mode", poll_mode]
    if device_blocks:
        rx_cmd += ["--device-blocks", str(device_blocks)]
    # The senders outlive the receiver's counted span by far: they are
    # stopped (SIGTERM: they report and end) once the receiver has.  They start one after the other
    # (start_gap) because that is how cameras come up; the warm-up covers
    # the last one.
    tx_secs = seconds + warmup + start_gap * senders + 60
    rx = subprocess.Popen(rx_cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
    time.sleep(0.5)
    txs = []
    for k in range(senders):
        # Files, not pipes: nobody reads a sender's output until the end,
        # and a sender blocked writing a full pipe would stall its cameras.
        out_f, err_f = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
        txs.append((subprocess.Popen(
            [tool, "send", *common, "--streams", str(cameras), "--first-device",
             str(k * cameras), "--seconds", str(tx_secs)],
            env=env, stdout=out_f, stderr=err_f), out_f, err_f))
        time.sleep(start_gap)
    try:
        out, err = rx.communicate(timeout=seconds + warmup + start_gap * senders + 90)
    except subprocess.TimeoutExpired:
        rx.kill()
        out, err = rx.communicate()
    for p, _, _ in txs:
        p.terminate()  # gst-latency reports and stops on SIGTERM
    sent = []
    for p, out_f, err_f in txs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        out_f.seek(0)
        err_f.seek(0)
        o, e = out_f.read(), err_f.read()
        out_f.close()
        err_f.close()
        try:
            sent.append(json.loads(o.strip().splitlines()[-1]))
        except (json.JSONDecodeError, IndexError):
            sent.append({"error": (e.strip() or "no output")[-200:]})
    try:
        res = json.loads(out.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return {"senders": senders, "cameras": streams, "error": (err.strip() or
                                                                  "no output")[-300:],
                "sent": sent}
    res.pop("per_stream", None)  # 96 cameras of percentiles: not plotted
    res["senders"] = senders
    res["cameras"] = streams
    res["device_blocks"] = device_blocks
    res["sent"] = sent
    # A camera never seen lost its whole run; it is counted apart, not
    # guessed into "lost".
    res["cameras_unseen"] = streams - res.get("streams_seen", 0)
    res["cpu_us_per_frame"] = (res["cpu_s"] * 1e6 / res["samples"]
                               if res.get("samples") else None)
    return res
