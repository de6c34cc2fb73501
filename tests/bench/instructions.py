#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Instructions per frame from callgrind dumps of two gst-frames runs of one
rig, short and long, for tests/bench/run.py part B12; also a command line:

    instructions.py short.out FRAMES long.out FRAMES   # the split as JSON

Per frame = (long - short) / (frames long - frames short), for the total
and for each part below: start-up (gst_init, the registry, caps) and
tear-down are the same in both runs and cancel.  (Callgrind's client
requests can't bound a span instead: they zero and dump only the calling
thread's counters.)

Callgrind counts instructions (Ir), which don't depend on the machine's
speed or load: the same binary, inputs and environment give the same
count, give or take the polls that find nothing (valgrind runs one thread
at a time, so how often a waiting thread looks depends on the schedule).

Each dump is split three ways, from its call arcs (each function's cost
as called from each caller, inclusive):

  fill    the pixels: every call into videotestsrc from outside it (its
          fill vfunc, the frames it paints, and what it calls: libgstvideo's
          packing, orc).  The same work whoever carries the frame.
  copies  every memcpy/memmove of the span not called from the fill's
          libraries, by the library that called it: a map that merges a
          buffer of several memories (libgstreamer), shmsink's copy into
          its area (libgstshm), rdmasink's copy into a send block
          (libgstrdma), the library's reassembly or the shm back end's
          emulated NIC (libsbr: a NIC's DMA over verbs, a CPU copy here).
  rest    everything else: the elements, the engine, GStreamer's pushing,
          the threads' waits and wake-ups.

Debian's GStreamer libraries carry no symbols for their static functions,
hence objects rather than function names for the fill; libsbr and the
plugin are this build's, with symbols.
"""
import json
import re
import sys

# Objects whose code is the pixels' (the fill and what it calls).
FILL_OBJECTS = ("libgstvideotestsrc.so",)
FILL_CALLEES = ("libgstvideotestsrc.so", "libgstvideo-1.0.so", "liborc-0.4.so")
OWN_OBJECTS = ("libsbr.so", "libgstrdma.so")
COPY_FN = re.compile(r"(^|_)(memcpy|memmove)")



def short_object(path):
    base = path.rsplit("/", 1)[-1]
    return re.sub(r"\.so[.\d]*$", ".so", base)


def caller_tree(path):
    """[(function, object, [(caller, caller_object, cost, calls)])] and the
    dump's total, read from the callgrind file itself: callgrind_annotate
    keys a function by file and name only, and Debian's libraries name
    their static functions by offset (0x7140), so the fill function of
    videotestsrc and one of shmsink at the same offset would be merged."""
    names = {"ob": {}, "fn": {}}
    cur = {"ob": "?", "fn": "?"}
    call_to = None  # (callee object, callee function) of the next cost line
    cob = None
    arcs = {}
    total = None
    ref = re.compile(r"\((\d+)\)(?:\s+(.*))?$")

    def name(kind, text):
        m = ref.match(text.strip())
        if not m:
            return text.strip()
        if m.group(2) is not None:
            names[kind][m.group(1)] = m.group(2)
        return names[kind].get(m.group(1), text)

    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith(("ob=", "fn=")):
                kind = line[:2]
                cur[kind] = name(kind, line[3:])
                if kind == "fn":
                    cob = None
            elif line.startswith("cob="):
                cob = name("ob", line[4:])
            elif line.startswith("cfn="):
                call_fn = name("fn", line[4:])
                call_to = (cob or cur["ob"], call_fn)
            elif line.startswith("calls="):
                calls = int(line.split()[0][6:])
                pending = (call_to, calls)
                call_to = "cost"
                continue
            elif line.startswith(("summary:", "totals:")):
                total = int(line.split()[1])
            elif call_to == "cost" and line[:1] in "0123456789+-*":
                (callee, calls) = pending
                cost = int(line.split()[-1])
                key = (callee, (cur["ob"], cur["fn"]))
                c0, n0 = arcs.get(key, (0, 0))
                arcs[key] = (c0 + cost, n0 + calls)
                call_to = None
                cob = None
    tree = {}
    for ((cobj, cfn), (obj, fn)), (cost, calls) in arcs.items():
        tree.setdefault((cfn, short_object(cobj)), []).append(
            (fn, short_object(obj), cost, calls))
    return [(fn, obj, 0, callers) for (fn, obj), callers in tree.items()], total


def costs(path):
    """A dump's Ir: total, fill, copies by the caller's library."""
    tree, total = caller_tree(path)
    if not total:
        return None
    fill = 0
    copies = {}
    fill_copies = 0
    for fn, obj, cost, callers in tree:
        if obj.startswith(FILL_OBJECTS):
            # Calls into videotestsrc from outside it; a call from
            # videotestsrc to itself is inside one of those already.
            fill += sum(c for _, cobj, c, _ in callers if not cobj.startswith(FILL_OBJECTS))
        if COPY_FN.search(fn.split("'")[0]):
            for cfn, cobj, c, _ in callers:
                if cobj.startswith(FILL_CALLEES):
                    fill_copies += c
                elif cobj.startswith("libc.so"):
                    continue  # memmove called through another libc routine
                else:
                    # Ours have symbols: name the function, it says which copy.
                    key = f"{cobj}:{cfn}" if cobj.startswith(OWN_OBJECTS) else cobj
                    copies[key] = copies.get(key, 0) + c
    return {"total": total, "fill": fill, "copies": copies, "fill_copies": fill_copies}


def per_frame(short, long_):
    """Ir a frame from two runs of the same rig, (costs, frames) each: the
    difference of the whole runs over the difference of their frames, so
    that start-up and tear-down, the same in both, cancel."""
    (a, na), (b, nb) = short, long_
    if not a or not b or nb <= na:
        return None
    n = nb - na
    keys = set(a["copies"]) | set(b["copies"])
    by = {k: (b["copies"].get(k, 0) - a["copies"].get(k, 0)) / n for k in sorted(keys)}
    total = (b["total"] - a["total"]) / n
    fill = (b["fill"] - a["fill"]) / n
    copy = sum(by.values())
    return {"frames": n, "ir_per_frame": total, "fill_ir_per_frame": fill,
            "copy_ir_per_frame": copy, "copy_by_object_per_frame": by,
            "fill_memcpy_ir_per_frame": (b["fill_copies"] - a["fill_copies"]) / n,
            "rest_ir_per_frame": total - fill - copy,
            "short": {"frames": na, "total_ir": a["total"]},
            "long": {"frames": nb, "total_ir": b["total"]}}


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit("usage: instructions.py SHORT.out FRAMES LONG.out FRAMES")
    print(json.dumps(per_frame((costs(sys.argv[1]), int(sys.argv[2])),
                               (costs(sys.argv[3]), int(sys.argv[4]))), indent=1))
