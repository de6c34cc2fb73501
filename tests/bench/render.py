# SPDX-License-Identifier: LGPL-2.1-or-later
"""Turns tests/bench/run.py's results into docs/benchmarks.md + docs/bench/*.png.

Pure rendering: it measures nothing.  `tests/bench/run.py --render` re-runs
it on docs/bench/results.json.  The hand-written analysis in
tests/bench/analysis.md is appended as it is.
"""
import math
import os
import statistics

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402,F401

import bigframes  # noqa: E402  (B11, B12: measured and rendered there)

HERE = os.path.dirname(os.path.abspath(__file__))
KIB, MIB = 1024, 1024 * 1024
SB, SW = "status-byte", "sliding-window"
COLORS = {SB: "tab:blue", SW: "tab:orange", "ib": "tab:green", "bound": "tab:gray"}


def size_label(n):
    if n >= MIB and n % MIB == 0:
        return f"{n // MIB} MiB"
    if n >= KIB and n % KIB == 0:
        return f"{n // KIB} KiB"
    return f"{n} B"


def fmt(v, digits=1):
    if v is None:
        return "n/a"
    if abs(v) >= 10000:
        return f"{v:,.0f}"
    if abs(v) >= 100:
        return f"{v:.0f}"
    return f"{v:.{digits}f}"


def fr(v):
    return "n/a" if v is None else f"{v:.2f}"


def pct(v):
    return "n/a" if v is None else f"{v * 100:.1f} %"


def ratio(a, b):
    if a is None or b is None or not b:
        return None
    return a / b


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def verdict(ok):
    return "n/a" if ok is None else ("**met**" if ok else "**missed**")


def vm_entries(vm, part, **match):
    """Results of the VM jobs of one part whose job fields match."""
    out = []
    for e in (vm or {}).get("results", []):
        j = e["job"]
        if j.get("part") != part or any(j.get(k) != v for k, v in match.items()):
            continue
        out.append((j, e.get("result") if "error" not in e else {"error": e["error"]}))
    return out


def vm_one(vm, part, **match):
    got = vm_entries(vm, part, **match)
    return got[0][1] if got else None


def vm_ok(vm):
    return bool(vm) and "results" in vm


# ----------------------------------------------------------------- B1


def b1_vm_rows(vm):
    if not vm_ok(vm):
        return []
    sizes = sorted({j["size"] for j, _ in vm_entries(vm, "B1")})
    rows = []
    for s in sizes:
        def tput(kind, mech=None, variant=None):
            vals = []
            for j, r in vm_entries(vm, "B1", kind=kind, size=s, mechanism=mech,
                                   variant=variant):
                r = r or {}
                v = r.get("throughput_mbps") if kind == "ib_write_bw" else \
                    (r.get("tx") or {}).get("throughput_mbps")
                vals.append(v)
            return med(vals), [v for v in vals]
        ib, ibs = tput("ib_write_bw")
        sb, sbs = tput("sbr_perf", SB)
        sw, sws = tput("sbr_perf", SW)
        sb64, _ = tput("sbr_perf", SB, "N=64")
        sw64, _ = tput("sbr_perf", SW, "N=64")
        chain, _ = tput("sbr_perf", SB, "chain")
        ra8, _ = tput("sbr_perf", SB, "ra8")
        ib16, _ = tput("ib_write_bw", None, "t16")
        rows.append({"size": s, "ib": ib, "sb": sb, "sw": sw, "sb64": sb64, "ib16": ib16,
                     "chain": chain, "ra8": ra8, "sw64": sw64, "ibs": ibs, "sbs": sbs,
                     "sws": sws})
    return rows


def b1_vm_lat_rows(vm):
    if not vm_ok(vm):
        return []
    sizes = sorted({j["size"] for j, _ in vm_entries(vm, "B1lat")})
    rows = []
    for s in sizes:
        ib = vm_one(vm, "B1lat", kind="ib_write_lat", size=s) or {}
        out = {"size": s, "ib_typ": ib.get("t_typical_us"), "ib_avg": ib.get("t_avg_us")}
        for m in (SB, SW):
            r = vm_one(vm, "B1lat", kind="sbr_perf", mechanism=m, size=s) or {}
            rx = r.get("rx") or {}
            out[m] = (rx.get("latency_mean_us"), rx.get("latency_max_us"))
        rows.append(out)
    return rows


