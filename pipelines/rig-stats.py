#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Summarises a rig run: per camera, where every frame went; CPU; frames/s.

    pipelines/rig-stats.py --sender send.json --receiver recv.json
        [--expected N] [--title TEXT]

Reads the --stats files of rig-send.sh (rdmasink stats) and of
rig-mosaic.sh or rig-frames.py (rdmasrc stats, buffers counted on the
rdmasrc pads and on the mosaic's inputs), prints a table, one line per
camera:

  produced   --expected (num-buffers of each camera, i.e. seconds * fps),
             else sent + tx-drops
  sent       rdmasink "frames": handed to the RDMA sender
  tx-drops   rdmasink "drops": no free send block in time (backpressure)
  received   rdmasrc "frames" of the device: arrived whole
  lost       produced - received: never arrived (tx-drops, rx-drops, gaps)
  pushed     frames the device's rdmasrc pad pushed downstream
  drop-old   dropped by the pad's over-budget policy (drops-leaky: the
             oldest queued frames, to make room, under drop-oldest)
  not-play   dropped while the receiver wasn't PLAYING (drops-not-playing)
  ended      dropped after the device's EOS (drops-ended)
  key-wait   delta frames of an encoded camera dropped after a gap until
             its next key frame (waiting-for-key-drops: a decoder gets no
             frame whose references are gone)
  mosaic     frames that reached the mosaic: buffers counted on the
             compositor input fed by the camera's pad ("-" without a mosaic)
  fps        frames/s at the mosaic input (first to last arrival), or at
             the pad without a mosaic

then the mosaic's own output, the CPU time of each process while it
streamed, and RESULT.  RESULT is OK only when every figure it states was
measured and adds up: every camera has sender stats, receiver stats and
pad counts (and mosaic counts when there is a mosaic); no frame lost;
every received frame was pushed or dropped by a named policy; every
pushed frame reached the mosaic.  Frames dropped by a pad policy are
stated in the OK line, not hidden.  Exit status 0 when OK, else 1.
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


