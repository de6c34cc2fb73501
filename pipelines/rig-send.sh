#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The 12-camera rig's sender: twelve live test cameras (videotestsrc, each
# a different pattern, "cam N" written on it) in ONE gst-launch-1.0
# pipeline, each into `rdmasink device-id=N`; the twelve sinks share one
# connection (one QP) to the rdmasrc at HOST:PORT.  A rig of several
# capture hosts gives each host its own device ids with --first-device
# (three hosts of four cameras: 0, 4 and 8; README.md, "A rig of several
# hosts").
#
#   pipelines/rig-send.sh [options]
#
#   --host ADDR        receiver address (verbs; shm ignores it)  [127.0.0.1]
#   --port N           receiver port                             [7471]
#   --transport T      verbs or shm                              [verbs]
#   --cameras N        cameras (1-12), device-id FIRST..FIRST+N-1 [12]
#   --first-device N   the first camera's device-id (0-255)      [0]
#   --width N          frame width                               [640]
#   --height N         frame height                              [480]
#   --fps N            frames per second                         [25]
#   --seconds N        stop after N s (num-buffers = N*fps), EOS
#                      to the receiver; 0 = until Ctrl-C         [0]
#   --encode C         none (raw RGB), vp8, h264 or jpeg: one encoder
#                      per camera, in the camera's pipeline  [none]
#   --gop N            with --encode vp8/h264: a key frame every N
#                      frames                                    [2 s of fps]
#   --sink-props P     extra rdmasink properties, e.g.
#                      "backpressure=drop"                       []
#   --stats FILE       run through rig-run.py and write the final
#                      rdmasink stats, CPU and wall time as JSON
#   --ready FILE       (with --stats) create FILE once PLAYING
#   --print            print the gst-launch-1.0 command, run nothing
#
# Every option also reads an environment variable: RIG_HOST, RIG_PORT,
# RIG_TRANSPORT, RIG_CAMERAS, RIG_FIRST_DEVICE, RIG_WIDTH, RIG_HEIGHT,
# RIG_FPS, RIG_SECONDS, RIG_ENCODE, RIG_GOP, RIG_SINK_PROPS (flags win).
# Raw frames are RGB (640x480: 921,600 bytes, one receive block at
# rdmasrc's default block-size); encoded ones I420 into the encoder.  Without --stats the
# pipeline runs under `gst-launch-1.0 -e`, so Ctrl-C ends it with EOS.
#
# Examples:
#   pipelines/rig-send.sh --host 192.168.1.20
#   pipelines/rig-send.sh --transport shm --seconds 10
#   pipelines/rig-send.sh --width 160 --height 120 --seconds 5
#   pipelines/rig-send.sh --host 192.168.1.20 --cameras 4 --first-device 4
#   pipelines/rig-send.sh --transport shm --encode vp8 --gop 250
#
# Encoders: vp8enc (deadline=1: real time), openh264enc then h264parse
# (byte-stream, SPS/PPS before every key frame: a receiver that joins or
# restarts mid-stream decodes from the next key frame), jpegenc.  The
# receiver (rig-mosaic.sh) decodes whatever comes.
#
# The plugin is found through GST_PLUGIN_PATH, else in build/gst of this
# source tree.  textoverlay is Debian's gstreamer1.0-x (the pango plugin).
set -eu

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
top=$(dirname "$here")
prog=rig-send

usage() {
	sed -n '4,/^[^#]/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
	exit "${1:-2}"
}
die() {
	printf '%s: %s\n' "$prog" "$*" >&2
	exit 2
}

host=${RIG_HOST:-127.0.0.1}
port=${RIG_PORT:-7471}
transport=${RIG_TRANSPORT:-verbs}
cameras=${RIG_CAMERAS:-12}
first=${RIG_FIRST_DEVICE:-0}
width=${RIG_WIDTH:-640}
height=${RIG_HEIGHT:-480}
fps=${RIG_FPS:-25}
seconds=${RIG_SECONDS:-0}
encode=${RIG_ENCODE:-none}
gop=${RIG_GOP:-}
sink_props=${RIG_SINK_PROPS:-}
stats=
ready=
print=

while [ $# -gt 0 ]; do
	case $1 in
	--*=*) opt=${1%%=*} val=${1#*=}; shift; set -- "$opt" "$val" "$@"; continue ;;
	esac
	case $1 in
	--host | --port | --transport | --cameras | --first-device | --width | \
		--height | --fps | --seconds | --encode | --gop | --sink-props | \
		--stats | --ready)
		[ $# -ge 2 ] || die "$1 needs a value"
		case $1 in
		--host) host=$2 ;;
		--port) port=$2 ;;
		--transport) transport=$2 ;;
		--cameras) cameras=$2 ;;
		--first-device) first=$2 ;;
		--width) width=$2 ;;
		--height) height=$2 ;;
		--fps) fps=$2 ;;
		--seconds) seconds=$2 ;;
		--encode) encode=$2 ;;
		--gop) gop=$2 ;;
		--sink-props) sink_props=$2 ;;
		--stats) stats=$2 ;;
		--ready) ready=$2 ;;
		esac
		shift 2 ;;
	--print) print=1; shift ;;
	-h | --help) usage 0 ;;
	*) die "unexpected argument: $1 (--help lists the options)" ;;
	esac
