#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The install, as a user or a packager meets it (issue #20 item 3):
#   1. configure with --prefix in a temporary directory, `meson install`;
#   2. the plugin is under <prefix>/<libdir>/gstreamer-1.0, with sbr.h,
#      sbr.pc and libsbr beside it, and no tool or sample (opt-in);
#   3. gst-inspect-1.0 finds rdmasink and rdmasrc in the installed plugin
#      alone (GST_PLUGIN_SYSTEM_PATH emptied), with its package name;
#   4. a small C program built with `pkg-config --cflags --libs sbr`
#      against the installed files sends and receives over shm;
#   5. gst-launch-1.0 moves frames from rdmasink to rdmasrc through the
#      installed plugin;
#   6. a build without rdma-core says so when configured, and
#      transport=verbs fails at once with a message that says why.
# Prints "install: ok" or "install: FAILED <why>" per check; exit 0 when
# all passed.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0

ok() { echo "install: ok: $*"; }
fail() { echo "install: FAILED: $*"; failed=$((failed + 1)); }

prefix=$work/prefix
if ! meson setup "$work/build" "$top" --prefix "$prefix" -Dtests=disabled \
  -Dsamples=disabled -Dpackage-name="install check" >"$work/setup.log" 2>&1 ||
  ! ninja -C "$work/build" >"$work/build.log" 2>&1 ||
  ! meson install -C "$work/build" >"$work/install.log" 2>&1; then
  tail -20 "$work"/*.log
  fail "configure, build or install into $prefix"
  exit 1
fi
libdir=$(meson introspect "$work/build" --buildoptions |
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
# is a fresh one.
export LD_LIBRARY_PATH=$prefix/$libdir
export GST_PLUGIN_PATH=$prefix/$libdir/gstreamer-1.0
GST_PLUGIN_SYSTEM_PATH=$(pkg-config --variable=pluginsdir gstreamer-1.0)
export GST_PLUGIN_SYSTEM_PATH
export GST_REGISTRY=$work/registry.bin
if gst-inspect-1.0 rdma >"$work/inspect.txt" 2>&1 &&
  grep -q "rdmasink" "$work/inspect.txt" &&
  grep -q "rdmasrc" "$work/inspect.txt" &&
  grep -q "install check" "$work/inspect.txt" &&
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
  if out=$(timeout 60 "$work/sbr-consumer" $((20000 + $$ % 20000)) 2>&1); then
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
