#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The VM steps of the test command (scripts/run-tests.sh), side by side,
# one emulated CPU each:
#   rxe  the verbs suite (meson test --suite verbs) in the Soft-RoCE VM,
#        but for the element files given to the other VM (suite 'vm-siw',
#        tests/gst/meson.build), then the README's demo (12 cameras over
#        Soft-RoCE into a mosaic);
#   siw  suite 'siw' (the verbs tests whose behaviour depends on the RDMA
#        family: the library's, and those element files) in the soft-iWARP
#        VM.  The first run on a
#        machine builds siw.ko (Debian's kernel has none; about a minute,
#        then cached).
#
#   tests/softroce/ci-vms.sh BUILD-DIR OUT-DIR
#
# Leaves in OUT-DIR: rxe.log, siw.log and demo.log (each step's output),
# rxe.rc and siw.rc (each VM's exit status: a VM that died part-way left
# a meson log of only the tests that finished),
# demo.rc (the demo's verdict: 0 when it made BUILD-DIR/demo-out/mosaic.avi
# and stats.txt: under the build, as the VM writes only below the working
# directory) and
# times (one line per step: its wall clock).  Meson's own results are in
# BUILD-DIR/meson-logs/verbs-rxe.json and verbs-siw.json.  SBR_VM_SIW=0
# leaves the soft-iWARP VM out.
#
# Why one CPU each: with two, the two VMs' four vCPU threads shared a
# 2-core host, and an emulated CPU that waits for another (a spinlock, an
# IPI) while that one's thread is off the core burns its time: the verbs
# suite then took half as long again.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "$1" && pwd)
out=$2
mkdir -p "$out"
cd "$top" || exit 1

# The element tests' registry (tests/gst/meson.build), made here natively
# rather than by the first of them in each VM, which scanned every system
# plugin on the emulated CPU (25-30 s of each VM's run).
system=$(pkg-config --variable=pluginsdir gstreamer-1.0 2>/dev/null)
if [ -n "$system" ]; then
  GST_REGISTRY_1_0="$build/tests/gst/registry-verbs.bin" \
    GST_PLUGIN_PATH="$build/gst" GST_PLUGIN_PATH_1_0="$build/gst" \
    GST_PLUGIN_SYSTEM_PATH="$system" GST_PLUGIN_SYSTEM_PATH_1_0="$system" \
    gst-inspect-1.0 rdmasrc >/dev/null 2>&1 || true
fi

rxe() {
  local t=$SECONDS
  # Its own log name, so meson runs on the host meanwhile (same build
  # directory) never read or overwrite it.
  rm -f "$build/meson-logs/verbs-rxe.json"
  rm -rf "$build/demo-out"
  tests/softroce/run-in-vm.sh --cpus 1 -- meson test -C "$build" \
    --suite verbs --no-suite vm-siw --print-errorlogs --no-rebuild \
    --logbase verbs-rxe \
    >"$out/rxe.log" 2>&1
  echo $? >"$out/rxe.rc"
  echo "VM: verbs suite over Soft-RoCE: $((SECONDS - t)) s" >>"$out/times"
  t=$SECONDS
  # The README's demo, as a user runs it (with this build rather than one
  # of its own); it fails when a frame is lost or either side fails.
  if scripts/demo.sh --seconds 3 --build "$build" --out "$build/demo-out" \
    >"$out/demo.log" 2>&1 && [ -s "$build/demo-out/mosaic.avi" ] &&
    [ -s "$build/demo-out/stats.txt" ]; then
    echo 0 >"$out/demo.rc"
  else
    echo 1 >"$out/demo.rc"
  fi
  echo "VM: demo over Soft-RoCE: $((SECONDS - t)) s" >>"$out/times"
}

siw() {
  local t=$SECONDS
  rm -f "$build/meson-logs/verbs-siw.json"
  tests/softroce/run-in-vm.sh --cpus 1 --family siw -- meson test -C "$build" \
    --suite siw --print-errorlogs --no-rebuild --logbase verbs-siw \
    >"$out/siw.log" 2>&1
  echo $? >"$out/siw.rc"
  echo "VM: suite siw over soft-iWARP: $((SECONDS - t)) s" >>"$out/times"
}

: >"$out/times"
rxe &
rxe_pid=$!
[ "${SBR_VM_SIW:-1}" = 0 ] || siw
wait "$rxe_pid"
