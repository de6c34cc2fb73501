#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Runs a check script whose checks print "PREFIX: ok: ..." and
# "PREFIX: FAILED: ..." (tests/install/check-install.sh,
# tests/package/check-package.sh) and turns its output into TAP, so meson
# counts each check (protocol 'tap'); every other line is kept as a TAP
# comment.  A script that checked nothing, or that exited non-zero with no
# check failed, fails one check more.
#
#   tap.sh PREFIX SCRIPT [ARGS...]
set -u
prefix=$1
shift
n=0
bad=0
status=
# The check's own words, after "PREFIX: ok: ".
what() { sed -E 's/^[^:]*: (ok|FAILED):? *//' <<<"$1"; }
while IFS= read -r line; do
  case $line in
  "$prefix: ok"*)
    n=$((n + 1))
    echo "ok $n - $(what "$line")"
    ;;
  "$prefix: FAILED"*)
    n=$((n + 1))
    bad=$((bad + 1))
    echo "not ok $n - $(what "$line")"
    ;;
  "tap.sh exit "*) status=${line#tap.sh exit } ;;
  *) echo "# $line" ;;
  esac
done < <(
  "$@" 2>&1
  echo "tap.sh exit $?"
)
if [ "$n" -eq 0 ]; then
  n=1
  echo "not ok 1 - $(basename "$1") checked nothing (exit $status)"
elif [ "$status" != 0 ] && [ "$bad" -eq 0 ]; then
  n=$((n + 1))
  echo "not ok $n - $(basename "$1") exited $status with no check failed"
fi
echo "1..$n"
