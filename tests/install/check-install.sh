#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The install, as a user or a packager meets it:
#   1. the README's "Install" lines, run literally in a copy of the source
#      tree with a fresh HOME and no other environment (no
#      LD_LIBRARY_PATH): `meson setup build --prefix ~/.local && ninja -C
#      build install`, `export GST_PLUGIN_PATH=...`, then
#      `gst-inspect-1.0 rdmasrc` must find the element (the installed
#      plugin finds the installed libsbr through its run path,
#      gst/meson.build);
#   2. the plugin is under <prefix>/<libdir>/gstreamer-1.0, with sbr.h,
#      sbr.pc and libsbr beside it, and no tool or sample (opt-in);
#   3. gst-inspect-1.0 finds rdmasink and rdmasrc in the installed plugin
#      alone (GST_PLUGIN_SYSTEM_PATH emptied of this build);
#   4. a small C program built with `pkg-config --cflags --libs sbr`
#      against the installed files sends and receives over shm;
#   5. gst-launch-1.0 moves frames from rdmasink to rdmasrc through the
#      installed plugin;
#   6. a build without rdma-core says so when configured, and
#      transport=verbs fails at once with a message that says why.
# Prints "install: ok: ..." or "install: FAILED: ..." per check (the meson
# test 'install' reads them through tests/tap.sh); exit 0 when all passed.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd -P)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0

ok() { echo "install: ok: $*"; }
fail() { echo "install: FAILED: $*"; failed=$((failed + 1)); }

# A copy of the tree as a commit of it would hold (tracked and new files,
# no build directories): the README's `meson setup build` writes there.
src=$work/src
mkdir "$src"
(cd "$top" && git ls-files -z --cached --others --exclude-standard |
  tar --null -T - --ignore-failed-read -cf - 2>/dev/null) | tar -C "$src" -xf -
home=$work/home
mkdir "$home"
readme_lines=$(awk '/^## /{ on = ($0 == "## Install") } on && /^    [^ ]/' \
  "$top/README.md" | sed 's/^    //')
if [ -z "$readme_lines" ]; then
  fail "README.md has no indented command lines under \"## Install\""
  exit 1