def plot_b1(res, vm, path):
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    ax = axes[0]
    rows = res.get("throughput", []) if res else []
    if rows:
        xs = [r["size"] for r in rows]
        for m, key in ((SB, "sb"), (SW, "sw")):
            ax.plot(xs, [r[key] for r in rows], "o-", color=COLORS[m], label=m)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("payload per block (bytes)")
    ax.set_ylabel("MB/s (payload)")
    ax.set_title("host, shm back end (real time, 2 shared cores)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    ax = axes[1]
    vrows = b1_vm_rows(vm)
    if vrows:
        xs = [r["size"] for r in vrows]
        ax.plot(xs, [r["ib"] for r in vrows], "s--", color=COLORS["ib"], label="ib_write_bw")
        ax.plot(xs, [r["sb"] for r in vrows], "o-", color=COLORS[SB], label=SB)
        ax.plot(xs, [r["sw"] for r in vrows], "o-", color=COLORS[SW], label=SW)
        ax.legend()
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message / payload per block (bytes)")
    ax.set_ylabel("MB/s")
    ax.set_title("Soft-RoCE in a TCG VM (EMULATED CPU)")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def section_b1(res, vm, out, figdir):
    out.append("## B1. Throughput and latency vs block size\n")
    if not res or "error" in res:
        out.append(f"Not measured: {(res or {}).get('error', 'part not run')}\n")
        return
    plot_b1(res, vm, os.path.join(figdir, "b1_throughput.png"))
    out.append("![B1 throughput](bench/b1_throughput.png)\n")
    out.append(f"### Host, shm back end\n\nOne sbr-perf sender and receiver process, one device, "
               f"zero-copy fill (the producer doesn't touch the payload), 16 lane blocks of "
               f"payload + 72 bytes, sync-when-empty, {res['seconds']} s per run, "
               f"{res['reps']} run(s) per point alternating the mechanisms, median shown. "
               "MB = 10^6 bytes of payload. *Paper chain* is status-byte with one status "
               "WRITE per block (`--status-batch 1`: data WRITE + inline status WRITE, "
               "signaled, for every block) where the default shares one status WRITE among "
               "blocks posted together (docs/protocol.md).\n")
    out.append("| payload | status-byte MB/s | sliding-window MB/s | SB / SW | "
               "SB paper chain MB/s | SB / chain |")
    out.append("|---:|---:|---:|---:|---:|---:|")
    for r in res["throughput"]:
        chain = r.get("sb_chain")
        out.append(f"| {size_label(r['size'])} | {fmt(r['sb'])} | {fmt(r['sw'])} | "
                   f"{fr(ratio(r['sb'], r['sw']))} | {fmt(chain) if chain else '-'} | "
                   f"{fr(ratio(r['sb'], chain)) if chain else '-'} |")
    out.append("")
    vrows = b1_vm_rows(vm)
    if vrows:
        out.append("### Soft-RoCE VM (EMULATED CPU: read only the ratios)\n")
        out.append("Same rxe0 device for all three, sender and receiver in the same VM on "
                   "10.77.0.1; ib_write_bw moves `size` bytes per WRITE (its MB/s from its "
                   "message rate x size), sbr-perf moves payload + 72 bytes per block and "
                   "counts payload only. ib_write_bw keeps 128 WRITEs in flight by default; "
                   "from 64 KiB on it also runs with `-t 16` (16 in flight, like the 16 "
                   "blocks of sbr-perf): at 1 MiB the default depth (128 MiB outstanding) is "
                   "much slower on rxe, so that reference is not the link's capacity.\n")
        nrep = max(len(r["ibs"]) for r in vrows)
        if nrep > 1:
            out.append(f"Each point ran {nrep} times (ib_write_bw, status-byte, sliding-window "
                       "back to back, the order reversed every other time); medians, with the "
                       "single runs in brackets.\n")
        out.append("| payload | ib_write_bw MB/s | status-byte MB/s | SB / ib | "
                   "sliding-window MB/s | SW / ib | SB / SW | SB paper chain MB/s | "
                   "chain / ib | SB with 64 blocks MB/s | "
                   "/ ib | SB read-ahead 8 MB/s | / ib | ib_write_bw -t 16 MB/s | "
                   "SB / ib -t 16 |")
        out.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        runs = lambda xs: (" [" + ", ".join(fmt(x) for x in xs) + "]") if len(xs) > 1 else ""  # noqa
        for r in vrows:
            out.append(f"| {size_label(r['size'])} | {fmt(r['ib'])}{runs(r['ibs'])} | "
                       f"{fmt(r['sb'])}{runs(r['sbs'])} | {fr(ratio(r['sb'], r['ib']))} | "
                       f"{fmt(r['sw'])}{runs(r['sws'])} | {fr(ratio(r['sw'], r['ib']))} | "
                       f"{fr(ratio(r['sb'], r['sw']))} | "
                       f"{fmt(r['chain']) if r['chain'] else '-'} | "
                       f"{fr(ratio(r['chain'], r['ib'])) if r['chain'] else '-'} | "
                       f"{fmt(r['sb64']) if r['sb64'] else '-'} | "
                       f"{fr(ratio(r['sb64'], r['ib'])) if r['sb64'] else '-'} | "
                       f"{fmt(r['ra8']) if r['ra8'] else '-'} | "
                       f"{fr(ratio(r['ra8'], r['ib'])) if r['ra8'] else '-'} | "
                       f"{fmt(r['ib16']) if r['ib16'] else '-'} | "
                       f"{fr(ratio(r['sb'], r['ib16'])) if r['ib16'] else '-'} |")
        out.append("")
        w64 = [r for r in vrows if r.get("sw64")]
        if w64:
            out.append("Both mechanisms with 64 lane blocks instead of 16 (same VM run): at "
                       "small blocks each is bound by one round trip per window.\n")
            out.append("| payload | status-byte N=64 MB/s | sliding-window N=64 MB/s | "
                       "SB / SW |")
            out.append("|---:|---:|---:|---:|")
            for r in w64:
                out.append(f"| {size_label(r['size'])} | {fmt(r['sb64'])} | {fmt(r['sw64'])} | "
                           f"{fr(ratio(r['sb64'], r['sw64']))} |")
            out.append("")
    out.append("### Latency\n")
    out.append("sbr-perf at `--rate 100` (one device, 100 blocks/s): the receiver's "
               "capture-to-delivery latency, capture time = the sender's CLOCK_REALTIME just "
               "before it acquires the block, delivery = when `sbr_receiver_next_frame` returns "
               "it (same host clock). At this rate both ends are idle between blocks, so it "
               "includes the polling back-off of the receiver (and for the sliding window "
               "nothing else: the ACK is off the path). The distributions at frame sizes and "
               "rates, per waiting mode and through the elements, are in B9.\n")
    out.append("| payload | shm status-byte mean / max us | shm sliding-window mean / max us |")
    out.append("|---:|---:|---:|")
    for r in res.get("latency", []):
        sb, sw = r.get(SB) or {}, r.get(SW) or {}
        out.append(f"| {size_label(r['size'])} | {fmt(sb.get('mean_us'))} / "
                   f"{fmt(sb.get('max_us'))} | {fmt(sw.get('mean_us'))} / "
                   f"{fmt(sw.get('max_us'))} |")
    out.append("")
    lrows = b1_vm_lat_rows(vm)
    if lrows:
        out.append("VM (EMULATED): ib_write_lat (half a ping-pong round trip, busy polling) "
                   "next to sbr-perf's one-way capture-to-delivery latency at 100 blocks/s.\n")
        out.append("| payload | ib_write_lat typical / avg us | status-byte mean / max us | "
                   "SB mean / ib typical | sliding-window mean / max us |")
        out.append("|---:|---:|---:|---:|---:|")
        for r in lrows:
            sb, sw = r[SB], r[SW]
            out.append(f"| {size_label(r['size'])} | {fmt(r['ib_typ'])} / {fmt(r['ib_avg'])} | "
                       f"{fmt(sb[0])} / {fmt(sb[1])} | {fr(ratio(sb[0], r['ib_typ']))} | "
                       f"{fmt(sw[0])} / {fmt(sw[1])} |")
        out.append("")


# ----------------------------------------------------------------- B2


def b2_vm_rows(vm, part="B2"):
    if not vm_ok(vm):
        return []
    keys = []
    for j, _ in vm_entries(vm, part):
        k = (j.get("blocks"), j.get("variant"))
        if k not in keys:
            keys.append(k)
    rows = []
    for n, variant in keys:
        rows.append({"blocks": n, "variant": variant,
                     SB: vm_one(vm, part, mechanism=SB, blocks=n, variant=variant),
                     SW: vm_one(vm, part, mechanism=SW, blocks=n, variant=variant)})
    return rows


def plot_b2(rows, vrows, path):
    fig, axes = plt.subplots(1, 2 if vrows else 1, figsize=(12 if vrows else 6.5, 4.5),
                             squeeze=False)
    for ax, rs, title in ((axes[0][0], rows, "host, shm"),
                          (axes[0][1] if vrows else None, vrows, "Soft-RoCE VM (EMULATED)")):
        if ax is None:
            continue
        xs = [r["blocks"] for r in rs]
        for m, key, label in ((SB, "sync_read", "status-byte: status READ"),
                              (SW, "ack", "sliding-window: ACK path")):
            def g(r, q):
                d = r.get(m) or {}
                return (d.get(key) or {}).get(q)
            ax.plot(xs, [g(r, "p50_us") for r in rs], "o-", color=COLORS[m],
                    label=f"{label} p50")
            ax.plot(xs, [g(r, "mean_us") for r in rs], "s--", color=COLORS[m], alpha=0.7,
                    label=f"{label} mean")
            ax.fill_between(xs, [g(r, "p50_us") or 0 for r in rs],
                            [g(r, "p99_us") or 0 for r in rs], color=COLORS[m], alpha=0.12)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("lane blocks N")
        ax.set_ylabel("us (shaded: p50..p99)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_b2_hist(rows, vrows, path, n=16):
    """The distribution behind the means: quarter-octave buckets."""
    panels = [("host, shm", rows)] + ([("Soft-RoCE VM (EMULATED)", vrows)] if vrows else [])
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 4), squeeze=False)
    for ax, (title, rs) in zip(axes[0], panels):
        r = next((x for x in rs if x["blocks"] == n and not x.get("variant")), None)
        if not r:
            continue
        for m, key, label in ((SB, "sync_read", "status READ"),
                              (SW, "ack", "sliding-window ACK path")):
            h = ((r.get(m) or {}).get(key) or {})
            b = h.get("quarter_log2_ns_buckets") or []
            tot = sum(b) or 1
            xs = [2 ** ((i + 0.5) / 4) / 1e3 for i in range(len(b))]
            ax.step(xs, [100 * c / tot for c in b], where="mid", color=COLORS[m],
                    label=f"{label} (n={h.get('n', 0)})")
        ax.set_xscale("log")
        ax.set_xlim(left=0.5)
        ax.set_xlabel("us")
        ax.set_ylabel("% of events per quarter octave")
        ax.set_title(f"{title}, N = {n}, 4 KiB")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def b2_table(rows, out):
    out.append("| N | SB MB/s | READs / block | READ mean / p50 / p99 / max us | "
               "SW MB/s | ACK mean / p50 / p99 / max us | READ / ACK (mean) | "
               "READ / ACK (p50) |")
    out.append("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        sb, sw = r.get(SB) or {}, r.get(SW) or {}
        h1, h2 = sb.get("sync_read") or {}, sw.get("ack") or {}
        rpb = ratio(sb.get("sender", {}).get("sync_reads"), sb.get("sender", {}).get("blocks"))
        out.append(
            f"| {r['blocks']} | {fmt(sb.get('throughput_mbps'))} | {fr(rpb)} | "
            f"{fmt(h1.get('mean_us'))} / {fmt(h1.get('p50_us'))} / {fmt(h1.get('p99_us'))} / "
            f"{fmt(h1.get('max_us'))} | {fmt(sw.get('throughput_mbps'))} | "
            f"{fmt(h2.get('mean_us'))} / {fmt(h2.get('p50_us'))} / {fmt(h2.get('p99_us'))} / "
            f"{fmt(h2.get('max_us'))} | {fr(ratio(h1.get('mean_us'), h2.get('mean_us')))} | "
            f"{fr(ratio(h1.get('p50_us'), h2.get('p50_us')))} |")
    out.append("")


def section_b2(res, vm, out, figdir):
    out.append("## B2. Sync control latency vs number of blocks\n")
    if not res or "error" in res:
        out.append(f"Not measured: {(res or {}).get('error', 'part not run')}\n")
        return
    vrows = b2_vm_rows(vm)
    plot_b2(res["rows"], vrows, os.path.join(figdir, "b2_sync.png"))
    out.append("![B2 sync latency](bench/b2_sync.png)\n")
    plot_b2_hist(res["rows"], vrows, os.path.join(figdir, "b2_hist.png"))
    out.append("![B2 distributions at N = 16](bench/b2_hist.png)\n")
    out.append(
        "`tests/bench/sbr-bench sync`: sender and receiver in one process (one clock), one "
        f"producer submitting {size_label(res['size'])} blocks flat out, the receiving "
        "application releasing each block at once, N lane blocks (the sender gets max(N, 16) "
        "send blocks), sync-when-empty. A poller thread reads `sbr_sender_get_stats()` in a "
        "loop (with `sched_yield`) for both mechanisms alike:\n\n"
        "* **status-byte**: the duration of every status READ (post to completion), taken as "
        "the growth of `sync_read_ns_total` per READ (one READ is in flight at a time). "
        "`sbr-perf` reports only the mean and max of READ durations (its percentiles are of "
        "frame latency, B9): **the library keeps no histogram of READs**, so their "
        "distribution is reconstructed from outside.\n"
        "* **sliding-window**: the library exposes no per-slot wait, so what is measured is "
        "the ACK path of the round trip that frees a slot: from the receiving application's "
        "`sbr_block_release` (which posts the ACK) to the sender's ACK thread having counted "
        "it (`acks` in the stats). The data WRITE half of the round trip is not included, "
        "so this *under*-states the sliding window's slot round trip.\n\n"
        "Percentiles come from quarter-octave buckets (about +-9 %). The first 100 ms are not "
        f"counted. {res['duration_ms']} ms per run.\n")
    out.append("### Host, shm back end\n")
    b2_table(res["rows"], out)
    if vrows:
        out.append("### Soft-RoCE VM (EMULATED CPU)\n")
        ps = ((vrows[0].get(SW) or {}).get("poll_sleep_us"))
        if ps:
            out.append(f"Here the poller sleeps {ps} us between polls (spinning on the emulated "
                       "CPU, where `clock_gettime` is a system call, starved what it measured): "
                       "an ACK is seen up to one poll interval late; READ durations are the "
                       "library's own and don't depend on it.\n")
        b2_table(vrows, out)


def section_b2x(res, vm, out):
    if not res or "error" in res or not res.get("rows"):
        return
    out.append("### Sensitivity: how much of it is polling back-off (host, shm, N = 16)\n")
    out.append(
        "The same `sbr-bench sync` run with the library's public back-off knobs "
        "(`struct sbr_backoff_config`, set on both ends: default spin 20 us, then sleep "
        "10 us doubling to 1 ms; \"max sleep 50 us\" caps the doubling) or the threads' timer "
        "slack (`prctl(PR_SET_TIMERSLACK)`, "
        "inherited by the library's threads; Linux's default is 50 us, so a 10 us sleep "
        "lasts 60 us or more) changed. Evidence for the analysis below, not a tuning "
        "recommendation by itself.\n")
    out.append("| payload | variant | SB MB/s | READ mean / p50 / p99 us | SW MB/s | "
               "ACK mean / p50 / p99 us | SB / SW MB/s | READ / ACK mean |")
    out.append("|---:|---|---:|---:|---:|---:|---:|---:|")
    for r in res["rows"]:
        sb, sw = r.get(SB) or {}, r.get(SW) or {}
        h1, h2 = sb.get("sync_read") or {}, sw.get("ack") or {}
        out.append(f"| {size_label(r['size'])} | {r['variant']} | "
                   f"{fmt(sb.get('throughput_mbps'))} | {fmt(h1.get('mean_us'))} / "
                   f"{fmt(h1.get('p50_us'))} / {fmt(h1.get('p99_us'))} | "
                   f"{fmt(sw.get('throughput_mbps'))} | {fmt(h2.get('mean_us'))} / "
                   f"{fmt(h2.get('p50_us'))} / {fmt(h2.get('p99_us'))} | "
                   f"{fr(ratio(sb.get('throughput_mbps'), sw.get('throughput_mbps')))} | "
                   f"{fr(ratio(h1.get('mean_us'), h2.get('mean_us')))} |")
    out.append("")
    vrows = [r for r in b2_vm_rows(vm) if r["blocks"] == 16]
    vrows = [dict(r, variant="default") for r in vrows] + b2_vm_rows(vm, "B2X")
    if len(vrows) > 1:
        out.append("The same in the Soft-RoCE VM (EMULATED CPU, 4 KiB, N = 16):\n")
        out.append("| variant | SB MB/s | READ mean / p50 / p99 us | SW MB/s | "
                   "ACK mean / p50 / p99 us | SB / SW MB/s | READ / ACK mean |")
        out.append("|---|---:|---:|---:|---:|---:|---:|")
        for r in vrows:
            sb, sw = r.get(SB) or {}, r.get(SW) or {}
            h1, h2 = sb.get("sync_read") or {}, sw.get("ack") or {}
            out.append(f"| {r['variant']} | {fmt(sb.get('throughput_mbps'))} | "
                       f"{fmt(h1.get('mean_us'))} / {fmt(h1.get('p50_us'))} / "
                       f"{fmt(h1.get('p99_us'))} | {fmt(sw.get('throughput_mbps'))} | "
                       f"{fmt(h2.get('mean_us'))} / {fmt(h2.get('p50_us'))} / "
                       f"{fmt(h2.get('p99_us'))} | "
                       f"{fr(ratio(sb.get('throughput_mbps'), sw.get('throughput_mbps')))} | "
                       f"{fr(ratio(h1.get('mean_us'), h2.get('mean_us')))} |")
        out.append("")


# ----------------------------------------------------------------- B3


def section_b3(res, out, figdir):
    out.append("## B3. CPU\n")
    if not res or "error" in res:
        out.append(f"Not measured: {(res or {}).get('error', 'part not run')}\n")
        return
    out.append(
        f"Sender and receiver CPU seconds per GB of payload (sbr-perf `cpu_s` = getrusage "
        f"user + system of the whole process from the first frame, shm back end, "
        f"zero-copy fill, {res['seconds']} s flat out). **Caveat:** over shm the sender "
        "process also runs the simulated NIC thread that copies every block into the "
        "receiver's memory (the DMA a real NIC does), so the sender's CPU per GB here is "
        "mostly that memcpy at large blocks; the receiver's is its polling.\n")
    out.append("| payload | SB sender s/GB | SW sender s/GB | SB / SW | SB receiver s/GB | "
               "SW receiver s/GB | SB MB/s | SW MB/s |")
    out.append("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in res["cpu"]:
        sb, sw = r.get(SB) or {}, r.get(SW) or {}
        out.append(f"| {size_label(r['size'])} | {fmt(sb.get('tx_cpu_s_per_gb'), 3)} | "
                   f"{fmt(sw.get('tx_cpu_s_per_gb'), 3)} | "
                   f"{fr(ratio(sb.get('tx_cpu_s_per_gb'), sw.get('tx_cpu_s_per_gb')))} | "
                   f"{fmt(sb.get('rx_cpu_s_per_gb'), 3)} | {fmt(sw.get('rx_cpu_s_per_gb'), 3)} | "
                   f"{fmt(sb.get('throughput_mbps'))} | {fmt(sw.get('throughput_mbps'))} |")
    out.append("")
    idle = res.get("idle") or {}
    if idle:
        out.append("Idle cost (shm): a receiver nobody is connected to uses "
                   f"{fmt(idle.get('receiver_alone_cpu_pct'), 2)} % of a core (it sleeps in the "
                   "listener's poll). With a sender connected that sends one 1,000-byte frame a "
                   "second (back-off up to its 1 ms ceiling on both ends):\n")
        out.append("| mechanism | receiver CPU | sender CPU |")
        out.append("|---|---:|---:|")
        for m in (SB, SW):
            x = idle.get(m) or {}
            out.append(f"| {m} | {fmt(x.get('receiver_cpu_pct'), 2)} % | "
                       f"{fmt(x.get('sender_cpu_pct'), 2)} % |")
        out.append("")
    cg = res.get("callgrind") or {}
    if "error" in cg:
        out.append(f"Callgrind: {cg['error']}\n")
        return
    out.append(
        "### Instructions per block (callgrind)\n\n"
        "`valgrind --tool=callgrind` on `sbr-perf send` (shm, zero-copy, flat out; the "
        "receiver runs natively), inclusive instruction counts (Ir) divided by the blocks "
        "sent. **Engine** = `sb_progress` (status-byte) or `sw_progress` + the ACK thread "
        "`ack_thread` (sliding-window), with everything they call: reaping completions, "
        "posting (the shm back end's `post_send`), the status READ, the queue and stats "
        "locks. The payload is copied only by the shm NIC thread, which is outside the "
        "engine and listed separately. Instruction counts don't depend on the machine's "
        "load, but polls that find nothing are counted too (valgrind serialises threads), so "
        "`progress calls / block` is shown.\n")
    out.append("| mechanism, payload | engine Ir / block | progress calls / block | "
               "sender thread Ir / block | fill (acquire + submit) Ir / block | of which "
               "block_encode | shm NIC thread Ir / block (incl. payload memcpy) |")
    out.append("|---|---:|---:|---:|---:|---:|---:|")
    for key, r in cg.items():
        if not r:
            out.append(f"| {key} | failed | | | | | |")
            continue
        mech, size = key.split("/")
        out.append(f"| {mech}, {size_label(int(size))} | **{r['engine_ir_per_block']:.0f}** | "
                   f"{r['progress_calls_per_block']:.2f} | "
                   f"{r['sender_thread_ir_per_block'] + r['ack_thread_ir_per_block']:.0f} | "
                   f"{r['fill_ir_per_block']:.0f} | {r['block_encode_ir_per_block']:.0f} | "
                   f"{r['nic_ir_per_block']:.0f} |")
    out.append("")
    out.append("Sender thread Ir includes its loop and back-off around the engine (plus the "
               "ACK thread for the sliding window).\n")


# ----------------------------------------------------------------- B4


def pick_median_run(runs):
    good = [r for r in runs if r["stats"]["dip"] is not None]
    if not good:
        return None
    good.sort(key=lambda r: r["stats"]["dip"])
    return good[len(good) // 2]


def plot_b4(res, path):
    fig, axes = plt.subplots(2, 2, figsize=(13, 6), sharex=True)
    for col, (suffix, title) in enumerate((("", "flat out"),
                                           ("@rate", f"paced, {res.get('rate', '?')} blocks/s"))):
        for row, m in enumerate((SB, SW)):
            ax = axes[row][col]
            hold = pick_median_run(res["runs"].get(f"{m}/hold{suffix}", []))
            ctrl = pick_median_run(res["runs"].get(f"{m}/control{suffix}", []))
            if ctrl:
                iv = ctrl["interval_ms"]
                xs = [k * iv + iv / 2 for k in range(len(ctrl["stats"]["rates"]))]
                ax.step(xs, ctrl["stats"]["rates"], where="mid", color="gray", alpha=0.6,
                        label="no hold (control run)")
            if hold:
                iv = hold["interval_ms"]
                xs = [k * iv + iv / 2 for k in range(len(hold["stats"]["rates"]))]
                ax.step(xs, hold["stats"]["rates"], where="mid", color=COLORS[m],
                        label="one block held")
                ax.axvspan(hold["held_at_ms"], hold["released_at_ms"] or 200, color="red",
                           alpha=0.08, label="block held")
            ax.set_ylabel("MB/s per 10 ms")
            ax.set_ylim(bottom=0)
            ax.set_title(f"{m}, {title}")
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=7, loc="lower right")
    for ax in axes[1]:
        ax.set_xlabel("ms (t = 0 is 100 ms after the producer started)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def b4_summary(res):
    s = {}
    for key, runs in res.get("runs", {}).items():
        st = [r["stats"] for r in runs]
        s[key] = {"dip": med([x["dip"] for x in st]),
                  "dips": [x["dip"] for x in st],
                  "worst": med([x["worst_interval_dip"] for x in st]),
                  "zero_ms": max([x["longest_zero_ms"] for x in st], default=None),
                  "base": med([x["baseline_mbps"] for x in st]),
                  "hold": med([x["hold_mbps"] for x in st]),
                  "n": len(st)}
    return s


def section_b4(res, out, figdir):
    out.append("## B4. One block held from 100 to 200 ms\n")
    if not res or "error" in res:
        out.append(f"Not measured: {(res or {}).get('error', 'part not run')}\n")
        return
    plot_b4(res, os.path.join(figdir, "b4_timeline.png"))
    out.append("![B4 timeline](bench/b4_timeline.png)\n")
    out.append(
        "`sbr-perf --hold-ms` holds device 0's *first* frame from t = 0 and prints no "
        "timeline, so this uses `tests/bench/sbr-bench timeline`: sender and receiver in one "
        f"process over shm, {size_label(res['size'])} blocks flat out, {res['blocks']} lane "
        "blocks, bytes delivered to the receiving application per 10 ms. The receiver holds "
        "(`sbr_block_hold`) the first block that arrives at or after t = 100 ms and releases "
        "it at t = 200 ms (t = 0 is 100 ms after the producer started, past the start-up "
        "transient). Flat out, and paced at a fixed offered load well under capacity. "
        "**Dip** = 1 - mean throughput over [100, 200) ms / mean over "
        "[0, 100) ms; **stall** = the longest run of 10 ms intervals with nothing delivered. "
        "Each case also runs without a hold (control), measured the same way: its \"dip\" is "
        "the noise floor of this machine. Median of the runs; the plot shows the median run.\n")
    s = b4_summary(res)
    out.append("| mechanism | load | run | dip (median) | dips of the runs | worst 10 ms vs "
               "baseline | longest stall | baseline MB/s | during hold MB/s |")
    out.append("|---|---|---|---:|---|---:|---:|---:|---:|")
    for suffix, load in (("", "flat out"), ("@rate", f"{res.get('rate', '?')} blocks/s")):
        for m in (SB, SW):
            for v in ("hold", "control"):
                x = s.get(f"{m}/{v}{suffix}")
                if not x or not x["n"]:
                    continue
                out.append(f"| {m} | {load} | {v} | {pct(x['dip'])} | "
                           f"{', '.join(pct(d) for d in x['dips'])} | {pct(x['worst'])} | "
                           f"{x['zero_ms']} ms | {fmt(x['base'])} | {fmt(x['hold'])} |")
    out.append("")


# ----------------------------------------------------------------- B7


def plot_b7(res, path):
    sizes = sorted({r["size"] for r in res["rows"]})
    fig, axes = plt.subplots(1, len(sizes), figsize=(5 * len(sizes), 4.2))
    if len(sizes) == 1:
        axes = [axes]
    for ax, size in zip(axes, sizes):
        rows = [r for r in res["rows"] if r["size"] == size]
        xs = [r["delay_us"] / 1000 for r in rows]
        for mode, style, label in (("sync_when_empty", "o-", "sync when empty"),
                                   ("read_ahead", "s-", "read-ahead N/2")):
            ax.plot(xs, [(r.get(mode) or {}).get("throughput_mbps") for r in rows], style,
                    label=label)
        bx = [x for x in xs if x > 0]
        n = rows[0]["blocks"]
        ax.plot(bx, [n * size / (x * 1e-3) / 1e6 for x in bx], ":", color=COLORS["bound"],
                label=f"N x block / RTT (N={n})")
        ax.set_yscale("log")
        ax.set_xlabel("added round trip (ms)")
        ax.set_ylabel("MB/s")
        ax.set_title(f"{size_label(size)} blocks (shm)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def b7_point(res, size, delay, mode):
    for r in res.get("rows", []):
        if r["size"] == size and r["delay_us"] == delay:
            return (r.get(mode) or {}).get("throughput_mbps")
    return None


def section_b7(res, out, figdir):
    out.append("## B7. Long round trips (shm back end, injected delay)\n")
    if not res or "error" in res:
        out.append(f"Not measured: {(res or {}).get('error', 'part not run')}\n")
        return
    plot_b7(res, os.path.join(figdir, "b7_delay.png"))
    out.append("![B7 delay](bench/b7_delay.png)\n")
    out.append(
        "sbr-perf over shm with `--delay-us D`: every work request executes at post + D/2 and "
        "completes at post + D (pipelined). Status-byte, 16 lane blocks and 16 send blocks, "
        f"zero-copy fill, {res['seconds']} s per run, "
        f"{res.get('reps', 1)} run(s) per point with the modes alternating (median, single "
        "runs in brackets); sync-when-empty (`--read-ahead 0`, the "
        "paper's) vs read-ahead (`--read-ahead 8`: once 8 or fewer blocks are known free, READs "
        "go out between writes, a quarter of the lane apart, up to four in flight; before "
        "git 51b59bf only one READ was in flight). **Bound**: a receive block can be rewritten at "
        "most once per round trip (the READ that finds it free executes after the block "
        "landed and completes a round trip after it was written) and a send block is reused "
        "after its completion, so throughput <= N x block / RTT, next to each figure.\n")
    out.append("| payload | added RTT | sync-when-empty MB/s | vs no delay | read-ahead MB/s | "
               "vs no delay | bound N x block / RTT MB/s |")
    out.append("|---:|---:|---:|---:|---:|---:|---:|")
    for r in res["rows"]:
        size, d = r["size"], r["delay_us"]
        a = (r.get("sync_when_empty") or {}).get("throughput_mbps")
        b = (r.get("read_ahead") or {}).get("throughput_mbps")
        a0 = b7_point(res, size, 0, "sync_when_empty")
        b0 = b7_point(res, size, 0, "read_ahead")
        bound = r["blocks"] * size / (d * 1e-6) / 1e6 if d else None

        def runs(mode):
            xs = (r.get(mode) or {}).get("runs_mbps") or []
            return (" [" + ", ".join(fmt(x) for x in xs) + "]") if len(xs) > 1 else ""
        out.append(f"| {size_label(size)} | {d / 1000:g} ms | {fmt(a)}{runs('sync_when_empty')} | "
                   f"{pct(ratio(a, a0))} | {fmt(b)}{runs('read_ahead')} | {pct(ratio(b, b0))} | "
                   f"{fmt(bound) if bound else '-'} |")
    out.append("")
    if res.get("more_blocks"):
        out.append("What helps: more blocks (a bigger window), at 1 ms added round trip:\n")
        out.append("| payload | N (lane and send blocks) | sync-when-empty MB/s | "
                   "read-ahead N/2 MB/s | no delay, same N, MB/s | best vs no delay | "
                   "bound N x block / RTT MB/s |")
        out.append("|---:|---:|---:|---:|---:|---:|---:|")
        for r in res["more_blocks"]:
            size, n = r["size"], r["blocks"]
            a = (r.get("sync_when_empty") or {}).get("throughput_mbps")
            b = (r.get("read_ahead") or {}).get("throughput_mbps")
            z = (r.get("no_delay") or {}).get("throughput_mbps")
            best = max([x for x in (a, b) if x is not None], default=None)
            out.append(f"| {size_label(size)} | {n} | {fmt(a)} | {fmt(b)} | {fmt(z)} | "
                       f"{pct(ratio(best, z))} | {fmt(n * size / 1e-3 / 1e6)} |")
        out.append("")


# ------------------------------------------------------------- B5 / B6

GST_NAMES = {"rdma-sb": "rdmasink/rdmasrc transport=shm, status-byte",
             "rdma-sw": "rdmasink/rdmasrc transport=shm, sliding-window",
             "shm": "shmsink/shmsrc", "tcp": "tcpclientsink/tcpserversrc"}


def section_b56(res, out):
    if not res or "error" in res or "skipped" in res:
        why = (res or {}).get("error") or (res or {}).get("skipped") or "part not run"
        out.append("## B5. Twelve cameras through the elements\n")
        out.append(f"**Not measured in this run**: {why}.\n")
        out.append("## B6. GStreamer peers\n")
        out.append(f"**Not measured in this run**: {why}.\n")
        return
    base = res.get("source_only") or {}
    out.append("## B5. Twelve cameras through the elements (host, shm)\n")
    out.append(
        "`tests/bench/gst_peers.py`: one sender process with 12 pipelines `videotestsrc "
        "is-live=true pattern=solid-color ! video/x-raw,format=RGB,width=640,height=480,"
        "framerate=25/1 ! <sink>` (921,600-byte frames, 23 MB/s each, 276 MB/s in all) and "
        "one receiver process counting buffers per stream at its fakesinks. The 12 rdmasinks "
        "share one connection (one QP, one lane of 16 blocks of 1 MiB); rdmasrc exposes "
        "`src_0` ... `src_11`. CPU = getrusage of each process over the run (the sender's "
        "includes drawing the test pattern: see the source-only row).\n")
    out.append("| transport | frames sent | received | lost | rdmasink drops | "
               "receiver CPU | sender CPU |")
    out.append("|---|---:|---:|---:|---:|---:|---:|")
    for r in res.get("B5", []):
        tx, rx = r.get("tx") or {}, r.get("rx") or {}
        sent = 12 * r["frames_each"]
        span = rx.get("wall_s") or rx.get("span_s") or 0
        el = tx.get("elapsed_s") or 0
        out.append(f"| {GST_NAMES.get(r['transport'], r['transport'])} | {sent} | "
                   f"{rx.get('frames', 'n/a')} | "
                   f"{sent - rx['frames'] if 'frames' in rx else 'n/a'} | "
                   f"{tx.get('rdmasink_drops', '-') if r['transport'].startswith('rdma') else '-'}"
                   f" | {fmt(100 * rx['cpu_s'] / span) + ' %' if span else 'n/a'} | "
                   f"{fmt(100 * tx['cpu_s'] / el) + ' %' if el else 'n/a'} |")
    out.append("\nCPU percentages are of one core: the receiver's over its run (PLAYING to "
               "its last frame, or to giving up 3 s after the last one when streams stall), the "
               "sender's from PLAYING to EOS.\n")
    out.append("## B6. GStreamer peers: 12 streams flat out (host)\n")
    out.append(
        "The same 12 streams with `is-live=false` and `sync=false`: as fast as each transport "
        f"takes them, {res['B6'][0]['tx']['frames_each'] if res['B6'] and res['B6'][0].get('tx') else '?'}"
        " frames per stream, each transport run "
        f"{max([r['rep'] for r in res['B6']], default=0) + 1} time(s) in alternating order "
        "(median). A transport that stops delivering part-way shows the frames it lost (the "
        "receiver gives up 3 s after its last frame); frames/s then covers what arrived. "
        "TCP runs as `tcpclientsink` -> `tcpserversrc ! rawvideoparse` (one "
        "connection per stream): the sender connects, so TCP's own backpressure throttles it "
        "(`tcpserversink` queues without bound when its client is slower). shm is "
        "`identity drop-allocation=true ! shmsink` / `shmsrc` with a 24-frame area per "
        "stream: without drop-allocation, videotestsrc's buffer pool keeps the area's "
        "blocks and shmsink deadlocks once the reader lags by a whole area (it \"lost\" "
        "half the frames in earlier runs), so shmsink copies each frame into its area, as "
        "our shm NIC thread does. rdmasrc runs with its defaults (32 blocks a lane: 29 MB "
        "for the 12 streams, against the 265 MB of shmsink's areas). Each receiver counts "
        "its frames with GstBaseSink's own count, read every 10 ms, not a Python call per "
        "buffer (which cost more CPU than either transport). Receiver CPU per GB counts from "
        "its first buffer; sender CPU per GB has the source-only run (the same pipelines "
        "into fakesink: "
        f"{fmt(base.get('cpu_s'), 2)} s) subtracted.\n")
    rows = {}
    for r in res.get("B6", []):
        rows.setdefault(r["transport"], []).append(r)
    ref = None
    table = []
    for t, rs in rows.items():
        fps = med([(r.get("rx") or {}).get("frames_per_s") for r in rs])
        mbps = med([(r.get("rx") or {}).get("mbps") for r in rs])
        rxc = med([(r["rx"]["cpu_s_streaming"] / (r["rx"]["bytes"] / 1e9))
                   if r.get("rx") and r["rx"].get("bytes") else None for r in rs])
        txc = med([((r["tx"]["cpu_s"] - (base.get("cpu_s") or 0)) / (r["rx"]["bytes"] / 1e9))
                   if r.get("tx") and r.get("rx") and r["rx"].get("bytes") else None
                   for r in rs])
        lost = [12 * r["tx"]["frames_each"] - r["rx"]["frames"]
                for r in rs if r.get("tx") and r.get("rx")]
        if t == "rdma-sb":
            ref = fps
        table.append((t, fps, mbps, rxc, txc, lost))
    out.append("| transport | frames/s (all 12) | MB/s | vs rdma status-byte | "
               "receiver CPU s/GB | sender CPU s/GB (net of the source) | frames lost |")
    out.append("|---|---:|---:|---:|---:|---:|---|")
    sent_each = {t: 12 * ((rs[0].get("tx") or {}).get("frames_each") or 0)
                 for t, rs in rows.items()}
    for t, fps, mbps, rxc, txc, lost in table:
        if lost and sent_each.get(t) and min(lost) > 0.95 * sent_each[t]:
            got = sent_each[t] - min(lost)
            out.append(f"| {GST_NAMES.get(t, t)} | stalled after {got} frames | - | - | - | - | "
                       f"{', '.join(map(str, lost))} |")
            continue
        out.append(f"| {GST_NAMES.get(t, t)} | {fmt(fps)} | {fmt(mbps)} | "
                   f"{fr(ratio(fps, ref))} | {fmt(rxc, 3)} | {fmt(txc, 3)} | "
                   f"{', '.join(map(str, lost))} |")
    out.append("")


# ------------------------------------------------------------- B8

B8_NAMES = {"baseline": "no slow consumer (baseline)",
            "drop-oldest": "camera 0 slow then stuck, over-budget=drop-oldest (default)",
            "pause": "camera 0 slow then stuck, over-budget=pause",
            "before": "camera 0 slow then stuck, single streaming thread (before)"}


def b8_rows(res):
    rows = []
    for r in res.get("runs", []):
        if "received" not in r:
            rows.append((r.get("label"), None))
            continue
        n = r["frames_each"]
        others = r["received"][1:]
        per_s = r["per_second"]
        secs = int(res["seconds"])
        # Steady-state rate of the other eleven: whole seconds 1 .. secs-2.
        inner = [min(ps[i] for ps in per_s[1:]) for i in range(1, max(2, secs - 1))]
        tx = r.get("tx") or {}
        span = r.get("span_s") or 1
        rows.append((r["label"], {
            "others_lost": sum(n - x for x in others), "others_min": min(others),
            "others_min_fps": min(inner) if inner else None,
            "cam0": r["received"][0], "n": n,
            "cam0_rx_stats": (r.get("rdmasrc") or {}).get("0", {}),
            "cam0_tx": (tx.get("rdmasink_by_device") or {}).get("0", {}),
            "rx_cpu": 100 * r["rx_cpu_s"] / span, "tx_cpu": 100 * tx["cpu_s"] / tx["elapsed_s"]
            if tx.get("elapsed_s") else None}))
    return rows


def plot_b8(res, path):
    runs = [r for r in res.get("runs", []) if "per_second" in r]
    if not runs:
        return False
    fig, axes = plt.subplots(1, len(runs), figsize=(3.3 * len(runs), 3.2), sharey=True)
    if len(runs) == 1:
        axes = [axes]
    for ax, r in zip(axes, runs):
        per_s = r["per_second"]
        secs = len(per_s[0])
        xs = list(range(secs))
        lo = [min(ps[i] for ps in per_s[1:]) for i in xs]
        hi = [max(ps[i] for ps in per_s[1:]) for i in xs]
        ax.fill_between(xs, lo, hi, color="tab:blue", alpha=0.3, step="post")
        ax.step(xs, lo, where="post", color="tab:blue", label="cameras 1-11 (min..max)")
        ax.step(xs, per_s[0], where="post", color="tab:red", label="camera 0")
        if r["label"] != "baseline":
            ax.axvspan(5, 10, color="tab:gray", alpha=0.15)
        ax.set_title(r["label"], fontsize=9)
        ax.set_xlabel("s after the first frame")
        ax.set_ylim(0, 30)
    axes[0].set_ylabel("frames/s received")
    axes[0].legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def section_b8(res, out, figdir):
    out.append("## B8. One slow, then stuck, camera beside eleven (host, shm)\n")
    if not res or "error" in res or "skipped" in res:
        why = (res or {}).get("error") or (res or {}).get("skipped") or "part not run"
        out.append(f"**Not measured in this run**: {why}.\n")
        return
    out.append(
        "`tests/bench/independence.py`: the B5 sender (12 x 640x480 RGB at 25 fps, live, one "
        f"connection, {res['seconds']} s = {int(res['seconds'] * 25)} frames a camera) into "
        "`rdmasrc r.src_0 ! queue ! identity sleep-time=200000 ! fakesink` and "
        "`r.src_N ! queue ! fakesink` for the others: camera 0's consumer takes 200 ms a "
        "frame (5 fps), is stuck from 5 s to 10 s after the first frame (a probe holds its "
        "thread; grey band), then runs at 5 fps again. The baseline has every consumer fast. "
        "\"before\" is rdmasrc as of commit "
        f"{res.get('before_commit')} (one streaming thread for every pad), built aside, "
        "at both ends. CPU: getrusage of each process (the receiver's includes its Python "
        "probes), as % of one core.\n")
    if plot_b8(res, os.path.join(figdir, "b8_independence.png")):
        out.append("![B8](bench/b8_independence.png)\n")
    out.append("| run | cameras 1-11: lost | slowest second of any of them | camera 0: "
               "received / sent | camera 0 at rdmasrc | camera 0's sender | receiver CPU | "
               "sender CPU |")
    out.append("|---|---:|---:|---:|---|---|---:|---:|")
    for label, r in b8_rows(res):
        if r is None:
            out.append(f"| {B8_NAMES.get(label, label)} | failed | | | | | | |")
            continue
        rs = r["cam0_rx_stats"]
        tx = r["cam0_tx"]
        rx_txt = (f"{rs.get('drops-leaky', 0)} dropped, {rs.get('copies', 0)} copied, "
                  f"{rs.get('pauses', 0)} pauses ({fmt((rs.get('paused-time') or 0) / 1e9)} s)"
                  if rs and "drops-leaky" in rs else "-")
        tx_txt = (f"{tx.get('drops', 0)} drops ({tx.get('paused-drops', 0)} paused)"
                  if tx else "-")
        out.append(f"| {B8_NAMES.get(label, label)} | {r['others_lost']} | "
                   f"{r['others_min_fps']} frames/s | {r['cam0']} / {r['n']} | {rx_txt} | "
                   f"{tx_txt} | {fmt(r['rx_cpu'])} % | {fmt(r['tx_cpu'])} % |")
    out.append("")


# ----------------------------------------------------------------- B9

B9_PEER_NAMES = {"rdma": "rdmasink/rdmasrc", "shm": "shmsink/shmsrc",
                 "tcp": "tcpclientsink/tcpserversrc"}
B9_MODE_COLORS = {"busy": "tab:red", "adaptive": "tab:blue", "backoff": "tab:purple"}


def b9_ok(p):
    return p and "error" not in p and p.get("p50_us") is not None and p.get("p50_us", -1) >= 0


def b9_gst(res, video, streams, peer, mode=None):
    for p in (res or {}).get("gst", []):
        if (p.get("video") == video and p.get("streams") == streams and p.get("peer") == peer
                and (mode is None or p.get("mode") == mode) and b9_ok(p)):
            return p
    return None


def b9_lib(res, video, streams, mode):
    for p in (res or {}).get("lib", []):
        if (p.get("video") == video and p.get("streams") == streams and p.get("mode") == mode
                and p.get("latency_p50_us") is not None):
            return p
    return None


def b9_mode_label(res, mode, kind="gst"):
    chosen = res.get(f"{kind}_modes_chosen")
    return mode if chosen else f"{mode} (no modes in this build)"


def b9_ours_mode(res):
    """The mode the comparisons use: adaptive (the default to be) when the
    build has it, else what runs."""
    modes = res.get("gst_modes") or ["backoff"]
    return "adaptive" if "adaptive" in modes else modes[0]


def plot_b9(res, path):
    video = "640x480@25"
    panels = [s for s in (1, 12) if any(p.get("video") == video and p.get("streams") == s
                                        for p in res.get("gst", []) + res.get("lib", []))]
    if not panels:
        return False
    fig, axes = plt.subplots(1, len(panels), figsize=(6.2 * len(panels), 4.4), sharey=True)
    if len(panels) == 1:
        axes = [axes]
    for ax, streams in zip(axes, panels):
        pts = []
        for p in res.get("gst", []):
            if p.get("video") != video or p.get("streams") != streams or not b9_ok(p):
                continue
            if p["peer"] == "rdma":
                label, color, marker = f"rdmasrc {p.get('mode')}", \
                    B9_MODE_COLORS.get(p.get("mode"), "tab:blue"), "o"
            else:
                label = B9_PEER_NAMES[p["peer"]]
                color = "tab:green" if p["peer"] == "shm" else "tab:gray"
                marker = "s"
            pts.append((label, color, marker, p["cpu_percent"], p["p50_us"], p["p99_us"]))
        for p in res.get("lib", []):
            if p.get("video") != video or p.get("streams") != streams or \
                    p.get("latency_p50_us") is None:
                continue
            pts.append((f"sbr-perf {p['mode']}", B9_MODE_COLORS.get(p["mode"], "tab:blue"),
                        "^", p["cpu_percent"], p["latency_p50_us"], p["latency_p99_us"]))
        for label, color, marker, cpu, p50, p99 in pts:
            ax.plot([cpu, cpu], [p50, p99], color=color, alpha=0.5, lw=1)
            ax.plot(cpu, p50, marker=marker, color=color, ls="none", ms=7)
            ax.plot(cpu, p99, marker=marker, color=color, ls="none", ms=7, mfc="none")
            # Library points are labelled on the left: at one camera they sit
            # next to rdmasrc's of the same mode.
            lib = marker == "^"
            ax.annotate(label, (cpu, p50), textcoords="offset points",
                        xytext=(-6 if lib else 6, -3), ha="right" if lib else "left",
                        fontsize=7, color=color)
        ax.axhline(250, color="tab:gray", ls=":", lw=0.8)
        ax.axhline(1000 if streams == 1 else 3000, color="tab:gray", ls="--", lw=0.8)
        ax.set_yscale("log")
        ax.set_xscale("log")  # busy polling is ~100 %, the back-off ~1 %
        lo = min([c for _, _, _, c, _, _ in pts if c > 0], default=1)
        ax.set_xlim(min(0.2, lo / 1.5), 150)
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x:g}"))
        ax.set_xlabel("receiver CPU, % of one core (getrusage, log)")
        ax.set_title(f"{streams} camera{'s' if streams > 1 else ''}, {video} RGB, shm, "
                     "capture -> delivery", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("latency, us (log; filled: p50, hollow: p99)")
    fig.text(0.01, 0.005, "o rdmasrc -> appsink, s peer elements -> appsink, ^ sbr-perf "
             "(library).  Dotted: 250 us (p50 target, adaptive); dashed: the p99 target "
             "(1 ms for 1 camera, 3 ms for 12).  Colour = waiting mode or peer.",
             fontsize=7, va="bottom")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def b9_vm_rows(res):
    vm = (res or {}).get("vm") or {}
    if not vm_ok(vm):
        return [], {}
    ib = {}
    for j, r in vm_entries(vm, "B9"):
        if (j["kind"] in ("ib_write_lat", "ib_read_lat") and r and "error" not in r and
                math.isfinite(r.get("t_typical_us") or math.inf)):
            # Of several runs, the least disturbed (lowest typical) is the
            # link's reference; every run is kept in "runs".
            key = (j["kind"], j["size"])
            runs = ib.get(key, {}).get("runs", []) + [r["t_typical_us"]]
            if key not in ib or r["t_typical_us"] < ib[key]["t_typical_us"]:
                ib[key] = dict(r)
            ib[key]["runs"] = runs
    rows = []
    for j, r in vm_entries(vm, "B9", kind="sbr_perf"):
        rx = (r or {}).get("rx") or {}
        rows.append({"size": j["size"], "rate": j.get("rate"), "mode": j.get("poll_mode"),
                     "chosen": bool(j.get("rx_args")), "p50": rx.get("latency_p50_us"),
                     "p99": rx.get("latency_p99_us"), "mean": rx.get("latency_mean_us"),
                     "max": rx.get("latency_max_us"), "cpu": rx.get("cpu_percent"),
                     "error": (r or {}).get("error") or (None if rx else
                                                         (r or {}).get("rx_error", "no result"))})
    return rows, ib


def b9_targets(res):
    """Issue #11's targets next to this run's figures: (target, wanted,
    measured, verdict, where)."""
    rows = []
    if not res or "error" in res:
        return rows
    v = "640x480@25"
    modes = res.get("gst_modes") or []

    def mode_point(streams, mode, peer="rdma"):
        return b9_gst(res, v, streams, peer, mode)

    def fallback(streams, mode, what):
        """A target for a mode this build lacks: n/a, with what runs."""
        p = mode_point(streams, "backoff")
        txt = f"no `{mode}` mode in this build"
        if p:
            txt += f"; backoff (today): {what(p)}"
        return txt

    one = lambda p: (f"p50 {fmt(p['p50_us'])} us, p99 {fmt(p['p99_us'])} us, "  # noqa: E731
                     f"receiver {fmt(p['cpu_percent'])} %")
    if "adaptive" in modes and res.get("gst_modes_chosen"):
        p = mode_point(1, "adaptive")
        ok = None if not p else (p["p50_us"] <= 250 and p["p99_us"] <= 1000 and
                                 p["cpu_percent"] < 3)
        rows.append(("1 camera 640x480@25, shm, capture -> appsink, `adaptive`",
                     "p50 <= 250 us, p99 <= 1 ms, receiver < 3 % of a core",
                     one(p) if p else "failed", verdict(ok), "host shm"))
    else:
        rows.append(("1 camera 640x480@25, shm, capture -> appsink, `adaptive`",
                     "p50 <= 250 us, p99 <= 1 ms, receiver < 3 % of a core",
                     fallback(1, "adaptive", one), "n/a (not built yet)", "host shm"))
    if "busy" in modes and res.get("gst_modes_chosen"):
        p = mode_point(1, "busy")
        rows.append(("1 camera, `busy`", "p50 <= 150 us", one(p) if p else "failed",
                     verdict(None if not p else p["p50_us"] <= 150), "host shm"))
    else:
        rows.append(("1 camera, `busy`", "p50 <= 150 us", fallback(1, "busy", one),
                     "n/a (not built yet)", "host shm"))
    twelve = lambda p: f"p99 {fmt(p['p99_us'])} us (p50 {fmt(p['p50_us'])} us)"  # noqa: E731
    if "adaptive" in modes and res.get("gst_modes_chosen"):
        p = mode_point(12, "adaptive")
        rows.append(("12 cameras 640x480@25, `adaptive`", "p99 <= 3 ms",
                     twelve(p) if p else "failed",
                     verdict(None if not p else p["p99_us"] <= 3000), "host shm"))
    else:
        rows.append(("12 cameras 640x480@25, `adaptive`", "p99 <= 3 ms",
                     fallback(12, "adaptive", twelve), "n/a (not built yet)", "host shm"))
    ours_mode = b9_ours_mode(res)
    for peer, want in (("shm", 0.5), ("tcp", 0.3)):
        parts, oks = [], []
        for streams in (1, 12):
            o, q = mode_point(streams, ours_mode), b9_gst(res, v, streams, peer)
            x = ratio(o and o["p50_us"], q and q["p50_us"])
            if x is not None:
                parts.append(f"{streams} camera{'s' if streams > 1 else ''}: {x:.2f} "
                             f"({fmt(o['p50_us'])} / {fmt(q['p50_us'])} us)")
                oks.append(x <= want)
        rows.append((f"ours ({ours_mode}) / {B9_PEER_NAMES[peer]}, p50, 640x480@25, same run",
                     f"<= {want}", "; ".join(parts) or "not measured",
                     verdict(all(oks) if oks else None), "host shm"))
    vrows, ib = b9_vm_rows(res)
    w = ib.get(("ib_write_lat", 64))
    got = [(r["mode"], ratio(r["p50"], w and w["t_typical_us"])) for r in vrows
           if r["size"] == 64 and r["p50"] is not None]
    got = [(m, x) for m, x in got if x is not None]
    if got:
        best = min(x for _, x in got)
        # Both ends of ib_write_lat busy-poll on 2 emulated vCPUs: when the
        # host takes those away its "typical" is the scheduler's, not the
        # link's.  Such a reference decides nothing.
        disturbed = w["t_typical_us"] > 10 * w["t_min_us"]
        rows.append(("VM: status-byte one-way latency at 64 B / ib_write_lat", "<= 2",
                     ", ".join(f"{m}: {x:.2f}" for m, x in got) +
                     " (sbr-perf p50 / ib_write_lat typical)" + kept_note(res) +
                     (f"; ib_write_lat's typical was {w['t_typical_us'] / w['t_min_us']:.0f}x "
                      "its minimum in this run: disturbed" if disturbed else ""),
                     "n/a (reference disturbed)" if disturbed else verdict(best <= 2),
                     "VM (EMULATED)"))
    else:
        rows.append(("VM: status-byte one-way latency at 64 B / ib_write_lat", "<= 2",
                     "not measured" + (f" ({res['vm'].get('skipped') or res['vm'].get('error')})"
                                       if isinstance(res.get("vm"), dict) else ""),
                     "n/a", "VM"))
    return rows


def kept_note(res):
    """Where --no-vm kept an earlier run's VM figures: when they were
    measured."""
    k = (res.get("vm") or {}).get("kept_from")
    if not k:
        return ""
    return f" [VM figures kept from the run of {k['started']} at git {k['git']}: --no-vm]"


def section_b9(res, out, figdir):
    out.append("## B9. Latency: capture to delivery, and the receiver's CPU\n")
    if not res or "error" in res:
        why = (res or {}).get("error") or "part not run"
        out.append(f"**Not measured in this run**: {why}.\n")
        return
    out.append(
        "Issue #11, part 1. Every camera is `videotestsrc is-live=true pattern=solid-color` "
        "at its own 25 or 30 fps; **640x480@25 is RGB (921,600 bytes a frame), 1920x1080@30 is "
        "I420 (3,110,400 bytes)**; 1 camera, or 12 in one sending process captured at about "
        "the same instants. Everything is on this host over shared memory: rdmasink/rdmasrc "
        "use `transport=shm` (a thread in the sender copies every block into the receiver's "
        "lane, as a NIC would DMA it). Each point runs "
        f"{res['seconds']} s after {res.get('warmup_s', 1)} s not counted; points are "
        "interleaved, the order reversed every other configuration.\n")
    out.append(
        "* **Library** (`sbr-perf`, status-byte, zero-copy, 32 lane blocks of one frame): "
        "capture = the sender's CLOCK_REALTIME just before it acquires the block; delivery = "
        "when `sbr_receiver_next_frame` returns it. Receiver CPU = getrusage of the "
        "receiving process from its first frame, % of one core.\n"
        "* **Elements** (`tests/bench/gst-latency`, C, the same for every peer): sender "
        "`videotestsrc ! caps ! SINK` per camera, receiver `SRC ! appsink sync=false` per "
        "camera, with SINK/SRC = `rdmasink`/`rdmasrc transport=shm` (one connection, pads "
        "src_0..11, block-size one frame), `shmsink`/`shmsrc` (one socket per camera; "
        "`identity drop-allocation=true` before shmsink, as in B6, or it stalls), "
        "`tcpclientsink`/`tcpserversrc ! rawvideoparse` (one connection per camera). "
        "**How the capture time travels, identically for all three:** a pad probe on "
        "videotestsrc's src pad (the instant the live source releases the frame) writes 8 "
        "magic bytes and CLOCK_REALTIME (ns) into the frame's first 16 bytes, and adds the "
        "same value as a `timestamp/x-unix` GstReferenceTimestampMeta (which rdmasink sends "
        "as the block's capture time; no other peer carries metas). The appsink's "
        "new-sample callback reads CLOCK_REALTIME again (same host, same clock): latency = "
        "the difference, from the bytes for every peer (for rdmasrc the meta it hands out "
        "gives the same figures: `meta_*` in results.json). No `queue` before the appsinks "
        "(samples/ put one after each rdmasrc pad: that adds one thread hand-off, for every "
        "peer alike). Receiver CPU = getrusage of the receiving process over the counted "
        "span, % of one core. Percentiles are nearest-rank over every frame.\n")
    lm, gm = res.get("lib_modes_chosen"), res.get("gst_modes_chosen")
    out.append(
        "**Waiting modes:** " +
        ("sbr-perf ran " + ", ".join(f"`{m}`" for m in res["lib_modes"]) if lm else
         "this build's sbr-perf has no `--poll-mode`: every library point ran the receiver's "
         "back-off (what `backoff` will name)") + "; " +
        ("rdmasrc ran " + ", ".join(f"`{m}`" for m in res["gst_modes"]) if gm else
         "this build's rdmasrc has no `poll-mode`: every rdmasrc point ran the back-off "
         "(`backoff`)") + ". Every point below is labelled with the mode it really ran.\n")
    out.append(
        "**These figures are from a 2-core host shared with other developers' builds, "
        "tests and VMs**: the load average when B9 started is in the header above (about 1 "
        "or less: nothing else ran). Compare within one run.\n")
    out.append("Re-run only this part, then re-render:\n")
    out.append("    tests/bench/run.py --only B9            # host (~4-7 min) + its own VM boot")
    out.append("    tests/bench/run.py --only B9 --no-vm    # host only")
    out.append("    tests/bench/run.py --render\n")
    trows = b9_targets(res)
    if trows:
        out.append("### Targets (issue #11)\n")
        out.append("| target | wanted | measured | verdict | where |")
        out.append("|---|---|---|---|---|")
        for t in trows:
            out.append("| " + " | ".join(t) + " |")
        out.append("")
    if plot_b9(res, os.path.join(figdir, "b9_latency.png")):
        out.append("![B9 latency against receiver CPU](bench/b9_latency.png)\n")
    if res.get("gst"):
        out.append("### Through the elements (capture -> appsink)\n")
        fps = {v["name"]: v["fps"] for v in res.get("video", [])}
        out.append("| video | cameras | peer | waiting mode | frames counted / sent | "
                   "dropped by rdmasrc | p50 us | p90 us | p99 us | max us | "
                   "p50 to pad push us | receiver CPU % | p50 / rdmasrc's |")
        out.append("|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        ours_mode = b9_ours_mode(res)
        for p in res["gst"]:
            ours = b9_gst(res, p["video"], p["streams"], "rdma", ours_mode)
            mode = b9_mode_label(res, p["mode"]) if p["peer"] == "rdma" else "-"
            if not b9_ok(p):
                out.append(f"| {p['video']} | {p['streams']} | {B9_PEER_NAMES[p['peer']]} | "
                           f"{mode} | failed: {str(p.get('error') or p.get('errors'))[:80]} "
                           "| | | | | | | | |")
                continue
            rel = "" if p["peer"] == "rdma" else fr(ratio(p["p50_us"],
                                                          ours and ours["p50_us"]))
            sent = int(round(p["streams"] * fps.get(p["video"], 0) * res["seconds"]))
            rs = p.get("rdmasrc") or {}
            dropped = (str(sum(rs.get(k, 0) for k in ("devices-drops", "devices-drops-leaky",
                                                       "devices-gaps")))
                       if p["peer"] == "rdma" and rs else "-")
            out.append(f"| {p['video']} | {p['streams']} | {B9_PEER_NAMES[p['peer']]} | "
                       f"{mode} | {p['samples']} / ~{sent} | {dropped} | {fmt(p['p50_us'])} | "
                       f"{fmt(p['p90_us'])} | {fmt(p['p99_us'])} | {fmt(p['max_us'])} | "
                       f"{fmt(p['push_p50_us']) if p.get('push_p50_us') is not None else '-'} | "
                       f"{fmt(p['cpu_percent'])} | {rel} |")
        out.append("\n\"p50 to pad push\": rdmasrc only, capture to the moment its pad task "
                   "pushes the buffer (a probe on the pad; builds before it have none): the "
                   "rest, to the appsink's callback, is downstream of rdmasrc. ")
        out[-1] += (f"\"p50 / rdmasrc's\": the peer's p50 over rdmasrc's ({ours_mode}) in the "
                   "same configuration; above 1 the peer is slower. \"frames counted / sent\": "
                   "frames that reached the appsinks in the counted span, against cameras x "
                   "fps x seconds; a peer far below it could not keep up (its latency then "
                   "grows with its backlog, e.g. tcp with 12 x 1080p). \"dropped by rdmasrc\": "
                   "its drop-oldest policy (a camera over its share of the lane: with 12 "
                   "cameras and the default 32 lane blocks, 2 each) plus gaps, from its stats; "
                   "dropped frames have no latency, so they are not in the percentiles.\n")
    elif res.get("gst_skipped"):
        out.append(f"Elements: not measured ({res['gst_skipped']}).\n")
    if res.get("lib"):
        out.append("### Library (sbr-perf, capture -> `sbr_receiver_next_frame`)\n")
        out.append("| video | devices | waiting mode | frames | p50 us | p90 us | p99 us | max us | "
                   "mean us | receiver CPU % |")
        out.append("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
        for p in res["lib"]:
            if p.get("latency_p50_us") is None:
                out.append(f"| {p['video']} | {p['streams']} | {p['mode']} | failed | | | | | "
                           "| |")
                continue
            out.append(f"| {p['video']} | {p['streams']} | "
                       f"{b9_mode_label(res, p['mode'], 'lib')} | {p['frames']} | "
                       f"{fmt(p['latency_p50_us'])} | {fmt(p['latency_p90_us'])} | "
                       f"{fmt(p['latency_p99_us'])} | {fmt(p['latency_max_us'])} | "
                       f"{fmt(p['latency_mean_us'])} | {fmt(p['cpu_percent'])} |")
        out.append("\nsbr-perf's percentiles come from a log-linear histogram (64 buckets per "
                   "octave: within 0.8 %); mean and max are exact.\n")
    out.append("### Verbs in the Soft-RoCE VM (EMULATED CPU: ratios only)\n")
    vrows, ib = b9_vm_rows(res)
    vm = res.get("vm") or {}
    if not vrows:
        why = vm.get("skipped") or vm.get("error") or "no results"
        out.append(f"Not measured in this run ({why}).\n")
        return
    g = vm.get("guest") or {}
    if vm.get("kept_from"):
        k = vm["kept_from"]
        out.append(f"*These VM figures are from the B9 run of {k['started']} (git "
                   f"{k['git']}), kept because the host part was re-run with --no-vm.*\n")
    out.append(
        f"One boot of the VM ({vm.get('accel', 'tcg').upper()}, {g.get('nproc', '?')} "
        f"emulated vCPUs, rxe0 talking to itself; {vm.get('wall_s', 0):.0f} s in all): "
        "sbr-perf one-way capture-to-delivery latency (status-byte, one device) at 64 B "
        "(100 blocks/s) and at the two frame sizes (5 frames/s: the emulated CPU can't "
        "carry 25 fps of frames), next to perftest's `ib_write_lat` (half a ping-pong "
        "round trip, busy polling) and `ib_read_lat` (one READ) in the same run. The CPU "
        "is emulated (TCG): absolute microseconds mean nothing, only the ratios.\n")
    w64, r64 = ib.get(("ib_write_lat", 64)), ib.get(("ib_read_lat", 64))
    names = {video_size(v): f"{v['name']} {v['format']}" for v in res.get("video", [])}
    refs = "; ".join(f"{k[0]} {size_label(k[1]) if k[1] == 64 else f'{k[1]:,} B'}: "
                     f"{len(v['runs'])} run(s), the lowest typical taken"
                     + (f" (the others {', '.join(fr(x / v['t_typical_us']) for x in v['runs'] if x != v['t_typical_us'])}x it)"
                        if len(v["runs"]) > 1 else "")
                     for k, v in sorted(ib.items()) if len(v["runs"]) > 1)
    if refs:
        out.append(f"References: {refs}.\n")
    out.append("| payload | rate | waiting mode | p50 / ib_write_lat | p99 / ib_write_lat | "
               "p50 / ib_read_lat | ib_read_lat / ib_write_lat |")
    out.append("|---|---:|---|---:|---:|---:|---:|")
    for r in vrows:
        wl = ib.get(("ib_write_lat", r["size"]))
        w = wl and wl["t_typical_us"]
        rd = r64 and r64["t_typical_us"] if r["size"] == 64 else None
        mode = r["mode"] if r["chosen"] else f"{r['mode']} (no modes in this build)"
        label = f"{r['size']:,} B" + (f" ({names[r['size']]})" if r["size"] in names else "")
        if r["p50"] is None:
            out.append(f"| {label} | {r['rate']}/s | {mode} | failed: {str(r['error'])[:60]} "
                       "| | | |")
            continue
        out.append(f"| {label} | {r['rate']}/s | {mode} | {fr(ratio(r['p50'], w))} | "
                   f"{fr(ratio(r['p99'], w))} | {fr(ratio(r['p50'], rd)) if rd else '-'} | "
                   f"{fr(ratio(rd, w64 and w64['t_typical_us'])) if rd else '-'} |")
    out.append("\nsbr-perf's p50 and p99 over perftest's typical latency of the same size "
               "(ib_write_lat at the frame sizes is one frame WRITTEN with busy polling, "
               "half a ping-pong). Absolute microseconds are in results.json but mean nothing "
               "on an emulated CPU.\n")


def video_size(v):
    px = v["width"] * v["height"]
    return px * 3 // 2 if v["format"] == "I420" else px * 3


# ---------------------------------------------------------------- B10


def caveat(results, part):
    """The sentence run.py --caveat recorded for a part, or ""."""
    return ((results or {}).get("caveats") or {}).get(part, "")


def b10_ok(p):
    return isinstance(p, dict) and "error" not in p and p.get("samples")


def b10_vm_points(res):
    return [r for _, r in vm_entries(res.get("vm"), "B10", kind="gst_scale")]


def b10_rs_dropped(p):
    rs = p.get("rdmasrc") or {}
    return sum(rs.get(k, 0) for k in ("devices-drops", "devices-drops-leaky", "devices-gaps"))


def b10_tx(p, key):
    return sum(t.get(key, 0) for t in p.get("sent", []) if isinstance(t, dict))


def b10_expected(p, fps):
    return p["cameras"] * fps * p["wall_s"]


def b10_kept_up(p, fps):
    """Whether the frames counted, with those lost, are the cameras' rate
    (5 % slack: frames on their way when the span ends; "lost" covers the
    whole run, a little more than the span, which errs towards kept up).
    Frames neither counted nor lost were still on their way, in a backlog:
    a receiver or senders behind the cameras, whose CPU per frame is not a
    steady cost, and no ratio is drawn from it."""
    return b10_ok(p) and p["samples"] + p.get("lost", 0) >= 0.95 * b10_expected(p, fps)


def b10_flatness(points, fps):
    """(CPU per frame at the most cameras / at the fewest, fewest, most,
    the points that didn't keep up); None without two good points."""
    good = [p for p in points if b10_ok(p) and p.get("cpu_us_per_frame")]
    if len(good) < 2:
        return None
    lo = min(good, key=lambda p: p["cameras"])
    hi = max(good, key=lambda p: p["cameras"])
    behind = [p for p in (lo, hi) if not b10_kept_up(p, fps)]
    return hi["cpu_us_per_frame"] / lo["cpu_us_per_frame"], lo["cameras"], hi["cameras"], behind


def plot_b10(res, path):
    fps = res["video"]["fps"]
    series = [("host, shm", "tab:blue", "o-", res.get("host", []))]
    if res.get("host_fixed_share"):
        series.append((f"host, shm, device-blocks={res.get('fixed_share')}", "tab:green", "^-",
                       res["host_fixed_share"]))
    vm = b10_vm_points(res)
    if vm:
        series.append(("VM, verbs (EMULATED)", "tab:orange", "s--", vm))
    behind_label = "not keeping up"
    if not any(b10_ok(p) for _, _, _, pts in series for p in pts):
        return False
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.4))
    for label, color, style, pts in series:
        pts = [p for p in pts if b10_ok(p)]
        xs = [p["cameras"] for p in pts]
        axes[0].plot(xs, [p.get("lost", 0) for p in pts], style, color=color, label=label)
        base = pts[0].get("cpu_us_per_frame") if pts else None
        axes[1].plot(xs, [ratio(p.get("cpu_us_per_frame"), base) for p in pts], style,
                     color=color, label=label)
        axes[2].plot(xs, [p["p99_us"] / 1e3 for p in pts], style, color=color, label=label)
        # Points that fell behind the cameras: hollow, their figures are a
        # backlog's.
        for p in pts:
            if b10_kept_up(p, fps):
                continue
            for ax, y in ((axes[0], p.get("lost", 0)),
                          (axes[1], ratio(p.get("cpu_us_per_frame"), base)),
                          (axes[2], p["p99_us"] / 1e3)):
                ax.plot([p["cameras"]], [y], style[0], color="white", markeredgecolor=color,
                        label=behind_label if ax is axes[1] else None)
            behind_label = None
    axes[0].set_ylabel("frames lost")
    axes[0].set_ylim(bottom=-0.5)
    axes[1].axhline(1.3, color=COLORS["bound"], ls=":", label="target (1.3x)")
    axes[1].set_ylabel("receiver CPU per frame\n(x its value at the fewest cameras)")
    axes[1].set_ylim(bottom=0)
    axes[2].set_yscale("log")
    axes[2].set_ylabel("p99 capture -> appsink (ms)")
    for ax in axes:
        ax.set_xlabel("cameras into one rdmasrc")
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=7)
    # The caveat goes on the image too: a plot gets copied without its text.
    if res.get("_caveat"):
        fig.suptitle(res["_caveat"], fontsize=9, color="tab:red")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def b10_table(points, out, fps):
    out.append("| senders x cameras | cameras | frames counted | lost | cameras unseen | "
               "rdmasink drops | dropped by rdmasrc | copied by rdmasrc | receiver CPU % | "
               "CPU per frame us | vs fewest | p50 us | p99 us | max us |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    base = next((p.get("cpu_us_per_frame") for p in points if b10_ok(p)), None)
    for p in points:
        label = f"{p.get('senders', '?')} x {p['cameras'] // max(p.get('senders', 1), 1)}" \
            if "cameras" in p else "?"
        if not b10_ok(p):
            why = str(p.get("error") or p.get("errors") or "no frames")[:80]
            out.append(f"| {label} | {p.get('cameras', '?')} | failed: {why} "
                       "| | | | | | | | | | | |")
            continue
        rs = p.get("rdmasrc") or {}
        out.append(f"| {label} | {p['cameras']} | {p['samples']} / ~"
                   f"{int(p['cameras'] * fps * p['wall_s'])} | {p.get('lost', 0)} | "
                   f"{p.get('cameras_unseen', 0)} | {b10_tx(p, 'rdmasink_drops')} | "
                   f"{b10_rs_dropped(p)} | {rs.get('copies', 0)} | {fmt(p['cpu_percent'])} | "
                   f"{fmt(p['cpu_us_per_frame'])} | {fr(ratio(p['cpu_us_per_frame'], base))} | "
                   f"{fmt(p['p50_us'])} | {fmt(p['p99_us'])} | {fmt(p['max_us'])} |")
    out.append("")


def b10_fit(points, fps):
    """Least squares of the receiver's CPU (s per s) against frames/s over
    the points that kept up: (fixed share of a core, CPU s per frame, n),
    or None.  The fixed part (its waits between frames, the bus, the
    listener) is spread over more frames as cameras are added; the slope
    is what a frame costs, which is what must stay flat."""
    pts = [p for p in points if b10_kept_up(p, fps) and p.get("wall_s")]
    if len(pts) < 2:
        return None
    xs = [p["samples"] / p["wall_s"] for p in pts]
    ys = [p["cpu_s"] / p["wall_s"] for p in pts]
    mx, my = statistics.mean(xs), statistics.mean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if not sxx:
        return None
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return my - b * mx, b, len(pts)


def b10_fit_note(points, fps, out):
    f = b10_fit(points, fps)
    if f:
        out.append(f"Receiver CPU against frames/s, least squares over the {f[2]} points that "
                   f"kept up: **{f[0] * 100:.1f} % of a core fixed + {f[1] * 1e6:.0f} us a "
                   "frame**. CPU per frame = fixed / (frames/s) + that slope: the fixed part "
                   "is spread over more frames as cameras are added; a slope that grows is a "
                   "cost that grows with the cameras.\n")


def b10_behind_note(points, fps, out):
    behind = [p for p in points if b10_ok(p) and not b10_kept_up(p, fps)]
    if behind:
        out.append("**Not keeping up** at " + ", ".join(f"{p['cameras']}" for p in behind) +
                   " cameras: the frames counted and lost fall short of what the cameras "
                   "made (\"frames counted\" against cameras x fps x seconds), so the "
                   "receiver or the senders were falling behind there; their latency is a "
                   "backlog's and their CPU per frame is not a steady cost.\n")


def b10_targets(results):
    res = (results or {}).get("B10")
    if not res or "error" in res or "skipped" in res:
        return []
    c = caveat(results, "B10")
    where = "host shm" + (f" ({c})" if c else "")
    host = [p for p in res.get("host", []) if "cameras" in p]
    rows = []
    if host:
        bad = [p for p in host if not b10_ok(p)]
        lost = [(p["cameras"], p.get("lost", 0) + (p.get("cameras_unseen") or 0))
                for p in host if b10_ok(p)]
        ok = None if bad or not lost else all(n == 0 for _, n in lost)
        rows.append(("B10: frames lost, 12 to 96 cameras (8 senders x 12)", "0",
                     ", ".join(f"{n} cameras: {x}" for n, x in lost) +
                     (f"; {len(bad)} point(s) failed" if bad else ""), verdict(ok), where))
    fps = res["video"]["fps"]
    fl = b10_flatness(host, fps)
    txt = f"{fr(fl[0])} ({fl[2]} / {fl[1]} cameras)" if fl else "not measured"
    v = verdict(None if not fl or fl[2] != 96 or fl[1] != 12 else fl[0] <= 1.3)
    if fl and fl[3]:
        txt += "; " + ", ".join(f"at {p['cameras']} cameras {p['samples']} of "
                                f"~{b10_expected(p, fps):.0f} frames arrived, "
                                f"{p.get('lost', 0)} lost"
                                for p in fl[3])
        v = "n/a (not keeping up: no steady cost to compare)"
    rows.append(("B10: receiver CPU per frame, 96 cameras / 12", "<= 1.3", txt, v, where))
    if c:  # a caveated run decides nothing
        rows = [(t, w, m, f"{v} (provisional)", wh) for t, w, m, v, wh in rows]
    return rows


def section_b10(results, out, figdir):
    res = results.get("B10")
    out.append("## B10. Many senders into one receiver\n")
    if not res or "error" in res or "skipped" in res:
        why = (res or {}).get("error") or (res or {}).get("skipped") or "part not run"
        out.append(f"**Not measured in this run**: {why}.\n")
        return
    c = caveat(results, "B10")
    if c:
        out.append(f"**{c[0].upper() + c[1:]}.** The figures below prove that the part runs "
                   "end to end; they are not the result.\n")
    v = res["video"]
    n = res["cameras_per_sender"]
    out.append(
        f"Issue #21, item 4. 1, 2, 4 and 8 sender processes of {n} live cameras each "
        f"(`videotestsrc is-live=true pattern=solid-color`, {v['width']}x{v['height']}@"
        f"{v['fps']} {v['format']}, {video_size(v):,} bytes a frame) into **one** `rdmasrc` "
        "over `transport=shm` on this host: one connection (lane) per sender process, the "
        "k-th sending devices k x 12 .. k x 12 + 11, which is how several camera-ingest "
        "processes feed one analytics process. Both ends are `tests/bench/gst-latency` (as "
        "in B9; `tests/bench/scale.py` starts them): receiver `rdmasrc ! appsink sync=false` "
        "per pad, default properties but `block-size` (one frame), `max-senders` (raised "
        "only above its default 8) and `stats-interval=0`; each lane keeps its default 32 "
        "blocks and each camera the automatic `device-blocks` share (below, beside the "
        "twin that holds it at 2). The "
        f"senders start {res.get('start_gap_s', 0.3)} s apart; each point counts "
        f"{res['seconds']} s after a warm-up that covers the last sender's start.\n")
    out.append(
        "* **Frames lost**: every frame carries its camera's frame number (written by the "
        "sender's probe beside the capture time); per camera, the numbers missing between "
        "its first and last frame received over the whole run, whoever dropped them (the "
        "sender waiting for a free block, rdmasrc over a camera's share, the transport). "
        "Frames a sender dropped before its connection was up, before the camera's first "
        "frame arrived, are not in it (rdmasink's counter has them). "
        "\"cameras unseen\" had no frame at all. `rdmasink drops` and `dropped by rdmasrc` "
        "are the elements' own counters (drops + drops-leaky + gaps), for where.\n"
        "* **Receiver CPU per frame**: getrusage of the receiving process (rdmasrc's "
        "threads, its pad tasks, the appsinks) over the counted span, over the frames "
        "counted; \"vs fewest\": over its value with one sender.\n"
        "* **Latency**: capture (the sender's probe) to the appsink callback, nearest-rank "
        "p50/p99 over every frame counted, all cameras together.\n")
    out.append("Re-run only this part, then re-render:\n")
    out.append("    tests/bench/run.py --only B10           # host (~2 min) + its own VM boot")
    out.append("    tests/bench/run.py --only B10 --no-vm   # host only\n")
    trows = b10_targets(results)
    if trows:
        out.append("### Targets (issue #21)\n")
        out.append("| target | wanted | measured | verdict | where |")
        out.append("|---|---|---|---|---|")
        for t in trows:
            out.append("| " + " | ".join(t) + " |")
        out.append("")
    res = dict(res, _caveat=c)
    if plot_b10(res, os.path.join(figdir, "b10_scale.png")):
        out.append("![B10 lost, CPU per frame and p99 against cameras](bench/b10_scale.png)\n")
    out.append("### Host, shm back end\n")
    out.append("rdmasrc's properties as a user gets them (the targets are these):\n")
    b10_table(res.get("host", []), out, v["fps"])
    b10_behind_note(res.get("host", []), v["fps"], out)
    b10_fit_note(res.get("host", []), v["fps"], out)
    fl = b10_flatness(res.get("host", []), v["fps"])
    if fl and not fl[3] and abs(fl[0] - 1) > 0.3:
        out.append(f"CPU per frame is **not flat** here: {fr(fl[0])}x from {fl[1]} to "
                   f"{fl[2]} cameras. Why: see B10 in the analysis.\n")
    fixed = res.get("host_fixed_share")
    if fixed:
        share = res.get("fixed_share")
        out.append(
            f"The same points with `device-blocks={share}`, each run beside its default "
            "twin (the two alternate which goes first). The automatic share is per lane: "
            "three quarters of a sender's lane (24 of the default 32 blocks) over that lane's "
            "pads, so 2 blocks a camera for each 12-camera sender, however many senders there "
            "are (before the per-lane share it fell to 1 from 24 cameras on, and rdmasrc "
            "copied or dropped frames: \"copied by rdmasrc\", \"dropped by rdmasrc\"). "
            f"With the share held at {share} the receiver's own scaling shows apart from its "
            "default's:\n")
        b10_table(fixed, out, v["fps"])
        b10_behind_note(fixed, v["fps"], out)
        b10_fit_note(fixed, v["fps"], out)
    out.append("### Verbs in the Soft-RoCE VM (EMULATED CPU: ratios only)\n")
    vm = res.get("vm") or {}
    vpts = b10_vm_points(res)
    if not vpts:
        why = vm.get("skipped") or vm.get("error") or "no results"
        out.append(f"Not measured in this run ({why}).\n")
        return
    g = vm.get("guest") or {}
    vv = res.get("vm_video") or v
    out.append(
        f"The same at reduced size: {res.get('vm_cameras_per_sender')} cameras a sender "
        f"at {vv['width']}x{vv['height']}@{vv['fps']} {vv['format']} (3 to 24 cameras), "
        "`transport=verbs` on rxe0 talking to itself, in one boot of the "
        f"VM ({vm.get('accel', 'tcg').upper()}, {g.get('nproc', '?')} vCPUs; "
        f"{vm.get('wall_s', 0):.0f} s in all). Soft-RoCE copies every byte on the guest's "
        "CPU, the same CPU the receiver's is measured on: the ratios to the one-sender "
        "point are the figure, not the microseconds.\n")
    b10_table(vpts, out, vv["fps"])
    b10_behind_note(vpts, vv["fps"], out)


# ------------------------------------------------------------- targets


def targets(results):
    rows = []
    vm = results.get("VM") or {}
    vrows = b1_vm_rows(vm) if vm_ok(vm) else []
    # The reference is the faster of ib_write_bw's two runs (default depth
    # 128, and -t 16): the stricter one, the closest to the link's capacity.
    big = []
    for r in vrows:
        if r["size"] < 64 * KIB:
            continue
        ref = max([x for x in (r["ib"], r.get("ib16")) if x], default=None)
        if ratio(r["sb"], ref) is not None:
            big.append((r["size"], ratio(r["sb"], ref)))
    if big:
        worst = min(x for _, x in big)
        rows.append(("status-byte / ib_write_bw, same link, >= 64 KiB", ">= 0.95",
                     ", ".join(f"{size_label(s)}: {x:.2f}" for s, x in big) +
                     " (vs the faster of ib_write_bw default and -t 16)",
                     verdict(worst >= 0.95), "VM (EMULATED)"))
    else:
        rows.append(("status-byte / ib_write_bw, same link, >= 64 KiB", ">= 0.95",
                     "not measured", "n/a", "VM"))
    r4 = [r for r in vrows if r["size"] == 4 * KIB]
    x = ratio(r4[0]["sb"], r4[0]["ib"]) if r4 else None
    txt, v = fr(x), verdict(None if x is None else x >= 0.8)
    if r4:
        alt = [(label, ratio(r4[0].get(k), r4[0]["ib"]))
               for label, k in (("64 lane blocks", "sb64"), ("read-ahead 8", "ra8"))]
        alt = [(label, y) for label, y in alt if y is not None]
        if alt:
            txt = f"16 lane blocks: {fr(x)}; " + ", ".join(f"{label}: {fr(y)}"
                                                            for label, y in alt)
            if x is not None and x < 0.8 and max(y for _, y in alt) >= 0.8:
                v += " with 16 blocks, met with " + ", ".join(
                    label for label, y in alt if y >= 0.8)
    rows.append(("status-byte / ib_write_bw at 4 KiB", ">= 0.8", txt, v, "VM (EMULATED)"))
    b1 = results.get("B1") or {}
    host256 = [r for r in b1.get("throughput", []) if r["size"] == 256]
    h = ratio(host256[0]["sb"], host256[0]["sw"]) if host256 else None
    v256 = [r for r in vrows if r["size"] == 256]
    v = ratio(v256[0]["sb"], v256[0]["sw"]) if v256 else None
    v64 = ratio(v256[0].get("sb64"), v256[0].get("sw64")) if v256 else None
    got = [x for x in (h, v, v64) if x is not None]
    rows.append(("status-byte / sliding-window throughput at 256 B", ">= 4.6 (aim 6)",
                 f"shm: {fr(h)}; VM: {fr(v)}" +
                 (f", with 64 lane blocks each: {fr(v64)}" if v64 is not None else ""),
                 verdict(max(got) >= 4.6 if got else None),
                 "host shm + VM (EMULATED)"))
    b2 = results.get("B2") or {}
    rs = []
    for r in b2.get("rows", []):
        sb, sw = r.get(SB) or {}, r.get(SW) or {}
        rs.append((r["blocks"], ratio((sb.get("sync_read") or {}).get("mean_us"),
                                      (sw.get("ack") or {}).get("mean_us"))))
    rs = [(n, x) for n, x in rs if x is not None]
    vr = []
    for r in b2_vm_rows(vm):
        sb, sw = r.get(SB) or {}, r.get(SW) or {}
        vr.append((r["blocks"], ratio((sb.get("sync_read") or {}).get("mean_us"),
                                      (sw.get("ack") or {}).get("mean_us"))))
    vr = [(n, x) for n, x in vr if x is not None]
    if rs or vr:
        allr = [x for _, x in rs + vr]
        txt = ("shm " + ", ".join(f"N={n}: {x:.2f}" for n, x in rs) if rs else "") + \
              ("; VM " + ", ".join(f"N={n}: {x:.2f}" for n, x in vr) if vr else "")
        v = verdict(max(allr) <= 0.1)
        if rs and vr and max(x for _, x in vr) <= 0.1 < max(x for _, x in rs):
            v += " over shm, met in the VM"
        rows.append(("sync latency: status READ / sliding-window ACK path (mean)", "<= 0.1",
                     txt, v, "host shm + VM (EMULATED)"))
    b4 = results.get("B4") or {}
    if b4.get("runs"):
        s = b4_summary(b4)
        sb = s.get(f"{SB}/hold") or {}
        ctl = s.get(f"{SB}/control") or {}
        sw = s.get(f"{SW}/hold") or {}
        sbr = s.get(f"{SB}/hold@rate") or {}
        ok = None if sb.get("dip") is None else (sb["dip"] <= 0.12 and sb["zero_ms"] == 0 and
                                                 (sbr.get("zero_ms") or 0) == 0)
        rows.append(("held block: status-byte dip, never a stall", "<= 12 %, no stall",
                     f"flat out: dip {pct(sb.get('dip'))} (same measure without a hold: "
                     f"{pct(ctl.get('dip'))}), longest stall {sb.get('zero_ms')} ms; paced: "
                     f"dip {pct(sbr.get('dip'))}, stall {sbr.get('zero_ms')} ms. "
                     f"Sliding-window flat out: dip {pct(sw.get('dip'))}, stall "
                     f"{sw.get('zero_ms')} ms",
                     verdict(ok), "host shm"))
    b7 = results.get("B7") or {}
    if b7.get("rows"):
        a = ratio(b7_point(b7, MIB, 1000, "sync_when_empty"),
                  b7_point(b7, MIB, 0, "sync_when_empty"))
        b = ratio(b7_point(b7, MIB, 1000, "read_ahead"), b7_point(b7, MIB, 0, "read_ahead"))
        best = max([x for x in (a, b) if x is not None], default=None)
        more = []
        for r in b7.get("more_blocks", []):
            if r["size"] != MIB:
                continue
            z = (r.get("no_delay") or {}).get("throughput_mbps")
            xs = [(r.get(k) or {}).get("throughput_mbps") for k in ("sync_when_empty",
                                                                    "read_ahead")]
            xs = [x for x in xs if x is not None]
            if z and xs:
                more.append((r["blocks"], max(xs) / z))
        txt = f"N=16 (default): sync-when-empty {pct(a)}, read-ahead {pct(b)}"
        if more:
            txt += "; " + ", ".join(f"N={n}: {pct(x)}" for n, x in more) + \
                " (best mode vs no delay at the same N)"
        v = verdict(None if best is None else best >= 0.9)
        if more and best is not None and best < 0.9 and max(x for _, x in more) >= 0.9:
            v += " at N=16, met with more blocks"
        rows.append(("1 ms added RTT vs none, 1 MiB blocks", ">= 90 %", txt, v,
                     "host shm (injected)"))
    cg = (results.get("B3") or {}).get("callgrind") or {}
    vals = [(k, v["engine_ir_per_block"]) for k, v in cg.items() if isinstance(v, dict)
            and "engine_ir_per_block" in v]
    if vals:
        rows.append(("sender engine instructions per block", "<= 2,000",
                     ", ".join(f"{k.split('/')[0]} {size_label(int(k.split('/')[1]))}: "
                               f"{v:.0f}" for k, v in vals),
                     verdict(max(v for _, v in vals) <= 2000), "callgrind, host shm"))
    rows += b9_targets(results.get("B9"))
    rows += b21_targets(results)
    rows += b10_targets(results)
    rows += bigframes.b11_targets(results)
    rows += bigframes.b12_targets(results)
    return rows


def b6_medians(res):
    """B6 per transport: (frames/s, receiver CPU s per GB, frames lost per
    run), medians over the runs, as the B6 table shows them."""
    out = {}
    for t in ("rdma-sb", "shm"):
        rs = [r for r in (res or {}).get("B6", []) if r["transport"] == t]
        if not rs:
            continue
        fps = med([(r.get("rx") or {}).get("frames_per_s") for r in rs])
        rxc = med([(r["rx"]["cpu_s_streaming"] / (r["rx"]["bytes"] / 1e9))
                   if r.get("rx") and r["rx"].get("bytes") else None for r in rs])
        lost = [12 * r["tx"]["frames_each"] - r["rx"]["frames"]
                for r in rs if r.get("tx") and r.get("rx")]
        out[t] = (fps, rxc, lost)
    return out


def b21_targets(results):
    """Issue #21's targets for B6 and B9, each beside its peer measured in
    the same run (B10's are b10_targets)."""
    rows = []
    b6 = b6_medians(results.get("B56"))
    ours, peer = b6.get("rdma-sb"), b6.get("shm")
    where = "host shm (B6)"
    if ours and peer:
        x = ratio(ours[0], peer[0])
        rows.append(("B6, 12 streams flat out: ours / shmsink frames/s", ">= 1.5",
                     f"{fr(x)} ({fmt(ours[0])} against {fmt(peer[0])})",
                     verdict(None if x is None else x >= 1.5), where))
        rows.append(("B6: frames lost", "0", f"{', '.join(map(str, ours[2]))} per run "
                     f"(shmsink: {', '.join(map(str, peer[2]))})",
                     verdict(bool(ours[2]) and max(ours[2]) == 0), where))
        ok = None if ours[1] is None or peer[1] is None else ours[1] <= peer[1]
        rows.append(("B6: receiver CPU per GB", "<= shmsink's",
                     f"{fmt(ours[1], 3)} s against {fmt(peer[1], 3)} s", verdict(ok), where))
    else:
        rows.append(("B6 (issue #21)", "see below", "not measured", "n/a", where))
    b9 = results.get("B9")
    for streams in (1, 12):
        p = b9_gst(b9, "640x480@25", streams, "rdma", "adaptive")
        q = b9_gst(b9, "640x480@25", streams, "shm")
        x = ratio(p["p50_us"], q["p50_us"]) if p and q else None
        rows.append((f"B9, {streams} camera(s) 640x480@25, `adaptive`: ours / shmsink p50",
                     "<= 0.8",
                     f"{fr(x)} ({fmt(p['p50_us'])} us against {fmt(q['p50_us'])} us)"
                     if x is not None else "not measured",
                     verdict(None if x is None else x <= 0.8), "host shm (B9)"))
    return rows


# -------------------------------------------------------------- header


def header(results, out):
    m = results.get("machine", {})
    vm = results.get("VM") or {}
    g = vm.get("guest") or {}
    out.append("<!-- SPDX-License-Identifier: LGPL-2.1-or-later -->")
    out.append("<!-- GENERATED by tests/bench/run.py from docs/bench/results.json: don't edit; "
               "the analysis at the end comes from tests/bench/analysis.md -->")
    out.append("# Benchmarks\n")
    out.append("One command measures everything and rewrites this file, its plots "
               "(`docs/bench/*.png`) and the raw data (`docs/bench/results.json`):\n")
    out.append("    tests/bench/run.py            # full run, one VM boot (~17 min)")
    out.append("    tests/bench/run.py --quick    # fewer points, shorter runs (~5 min)")
    out.append("    tests/bench/run.py --no-vm    # host (shm) parts only")
    out.append("    tests/bench/run.py --only B4  # re-measure some parts, keep the rest")
    out.append("    tests/bench/run.py --only B9 --no-vm  # the latency part, host only")
    out.append("    tests/bench/run.py --only B10 # many senders into one receiver")
    out.append("    tests/bench/run.py --only B11 # big frames (1080p, 4K) against shmsink")
    out.append("    tests/bench/run.py --only B12 # instructions per frame (callgrind)")
    out.append("    tests/bench/run.py --render   # rebuild this file from results.json\n")
    out.append("Every figure is measured in the same run as its baseline and shown as a "
               "ratio next to the absolute value; the machine is shared and noisy, so "
               "absolute figures move between runs, ratios much less. Nothing here fails "
               "on a timing.\n")
    out.append("## This run\n")
    timings = results.get("timings", {})
    started = results.get("part_started", {})
    dates = sorted(set(v[:10] for v in started.values())) or [m.get("date", "?")[:10]]
    out.append(f"* **Date:** {', '.join(dates)}; {'quick' if results.get('quick') else 'full'}"
               f" run, {sum(timings.values()) / 60:.1f} min of measuring in all (part: seconds"
               f"{', started at' if started else ''}: " +
               ", ".join(f"{k} {v:.0f} s" + (f" at {started[k][11:]}" if k in started else "")
                         for k, v in timings.items()) + ").")
    out.append(f"* **Machine:** {m.get('nproc', '?')} CPUs ({m.get('cpu', '?')}), kernel "
               f"{m.get('kernel', '?')}, load average at start "
               f"{' '.join(m.get('loadavg_start', []))} (other jobs share it), timer slack "
               f"{m.get('timer_slack_ns', '?')} ns.")
    if results.get("loadavg"):
        out.append("* **Load average (1, 5, 15 min) when each part started** (2 CPUs; "
                   "anything above ~1 is other jobs, e.g. a colleague's VM): " +
                   ", ".join(f"{k} {v[0]:.1f}/{v[1]:.1f}/{v[2]:.1f}"
                             for k, v in results["loadavg"].items()) + ".")
    out.append(f"* **Code:** git {m.get('git', '?')}"
               f"{' with uncommitted changes in lib/ or tools/' if m.get('git_dirty_lib') else ''}"
               f", `buildtype=debugoptimized` (-O2 -g)" +
               (" (parts re-run alone since: " +
                ", ".join(f"{k} at git {v}" for k, v in results["part_git"].items()
                          if v != m.get("git")) + ")"
                if any(v != m.get("git") for v in results.get("part_git", {}).values())
                else "") + ".")
    out.append("* **What is emulated:**")
    out.append("  * *host / shm* figures: real time on the host CPU, but the RDMA NIC is "
               "simulated by the shm back end: a thread in the sender process executes every "
               "WRITE/READ with memcpy (and `--delay-us` injects round trips). That thread "
               "competes with the sender, receiver and producer threads for the same 2 "
               "cores.")
    if vm_ok(vm):
        mtu = f", RoCE MTU {g['active_mtu']}" if g.get("active_mtu") else ""
        out.append(f"  * *VM* figures (marked EMULATED): Soft-RoCE (`rdma_rxe`) on a veth "
                   f"(MTU 9000{mtu}) inside a qemu "
                   f"{vm.get('accel', 'TCG').upper()} VM with an **emulated CPU** "
                   f"({g.get('nproc', '?')} vCPUs \"{g.get('cpu', '?')}\", guest kernel "
                   f"{g.get('kernel', '?')}, {m.get('qemu', 'qemu')}); sender and receiver "
                   f"talk to themselves on one rxe device. One boot ran all "
                   f"{len(vm.get('results', []))} verbs measurements in "
                   f"{vm.get('wall_s', 0):.0f} s. Only ratios within the VM run mean "
                   "anything.")
    else:
        why = vm.get("error") or vm.get("skipped") or "not run"
        out.append(f"  * *VM* (Soft-RoCE) figures: none in this run ({why}).")
    out.append("")


# Where run.py --caveat's sentence goes for the parts whose section doesn't
# place it itself (B10 does, and marks its verdicts provisional).
CAVEAT_HEADINGS = {"B56": ["## B5.", "## B6."], "B2X": ["### Sensitivity"],
                   "VM": ["### Verbs", "### VM"]}


def mark_caveats(results, out):
    for part, c in (results.get("caveats") or {}).items():
        if not c or part == "B10":
            continue
        heads = CAVEAT_HEADINGS.get(part, [f"## {part}."])
        for i in range(len(out) - 1, -1, -1):
            if any(out[i].startswith(h) for h in heads):
                out.insert(i + 1, f"**{c[0].upper() + c[1:]}.**\n")


def render(results, out_path):
    figdir = os.path.join(os.path.dirname(out_path), "bench")
    os.makedirs(figdir, exist_ok=True)
    out = []
    header(results, out)
    out.append("## Targets\n")
    out.append("| target | wanted | measured | verdict | where |")
    out.append("|---|---|---|---|---|")
    for t in targets(results):
        out.append("| " + " | ".join(t) + " |")
    out.append("\nWhy the missed ones are missed, with profiles: see **Analysis** at the end.\n")
    vm = results.get("VM") or {}
    section_b1(results.get("B1"), vm if vm_ok(vm) else None, out, figdir)
    section_b2(results.get("B2"), vm if vm_ok(vm) else {}, out, figdir)
    section_b2x(results.get("B2X"), vm if vm_ok(vm) else {}, out)
    section_b3(results.get("B3"), out, figdir)
    section_b4(results.get("B4"), out, figdir)
    section_b56(results.get("B56"), out)
    section_b7(results.get("B7"), out, figdir)
    section_b8(results.get("B8"), out, figdir)
    section_b9(results.get("B9"), out, figdir)
    section_b10(results, out, figdir)
    bigframes.section_b11(results, out, figdir)
    bigframes.section_b12(results, out)
    mark_caveats(results, out)
    analysis = os.path.join(HERE, "analysis.md")
    if os.path.exists(analysis):
        with open(analysis) as f:
            out.append(f.read().rstrip() + "\n")
    with open(out_path, "w") as f:
        f.write("\n".join(out))