def mosaic_inputs(report):
    """Compositor input counts by the device whose rdmasrc pad feeds them."""
    out = {}
    for key, p in report.get("inputs", {}).items():
        src = p.get("from") or ""
        pad = src.split(":")[-1]
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
    mosaic = mosaic_inputs(rcv)
    # A mosaic receiver (rig-mosaic.sh) has compositor outputs; rig-frames.py
    # has none, and no mosaic column is claimed for it.
    has_mosaic = bool(rcv.get("outputs"))

    lines = []
    if args.title:
        lines += [args.title, ""]
    cols = ("camera", "produced", "sent", "tx-drops", "received", "lost", "pushed",
            "drop-old", "not-play", "ended", "key-wait", "mosaic", "fps")
    hdr = "%-6s" % cols[0] + "".join(" %8s" % c for c in cols[1:-1]) + " %6s" % cols[-1]
    lines += [hdr, "-" * len(hdr)]
    keys = ("produced", "sent", "txd", "rcv", "lost", "pushed", "leaky", "notplay", "ended", "keywait",
            "mosaic")
    tot = dict.fromkeys(keys, 0)
    tot["queued"] = tot["rxd"] = tot["gaps"] = 0
    policies = set()
    missing = []  # what a claim would rest on but wasn't measured
    unaccounted = {}  # device -> received - (pushed + policy drops + queued)
    short = {}  # device -> pushed - reached the mosaic
    miscounted = {}  # device -> pushed (stats) vs buffers counted on the pad
    fps_sum = 0.0
    for dev in sorted(set(tx) | set(rx)):
        t, r = tx.get(dev), rx.get(dev)
        p, m = pads.get(dev), mosaic.get(dev)
        if t is None:
            missing.append("sender stats of camera %d" % dev)
            t = {}
        if r is None:
            missing.append("receiver stats of camera %d" % dev)
            r = {}
        if p is None or p.get("probe-errors"):
            missing.append("pad counts of camera %d" % dev)
        if has_mosaic and (m is None or m.get("probe-errors")):
            missing.append("mosaic input of camera %d" % dev)
        sent = t.get("frames", 0)
        produced = args.expected if args.expected else sent + t.get("drops", 0)
        received = r.get("frames", 0)
        lost = max(produced - received, 0)
        pushed = r.get("pushed", 0)
        leaky, notplay, ended = r.get("drops-leaky", 0), r.get("drops-not-playing", 0), r.get("drops-ended", 0)
        keywait = r.get("waiting-for-key-drops", 0)
        queued = r.get("queued", 0)
        if r.get("over-budget"):
            policies.add(r["over-budget"])
        if r and received != pushed + leaky + notplay + ended + keywait + queued:
            unaccounted[dev] = received - (pushed + leaky + notplay + ended + keywait + queued)
        if p is not None and p.get("buffers", 0) != pushed:
            miscounted[dev] = (pushed, p.get("buffers", 0))
        at_mosaic = m.get("buffers", 0) if m is not None else None
        if at_mosaic is not None and at_mosaic != pushed:
            short[dev] = pushed - at_mosaic
        rate = (m if has_mosaic else p) or {}
        fps = rate.get("fps") or ((rate.get("buffers", 0) - 1) / rate["span"] if rate.get("span") else 0.0)
        fps_sum += fps
        lines.append("dev%02d " % dev + "".join(" %8d" % v for v in (
            produced, sent, t.get("drops", 0), received, lost, pushed, leaky, notplay, ended, keywait))
            + (" %8d" % at_mosaic if at_mosaic is not None else " %8s" % "-") + " %6.1f" % fps)
        for k, v in zip(keys, (produced, sent, t.get("drops", 0), received, lost, pushed, leaky, notplay, ended,
                               keywait, at_mosaic or 0)):
            tot[k] += v
        tot["queued"] += queued
        tot["rxd"] += r.get("drops", 0)
        tot["gaps"] += r.get("gaps", 0)
    lines.append("-" * len(hdr))
    lines.append("total " + "".join(" %8d" % tot[k] for k in keys[:-1])
                 + (" %8d" % tot["mosaic"] if has_mosaic else " %8s" % "-") + " %6.1f" % fps_sum)
    lines.append("")
    if tot["rxd"] or tot["gaps"]:
        lines.append("on the way: %d frame(s) dropped at the receiver, %d packet number(s) skipped"
                     % (tot["rxd"], tot["gaps"]))

    wall = rcv.get("wall-streaming", 0.0)
    if wall > 0 and rx:
        lines.append(
            "overall:  %d frames in %.2f s (first frame to end) = %.1f frames/s, %.1f per camera"
            % (tot["rcv"], wall, tot["rcv"] / wall, tot["rcv"] / wall / len(rx)))
    src = next((e["stats"] for e in rcv.get("elements", {}).values() if e.get("factory") == "rdmasrc"), {})
    if src:
        mb = src.get("bytes", 0) / 1e6
        lines.append(
            "receiver: %d frames pushed, %.1f MB in %d blocks (%.1f MB/s), %d copied for max-held, "
            "%d lane(s); pad policy %s" % (src.get("pushed", 0), mb, src.get("blocks", 0),
                                           mb / wall if wall > 0 else 0.0, src.get("copies", 0),
                                           src.get("lanes-opened", 0), ", ".join(sorted(policies)) or "?"))
    conn = next(iter(tx.values()), {})
    if conn:
        lines.append(
            "sender:   %d zero-copy / %d copied buffers, %d sync reads, %d waits for a free block, "
            "%d reconnects" % (sum(t.get("zero-copy-buffers", 0) for t in tx.values()),
                               sum(t.get("copied-buffers", 0) for t in tx.values()),
                               conn.get("sync-reads", 0), conn.get("no-free-waits", 0), conn.get("reconnects", 0)))
    out_frames, out_fps = 0, 0.0
    for key, o in rcv.get("outputs", {}).items():
        out_frames += o["buffers"]
        out_fps = o.get("fps", 0.0)
        lines.append("mosaic:   %d frames written (%.1f frames/s)" % (o["buffers"], out_fps))
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
    if missing:
        problems.append("not measured: " + ", ".join(missing))
    if tot["lost"]:
        problems.append("%d frame(s) lost" % tot["lost"])
    for dev, n in sorted(unaccounted.items()):
        problems.append("camera %d: %d received frame(s) neither pushed nor dropped by a policy" % (dev, n))
    for dev, (pushed, counted) in sorted(miscounted.items()):
        problems.append("camera %d: the pad pushed %d frame(s), %d were counted on it" % (dev, pushed, counted))
    for dev, n in sorted(short.items()):
        problems.append("camera %d: %d pushed frame(s) never reached the mosaic" % (dev, n))
    if has_mosaic and not out_frames:
        problems.append("the mosaic wrote no frame")
    if problems:
        lines.append("RESULT: FAILED: " + "; ".join(problems))
    else:
        dropped = tot["leaky"] + tot["notplay"] + tot["ended"] + tot["keywait"]
        what = "%d camera(s): %d frames received, 0 lost" % (len(rx), tot["rcv"])
        if has_mosaic:
            what += "; %d reached the mosaic (%.1f frames/s per camera)" % (
                tot["mosaic"], fps_sum / len(rx))
        else:
            what += "; %d pushed" % tot["pushed"]
        if dropped:
            what += ("; %d dropped at the pads (%d by the %s policy, %d not playing, %d after EOS, "
                     "%d waiting for a key frame)") % (
                dropped, tot["leaky"], "/".join(sorted(policies)) or "over-budget", tot["notplay"], tot["ended"],
                tot["keywait"])
        else:
            what += ", none dropped at the pads"
        if has_mosaic:
            what += "; mosaic %d frames at %.1f frames/s" % (out_frames, out_fps)
        lines.append("RESULT: OK: " + what)
    print("\n".join(lines))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