fi
printf '%s\n' "$readme_lines" | sed 's/^/  README: /'
# shellcheck disable=SC2016 # expanded by the inner shell
if (cd "$src" && env -i PATH="$PATH" HOME="$home" LANG=C.UTF-8 bash -c '
  set -e
  eval "$1" >"$2/readme-install.log" 2>&1
  gst-inspect-1.0 rdmasrc >"$2/readme-inspect.log" 2>&1' _ \
  "$readme_lines" "$work"); then
  ok "the README's install lines, then gst-inspect-1.0 rdmasrc with only GST_PLUGIN_PATH set"
else
  tail -20 "$work"/readme-*.log
  fail "the README's install lines and gst-inspect-1.0 rdmasrc (above)"
  exit 1
fi

prefix=$home/.local
libdir=$(meson introspect "$src/build" --buildoptions |
  python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"]=="libdir"][0])')
plugin=$prefix/$libdir/gstreamer-1.0/libgstrdma.so
if [ -f "$plugin" ] && [ -f "$prefix/include/sbr/sbr.h" ] &&
  [ -f "$prefix/$libdir/pkgconfig/sbr.pc" ] &&
  ls "$prefix/$libdir"/libsbr.so.* >/dev/null 2>&1; then
  ok "plugin, header, pkg-config file and library under the prefix"
else
  find "$prefix" -type f
  fail "installed files not where expected (plugin $plugin)"
fi
if [ -e "$prefix/bin/sbr-perf" ] || [ -e "$prefix/bin/rdma-analytics" ]; then
  fail "tools or samples installed without -Dinstall-tools/-Dinstall-samples"
else
  ok "no tool or sample installed unless asked"
fi

# Only the installed plugin and the system's own: the build tree's must not
# be found, so the caller's GST_PLUGIN_PATH is replaced, and the registry
# is a fresh one.  No LD_LIBRARY_PATH: the plugin's run path finds libsbr.
unset LD_LIBRARY_PATH GST_PLUGIN_PATH_1_0 GST_PLUGIN_SYSTEM_PATH_1_0 GST_REGISTRY_1_0
export GST_PLUGIN_PATH=$prefix/$libdir/gstreamer-1.0
GST_PLUGIN_SYSTEM_PATH=$(pkg-config --variable=pluginsdir gstreamer-1.0)
export GST_PLUGIN_SYSTEM_PATH
export GST_REGISTRY=$work/registry.bin
if gst-inspect-1.0 rdma >"$work/inspect.txt" 2>&1 &&
  grep -q "rdmasink" "$work/inspect.txt" &&
  grep -q "rdmasrc" "$work/inspect.txt" &&
  grep -q "$plugin" "$work/inspect.txt"; then
  ok "gst-inspect-1.0 lists rdmasink and rdmasrc from $plugin"
else
  cat "$work/inspect.txt"
  fail "gst-inspect-1.0 rdma"
fi

export PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig
# shellcheck disable=SC2046
if cc -Wall -Wextra -Werror -o "$work/sbr-consumer" \
  "$top/tests/install/sbr-consumer.c" $(pkg-config --cflags --libs sbr) \
  -pthread 2>"$work/cc.log"; then
  # An app linked against a library under a user prefix finds it as any
  # such app does: LD_LIBRARY_PATH (or its own run path).
  if out=$(LD_LIBRARY_PATH=$prefix/$libdir timeout 60 "$work/sbr-consumer" $((20000 + $$ % 20000)) 2>&1); then
    ok "$out"
  else
    echo "$out"
    fail "sbr-consumer against the installed library"
  fi
else
  cat "$work/cc.log"
  fail "compiling against the installed sbr.h and sbr.pc"
fi

port=$((20000 + ($$ + 7) % 20000))
timeout 60 gst-launch-1.0 -q rdmasrc transport=shm port=$port name=r \
  r.src_2 ! fakesink num-buffers=30 >"$work/recv.log" 2>&1 &
recv=$!
sleep 1
timeout 60 gst-launch-1.0 -q videotestsrc num-buffers=60 is-live=true ! \
  video/x-raw,width=160,height=120,framerate=30/1 ! \
  rdmasink transport=shm port=$port device-id=2 >"$work/send.log" 2>&1
if wait $recv; then
  ok "gst-launch-1.0: 30 frames from rdmasink to rdmasrc over shm"
else
  cat "$work/send.log" "$work/recv.log"
  fail "gst-launch-1.0 round trip through the installed plugin"
fi

# Without rdma-core: a configure-time warning, and an error at start.
if meson setup "$work/build-noverbs" "$top" --prefix "$work/prefix-noverbs" \
  -Dverbs=disabled -Dtests=disabled -Dsamples=disabled \
  >"$work/setup-noverbs.log" 2>&1 &&
  ninja -C "$work/build-noverbs" >/dev/null 2>&1; then
  if grep -q "verbs back end is off" "$work/setup-noverbs.log"; then
    ok "configuring without rdma-core says the verbs back end is off"
  else
    fail "configuring without rdma-core gave no warning"
  fi
  start=$(date +%s)
  GST_PLUGIN_PATH=$work/build-noverbs/gst \
    LD_LIBRARY_PATH=$work/build-noverbs/lib GST_REGISTRY=$work/reg-nv.bin \
    timeout 30 gst-launch-1.0 videotestsrc num-buffers=5 ! \
    rdmasink transport=verbs host=127.0.0.1 >"$work/nv.log" 2>&1
  rc=$?
  if [ $rc -ne 0 ] && [ $rc -ne 124 ] &&
    grep -q "built without rdma-core" "$work/nv.log" &&
    [ $(($(date +%s) - start)) -lt 20 ]; then
    ok "transport=verbs without rdma-core fails at once, saying why"
  else
    cat "$work/nv.log"
    fail "transport=verbs without rdma-core (exit $rc)"
  fi
else
  tail -20 "$work/setup-noverbs.log"
  fail "configuring and building without rdma-core"
fi

[ "$failed" -eq 0 ]
