#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# pipelines/rig-send.sh's device ids and encoders: the launch line --print shows for
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

# --encode: one encoder per camera between the camera and its sink, and
# a key frame every --gop frames (default two seconds of --fps).
# (--print quotes as printf %q does: the backslashes go.)
line() { bash "$send" --transport shm --cameras 1 "$@" --print | tr -d '\\'; }
has() {
	local what=$1 want=$2
	shift 2
	case $(line "$@") in
	*"$want"*) ok "$what" ;;
	*) failed "$what: no '$want' in: $(line "$@")" ;;
	esac
}
has "vp8, key frame every 2 s" "vp8enc deadline=1 keyframe-max-dist=50 ! rdmasink" --encode vp8
has "vp8 --gop" "keyframe-max-dist=10 ! rdmasink" --encode vp8 --gop 10
has "h264: headers before every key frame" \
	"openh264enc gop-size=30 ! h264parse config-interval=-1" --encode h264 --fps 15
has "jpeg" "jpegenc ! rdmasink" --encode jpeg
has "raw by default" "format=RGB"
case $(line) in
*enc*) failed "an encoder without --encode: $(line)" ;;
*) ok "no encoder without --encode" ;;
esac
for bad in "--encode mp3" "--encode vp8 --gop 0" "--encode h264 --gop x"; do
	# shellcheck disable=SC2086 # the options are words on purpose
	if err=$(bash "$send" $bad --print 2>&1 >/dev/null); then
		failed "$bad accepted"
	else
		ok "$bad refused: $err"
	fi
done
