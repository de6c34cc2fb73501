#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Summarises a rig run: frames per camera sent, received, lost; CPU; frames/s.

    pipelines/rig-stats.py --sender send.json --receiver recv.json
        [--expected N] [--title TEXT]

Reads the --stats files of rig-send.sh (rdmasink stats) and of
rig-mosaic.sh or rig-frames.py (rdmasrc stats), prints a table, one line
per camera:

  produced   --expected (num-buffers of each camera, i.e. seconds * fps)
  sent       rdmasink "frames": handed to the RDMA sender
  tx-drops   rdmasink "drops": no free send block in time (backpressure)
  received   rdmasrc "frames" of the device
  rx-drops   rdmasrc device "drops"
  gaps       rdmasrc device "gaps" (packet numbers skipped)
  lost       produced - received (or sent - received without --expected)
  fps        frames/s at the receiver (first to last arrival of the camera)

then the CPU time of each process while it streamed.  Exit status 0 when
no frame was lost and both sides ended without error, else 1.
"""

import argparse
import json
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def sender_devices(report):
    out = {}
    for e in report.get("elements", {}).values():
        if e.get("factory") == "rdmasink":
            s = e["stats"]
            out[s["device-id"]] = s
    return out


def receiver_devices(report):
    out = {}
    for e in report.get("elements", {}).values():
        if e.get("factory") == "rdmasrc":
            # One field per device, "device-<N>", a "rdmasrc-device-stats".
            for d in e["stats"].values():
                if isinstance(d, dict) and d.get("name") == "rdmasrc-device-stats":
                    out[d["device-id"]] = d
    return out


def receiver_pads(report):
    out = {}
    for key, p in report.get("pads", {}).items():
        pad = key.split(":")[-1]
        if pad.startswith("src_"):
            out[int(pad[4:])] = p
    return out


def cpu_line(name, r):
    wall = r.get("wall-streaming", r.get("wall-playing", 0.0))
    cpu = r.get("cpu-streaming", r.get("cpu-playing", 0.0))
    pct = 100.0 * cpu / wall if wall > 0 else 0.0
    return "%-9s CPU %6.2f s in %6.2f s streaming = %5.1f%% of one core (process total %.2f s)" % (
        name + ":",
        cpu,
        wall,
        pct,
        r.get("cpu-total", 0.0),
    )


def main():
    ap = argparse.ArgumentParser(description="Summarise a rig run's --stats files.")
    ap.add_argument("--sender", required=True)
    ap.add_argument("--receiver", required=True)
    ap.add_argument("--expected", type=int, default=0, help="frames each camera produced")
    ap.add_argument("--title", default="")
    args = ap.parse_args()

    try:
        snd = load(args.sender)
    except (OSError, ValueError) as e:
        snd = {"errors": ["no sender statistics: %s" % e]}
    try:
        rcv = load(args.receiver)
    except (OSError, ValueError) as e:
        rcv = {"errors": ["no receiver statistics: %s" % e]}
    tx = sender_devices(snd)
    rx = receiver_devices(rcv)
    pads = receiver_pads(rcv)

    lines = []
    if args.title:
        lines += [args.title, ""]
    hdr = "%-6s %9s %9s %9s %9s %9s %9s %9s %7s" % (
        "camera", "produced", "sent", "tx-drops", "received", "rx-drops", "gaps", "lost", "fps")
    lines += [hdr, "-" * len(hdr)]
    tot = dict(produced=0, sent=0, txd=0, rcv=0, rxd=0, gaps=0, lost=0)
    fps_sum = 0.0
    for dev in sorted(set(tx) | set(rx)):
        t, r, p = tx.get(dev, {}), rx.get(dev, {}), pads.get(dev, {})
        sent = t.get("frames", 0)
        produced = args.expected if args.expected else sent + t.get("drops", 0)
        received = r.get("frames", 0)
        lost = max(produced - received, 0)
        fps = p.get("fps") or ((p.get("buffers", 0) - 1) / p["span"] if p.get("span") else 0.0)
        fps_sum += fps
        lines.append("dev%02d  %9d %9d %9d %9d %9d %9d %9d %7.1f" % (
            dev, produced, sent, t.get("drops", 0), received, r.get("drops", 0), r.get("gaps", 0), lost, fps))
        tot["produced"] += produced
        tot["sent"] += sent
        tot["txd"] += t.get("drops", 0)
        tot["rcv"] += received
        tot["rxd"] += r.get("drops", 0)
        tot["gaps"] += r.get("gaps", 0)
        tot["lost"] += lost
    lines.append("-" * len(hdr))
    lines.append("total  %9d %9d %9d %9d %9d %9d %9d %7.1f" % (
        tot["produced"], tot["sent"], tot["txd"], tot["rcv"], tot["rxd"], tot["gaps"], tot["lost"], fps_sum))
    lines.append("")

    wall = rcv.get("wall-streaming", 0.0)
    if wall > 0 and rx:
        lines.append(
            "overall:  %d frames in %.2f s (first frame to end) = %.1f frames/s, %.1f per camera"
            % (tot["rcv"], wall, tot["rcv"] / wall, tot["rcv"] / wall / len(rx)))
    src = next((e["stats"] for e in rcv.get("elements", {}).values() if e.get("factory") == "rdmasrc"), {})
    if src:
        mb = src.get("bytes", 0) / 1e6
        wall = rcv.get("wall-streaming", 0.0)
        lines.append(
            "receiver: %d frames pushed, %.1f MB in %d blocks (%.1f MB/s), %d copied for max-held, "
            "%d lane(s)" % (src.get("pushed", 0), mb, src.get("blocks", 0), mb / wall if wall > 0 else 0.0,
                           src.get("copies", 0), src.get("lanes-opened", 0)))
    conn = next(iter(tx.values()), {})
    if conn:
        lines.append(
            "sender:   %d zero-copy / %d copied buffers, %d sync reads, %d waits for a free block, "
            "%d reconnects" % (sum(t.get("zero-copy-buffers", 0) for t in tx.values()),
                               sum(t.get("copied-buffers", 0) for t in tx.values()),
                               conn.get("sync-reads", 0), conn.get("no-free-waits", 0), conn.get("reconnects", 0)))
    for key, o in rcv.get("outputs", {}).items():
        lines.append("mosaic:   %d frames written (%.1f frames/s)" % (o["buffers"], o.get("fps", 0.0)))
    if "devices" in rcv and rcv.get("label") == "rig-frames":
        written = sum(d["written"] for d in rcv["devices"].values())
        lines.append("frames:   %d files written" % written)
    lines.append(cpu_line("sender", snd))
    lines.append(cpu_line("receiver", rcv))
    lines.append("")

    problems = []
    for side, r in (("sender", snd), ("receiver", rcv)):
        for e in r.get("errors", []):
            problems.append("%s error: %s" % (side, e))
        if r.get("status") not in (0, None) and not r.get("errors"):
            problems.append("%s exited with status %s" % (side, r.get("status")))
    if not tx:
        problems.append("no sender statistics")
    if not rx:
        problems.append("no camera arrived at the receiver")
    if tot["lost"]:
        problems.append("%d frame(s) lost" % tot["lost"])
    if problems:
        lines.append("RESULT: FAILED: " + "; ".join(problems))
    else:
        lines.append("RESULT: OK: %d camera(s), %d frames received, 0 lost" % (len(rx), tot["rcv"]))
    print("\n".join(lines))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