done

for v in port cameras first width height fps seconds; do
	case ${!v} in '' | *[!0-9]*) die "--${v/#first/first-device}: not a number: '${!v}'" ;; esac
done
[ -n "$gop" ] || gop=$((2 * fps))
case $gop in *[!0-9]*) die "--gop: not a number: '$gop'" ;; esac
if [ "$cameras" -lt 1 ] || [ "$cameras" -gt 12 ]; then
	die "--cameras: 1 to 12"
fi
# rdmasrc's pads are src_0 ... src_255.
if [ "$first" -gt $((256 - cameras)) ]; then
	die "--first-device: devices $first..$((first + cameras - 1)) go past 255"
fi
if [ "$width" -lt 16 ] || [ "$height" -lt 16 ] || [ "$fps" -lt 1 ]; then
	die "--width/--height at least 16, --fps at least 1"
fi
case $transport in verbs | shm) ;; *) die "--transport: verbs or shm" ;; esac
[ "$gop" -ge 1 ] || die "--gop: at least 1"
# What goes between a camera and its rdmasink, one word an argument.
case $encode in
none) coder=() format=RGB ;;
vp8) coder=(! videoconvert ! vp8enc deadline=1 keyframe-max-dist="$gop") format=I420 ;;
h264)
	coder=(! videoconvert ! openh264enc gop-size="$gop" ! h264parse config-interval=-1
		! "video/x-h264,stream-format=byte-stream,alignment=au")
	format=I420 ;;
jpeg) coder=(! videoconvert ! jpegenc) format=I420 ;;
*) die "--encode: none, vp8, h264 or jpeg" ;;
esac
[ -z "$ready" ] || [ -n "$stats" ] || die "--ready needs --stats"

if [ -z "${GST_PLUGIN_PATH:-}" ] && [ -e "$top/build/gst/libgstrdma.so" ]; then
	export GST_PLUGIN_PATH=$top/build/gst
fi

# One pattern per device, told apart at a glance (some with motion); the
# same device looks the same whichever host sends it.
patterns=(
	"pattern=smpte"
	"pattern=snow"
	"pattern=ball"
	"pattern=checkers-8"
	"pattern=circular"
	"pattern=zone-plate kx2=20 ky2=20 kt=1"
	"pattern=gamut"
	"pattern=pinwheel"
	"pattern=spokes"
	"pattern=gradient"
	"pattern=colors"
	"pattern=smpte75 horizontal-speed=4"
)
buffers=$((seconds * fps))
[ "$seconds" -gt 0 ] || buffers=-1

# The pipeline as gst-launch-1.0 arguments (no shell quoting inside: each
# word is one argument, as gst_parse_launchv takes them).  The label's font
# is for 640 wide; textoverlay scales it with the width (auto-resize).
desc=()
for ((d = first; d < first + cameras; d++)); do
	read -r -a pat <<<"${patterns[$((d % 12))]}"
	read -r -a extra <<<"$sink_props"
	desc+=(
		videotestsrc is-live=true "${pat[@]}" num-buffers="$buffers"
		! "video/x-raw,format=$format,width=$width,height=$height,framerate=$fps/1"
		! textoverlay "text=cam $d" "font-desc=Sans Bold 36"
		valignment=top halignment=left shaded-background=true
		"${coder[@]}"
		! rdmasink name="tx$d" device-id="$d" transport="$transport"
		host="$host" port="$port" stats-interval=1000 "${extra[@]}"
	)
done

if [ -n "$print" ]; then
	printf 'gst-launch-1.0 -e'
	printf ' %q' "${desc[@]}"
	printf '\n'
	exit 0
fi

printf '%s: %d camera(s), devices %d-%d, %dx%d %s %d fps -> %s %s:%s%s\n' \
	"$prog" "$cameras" "$first" "$((first + cameras - 1))" "$width" "$height" \
	"$([ "$encode" = none ] && echo RGB || echo "$encode")" "$fps" "$transport" "$host" "$port" \
	"$([ "$seconds" -gt 0 ] && echo ", $seconds s" || echo ", until Ctrl-C")" >&2
if [ -n "$stats" ]; then
	run=("$here/rig-run.py" --label "$prog" --stats "$stats")
	[ -z "$ready" ] || run+=(--ready "$ready")
	exec "${run[@]}" -- "${desc[@]}"
fi
exec gst-launch-1.0 -e "${desc[@]}"
