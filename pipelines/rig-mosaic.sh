#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The 12-camera rig's mosaic receiver: one rdmasrc, its pads src_0 ..
# src_11 (one per camera, they appear when the cameras' caps arrive), each
# through a queue, decodebin (raw video passes through; an encoded camera,
# rig-send.sh --encode, is decoded), videoscale and videoconvert to a tile
# of a 4x3 `compositor` mosaic, encoded as Motion JPEG into an AVI (or
# Matroska) file.  Ends cleanly when every camera's EOS has arrived (each rdmasrc pad
# pushes EOS when its rdmasink sent EOS), or on Ctrl-C (gst-launch-1.0 -e).
#
#   pipelines/rig-mosaic.sh [options]
#
#   --address ADDR     listen address (verbs; shm ignores it)   [0.0.0.0]
#   --port N           listen port                              [7471]
#   --transport T      verbs or shm                             [verbs]
#   --cameras N        cameras, device-id 0..N-1 (1-12); must match
#                      the sender: the file ends when all N ended  [12]
#   --columns N        tiles per row                            [4]
#   --tile WxH         tile size                                [320x240]
#   --fps N            mosaic frame rate                        [25]
#   --out FILE         output, .avi (avimux) or .mkv            [mosaic.avi]
#   --quality N        JPEG quality 0-100                       [85]
#   --latency MS       compositor latency: how long it waits for
#                      late tiles before it outputs without them  [200]
#   --src-props P      extra rdmasrc properties, e.g. "blocks=64"  []
#   --stats FILE       run through rig-run.py and write the final
#                      rdmasrc stats, per-pad buffer counts, CPU and
#                      wall time as JSON
#   --ready FILE       (with --stats) create FILE once PLAYING, i.e.
#                      when senders may connect
#   --print            print the gst-launch-1.0 command, run nothing
#
# Environment variables with the same meaning: RIG_ADDRESS, RIG_PORT,
# RIG_TRANSPORT, RIG_CAMERAS, RIG_COLUMNS, RIG_TILE, RIG_FPS, RIG_OUT,
# RIG_QUALITY, RIG_LATENCY, RIG_SRC_PROPS (flags win).  Start it before the
# sender (rig-send.sh): the sender retries for its connect-timeout (5 s).
#
# Examples:
#   pipelines/rig-mosaic.sh --out /tmp/rig.avi
#   pipelines/rig-mosaic.sh --transport shm --tile 160x120
#
# Look at a frame: pipelines/snapshot.py rig.avi rig.png
set -eu

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
top=$(dirname "$here")
prog=rig-mosaic

usage() {
	sed -n '4,/^[^#]/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
	exit "${1:-2}"
}
die() {
	printf '%s: %s\n' "$prog" "$*" >&2
	exit 2
}

address=${RIG_ADDRESS:-0.0.0.0}
port=${RIG_PORT:-7471}
transport=${RIG_TRANSPORT:-verbs}
cameras=${RIG_CAMERAS:-12}
columns=${RIG_COLUMNS:-4}
tile=${RIG_TILE:-320x240}
fps=${RIG_FPS:-25}
out=${RIG_OUT:-mosaic.avi}
quality=${RIG_QUALITY:-85}
latency=${RIG_LATENCY:-200}
src_props=${RIG_SRC_PROPS:-}
stats=
ready=
print=

while [ $# -gt 0 ]; do
	case $1 in
	--*=*) opt=${1%%=*} val=${1#*=}; shift; set -- "$opt" "$val" "$@"; continue ;;
	esac
	case $1 in
	--address | --port | --transport | --cameras | --columns | --tile | --fps | \
		--out | --quality | --latency | --src-props | --stats | --ready)
		[ $# -ge 2 ] || die "$1 needs a value"
		case $1 in
		--address) address=$2 ;;
		--port) port=$2 ;;
		--transport) transport=$2 ;;
		--cameras) cameras=$2 ;;
		--columns) columns=$2 ;;
		--tile) tile=$2 ;;
		--fps) fps=$2 ;;
		--out) out=$2 ;;
		--quality) quality=$2 ;;
		--latency) latency=$2 ;;
		--src-props) src_props=$2 ;;
		--stats) stats=$2 ;;
		--ready) ready=$2 ;;
		esac
		shift 2 ;;
	--print) print=1; shift ;;
	-h | --help) usage 0 ;;
	*) die "unexpected argument: $1 (--help lists the options)" ;;
	esac
done

for v in port cameras columns fps quality latency; do
	case ${!v} in '' | *[!0-9]*) die "--$v: not a number: '${!v}'" ;; esac
done
case $tile in
[1-9]*x[1-9]*) tw=${tile%x*} th=${tile#*x} ;;
*) die "--tile: WIDTHxHEIGHT, not '$tile'" ;;
esac
case $tw$th in *[!0-9]*) die "--tile: WIDTHxHEIGHT, not '$tile'" ;; esac
if [ "$cameras" -lt 1 ] || [ "$cameras" -gt 12 ]; then
	die "--cameras: 1 to 12"
fi
if [ "$columns" -lt 1 ] || [ "$fps" -lt 1 ] || [ "$quality" -gt 100 ]; then
	die "--columns and --fps at least 1, --quality at most 100"
fi
case $transport in verbs | shm) ;; *) die "--transport: verbs or shm" ;; esac
case $out in
*.mkv) mux=matroskamux ;;
*) mux=avimux ;;
esac
[ -z "$ready" ] || [ -n "$stats" ] || die "--ready needs --stats"

if [ -z "${GST_PLUGIN_PATH:-}" ] && [ -e "$top/build/gst/libgstrdma.so" ]; then
	export GST_PLUGIN_PATH=$top/build/gst
fi

rows=$(((cameras + columns - 1) / columns))
[ "$cameras" -ge "$columns" ] || columns=$cameras
width=$((columns * tw))
height=$((rows * th))

# The pipeline as gst-launch-1.0 arguments, one word each.
read -r -a extra <<<"$src_props"
desc=(
	rdmasrc name=r transport="$transport" address="$address" port="$port"
	stats-interval=1000 "${extra[@]}"
	compositor name=comp background=black start-time-selection=first latency=$((latency * 1000000))
)
for ((i = 0; i < cameras; i++)); do
	col=$((i % columns)) row=$((i / columns))
	desc+=("sink_$i::xpos=$((col * tw))" "sink_$i::ypos=$((row * th))")
done
desc+=(
	! "video/x-raw,width=$width,height=$height,framerate=$fps/1"
	! videoconvert ! jpegenc quality="$quality" ! "$mux" ! filesink location="$out"
)
for ((i = 0; i < cameras; i++)); do
	desc+=(
		"r.src_$i" ! queue ! decodebin ! videoscale ! videoconvert
		! "video/x-raw,width=$tw,height=$th,pixel-aspect-ratio=1/1"
		! "comp.sink_$i"
	)
done

if [ -n "$print" ]; then
	printf 'gst-launch-1.0 -e'
	printf ' %q' "${desc[@]}"
	printf '\n'
	exit 0
fi

printf '%s: %d camera(s) from %s port %s -> %dx%d mosaic, %s\n' "$prog" \
	"$cameras" "$transport" "$port" "$width" "$height" "$out" >&2
if [ -n "$stats" ]; then
	run=("$here/rig-run.py" --label "$prog" --stats "$stats")
	[ -z "$ready" ] || run+=(--ready "$ready")
	exec "${run[@]}" -- "${desc[@]}"
fi
exec gst-launch-1.0 -e "${desc[@]}"
