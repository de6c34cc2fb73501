#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The demo: twelve live cameras over one RDMA connection into a 4x3 mosaic.
# Installs what is missing (Debian packages, as root), builds, starts the
# mosaic receiver (pipelines/rig-mosaic.sh) and the 12-camera sender
# (pipelines/rig-send.sh) for a few seconds, and leaves in the output
# directory:
#   mosaic.avi     the mosaic (Motion JPEG), mosaic.png one frame of it
#   stats.txt      per camera: frames produced, sent, received, lost,
#                  pushed by its rdmasrc pad, dropped by each pad policy,
#                  reached the mosaic, frames/s at the mosaic; the mosaic's
#                  own frames; CPU of the sender and of the receiver
#   send.json, recv.json, sender.log, receiver.log   the details
#
#   scripts/demo.sh [--shm] [--seconds N] [--out DIR] [--size WxH]
#                   [--fps N] [--encode C] [--port N] [--where auto|here|rxe|vm]
#                   [--host ADDR] [--build DIR] [--no-setup]
#
#   --shm          same host through shared memory, full size (640x480)
#   --seconds N    how long the cameras run                       [5]
#   --out DIR      output directory                 [<source tree>/demo-out]
#   --size WxH     camera size   [verbs: 160x120 in the VM, else 640x480]
#   --fps N        camera frame rate                              [25]
#   --encode C     the cameras send vp8, h264 or jpeg (one encoder each,
#                  rig-send.sh --encode), the mosaic decodes   [none: RGB]
#   --port N       rdmasrc port                                   [7471]
#   --where W      verbs only: where the RDMA device is
#                  auto  (default) $SBR_RDMA_ADDR if set, else an RDMA
#                        device of this host if one has an IPv4 address,
#                        else a Soft-RoCE device made here if this kernel
#                        has rdma_rxe (root), else the VM
#                  here  an RDMA device of this host (--host or detected)
#                  rxe   make a Soft-RoCE device here: veth pair
#                        sbrdemo0/1, 10.78.0.1, rxe "sbrdemo" (removed after)
#                  vm    both processes in the Soft-RoCE VM of
#                        tests/softroce/run-in-vm.sh (rxe0, 10.77.0.1)
#   --host ADDR    the RDMA address to use (both processes run here)
#   --build DIR    the build directory to use (and make)  [<source tree>/build]
#   --no-setup     skip installing and building (used inside the VM)
#
# Default: verbs, over Soft-RoCE.  In the VM the CPU is emulated (TCG, tens
# of MB/s), hence the smaller frames there; --shm shows the full rig.  Exit
# status 0 when both sides ended cleanly, every figure of stats.txt was
# measured, no frame was lost on the way and every frame a pad pushed
# reached the mosaic (stats.txt ends with "RESULT: OK", which says how many
# frames the pads dropped), 1 otherwise, 2 on usage errors.
set -eu

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
top=$(dirname "$here")
pipelines=$top/pipelines
prog=demo

msg() { printf '%s: %s\n' "$prog" "$*" >&2; }
die() {
	msg "$*"
	exit 1
}
usage() {
	sed -n '4,/^[^#]/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
	exit 0
}
bad() {
	msg "$* (--help lists the options)"
	exit 2
}

transport=verbs
seconds=5
out=$top/demo-out
size=
fps=25
encode=none
port=7471
where=auto
host=
setup=1
build_dir=$top/build
while [ $# -gt 0 ]; do
	case $1 in
	--*=*) opt=${1%%=*} val=${1#*=}; shift; set -- "$opt" "$val" "$@"; continue ;;
	esac
	case $1 in
	--seconds | --out | --size | --fps | --encode | --port | --where | --host | --build)
		[ $# -ge 2 ] || bad "$1 needs a value"
		case $1 in
		--seconds) seconds=$2 ;;
		--out) out=$2 ;;
		--size) size=$2 ;;
		--fps) fps=$2 ;;
		--encode) encode=$2 ;;
		--port) port=$2 ;;
		--where) where=$2 ;;
		--host) host=$2 ;;
		--build) build_dir=$2 ;;
		esac
		shift 2 ;;
	--shm) transport=shm; shift ;;
	--no-setup) setup=; shift ;;
	-h | --help) usage ;;
	*) bad "unexpected argument: $1" ;;
	esac
