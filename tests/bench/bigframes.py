# SPDX-License-Identifier: LGPL-2.1-or-later
"""Parts B11 (big frames, timed) and B12 (instructions per frame, counted)
of tests/bench/run.py, measuring and rendering; both run
tests/bench/gst-frames at both ends, over shm on this host, each in a
network namespace of its own when `unshare` can make one (rdmasrc's and
shmsink's ports and sockets can't clash with anybody else's run).

B11: 1, 6 and 12 cameras at 1920x1080 and 3840x2160, NV12 and RGB, flat
out (non-live videotestsrc), each frame mapped once by the consumer:
rdmasink/rdmasrc at their defaults against shmsink/shmsrc in the same
run, repetitions alternating the order; at 6 x 1080p NV12 also rdmasrc
with block-size=4194304 (a frame in one block), flat out and live at 25
fps (the issue #30 headline: default against 4 MiB blocks).

B12: instructions per frame under callgrind, both ends at once, for
12 x 640x480 RGB, 6 x 1920x1080 NV12 and 1 x 3840x2160 NV12, each rig a
short and a long run (the difference over the frames' difference), live
at a rate the instrumented processes keep up with (valgrind runs ~50x slower;
a flat-out run would measure how the transports cope with a slow peer,
not what a frame costs), split by tests/bench/instructions.py into the
pixel fill, copies and the rest.
"""
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
KIB, MIB = 1024, 1024 * 1024

B11_RES = [(1920, 1080), (3840, 2160)]
B11_FORMATS = ["NV12", "RGB"]
B11_CAMERAS = [1, 6, 12]
BIG_BLOCK = 4 * MIB  # the headline's "block-size large enough" for 1080p
B11_HEADLINE = (6, 1920, 1080, "NV12")

# (label, cameras, width, height, format, framerate, frames a camera)
B12_RIGS = [("12 x 640x480 RGB", 12, 640, 480, "RGB", "1", 16),
            ("6 x 1920x1080 NV12", 6, 1920, 1080, "NV12", "1", 16),
            ("1 x 3840x2160 NV12", 1, 3840, 2160, "NV12", "1", 24)]
B12_WARMUP = 2
B12_SHORT = 4  # frames a camera of the short run; the long one: the rig's


def frame_bytes(w, h, fmt):
    return w * h * 3 if fmt == "RGB" else w * h * 3 // 2


