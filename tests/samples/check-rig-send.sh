#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# pipelines/rig-send.sh's device ids: the launch line --print shows for
# the three capture hosts of a 12-camera rig (--first-device 0, 4, 8),
# and the ranges it refuses.  Lines "rig-send: ok: ..." and
# "rig-send: FAILED: ..." (tests/tap.sh).
#
#   check-rig-send.sh SOURCE_ROOT
set -u
send=$1/pipelines/rig-send.sh

ok() { echo "rig-send: ok: $*"; }
failed() { echo "rig-send: FAILED: $*"; }

# The device ids, sink names and labels of a --print, one line each.
ids() {
	bash "$send" --transport shm "$@" --print | tr ' ' '\n' |
		sed -n 's/^device-id=//p' | tr '\n' ' '
}
names() {
	bash "$send" --transport shm "$@" --print | tr ' ' '\n' |
		sed -n 's/^name=//p' | tr '\n' ' '
}

expect() {
	local what=$1 got=$2 want=$3
	if [ "$got" = "$want" ]; then
		ok "$what: $got"
	else
		failed "$what: '$got', expected '$want'"
	fi
}

expect "default" "$(ids)" "0 1 2 3 4 5 6 7 8 9 10 11 "
expect "host 1 of 3" "$(ids --cameras 4 --first-device 0)" "0 1 2 3 "
expect "host 2 of 3" "$(ids --cameras 4 --first-device 4)" "4 5 6 7 "
expect "host 3 of 3" "$(ids --cameras 4 --first-device=8)" "8 9 10 11 "
expect "sink names follow" "$(names --cameras 2 --first-device 8)" "tx8 tx9 "
expect "environment" "$(RIG_FIRST_DEVICE=20 ids --cameras 2)" "20 21 "
expect "up to 255" "$(ids --cameras 2 --first-device 254)" "254 255 "
label=$(bash "$send" --cameras 1 --first-device 5 --print)
case $label in
*'text=cam\ 5'*) ok "the label names the device" ;;
*) failed "no 'cam 5' label in: $label" ;;
esac

for bad in "--cameras 2 --first-device 255" "--first-device -1" \
	"--first-device x"; do
	# shellcheck disable=SC2086 # the options are words on purpose
	if err=$(bash "$send" $bad --print 2>&1 >/dev/null); then
		failed "$bad accepted"
	else
		ok "$bad refused: $err"
	fi
done
