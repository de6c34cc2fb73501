#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Compares the built libsbr.so with the checked-in ABI baseline
# (lib/abi/<soname>.xml, written by scripts/update-abi.sh):
#
#   check-abi.sh SOURCE_ROOT LIBSBR_SO
#
# Passes when abidiff finds no change an application could see, or only
# compatible ones: functions added, fields appended to the structs that
# carry their size (lib/abi/libsbr.abignore says which and why).  Fails on
# anything else -- a function removed or changed, a field inserted or
# changed, an enum value renumbered -- unless the soname changed with it
# (then there is no baseline of the new soname yet: write it with
# scripts/update-abi.sh).  Exit 77 (skipped, never passed) when abigail-tools
# is missing or the library has no debug information to compare.
set -u
top=$1
lib=$(readlink -f "$2")
command -v abidiff >/dev/null || {
  echo "check-abi: abidiff not found (Debian: apt install abigail-tools)"
  exit 77
}
readelf -S "$lib" | grep -q '\.debug_info' || {
  echo "check-abi: $lib has no debug information (a build without -g)"
  exit 77
}
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
baseline=$top/lib/abi/$soname.xml
if [ ! -f "$baseline" ]; then
  # A new soname: an incompatible change made honestly.  Its baseline is
  # written once the new ABI settles, with scripts/update-abi.sh.
  old=$(cd "$top/lib/abi" && ls -- *.xml 2>/dev/null | tr "\n" " ")
  echo "check-abi: no baseline for $soname (have: ${old:-none}): the" \
    "soname changed; run scripts/update-abi.sh to record its ABI"
  exit 0
fi
# --no-added-syms: a new function is compatible (it belongs in a new
# version node of lib/libsbr.map, which check-exports.py checks).
abidiff --no-added-syms --suppressions "$top/lib/abi/libsbr.abignore" \
  "$baseline" "$lib"
rc=$?
if [ $rc -eq 0 ]; then
  echo "check-abi: $soname compatible with ${baseline#"$top"/}"
  exit 0
fi
# abidiff's exit status is a bit field: 1 error, 2 usage, 4 ABI change,
# 8 incompatible change.
if [ $((rc & 3)) -ne 0 ]; then
  echo "check-abi: abidiff failed (exit $rc)"
else
  echo "check-abi: the ABI of $soname changed incompatibly (abidiff exit" \
    "$rc, above).  Undo the change, or add fields only at the end of the" \
    "sized structs (sbr.h, \"Growing structs\"), or bump the soname."
fi
exit 1
