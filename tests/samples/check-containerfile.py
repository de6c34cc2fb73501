#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Check samples/container/Containerfile's assumptions without a runtime.

    check-containerfile.py SOURCE-DIR

No container registry is reachable here (podman installs from Debian but
can't pull debian:12), so this checks what the RUN steps rely on: every
package they install exists in this Debian 12's apt-cache (a candidate
version), and their `meson setup` line (the same options, into a scratch
directory) configures this checkout with the samples enabled, and installs
the plugin where GStreamer looks and libsbr where the loader does (the image
has no dpkg-architecture, so without --libdir meson picks lib64: the image's
rdma-analytics then found no rdmasrc).  samples/container/build-and-run.sh
builds and runs the image itself, outside CI.
"""

import json
import os
import re
import shlex
import subprocess
import sys
import tempfile


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def main():
    src = sys.argv[1]
    text = open(os.path.join(src, "samples/container/Containerfile")).read()
    text = text.replace("\\\n", " ")
    runs = [l[4:] for l in text.splitlines() if l.startswith("RUN ")]
    words = shlex.split(runs[0])
    i = words.index("install")
    pkgs = []
    for w in words[i + 1:]:
        if w == "&&":
            break
        if not w.startswith("-"):
            pkgs.append(w)
    # One apt-cache for all: each run loads (and, while the VM steps beside
    # it install packages, rebuilds) the package cache, which took 17
    # separate runs past the test's minute on a new machine.
    out = subprocess.run(["apt-cache", "policy"] + pkgs, capture_output=True,
                         text=True).stdout
    candidates = dict(re.findall(r"^(\S+):\n(?:  .*\n)*?  Candidate: (\S+)",
                                 out, re.M))
    for p in pkgs:
        c = candidates.get(p)
        if not c or c == "(none)":
            fail("package %s: no candidate in apt-cache" % p)
        print("package %-36s %s" % (p, c))
    setup = next(r for r in runs if "meson setup" in r)
    args = shlex.split(setup.split("&&")[0])
    opts = [a for a in args[4:] if a.startswith("-D")]
    if "-Dsamples=enabled" not in opts:
        fail("the image doesn't build the samples")
    # The install directories, as the RUN step's shell would expand them
    # ($(gcc -print-multiarch): the image's gcc is Debian's, like this one).
    multiarch = subprocess.run(["gcc", "-print-multiarch"], capture_output=True,
                               text=True).stdout.strip()
    setup_text = setup.split("&&")[0].replace("$(gcc -print-multiarch)",
                                              multiarch)
    dirs = [a for a in shlex.split(setup_text)[4:]
            if a.startswith(("--prefix=", "--libdir="))]
    if not any(a.startswith("--libdir=") for a in dirs):
        fail("no --libdir: without dpkg-architecture in the image meson "
             "picks lib64, off GStreamer's plugin path")
    opts = dirs + opts
    with tempfile.TemporaryDirectory() as build:
        r = subprocess.run(["meson", "setup", build, src] + opts,
                           capture_output=True, text=True)
        if r.returncode != 0:
            print(r.stdout[-3000:])
            fail("meson setup %s failed" % " ".join(opts))
        if not os.path.exists(os.path.join(build, "build.ninja")):
            fail("no build.ninja")
        installed = subprocess.run(["meson", "introspect", "--installed",
                                    build], capture_output=True, text=True)
        dests = list(json.loads(installed.stdout).values())
        plugins = subprocess.run(["pkg-config", "--variable=pluginsdir",
                                  "gstreamer-1.0"], capture_output=True,
                                 text=True).stdout.strip()
        libdir = "/usr/lib/" + multiarch
        for name, want in (("libgstrdma.so", plugins),
                           ("libsbr.so.0", libdir)):
            got = [d for d in dests if os.path.basename(d) == name]
            if [os.path.dirname(d) for d in got] != [want]:
                fail("%s installs to %s, not %s" % (name, got, want))
            print("installs %-29s %s" % (name, want))
    print("meson setup %s: OK" % " ".join(opts))
    print("PASS")


if __name__ == "__main__":
    main()