done
for v in seconds fps port; do
	case ${!v} in '' | *[!0-9]* | 0) bad "--$v: not a positive number: '${!v}'" ;; esac
done
case $where in auto | here | rxe | vm) ;; *) bad "--where: auto, here, rxe or vm" ;; esac
case $encode in none | vp8 | h264 | jpeg) ;; *) bad "--encode: vp8, h264 or jpeg" ;; esac
case $size in
'') ;;
[1-9]*x[1-9]*)
	case ${size%x*}${size#*x} in *[!0-9]*) bad "--size: WIDTHxHEIGHT" ;; esac ;;
*) bad "--size: WIDTHxHEIGHT" ;;
esac
if [ -n "$host" ] && [ "$where" = auto ]; then
	where=here
fi
mkdir -p "$out"
out=$(cd "$out" && pwd -P)

# --- 1. packages -------------------------------------------------------------

# Beyond scripts/install-deps.sh: textoverlay (the pango plugin is in
# gstreamer1.0-x), the Python GStreamer bindings of the rig's helper
# scripts, and iproute2's rdma tool for a Soft-RoCE device on this host.
extra_packages=(gstreamer1.0-x python3-gi gir1.2-gstreamer-1.0
	gir1.2-gst-plugins-base-1.0 iproute2)

install_deps() {
	local missing=() p
	"$top/scripts/install-deps.sh" || die "scripts/install-deps.sh failed"
	command -v dpkg-query >/dev/null || return 0
	for p in "${extra_packages[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
			missing+=("$p")
	done
	[ ${#missing[@]} -gt 0 ] || return 0
	[ "$(id -u)" -eq 0 ] || die "need root to install: ${missing[*]}"
	msg "installing ${missing[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get -qq update
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		"${missing[@]}" >/dev/null
}

# --- 2. build ----------------------------------------------------------------

build() {
	(
		cd "$top"
		[ -f "$build_dir/build.ninja" ] || meson setup "$build_dir" >/dev/null
		ninja -C "$build_dir" >/dev/null
	) || die "the build failed (meson setup $build_dir && ninja -C $build_dir)"
}

if [ -n "$setup" ]; then
	msg "checking packages"
	install_deps
	msg "building"
	build
fi
build_dir=$(cd "$build_dir" && pwd -P)
export GST_PLUGIN_PATH=$build_dir/gst${GST_PLUGIN_PATH:+:$GST_PLUGIN_PATH}
for e in rdmasrc rdmasink videotestsrc textoverlay compositor jpegenc avimux; do
	gst-inspect-1.0 "$e" >/dev/null 2>&1 || die "GStreamer element $e is missing"
done

# --- 3. the rig --------------------------------------------------------------

# Runs the receiver, then the sender, here; writes $out/stats.txt.
#   run_rig TRANSPORT ADDRESS TITLE
run_rig() {
	local transport=$1 addr=$2 title=$3 w h tile rp i status=0
	w=${size%x*} h=${size#*x}
	# Tiles of half size from 320 wide on: the full rig is a 1280x720 mosaic.
	if [ "$w" -ge 320 ]; then tile=$((w / 2))x$((h / 2)); else tile=${w}x$h; fi
	rm -f "$out"/{mosaic.avi,mosaic.png,send.json,recv.json,stats.txt,sender.log,receiver.log,.ready}

	# 64 receive blocks (default 32): room for a couple of frames of every
	# camera while the receiver is busy, so the sender never waits long.
	"$pipelines/rig-mosaic.sh" --transport "$transport" --address "$addr" \
		--port "$port" --tile "$tile" --fps "$fps" --src-props "blocks=64" \
		--out "$out/mosaic.avi" --stats "$out/recv.json" --ready "$out/.ready" \
		>"$out/receiver.log" 2>&1 &
	rp=$!
	for ((i = 0; i < 600; i++)); do
		[ ! -e "$out/.ready" ] || break
		kill -0 "$rp" 2>/dev/null || break
		sleep 0.1
	done
	if [ ! -e "$out/.ready" ]; then
		kill -INT "$rp" 2>/dev/null || true
		wait "$rp" || true
		cat "$out/receiver.log" >&2
		die "the receiver did not start"
	fi

	# wait-timeout 10 s (default 1 s): when the receiver falls behind (an
	# emulated CPU, a loaded host) the cameras wait for free blocks rather
	# than drop frames; stats.txt counts the waits.
	msg "12 cameras ${w}x$h $([ "$encode" = none ] && echo RGB || echo "$encode") $fps fps for $seconds s over $transport ($addr)"
	timeout $((seconds * 10 + 120)) "$pipelines/rig-send.sh" --transport "$transport" \
		--host "$addr" --port "$port" --width "$w" --height "$h" --fps "$fps" \
		--seconds "$seconds" --encode "$encode" --sink-props "wait-timeout=10000" \
		--stats "$out/send.json" >"$out/sender.log" 2>&1 || status=$?
	[ "$status" -eq 0 ] || msg "the sender failed (status $status): see $out/sender.log"

	# The receiver ends with the cameras' EOS; if it hasn't after a while
	# (a sender that never connected), interrupt it: it ends its file.
	for ((i = 0; i < 600; i++)); do
		kill -0 "$rp" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$rp" 2>/dev/null; then
		msg "the receiver did not end with the cameras: interrupting it"
		kill -INT "$rp" 2>/dev/null || true
	fi
	status=0
	wait "$rp" || status=$?
	[ "$status" -eq 0 ] || msg "the receiver failed (status $status): see $out/receiver.log"
	rm -f "$out/.ready"

	"$pipelines/snapshot.py" "$out/mosaic.avi" "$out/mosaic.png" >/dev/null 2>&1 ||
		msg "could not take a frame of the mosaic"
	status=0
	"$pipelines/rig-stats.py" --sender "$out/send.json" --receiver "$out/recv.json" \
		--expected $((seconds * fps)) --title "$title${SBR_DEMO_NOTE:+ $SBR_DEMO_NOTE}" \
		>"$out/stats.txt" || status=$?
	cat "$out/stats.txt"
	return "$status"
}

# --- 4. where ----------------------------------------------------------------

# IPv4 address of the netdev under an RDMA device with one, if any.
rdma_device_addr() {
	local d nd a
	for d in /sys/class/infiniband/*; do
		[ -e "$d" ] || continue
		for nd in "$d"/ports/*/gid_attrs/ndevs/*; do
			[ -r "$nd" ] || continue
			a=$(ip -4 -o addr show dev "$(cat "$nd" 2>/dev/null)" 2>/dev/null |
				awk '{ sub("/.*", "", $4); print $4; exit }') || a=
			if [ -n "$a" ]; then
				echo "$a ${d##*/}"
				return 0
			fi
		done
	done
	return 1
}

rxe_possible() {
	[ "$(id -u)" -eq 0 ] && command -v rdma >/dev/null &&
		modprobe -n -q rdma_rxe 2>/dev/null && modprobe -n -q veth 2>/dev/null
}

rxe_made=
# shellcheck disable=SC2317 # called from the EXIT trap
rxe_remove() {
	[ -n "$rxe_made" ] || return 0
	rdma link delete sbrdemo 2>/dev/null || true
	ip link delete sbrdemo0 2>/dev/null || true
}

# A Soft-RoCE device on this host, as the VM makes it (guest-init.sh).
rxe_make() {
	local state i
	modprobe -a rdma_rxe veth ib_uverbs rdma_ucm || die "cannot load rdma_rxe"
	rxe_made=1
	trap rxe_remove EXIT
	ip link add sbrdemo0 mtu 9000 type veth peer name sbrdemo1 mtu 9000 ||
		die "cannot create the veth pair sbrdemo0/1"
	ip addr add 10.78.0.1/24 dev sbrdemo0
	ip link set sbrdemo1 up
	ip link set sbrdemo0 up
	rdma link add sbrdemo type rxe netdev sbrdemo0 || die "rdma link add sbrdemo failed"
	state=/sys/class/infiniband/sbrdemo/ports/1/state
	for ((i = 0; i < 100; i++)); do
		grep -q ACTIVE "$state" 2>/dev/null && return 0
		sleep 0.1
	done
	die "the Soft-RoCE device sbrdemo did not become ACTIVE"
}

if [ "$transport" = shm ]; then
	size=${size:-640x480}
	run_rig shm 127.0.0.1 \
		"gst-rdma demo: 12 cameras ${size} RGB $fps fps, $seconds s, transport shm (same host, shared memory)"
	exit
fi

if [ "$where" = auto ]; then
	if [ -n "${SBR_RDMA_ADDR:-}" ]; then
		host=$SBR_RDMA_ADDR where=here
	elif found=$(rdma_device_addr); then
		host=${found%% *} where=here
	elif rxe_possible; then
		where=rxe
	else
		where=vm
	fi
fi

case $where in
here)
	if [ -z "$host" ]; then
		found=$(rdma_device_addr) || die "no RDMA device with an IPv4 address here (--host ADDR)"
		host=${found%% *}
	fi
	ulimit -l unlimited 2>/dev/null || true
	size=${size:-640x480}
	devs=
	for d in /sys/class/infiniband/*; do
		[ ! -e "$d" ] || devs="$devs${devs:+ }${d##*/}"
	done
	run_rig verbs "$host" \
		"gst-rdma demo: 12 cameras ${size} RGB $fps fps, $seconds s, transport verbs at $host (RDMA device: ${devs:-?})"
	;;