def netns_prefix():
    """unshare --net ... with lo up, when this user may; else nothing (the
    ports then come from run.py's range, as the other parts' do)."""
    if not shutil.which("unshare"):
        return None
    r = subprocess.run(["unshare", "--net", "sh", "-c", "ip link set lo up"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return r.returncode == 0


PAIR_SCRIPT = r"""
# One sender and one receiver; shmsrc needs shmsink's socket, rdmasink its
# receiver listening: the order follows.  The receiver decides the end.
ip link set lo up 2>/dev/null
if [ "$T" = shm ]; then
  $TXW "$TOOL" send $C $TXA > "$D/tx.json" 2> "$D/tx.err" & TX=$!
  sleep "$GAP"
  $RXW "$TOOL" receive $C $RXA > "$D/rx.json" 2> "$D/rx.err"
  kill -TERM $TX 2>/dev/null; wait $TX
else
  $RXW "$TOOL" receive $C $RXA > "$D/rx.json" 2> "$D/rx.err" & RX=$!
  sleep "$GAP"
  $TXW "$TOOL" send $C $TXA > "$D/tx.json" 2> "$D/tx.err"
  wait $RX
fi
"""


def run_pair(ctx, env, transport, cameras, w, h, fmt, frames, rx_args=(), tx_args=(),
             live_fps=None, warmup=3, callgrind_dir=None, budget=180):
    """One gst-frames sender and receiver; returns (tx, rx) dicts (None when
    that end printed nothing) and, under callgrind, the dump paths."""
    tool = os.path.join(ctx.build, "tests/bench/gst-frames")
    d = tempfile.mkdtemp(prefix="b11-", dir=callgrind_dir)
    port = ctx.next_port()
    common = ["--transport", "rdma" if transport.startswith("rdma") else "shm",
              "--streams", str(cameras), "--width", str(w), "--height", str(h),
              "--format", fmt, "--frames", str(frames), "--warmup", str(warmup),
              "--port", str(port), "--socket-dir", d, "--seconds", str(budget)]
    if live_fps:
        common += ["--live", "--fps", str(live_fps)]
    vg = {}
    if callgrind_dir:
        for end in ("tx", "rx"):
            vg[end] = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={d}/cg.{end}"]
        rx_args = list(rx_args) + ["--idle", "30"]
    e = dict(env)
    e.update({"T": "rdma" if transport.startswith("rdma") else "shm", "TOOL": tool,
              "C": " ".join(common), "D": d, "GAP": "8" if callgrind_dir else "0.5",
              "RXA": " ".join(rx_args),
              # shmsrc reads the sender's area: that sender stays until it is
              # told to go; rdmasink's frames are in the receiver's lane once
              # EOS is through, but a receiver under valgrind may be behind.
              "TXA": " ".join(list(tx_args) +
                              ["--linger", str(budget if transport == "shm" else 3)]),
              "TXW": " ".join(vg.get("tx", [])), "RXW": " ".join(vg.get("rx", []))})
    cmd = ["sh", "-c", PAIR_SCRIPT]
    if ctx.netns:
        cmd = ["unshare", "--net"] + cmd
    try:
        subprocess.run(cmd, env=e, timeout=budget + 120, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        ctx.log(f"gst-frames {transport} {cameras}x{w}x{h} {fmt}: timed out")
    out = {}
    for end in ("tx", "rx"):
        try:
            with open(os.path.join(d, f"{end}.json")) as f:
                out[end] = json.loads(f.read().strip().splitlines()[-1])
        except (OSError, IndexError, json.JSONDecodeError):
            try:
                with open(os.path.join(d, f"{end}.err")) as f:
                    err = f.read()[-300:]
            except OSError:
                err = "no output"
            out[end] = None
            ctx.log(f"gst-frames {end} {transport} failed: {err.strip()}")
    dumps = {end: os.path.join(d, f"cg.{end}") for end in ("tx", "rx")} if callgrind_dir \
        else None
    if not callgrind_dir:
        shutil.rmtree(d, ignore_errors=True)
    return out["tx"], out["rx"], dumps


def frames_for(cameras, nbytes, quick):
    """Frames a camera: ~1.5 GB a run (a few seconds flat out), at least
    20 a camera so the span is frames, not start-up."""
    n = int(1.5e9 / (nbytes * cameras))
    n = max(20, min(300, n))
    return max(12, n // 4) if quick else n


def summarize(tx, rx, transport):
    """The figures B11 shows for one run."""
    if not rx:
        return {"transport": transport, "error": "receiver printed nothing"}
    r = {"transport": transport, "delivered": rx.get("frames"),
         "expected": rx.get("expected"), "counted": rx.get("counted"),
         "frames_per_s": rx.get("frames_per_s"),
         "rx_cpu_us_per_frame": rx.get("cpu_us_per_frame"),
         "maps_merged": rx.get("maps_merged_counted"), "error": rx.get("error")}
    if tx:
        r["tx_cpu_us_per_frame"] = tx.get("cpu_us_per_frame")
        r["tx_frames_per_s"] = tx.get("frames_per_s")
        r["tx_error"] = tx.get("error")
    rs = rx.get("rdmasrc")
    if rs:
        r["rx_pinned_bytes"] = rs.get("lane_bytes")
        r["rdmasrc_frames_copied"] = rs.get("frames-copied")
        r["rdmasrc_copies"] = rs.get("copies")
        r["frames_fragmented"] = (rs.get("devices-frames-fragmented")
                                  if rs.get("has-frames-fragmented") else None)
        r["block_size"] = rs.get("block-size")
    sk = (tx or {}).get("rdmasink")
    if sk:
        r["tx_pinned_bytes"] = sk.get("send-blocks", 0) * (sk.get("block-payload-size", 0) + 72)
        r["rdmasink_copied"] = sk.get("copied-buffers")
        r["rdmasink_drops"] = sk.get("drops")
    if tx and "shm_area_bytes" in tx:
        r["tx_area_bytes"] = tx["shm_area_bytes"]
    return r


def b11(ctx, env):
    ctx.netns = netns_prefix()
    reps = 1 if ctx.quick else 3
    res = {"reps": reps, "netns": bool(ctx.netns), "points": [], "headline": []}
    k = 0
    for cameras in B11_CAMERAS:
        for w, h in B11_RES:
            for fmt in B11_FORMATS:
                nbytes = frame_bytes(w, h, fmt)
                frames = frames_for(cameras, nbytes, ctx.quick)
                variants = [("rdma", [])]
                if (cameras, w, h, fmt) == B11_HEADLINE:
                    variants.append(("rdma-4MiB", ["--block-size", str(BIG_BLOCK)]))
                variants.append(("shm", []))
                point = {"cameras": cameras, "width": w, "height": h, "format": fmt,
                         "frame_bytes": nbytes, "frames_each": frames, "runs": []}
                for rep in range(reps):
                    order = variants if k % 2 == 0 else variants[::-1]
                    k += 1
                    for t, rx_args in order:
                        tx, rx, _ = run_pair(ctx, env, t, cameras, w, h, fmt, frames,
                                             rx_args=rx_args)
                        s = summarize(tx, rx, t)
                        s["rep"] = rep
                        point["runs"].append(s)
                        ctx.log(f"B11 {cameras}x{w}x{h} {fmt} {t}: {s.get('delivered')}/"
                                f"{s.get('expected')} frames, {s.get('frames_per_s') or 0:.0f}"
                                f" frames/s, rx {s.get('rx_cpu_us_per_frame') or 0:.0f} us, "
                                f"tx {s.get('tx_cpu_us_per_frame') or 0:.0f} us a frame")
                res["points"].append(point)
    # The headline as its author measured it: 6 cameras live at 25
    # fps, 100 frames each, default against 4 MiB blocks, alternating.
    cameras, w, h, fmt = B11_HEADLINE
    for rep in range(reps):
        for t, rx_args in ([("rdma", []), ("rdma-4MiB", ["--block-size", str(BIG_BLOCK)])]
                           if rep % 2 == 0 else
                           [("rdma-4MiB", ["--block-size", str(BIG_BLOCK)]), ("rdma", [])]):
            tx, rx, _ = run_pair(ctx, env, t, cameras, w, h, fmt, 40 if ctx.quick else 103,
                                 rx_args=rx_args, live_fps=25)
            s = summarize(tx, rx, t)
            s["rep"] = rep
            res["headline"].append(s)
            ctx.log(f"B11 headline live {t}: rx {s.get('rx_cpu_us_per_frame') or 0:.0f} us a "
                    f"frame, {s.get('delivered')} frames")
    return res


def b12(ctx, env):
    if not shutil.which("valgrind") or not shutil.which("callgrind_annotate"):
        return {"skipped": "valgrind is not installed"}
    import instructions
    ctx.netns = netns_prefix()
    reps = 1 if ctx.quick else 2
    keep = os.path.join(ctx.build, "bench", "b12")
    os.makedirs(keep, exist_ok=True)
    res = {"reps": reps, "warmup": B12_WARMUP, "rigs": []}
    k = 0
    for label, cameras, w, h, fmt, fps, frames in B12_RIGS:
        if ctx.quick:
            frames = B12_SHORT + 3
        rig = {"label": label, "cameras": cameras, "width": w, "height": h, "format": fmt,
               "fps": fps, "frames_each": frames, "runs": []}
        for rep in range(reps):
            for t in (["rdma", "shm"] if k % 2 == 0 else ["shm", "rdma"]):
                run = {"transport": t, "rep": rep}
                for length, n in (("short", B12_SHORT), ("long", frames)):
                    tx, rx, dumps = run_pair(ctx, env, t, cameras, w, h, fmt, n,
                                             live_fps=fps, warmup=B12_WARMUP,
                                             callgrind_dir=keep, budget=240)
                    # Frames delivered (mapped by the receiver) divide both
                    # ends' costs.
                    got = (rx or {}).get("frames")
                    run[length] = {"sent": (tx or {}).get("frames"), "delivered": got,
                                   "rdmasink": (tx or {}).get("rdmasink"),
                                   "rdmasrc": (rx or {}).get("rdmasrc"),
                                   "maps_merged": (rx or {}).get("maps_merged")}
                    run[length]["dir"] = os.path.relpath(os.path.dirname(dumps["tx"]), ctx.build)
                split_run(run, ctx.build)
                run["delivered"] = run["long"]["delivered"]
                run["sent"] = run["long"]["sent"]
                rig["runs"].append(run)
                ctx.log(f"B12 {label} {t}: rx {fmt_ir(run.get('rx_ir'))}, "
                        f"tx {fmt_ir(run.get('tx_ir'))} Ir a frame (total/fill/copies/rest)")
            k += 1
        res["rigs"].append(rig)
    return res


def split_run(run, build):
    """A run's Ir a frame at both ends, from its short and long dumps (kept
    in build/bench/b12: the split can be redone without re-measuring)."""
    import instructions
    for end in ("tx", "rx"):
        pair = []
        for length in ("short", "long"):
            r = run.get(length) or {}
            dump = os.path.join(build, r.get("dir", "?"), f"cg.{end}")
            c = instructions.costs(dump) if r.get("delivered") and os.path.exists(dump) \
                else None
            pair.append((c, r.get("delivered") or 0))
        run[end + "_ir"] = instructions.per_frame(*pair)


def fmt_ir(s):
    if not s:
        return "n/a"
    return "/".join(f"{s[k] / 1e3:.0f}k" for k in
                    ("ir_per_frame", "fill_ir_per_frame", "copy_ir_per_frame",
                     "rest_ir_per_frame"))


# ------------------------------------------------------------ rendering


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def spread(xs, scale=1.0, digits=0):
    """"median [min-max]" of the runs."""
    xs = [x * scale for x in xs if x is not None]
    if not xs:
        return "n/a"
    m = statistics.median(xs)
    f = (lambda v: f"{v:,.{digits}f}")
    return f(m) if len(xs) == 1 else f"{f(m)} [{f(min(xs))}-{f(max(xs))}]"


def ratio(a, b):
    return None if a is None or not b else a / b


def fr(v):
    return "n/a" if v is None else f"{v:.2f}"


def mb(n):
    return "n/a" if n is None else f"{n / MIB:,.0f} MiB"


def runs_of(point, t):
    return [r for r in point["runs"] if r["transport"] == t]


def ok_run(r):
    return r.get("delivered") and r.get("expected") and r["delivered"] >= r["expected"]


def b11_rows(res):
    rows = []
    for p in res.get("points", []):
        row = {"p": p}
        for t in ("rdma", "rdma-4MiB", "shm"):
            rs = runs_of(p, t)
            if not rs:
                continue
            row[t] = {
                "fps": [r.get("frames_per_s") for r in rs],
                "rx": [r.get("rx_cpu_us_per_frame") for r in rs],
                "tx": [r.get("tx_cpu_us_per_frame") for r in rs],
                "complete": all(ok_run(r) for r in rs),
                "delivered": [r.get("delivered") for r in rs],
                "expected": rs[0].get("expected"),
                "merged": [r.get("maps_merged") for r in rs],
                "counted": [r.get("counted") for r in rs],
                "fragmented": [r.get("frames_fragmented") for r in rs],
                "tx_copied": [r.get("rdmasink_copied") for r in rs],
                "rx_pinned": med([r.get("rx_pinned_bytes") for r in rs]),
                "tx_pinned": med([r.get("tx_pinned_bytes") for r in rs]),
                "area": med([r.get("tx_area_bytes") for r in rs]),
            }
        rows.append(row)
    return rows


def plot_b11(res, path):
    import matplotlib.pyplot as plt
    rows = [r for r in b11_rows(res) if "rdma" in r and "shm" in r]
    if not rows:
        return False
    labels = [f"{r['p']['cameras']}x{'4K' if r['p']['height'] == 2160 else '1080p'}\n"
              f"{r['p']['format']}" for r in rows]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    x = range(len(rows))
    for ax, key, title in zip(axes, ("fps", "rx", "tx"),
                              ("frames/s (all cameras)", "receiver CPU us / frame",
                               "sender CPU us / frame")):
        for off, t, color in ((-0.2, "rdma", "tab:blue"), (0.2, "shm", "tab:gray")):
            vals = [med(r[t][key]) or 0 for r in rows]
            lo = [v - min(x_ for x_ in r[t][key] if x_ is not None) if med(r[t][key]) else 0
                  for v, r in zip(vals, rows)]
            hi = [max(x_ for x_ in r[t][key] if x_ is not None) - v if med(r[t][key]) else 0
                  for v, r in zip(vals, rows)]
            ax.bar([i + off for i in x], vals, width=0.4, color=color,
                   label="rdmasink/rdmasrc (defaults)" if t == "rdma" else "shmsink/shmsrc",
                   yerr=[lo, hi], capsize=2)
        ax.set_xticks(list(x))
        ax.set_xticklabels(labels, fontsize=7)
        ax.set_yscale("log")
        ax.set_title(title)
    axes[0].legend(fontsize=8)
    fig.suptitle("B11: big frames flat out, each mapped once by the consumer "
                 "(median of the runs, bars: min-max)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def b11_headline(res):
    """(default rx us/frame runs, 4 MiB runs, ratio of medians) live at 25 fps."""
    h = res.get("headline") or []
    d = [r.get("rx_cpu_us_per_frame") for r in h if r["transport"] == "rdma"]
    b = [r.get("rx_cpu_us_per_frame") for r in h if r["transport"] == "rdma-4MiB"]
    return d, b, ratio(med(d), med(b))


def section_b11(results, out, figdir):
    res = results.get("B11")
    out.append("## B11. Big frames: 1080p and 4K, mapped by the consumer\n")
    if not res or "error" in res or "skipped" in res:
        why = (res or {}).get("error") or (res or {}).get("skipped") or "part not run"
        out.append(f"**Not measured in this run**: {why}.\n")
        return
    out.append(
        "Issue #30, item 3. `tests/bench/gst-frames` at both ends over shm on this host "
        "(each pair in a network namespace of its own): per camera `videotestsrc "
        "is-live=false pattern=solid-color num-buffers=F ! video/x-raw,...` flat out into "
        "`rdmasink transport=shm` (one connection, one lane, **rdmasrc's defaults**: "
        "32 blocks of 1 MiB) or into `identity drop-allocation=true ! shmsink` (an area of 8 "
        "frames a camera); the receiver maps every buffer once (`gst_buffer_map` READ, "
        "one byte read, unmap) in a pad probe on a `fakesink`, as OpenCV or a CPU element "
        "would, and counts the maps that had to merge several memories into one (a copy "
        "of the frame). Both ends report the CPU (getrusage, all threads) and wall time of "
        "their counted span: from the frame after each camera's first 3 to the last. "
        f"{res['reps']} runs a point, the order of the transports alternating; medians with "
        "[min-max]. Sender CPU includes videotestsrc's fill (the same for both). "
        "*Pinned*: what verbs would register, the receiver's lanes (blocks x block-size, "
        "from rdmasrc) and the sender's send blocks; over shm nothing is mlocked (VmLck 0), "
        "shmsink's area is shown for comparison. This is a shared 2-core machine: timed "
        "figures are noisy, the spread says how much.\n")
    out.append("    tests/bench/run.py --only B11   # ~10 min (--quick: one run a point)\n")
    if plot_b11(res, os.path.join(figdir, "b11_bigframes.png")):
        out.append("![B11 big frames](bench/b11_bigframes.png)\n")
    out.append("| cameras | frame | transport | frames/s | rx CPU us/frame | tx CPU us/frame | "
               "rx ours/shm | tx ours/shm | delivered | maps merged | sender copies | "
               "pinned rx / tx |")
    out.append("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for row in b11_rows(res):
        p = row["p"]
        shm = row.get("shm")
        for t in ("rdma", "rdma-4MiB", "shm"):
            if t not in row:
                continue
            v = row[t]
            rr = tr = "-"
            if t != "shm" and shm:
                rr = fr(ratio(med(v["rx"]), med(shm["rx"])))
                tr = fr(ratio(med(v["tx"]), med(shm["tx"])))
            deliv = "/".join(str(x) for x in v["delivered"]) + f" of {v['expected']}"
            merged = "/".join(str(x) for x in v["merged"])
            copies = "/".join(str(x) for x in v["tx_copied"]) if t != "shm" else "every frame"
            pinned = (f"{mb(v['rx_pinned'])} / {mb(v['tx_pinned'])}" if t != "shm"
                      else f"area {mb(v['area'])}")
            name = {"rdma": "rdma (defaults)", "rdma-4MiB": "rdma block-size=4 MiB",
                    "shm": "shmsink/shmsrc"}[t]
            out.append(f"| {p['cameras']} | {p['width']}x{p['height']} {p['format']} | {name} "
                       f"| {spread(v['fps'])} | {spread(v['rx'])} | {spread(v['tx'])} | {rr} "
                       f"| {tr} | {deliv} | {merged} | {copies} | {pinned} |")
    out.append("")
    out.append("*delivered*: frames mapped by the consumer per run, of those sent; a run short "
               "of them ended on the receiver's 3 s without a frame (its CPU and frames/s are "
               "of what came). *maps merged*: of the counted frames, how many were several "
               "memories (each such map copies the frame). *sender copies*: frames rdmasink "
               "copied into its send blocks because the source could not draw into them "
               "(shmsink copies every frame into its area). " +
               ("rdmasrc's `frames-fragmented` was read where the build has it." if any(
                   x is not None for row in b11_rows(res) for t in ("rdma",)
                   if t in row for x in row[t]["fragmented"])
                else "This build's rdmasrc has no `frames-fragmented` counter yet: merges "
                     "are counted by the consumer.") + "\n")
    d, b, x = b11_headline(res)
    out.append("### The issue #30 headline: 6 x 1080p NV12 live at 25 fps, default against "
               "4 MiB blocks\n")
    out.append(f"Receiver CPU per frame (100 frames a camera, live, mapped): default "
               f"{spread(d)} us, `block-size=4194304` {spread(b)} us: **{fr(x)}x** "
               "(target <= 1.1; 3.7x when the issue was filed).\n")


def b12_med(rig, t, end, key):
    return med([(r.get(end + "_ir") or {}).get(key) for r in rig["runs"]
                if r["transport"] == t])


def b12_excl(rig, t, end, with_copies=True):
    """Ir a frame with the fill left out (and the copies too, unless
    with_copies)."""
    vals = []
    for r in rig["runs"]:
        s = r.get(end + "_ir")
        if r["transport"] != t or not s:
            continue
        v = s["ir_per_frame"] - s["fill_ir_per_frame"]
        if not with_copies:
            v -= s["copy_ir_per_frame"]
        vals.append(v)
    return vals


def b12_targets(results):
    res = results.get("B12")
    if not res or "rigs" not in res:
        return []
    rows = []
    for end, name in (("rx", "receiver"), ("tx", "sender")):
        parts, xs = [], []
        for rig in res["rigs"]:
            x = ratio(med(b12_excl(rig, "rdma", end)), med(b12_excl(rig, "shm", end)))
            xs.append(x)
            parts.append(f"{rig['label']}: {fr(x)}")
        v = ("n/a" if any(x is None for x in xs) else
             "**met**" if all(x <= 0.7 for x in xs) else "**missed**")
        rows.append((f"B12: {name} instructions per frame, ours / shmsink, fill excluded",
                     "<= 0.7", ", ".join(parts), v, "callgrind, host shm"))
    return rows


def b11_targets(results):
    res = results.get("B11")
    if not res or "points" not in res:
        return []
    d, b, x = b11_headline(res)
    return [("6 x 1080p NV12 live, receiver CPU: defaults / block-size=4194304",
             "<= 1.1", f"{fr(x)} ({med(d) or 0:.0f} us against {med(b) or 0:.0f} us a frame)",
             "n/a" if x is None else ("**met**" if x <= 1.1 else "**missed**"), "host shm (B11)")]


def section_b12(results, out):
    res = results.get("B12")
    out.append("## B12. Instructions per frame (callgrind), both ends\n")
    if not res or "error" in res or "skipped" in res:
        why = (res or {}).get("error") or (res or {}).get("skipped") or "part not run"
        out.append(f"**Not measured in this run**: {why}.\n")
        return
    out.append(
        "Issue #30, item 2: a cost per frame that doesn't depend on the machine. The same "
        "gst-frames pipelines as B11, **both processes under `valgrind --tool=callgrind`** "
        "at once, live at a rate they keep up with under valgrind (so that no frame is "
        "dropped or waited for and the work is a frame's, not a slow peer's), every buffer "
        "mapped once by the consumer. Each rig runs twice, short "
        f"({B12_SHORT} frames a camera) and long, and a frame's cost is the difference of "
        "the two whole runs over the difference of the frames delivered (mapped by the "
        "receiver), for both ends: start-up, the registry, caps and tear-down are the same "
        "in both and cancel (callgrind's client requests can't bound a span instead: they "
        "zero and dump only the calling thread's counters). "
        "`tests/bench/instructions.py` splits each dump, from its call arcs (read from the "
        "callgrind file, by object: Debian's libraries name static functions by offset): "
        "**fill**, every call into videotestsrc (the pixels, the same whoever carries "
        "them); **copies**, every memcpy/memmove outside the fill, by who called it; "
        "**rest**, the elements, GStreamer and the threads' waits. A copy's count depends "
        "on how glibc's memcpy moves it: `rep movsb` counts one instruction a byte, the "
        "vector loop it takes for other sizes one per 32-128 bytes, so copies are shown "
        "apart and not compared by their counts alone. What can still move between runs is the polling "
        "that finds nothing: valgrind runs one thread at a time, and how often a waiting "
        f"thread looks depends on the schedule ({res['reps']} runs a rig, alternating, "
        "[min-max] shown).\n")
    out.append("    tests/bench/run.py --only B12   # ~8 min (--quick: one short run a rig)\n")
    out.append("| rig | end | transport | Ir/frame | fill | copies | rest | fill excluded "
               "| ours/shm, fill excl. | ours/shm, fill + copies excl. | copies by caller |")
    out.append("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    k = lambda v: "n/a" if v is None else f"{v / 1e3:,.0f}k"  # noqa: E731
    for rig in res["rigs"]:
        for end, name in (("rx", "receiver"), ("tx", "sender")):
            for t in ("rdma", "shm"):
                runs = [r.get(end + "_ir") for r in rig["runs"] if r["transport"] == t]
                runs = [s for s in runs if s]
                if not runs:
                    out.append(f"| {rig['label']} | {name} | {t} | n/a | | | | | | | |")
                    continue
                ex = b12_excl(rig, t, end)
                exn = b12_excl(rig, t, end, with_copies=False)
                r1 = r2 = "-"
                if t == "rdma":
                    r1 = fr(ratio(med(ex), med(b12_excl(rig, "shm", end))))
                    r2 = fr(ratio(med(exn), med(b12_excl(rig, "shm", end, False))))
                by = {}
                for s in runs:
                    for key, v in s["copy_by_object_per_frame"].items():
                        by.setdefault(key, []).append(v)
                bys = ", ".join(f"{key.replace('.so', '')} {k(med(v))}"
                                for key, v in sorted(by.items(), key=lambda kv: -med(kv[1]))
                                if med(v) >= 1000) or "none"
                out.append(
                    f"| {rig['label']} | {name} | "
                    f"{'rdmasink/rdmasrc' if t == 'rdma' else 'shmsink/shmsrc'} | "
                    f"{spread([s['ir_per_frame'] for s in runs], 1e-3)}k | "
                    f"{k(med([s['fill_ir_per_frame'] for s in runs]))} | "
                    f"{k(med([s['copy_ir_per_frame'] for s in runs]))} | "
                    f"{k(med([s['rest_ir_per_frame'] for s in runs]))} | "
                    f"{spread(ex, 1e-3)}k | {r1} | {r2} | {bys} |")
    out.append("")
    lost = [(rig["label"], r["transport"], r.get("sent"), r.get("delivered"))
            for rig in res["rigs"] for r in rig["runs"]
            if r.get("sent") is not None and r.get("delivered") != r.get("sent")]
    out.append("Frames sent and delivered differ in: " +
               (", ".join(f"{a} {t} ({d} of {s})" for a, t, s, d in lost) if lost else
                "no run (every frame sent was mapped)") + ".\n")
