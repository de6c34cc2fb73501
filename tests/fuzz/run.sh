#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Builds the libFuzzer targets (clang, ASan + UBSan, in build-fuzz/) and
# runs them as the meson tests of suite 'fuzz' (fuzz-one.sh): first every
# saved crash in regressions/<target>/ once, then the fuzzer from
# corpus/<target>/ for a fixed number of runs with a fixed seed (what CI
# does), or for a given time (README.md beside this file).
#
#   tests/fuzz/run.sh                      # CI: 20000 runs per target
#   tests/fuzz/run.sh --runs 100000 fuzz-shm
#   tests/fuzz/run.sh --time 600 fuzz-reassembly   # ten minutes
#
# Extra meson test options go after "--" (e.g. -- --logbase fuzz).  A
# crash leaves its input in build-fuzz/fuzz-artifacts/<target>/ and the
# log in build-fuzz/meson-logs/.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${SBR_FUZZ_BUILD:-$top/build-fuzz}
targets=()
meson_args=()
while [ $# -gt 0 ]; do
  case $1 in
  --runs) export SBR_FUZZ_RUNS=$2; shift 2 ;;
  --time) export SBR_FUZZ_TIME=$2; shift 2 ;;
  --build) build=$2; shift 2 ;;
  -h | --help) sed -n '3,16p' "$0"; exit 0 ;;
  --) shift; meson_args=("$@"); break ;;
  *) targets+=("fuzz/$1"); shift ;;
  esac
done

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
# Only the fuzz targets are built (the build's other tests are not wanted
# here), so meson test must not rebuild the rest.
all=(fuzz-block fuzz-priv fuzz-reassembly fuzz-shm fuzz-extras)
ninja -C "$build" "${all[@]/#/tests/fuzz/}" || { echo "fuzz: build failed" >&2; exit 1; }
# A run for a given time ends by itself: no meson timeout then.
[ -z "${SBR_FUZZ_TIME:-}" ] || meson_args+=(--timeout-multiplier 0)
exec meson test -C "$build" --no-rebuild --suite fuzz --print-errorlogs \
  "${meson_args[@]}" "${targets[@]}"
