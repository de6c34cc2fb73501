#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# One libFuzzer target, as the meson test fuzz/<target> (suite 'fuzz',
# registered in tests/fuzz/meson.build) runs it: every saved crash in
# regressions/<target>/ once, then the fuzzer from corpus/<target>/ for
# SBR_FUZZ_RUNS runs (default 20000, or the target's SBR_FUZZ_RUNS_DEFAULT
# from its meson test) with seed 1, or for SBR_FUZZ_TIME
# seconds when that is set (tests/fuzz/run.sh sets both from its options).
# A timed run keeps the new inputs it finds in BUILD/fuzz-corpus/<target>/
# and starts from them next time; a fixed run (CI's) starts from the
# repository's corpus alone, with new inputs in a directory of its own
# that goes with it, so each such run is the same as the last.  The
# repository's corpus is read, never written; a crash leaves its input in
# BUILD/fuzz-artifacts/<target>/.  Exits non-zero on any crash.
#
#   fuzz-one.sh EXECUTABLE TARGET SOURCE-DIR BUILD-DIR
set -u
exe=$1 t=$2 here=$3 build=$4
new=$build/fuzz-corpus/$t
art=$build/fuzz-artifacts/$t
mkdir -p "$new" "$art"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
# Leaks inside a library the target calls, each with its reason, in
# lsan-<target>.supp beside this script (only fuzz-extras has one).
if [ -f "$here/lsan-$t.supp" ]; then
  export LSAN_OPTIONS=${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$here/lsan-$t.supp:print_suppressions=0
  # A suppression matches a function in the allocation's stack, which the
  # fast unwinder stops short of (glib is built without frame pointers).
  # And deep enough for GstValue's parser at rdmasrc's nesting bound
  # (GST_RDMA_WIRE_MAX_NESTING): two frames a level.
  export ASAN_OPTIONS=$ASAN_OPTIONS:fast_unwind_on_malloc=0:malloc_context_size=255
fi

# Every crash found so far, replayed as it was found.
regressions=("$here"/regressions/"$t"/*)
if [ -e "${regressions[0]}" ] && ! "$exe" "${regressions[@]}"; then
  echo "fuzz $t: FAILED: a saved regression input crashes again"
  exit 1
fi
if [ -n "${SBR_FUZZ_TIME:-}" ]; then
  limit=(-max_total_time="$SBR_FUZZ_TIME")
else
  limit=(-runs="${SBR_FUZZ_RUNS:-${SBR_FUZZ_RUNS_DEFAULT:-20000}}" -seed=1)
  new=$(mktemp -d)
  trap 'rm -rf "$new"' EXIT
fi
# libFuzzer's own exit code for a crash or a leak is 77, which meson
# takes for a skip: a crash must fail the test.
"$exe" "${limit[@]}" -error_exitcode=1 -print_final_stats=1 \
  -artifact_prefix="$art/" "$new" "$here/corpus/$t"
