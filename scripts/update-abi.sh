#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Writes the ABI baseline of libsbr (lib/abi/libsbr.so.<N>.xml) from a
# build, for tests/abi/check-abi.sh to compare later builds against.
#
#   scripts/update-abi.sh [BUILD_DIR]     (default: build)
#
# Run it when the ABI changes on purpose: at a release (the baseline is the
# released ABI), after a compatible addition that should be held from then
# on (a function, a field appended to a growing struct), or with a soname
# bump; then commit the new XML with the change.  The build must have debug
# information (meson's default buildtype, debugoptimized, does).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build}
command -v abidw >/dev/null || {
  echo "update-abi: abidw not found (Debian: apt install abigail-tools)" >&2
  exit 1
}
meson compile -C "$build" sbr >/dev/null
lib=$(readlink -f "$build/lib/libsbr.so")
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ -n "$soname" ] || { echo "update-abi: $lib has no SONAME" >&2; exit 1; }
readelf -S "$lib" | grep -q '\.debug_info' || {
  echo "update-abi: $lib has no debug information: configure with -g" >&2
  exit 1
}
out=$top/lib/abi/$soname.xml
# Only what applications can reach (exported functions and the types they
# take), without paths or line numbers, so the file changes only when the
# ABI does.
abidw --suppressions "$top/lib/abi/libsbr.abignore" --exported-interfaces-only \
  --no-corpus-path --no-comp-dir-path --no-show-locs --no-elf-needed \
  --type-id-style hash --out-file "$out" "$lib"
# Baselines of an older soname stay: a branch of that series may need them.
echo "update-abi: wrote ${out#"$top"/} from $lib"
