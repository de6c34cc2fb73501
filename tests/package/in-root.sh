#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Run by check-package.sh inside the throw-away root, as root, with a clean
# environment, from a directory holding the built .debs, sbr-consumer.c and
# round-trip.py:
#
#   in-root.sh SOURCE_TREE
#
# Installs the four packages with dpkg (their dependencies come from the
# host's root, which has the build dependencies), then uses only what they
# installed.  SOURCE_TREE is where the checkout is on the host: it must not
# be visible here.  Prints "package: ok: ..." or "package: FAILED: ..." per
# check.
set -u
top=$1
here=$(pwd)
failed=0
ok() { echo "package: ok: $*"; }
fail() { echo "package: FAILED: $*"; failed=$((failed + 1)); }

ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
export HOME=$here/home GST_REGISTRY=$here/home/registry.bin
mkdir -p "$HOME"

if [ -e "$top/meson.build" ] || env | grep -q '^GST_PLUGIN_PATH\|^LD_LIBRARY_PATH'; then
  fail "the source tree ($top) or a plugin/library path is in sight"
else
  ok "no source tree, GST_PLUGIN_PATH or LD_LIBRARY_PATH in sight"
fi

debs=(libsbr0_*.deb libsbr-dev_*.deb gstreamer1.0-rdma_*.deb sbr-tools_*.deb)
if dpkg -i "${debs[@]}" >dpkg.log 2>&1; then
  ok "dpkg -i ${debs[*]}"
else
  cat dpkg.log
  fail "dpkg -i: the packages do not install"
  exit 1
fi

plugin=/usr/lib/$ma/gstreamer-1.0/libgstrdma.so
# /lib is /usr/lib (merged /usr): GStreamer may name either.
if gst-inspect-1.0 rdma >inspect.txt 2>&1 && grep -q rdmasink inspect.txt &&
  grep -q rdmasrc inspect.txt &&
  grep -q "Filename  *\(/usr\)\?/lib/$ma/gstreamer-1.0/libgstrdma.so" inspect.txt; then
  ok "gst-inspect-1.0 rdma: rdmasink and rdmasrc from $plugin"
else
  cat inspect.txt
  fail "gst-inspect-1.0 rdma"
fi
if ldd "$plugin" | grep -q "libsbr.so.0 => /\(usr/\)\?lib/$ma/libsbr.so.0"; then
  ok "the plugin links the packaged libsbr.so.0"
else
  ldd "$plugin"
  fail "the plugin does not resolve libsbr.so.0 to the packaged library"
fi

port=$((20000 + $$ % 20000))
if out=$(timeout 180 /usr/bin/python3 "$here/round-trip.py" "$port" 12 30 2>&1); then
  ok "$out"
else
  echo "$out"
  fail "12-camera shm round trip through the packaged plugin"
fi

# shellcheck disable=SC2046
if cc -Wall -Wextra -Werror -o sbr-consumer sbr-consumer.c \
  $(pkg-config --cflags --libs sbr) -pthread 2>cc.log; then
  if out=$(timeout 60 ./sbr-consumer $((port + 1)) 2>&1); then
    ok "sbr-consumer built against libsbr-dev: $out"
  else
    echo "$out"
    fail "sbr-consumer against the packaged library"
  fi
else
  cat cc.log
  fail "compiling sbr-consumer.c against libsbr-dev (sbr.h, sbr.pc)"
fi

# sbr-tools: the man page's example, twelve devices over shm.
p=$((port + 2))
timeout 60 sbr-perf receive --backend shm --port $p --devices 12 --verify \
  >perf-recv.log 2>&1 &
recv=$!
if timeout 60 sbr-perf send 127.0.0.1 --backend shm --port $p --devices 12 \
  --count 100 --verify >perf-send.log 2>&1 && wait $recv; then
  ok "sbr-perf: 12 devices x 100 frames over shm, verified"
else
  wait $recv
  cat perf-send.log perf-recv.log
  fail "sbr-perf send/receive over shm"
fi
if [ -s /usr/share/man/man1/sbr-perf.1.gz ]; then
  ok "sbr-perf(1) installed"
else
  fail "no sbr-perf(1) man page"
fi

[ "$failed" -eq 0 ]