rxe)
	rxe_possible || die "cannot make a Soft-RoCE device here (root, rdma tool, rdma_rxe module)"
	rxe_make
	ulimit -l unlimited 2>/dev/null || true
	size=${size:-640x480}
	run_rig verbs 10.78.0.1 \
		"gst-rdma demo: 12 cameras ${size} RGB $fps fps, $seconds s, transport verbs over Soft-RoCE (rxe on this host)"
	;;
vm)
	size=${size:-160x120}
	msg "no RDMA here: running both sides in the Soft-RoCE VM (emulated CPU: ${size} frames)"
	# The VM shares the current directory read-write (the rest read-only):
	# run from the output directory so the results land here.
	cd "$out"
	# SBR_* reach the guest: the title says where it ran.
	accel=tcg
	if [ "${SBR_VM_ACCEL:-}" = kvm ] || { [ -z "${SBR_VM_ACCEL:-}" ] &&
		{ [ -d /sys/module/kvm_intel ] || [ -d /sys/module/kvm_amd ]; } && [ -w /dev/kvm ]; }; then
		accel=kvm
	fi
	if [ "$accel" = tcg ]; then
		SBR_DEMO_NOTE="-- in the Soft-RoCE VM under TCG: an emulated CPU, figures show function, not speed"
	else
		SBR_DEMO_NOTE="-- in the Soft-RoCE VM (KVM)"
	fi
	export SBR_DEMO_NOTE
	exec "$top/tests/softroce/run-in-vm.sh" --timeout $((seconds + 900)) -- \
		"$here/demo.sh" --no-setup --where here --host 10.77.0.1 \
		--seconds "$seconds" --out "$out" --size "$size" --fps "$fps" --encode "$encode" \
		--port "$port" --build "$build_dir"
	;;
esac
