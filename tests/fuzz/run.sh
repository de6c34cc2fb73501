#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Builds the libFuzzer targets (clang, ASan + UBSan, in build-fuzz/) and
# runs each: first every saved crash in regressions/<target>/ once, then
# the fuzzer from corpus/<target>/ for a fixed number of runs with a fixed
# seed (what CI does), or for a given time (README.md beside this file).
#
#   tests/fuzz/run.sh                      # CI: 20000 runs per target
#   tests/fuzz/run.sh --runs 100000 fuzz-shm
#   tests/fuzz/run.sh --time 600 fuzz-reassembly   # ten minutes
#
# New inputs go to build-fuzz/fuzz-corpus/<target>/ (the repository's corpus
# is read, never written); a crash leaves its input in
# build-fuzz/fuzz-artifacts/.  Prints "fuzz <target>: ok|FAILED ..." per
# target and exits non-zero if any failed.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
here=$top/tests/fuzz
build=${SBR_FUZZ_BUILD:-$top/build-fuzz}
runs=20000
seconds=
targets=()
while [ $# -gt 0 ]; do
  case $1 in
  --runs) runs=$2; shift 2 ;;
  --time) seconds=$2; shift 2 ;;
  --build) build=$2; shift 2 ;;
  -h | --help) sed -n '3,17p' "$0"; exit 0 ;;
  *) targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(fuzz-block fuzz-priv fuzz-reassembly fuzz-shm)

if ! command -v clang >/dev/null; then
  echo "fuzz: clang is not installed (scripts/install-deps.sh installs it)" >&2
  exit 1
fi
if [ ! -f "$build/build.ninja" ]; then
  setup_log=$(mktemp)
  CC=clang meson setup "$build" "$top" -Dfuzz=enabled \
    -Db_sanitize=address,undefined -Db_lundef=false -Dplugin=disabled \
    -Dsamples=disabled >"$setup_log" 2>&1 ||
    { cat "$setup_log" >&2; echo "fuzz: meson setup failed" >&2; exit 1; }
  rm -f "$setup_log"
fi
ninja -C "$build" "${targets[@]/#/tests/fuzz/}" || { echo "fuzz: build failed" >&2; exit 1; }

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
failed=0
for t in "${targets[@]}"; do
  exe=$build/tests/fuzz/$t
  new=$build/fuzz-corpus/$t
  art=$build/fuzz-artifacts/$t
  log=$build/fuzz-logs/$t.log
  mkdir -p "$new" "$art" "$(dirname "$log")"
  : >"$log"
  status=ok
  # Every crash found so far, replayed as it was found.
  regressions=("$here"/regressions/"$t"/*)
  if [ -e "${regressions[0]}" ]; then
    "$exe" "${regressions[@]}" >>"$log" 2>&1 || status="FAILED (a regression input crashes again)"
  fi
  if [ "$status" = ok ]; then
    if [ -n "$seconds" ]; then
      limit=(-max_total_time="$seconds")
    else
      limit=(-runs="$runs" -seed=1)
    fi
    "$exe" "${limit[@]}" -print_final_stats=1 -artifact_prefix="$art/" \
      "$new" "$here/corpus/$t" >>"$log" 2>&1 || status=FAILED
  fi
  stats=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1 |
    sed -E 's/^#([0-9]+)[[:space:]]+DONE +cov: ([0-9]+) ft: ([0-9]+).*exec\/s: ([0-9]+).*/\1 runs, cov \2, ft \3, \4 exec\/s/')
  if [ "$status" = ok ]; then
    echo "fuzz $t: ok ($stats)"
  else
    failed=$((failed + 1))
    echo "fuzz $t: $status; log $log:"
    grep -E -A30 'ERROR|check failed|runtime error' "$log" | head -60
  fi
done
[ "$failed" -eq 0 ]
