#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Run a command inside a throw-away VM that has a Soft-RoCE (rxe) or a
# soft-iWARP (siw) device, so the project's RDMA code can be tested with
# real verbs on machines without an RDMA NIC (and with kernels without
# RDMA support at all).
#
#   tests/softroce/run-in-vm.sh [--family rxe|siw] [--timeout SECONDS] \
#       [--cpus N] [--mem MB] -- COMMAND [ARGS...]
#
# COMMAND is exec'ed with its ARGS as given (no shell in between: use
# `sh -c '...'` for pipelines and the like), in the guest, in the same
# working directory as here.  That directory is shared read-write at the
# same path; the rest of the host's root filesystem is visible read-only
# with a RAM overlay for writes, so binaries built here run unchanged.
# Passed through: PATH, LD_LIBRARY_PATH, HOME and every SBR_*, GST_*, G_*
# variable; also exported: SBR_RDMA_ADDR=10.77.0.1 SBR_RDMA_DEV=rxe0
# SBR_RDMA_SRC_ADDR=10.77.0.2 SBR_RDMA_SRC_NETDEV=veth1 (siw0 for
# --family siw; the rest is the same, so tests run unchanged).
# In the guest, rxe0 (on veth0, MTU 9000, 10.77.0.1) is ACTIVE, lo is up
# and `ulimit -l` is unlimited.  Talk to yourself: server and client
# processes both use 10.77.0.1.  A second device, rxe1 on veth1
# (10.77.0.2), is there for tests whose packets must cross a netdev (tc
# and netem faults): a client that binds 10.77.0.2 reaches 10.77.0.1 over
# the veth pair; rxe0 talking to itself never leaves the driver.
# A third, rxe2, is on bond0 (active-backup, fail_over_mac=active, over
# two veth slaves; 10.77.1.1), for tests of a bond failing over: then
# SBR_RDMA_BOND_ADDR, SBR_RDMA_BOND_DEV and SBR_RDMA_BOND_NETDEV=bond0
# are exported too (not if the bond could not be made).
#
# --family (or SBR_VM_FAMILY) chooses the NIC family, one per boot, on
# both veth ends (rdma_cm resolves an address to one device: never rxe and
# siw on one netdev):
#   rxe   Soft-RoCE (default): RoCE v2, type-2 memory windows.
#   siw   soft-iWARP: siw0 and siw1 instead of rxe0 and rxe1; iWARP over
#         the kernel's TCP, no memory windows.  Debian's kernel has no
#         siw.ko, so the first run builds one from linux-source-X.Y
#         against linux-headers-KVER (build-siw.sh installs them; about a
#         minute) and caches it beside the kernel.
#
# The command's stdout and stderr are streamed here; the script exits
# with the command's exit status, 124 if the timeout (default 1200 s,
# boot included) expired, 125 if the VM could not be set up, 2 on usage
# errors.  stdin is not used (it is /dev/null in the guest).
#
# Environment:
#   SBR_VM_ACCEL=kvm|tcg   override the accelerator choice
#   SBR_VM_FAMILY=rxe|siw  the default of --family
#   SBR_VM_CACHE=DIR       where the extracted kernel, the initramfs and
#                          siw.ko are kept, per kernel version (default
#                          $XDG_CACHE_HOME/sbr-softroce, i.e.
#                          ~/.cache/sbr-softroce)
#   SBR_VM_KVER=VERSION    guest kernel (default: newest in /boot whose
#                          modules include rdma_rxe)
#   SBR_VM_DEBUG=1         show the guest console and qemu's messages
#
# How: boot the distribution kernel (uncompressed: saves seconds under
# TCG) with a tiny busybox initramfs (initramfs-init.sh), switch_root into
# the host root shared over 9p, set up rxe there (guest-init.sh), run the
# command, power off.  The guest's stdout and stderr travel separately, so
# their relative order is not kept (each is line-accurate).  Debian only
# (apt-get, linux-image-amd64 ships rdma_rxe, linux-source-X.Y siw).

set -eu

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
prog=softroce

msg() {
	printf '%s: %s\n' "$prog" "$*" >&2
}

usage() {
	sed -n '/^#   tests/,/^#       \[--/s/^# \{0,3\}//p' "${BASH_SOURCE[0]}" >&2
	exit 2
}

die_usage() {
	msg "$*"
	usage
}

# Exit 125 (VM failure) with a message.
die() {
	msg "$*"
	exit 125
}

timeout=1200
cpus=2
mem=2048
family=${SBR_VM_FAMILY:-rxe}
while [ $# -gt 0 ]; do
	case $1 in
	--family) [ $# -ge 2 ] || die_usage "$1 needs a value"; family=$2; shift 2 ;;
	--family=*) family=${1#*=}; shift ;;
	--timeout) [ $# -ge 2 ] || die_usage "$1 needs a value"; timeout=$2; shift 2 ;;
	--timeout=*) timeout=${1#*=}; shift ;;
	--cpus) [ $# -ge 2 ] || die_usage "$1 needs a value"; cpus=$2; shift 2 ;;
	--cpus=*) cpus=${1#*=}; shift ;;
	--mem) [ $# -ge 2 ] || die_usage "$1 needs a value"; mem=$2; shift 2 ;;
	--mem=*) mem=${1#*=}; shift ;;
	-h | --help) usage ;;
	--) shift; break ;;
	*) die_usage "unexpected argument: $1" ;;
	esac
done
[ $# -gt 0 ] || die_usage "no command given"
for v in "$timeout" "$cpus" "$mem"; do
	case $v in '' | *[!0-9]* | 0) die_usage "not a positive integer: '$v'" ;; esac
done
case $family in
rxe | siw) ;;
*) die_usage "--family (SBR_VM_FAMILY) must be rxe or siw, not '$family'" ;;
esac

cwd=$(pwd -P)
# The working directory is mounted over its own path in the guest; doing
# that with / would hide the whole system.
[ "$cwd" != / ] || die_usage "run it from a directory other than /"

qpid=
tail_pids=()
build_tmp=
run=

# Every exit path ends here: qemu is killed by PID (it would otherwise
# keep running, headless, forever), and so are the output streamers.
# shellcheck disable=SC2317 # called from the EXIT trap
cleanup() {
	if [ -n "$qpid" ]; then
		kill -KILL "$qpid" 2>/dev/null || true
	fi
	if [ ${#tail_pids[@]} -gt 0 ]; then
		kill "${tail_pids[@]}" 2>/dev/null || true
		wait "${tail_pids[@]}" 2>/dev/null || true
	fi
	[ -z "$build_tmp" ] || rm -rf "$build_tmp"
	[ -z "$run" ] || rm -rf "$run"
}
trap cleanup EXIT
trap 'msg "interrupted"; exit 130' INT
trap 'msg "terminated"; exit 143' TERM
trap 'exit 129' HUP

# --- Packages -------------------------------------------------------------
# CI starts from a fresh Debian machine: install whatever is missing (and
# only then run apt-get update).  The kernel package is only required if
# /boot has no kernel with rdma_rxe (see find_kernel below).

pkgs=(qemu-system-x86 busybox-static kmod cpio xz-utils iproute2 rdma-core
	ibverbs-providers ibverbs-utils rdmacm-utils perftest util-linux)

pkg_installed() {
	dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

# newest kernel in /boot whose modules have rdma_rxe, or SBR_VM_KVER
find_kernel() {
	local v k
	if [ -n "${SBR_VM_KVER:-}" ]; then
		echo "$SBR_VM_KVER"
		return 0
	fi
	for v in /boot/vmlinuz-*; do
		[ -e "$v" ] || continue
		k=${v#/boot/vmlinuz-}
		compgen -G "/lib/modules/$k/kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko*" >/dev/null &&
			echo "$k"
	done | sort -V | tail -n 1
}

ensure_packages() {
	local missing=() p
	command -v dpkg-query >/dev/null || return 0 # not Debian: hope for the best
	for p in "${pkgs[@]}"; do
		pkg_installed "$p" || missing+=("$p")
	done
	[ -n "$(find_kernel)" ] || missing+=(linux-image-amd64)
	[ ${#missing[@]} -gt 0 ] || return 0

	local sudo=()
	if [ "$(id -u)" != 0 ]; then
		command -v sudo >/dev/null || die "missing packages (${missing[*]}); run as root to install them"
		sudo=(sudo -n)
	fi
	msg "installing ${missing[*]}"
	# INITRD=No: the kernel package would otherwise build Debian's large
	# initramfs, which the VM never uses (it has its own).  Lock::Timeout:
	# wait for another apt/dpkg run (e.g. unattended-upgrades) to finish
	# rather than fail at once.
	local apt=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive INITRD=No
		apt-get -q -o DPkg::Lock::Timeout=600)
	"${apt[@]}" update >&2 || die "apt-get update failed"
	"${apt[@]}" install -y --no-install-recommends "${missing[@]}" >&2 ||
		die "apt-get install ${missing[*]} failed"
}
# One installer at a time: two VMs started side by side on a fresh machine
# (tests/softroce/ci-vms.sh) both install, and `apt-get update` fails at
# once on the package lists' lock the other holds (DPkg::Lock::Timeout
# covers only dpkg's lock).  The second then finds the packages there.
exec {apt_lock}>/run/lock/sbr-softroce-apt.lock
flock "$apt_lock"
ensure_packages
exec {apt_lock}>&-

kver=$(find_kernel)
[ -n "$kver" ] || die "no kernel with rdma_rxe in /boot (install linux-image-amd64)"
vmlinuz=/boot/vmlinuz-$kver
[ -r "$vmlinuz" ] || die "cannot read $vmlinuz"

# --- Accelerator ------------------------------------------------------------
# KVM only on real kvm_intel/kvm_amd: the paravirtual kvm_pvm found on some
# cloud VMs exposes /dev/kvm but boots this kernel unusably slowly.
accel=${SBR_VM_ACCEL:-}
if [ -z "$accel" ]; then
	accel=tcg
	if { [ -d /sys/module/kvm_intel ] || [ -d /sys/module/kvm_amd ]; } &&
		[ -r /dev/kvm ] && [ -w /dev/kvm ]; then
		accel=kvm
	fi
fi
case $accel in
kvm) accel_args=(-accel kvm -cpu host) ;;
tcg) accel_args=(-accel "tcg,thread=multi" -cpu max) ;;
*) die_usage "SBR_VM_ACCEL must be kvm or tcg, not '$accel'" ;;
esac

# --- Kernel and initramfs cache -------------------------------------------

cache=${SBR_VM_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/sbr-softroce}/$kver
mkdir -p "$cache" || die "cannot create $cache"

# Files are built under a temporary name and renamed into place, so
# concurrent runs never see half-written ones.  Their names carry the
# size and mtime of /boot/vmlinuz-$kver: a rebuilt package with the same
# version string (Debian does that) must not reuse a stale kernel.
kstamp=$(stat -L -c '%s-%Y' "$vmlinuz")
make_tmp() {
	build_tmp=$(mktemp -d "$cache/.build.XXXXXX") || die "mktemp in $cache failed"
}

# The uncompressed ELF kernel.  The bzImage's decompressor is slow under
# TCG (~6 s per boot); qemu boots an ELF vmlinux directly (PVH entry).
# Debian's x86 kernels are xz-compressed: find the xz stream's magic and
# decompress from there.  If that fails, boot the bzImage as it is.
kernel=$cache/vmlinux-$kstamp
if [ ! -s "$kernel" ]; then
	make_tmp
	off=$(LC_ALL=C grep -obUaP '\xFD7zXZ\x00' "$vmlinuz" | head -n 1 | cut -d: -f1) || off=
	if [ -n "$off" ] &&
		tail -c +$((off + 1)) "$vmlinuz" | xz -dc --single-stream >"$build_tmp/vmlinux" 2>/dev/null &&
		[ "$(head -c 4 "$build_tmp/vmlinux" | od -An -tx1 | tr -d ' \n')" = 7f454c46 ]; then
		mv -f "$build_tmp/vmlinux" "$kernel"
		for f in "$cache"/vmlinux-*; do
			[ "$f" = "$kernel" ] || rm -f "$f"
		done
	else
		msg "could not extract an uncompressed kernel from $vmlinuz; booting it compressed (slower)"
		kernel=$vmlinuz
	fi
	rm -rf "$build_tmp"
	build_tmp=
fi

# soft-iWARP: Debian's kernel has none, so it is built here once per
# kernel (build-siw.sh) and kept beside the kernel, with the same stamp.
siw_ko=
if [ "$family" = siw ]; then
	siw_ko=$cache/siw-$kstamp.ko
	if [ ! -s "$siw_ko" ]; then
		make_tmp
		"$here/build-siw.sh" "$kver" "$build_tmp/siw.ko" ||
			die "could not build the soft-iWARP driver (siw.ko) for $kver (see above); --family rxe needs none"
		mv -f "$build_tmp/siw.ko" "$siw_ko"
		for f in "$cache"/siw-*.ko; do
			[ "$f" = "$siw_ko" ] || rm -f "$f"
		done
		rm -rf "$build_tmp"
		build_tmp=
	fi
fi

# Modules needed before the real root is mounted (virtio, 9p, overlay)
# plus the RDMA ones (loading them here is quicker than modprobe over 9p).
# bonding: the bond whose failover raises ADDR_CHANGE (guest-init.sh).
modules=(virtio_pci virtio_console 9pnet_virtio 9p overlay crc32_generic
	crc32_pclmul veth bonding ib_uverbs rdma_ucm)
case $family in
rxe) modules+=(rdma_rxe) ;;
siw)
	# What siw.ko depends on (ib_core, libcrc32c), from its own modinfo;
	# libcrc32c's soft dependencies (the crc32c implementations it asks
	# the crypto API for) come with it from modprobe --show-depends: the
	# initramfs has no modprobe for the kernel to call.
	deps=$(modinfo -F depends "$siw_ko") || die "modinfo $siw_ko failed"
	IFS=, read -r -a siw_deps <<<"$deps"
	modules+=(libcrc32c "${siw_deps[@]}")
	;;
esac

# The initramfs name carries a hash of everything it is made of, so a
# change to initramfs-init.sh or to the module list rebuilds it.
initrd_key=$({
	echo "recipe 1 $kstamp"
	echo "${modules[*]}"
	cat "$here/initramfs-init.sh"
	[ -z "$siw_ko" ] || sha256sum <"$siw_ko"
} | sha256sum | cut -c1-16)
initrd=$cache/initramfs-$family-$initrd_key.cpio
if [ ! -s "$initrd" ]; then
	msg "building the initramfs for $kver ($family)"
	make_tmp
	root=$build_tmp/root
	mkdir -p "$root"/{bin,dev,proc,sys,modules}
	cp /bin/busybox "$root/bin/busybox"
	cp "$here/initramfs-init.sh" "$root/init"
	chmod 0755 "$root/init" "$root/bin/busybox"
	# insmod order: each module after its dependencies, each once.
	for m in "${modules[@]}"; do
		modprobe -S "$kver" --show-depends "$m" >>"$build_tmp/deps" ||
			die "module $m not found for kernel $kver"
	done
	awk '$1 == "insmod" && !seen[$2]++ { print $2 }' "$build_tmp/deps" >"$build_tmp/paths"
	while read -r path; do
		name=${path##*/}
		# busybox insmod cannot read compressed modules: store them plain
		case $name in
		*.ko.xz) xz -dc "$path" >"$root/modules/${name%.xz}"; name=${name%.xz} ;;
		*.ko.zst) zstd -qdc "$path" >"$root/modules/${name%.zst}"; name=${name%.zst} ;;
		*.ko.gz) gzip -dc "$path" >"$root/modules/${name%.gz}"; name=${name%.gz} ;;
		*) cp "$path" "$root/modules/$name" ;;
		esac
		echo "$name" >>"$root/modules/order"
	done <"$build_tmp/paths"
	if [ -n "$siw_ko" ]; then
		cp "$siw_ko" "$root/modules/siw.ko"
		echo siw.ko >>"$root/modules/order"
	fi
	# Uncompressed: unpacking a few MB is cheaper than inflating them on an
	# emulated CPU.
	(cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) >"$build_tmp/initrd" ||
		die "cpio failed"
	mv -f "$build_tmp/initrd" "$initrd"
	# Drop initramfs files of older recipes of this family, and those
	# named before there were families (never this one: a concurrent run
	# may have just built it and be about to boot it; nor the other
	# family's, which a concurrent run may be booting).
	for f in "$cache"/initramfs-"$family"-*.cpio "$cache"/initramfs-[0-9a-f]*.cpio; do
		[ "$f" = "$initrd" ] || rm -f "$f"
	done
	rm -rf "$build_tmp"
	build_tmp=
fi

# --- The run ----------------------------------------------------------------

run=$(mktemp -d "${TMPDIR:-/tmp}/sbr-softroce.XXXXXX") || die "mktemp failed"
ctl=$run/ctl
mkdir "$ctl"

# Single-quote a string for sh (dash in the guest: no bash $'...').
shq() {
	local s=${1//\'/\'\\\'\'}
	printf "'%s'" "$s"
}

{
	printf 'sbr_cwd=%s\n' "$(shq "$cwd")"
	printf 'sbr_family=%s\n' "$family"
	printf 'set --'
	for a in "$@"; do printf ' %s' "$(shq "$a")"; done
	printf '\n'
} >"$ctl/job.sh"

{
	while IFS= read -r name; do
		case $name in
		PATH | LD_LIBRARY_PATH | HOME | SBR_* | GST_* | G_*)
			printf 'export %s=%s\n' "$name" "$(shq "${!name}")" ;;
		esac
	done < <(compgen -e)
	echo "export SBR_RDMA_ADDR=10.77.0.1 SBR_RDMA_DEV=${family}0"
	echo "export SBR_RDMA_SRC_ADDR=10.77.0.2 SBR_RDMA_SRC_NETDEV=veth1"
} >"$ctl/env.sh"

cp "$here/guest-init.sh" "$ctl/guest-init.sh"
: >"$run/stdout"
: >"$run/stderr"
: >"$run/console.log"

# qemu's option syntax doubles commas inside values.
qpath() {
	printf '%s' "${1//,/,,}"
}

# Kernel command line: quiet console on the (logged) serial port; panic=-1
# plus -no-reboot turn any guest panic into qemu exiting.  no_timer_check:
# at boot the kernel counts timer ticks through the IO-APIC for a few
# emulated milliseconds and panics ("IO-APIC + timer doesn't work!") when
# too few came; a TCG guest on a loaded host gets too few (a clean-clone
# CI on a new machine, the host suites and apt beside it), although its
# timer works.  Cloud images pass it for the same reason.
append="console=ttyS0 quiet loglevel=3 panic=-1 no_timer_check rdinit=/init"

# shellcheck disable=SC2054 # the commas are qemu's, not array separators
qemu_args=(
	-nodefaults -no-user-config -display none -no-reboot
	"${accel_args[@]}" -smp "$cpus" -m "$mem"
	-kernel "$kernel" -initrd "$initrd" -append "$append"
	-chardev "file,id=con,path=$(qpath "$run/console.log")"
	-serial chardev:con
	# multidevs=remap keeps inode numbers unique across the host's mounts
	-fsdev local,id=fsroot,path=/,security_model=none,readonly=on,multidevs=remap
	-device virtio-9p-pci,fsdev=fsroot,mount_tag=sbr-root
	-fsdev "local,id=fsctl,path=$(qpath "$ctl"),security_model=none,multidevs=remap"
	-device virtio-9p-pci,fsdev=fsctl,mount_tag=sbr-ctl
	-fsdev "local,id=fscwd,path=$(qpath "$cwd"),security_model=none,multidevs=remap"
	-device virtio-9p-pci,fsdev=fscwd,mount_tag=sbr-cwd
	# Output goes to plain files that tail(1) streams: qemu writes files
	# synchronously, so nothing is lost when the guest powers off right
	# after writing (a full pipe would make qemu hold data back, and drop
	# it at exit).
	-device virtio-serial-pci,id=vser
	-chardev "file,id=out,append=on,path=$(qpath "$run/stdout")"
	-device virtserialport,bus=vser.0,chardev=out,name=sbr.stdout
	-chardev "file,id=err,append=on,path=$(qpath "$run/stderr")"
	-device virtserialport,bus=vser.0,chardev=err,name=sbr.stderr
)

# setpriv --pdeathsig: qemu dies with this script even if the script is
# SIGKILLed and its traps never run.
pdeath=()
if setpriv --help 2>&1 | grep -q pdeathsig; then
	pdeath=(setpriv --pdeathsig KILL --)
fi

now_us() {
	local t=$EPOCHREALTIME
	echo "${t//[!0-9]/}"
}
start=$(now_us)
deadline=$((start + timeout * 1000000))

"${pdeath[@]}" qemu-system-x86_64 "${qemu_args[@]}" </dev/null >"$run/qemu.log" 2>&1 &
qpid=$!
# Out of the job table: bash would otherwise print a "Killed"/"Aborted"
# job notice of its own when qemu dies of a signal.  The loop below
# watches the PID instead of waiting for the job.
disown "$qpid"

# The command's output is streamed from the moment the guest is ready
# (so the "ready" line comes first), by tail -f until qemu is gone.
# -s 0.2: tail checks every 0.2 s whether qemu still runs, then drains
# what is left and exits.  pdeathsig here too: tail only notices qemu's
# end once qemu is reaped, which takes a while if this script was
# SIGKILLed.
stream_output() {
	"${pdeath[@]}" tail -n +1 -s 0.2 --pid="$qpid" -f "$run/stdout" &
	tail_pids+=($!)
	"${pdeath[@]}" tail -n +1 -s 0.2 --pid="$qpid" -f "$run/stderr" >&2 &
	tail_pids+=($!)
}
if [ -n "${SBR_VM_DEBUG:-}" ]; then
	"${pdeath[@]}" tail -n +1 -s 0.2 --pid="$qpid" -f "$run/console.log" "$run/qemu.log" >&2 &
	tail_pids+=($!)
fi

report_ready() {
	ready=$((($(now_us) - start) / 100000))
	msg "VM ready in $((ready / 10)).$((ready % 10)) s ($accel, $family)"
}

# Watchdog loop.  bash reaps its children (disowned too) as soon as they
# exit, so kill -0 fails once qemu is gone.
ready=
timed_out=
while kill -0 "$qpid" 2>/dev/null; do
	if [ -z "$ready" ] && [ -e "$ctl/ready" ]; then
		report_ready
		stream_output
	fi
	if [ "$(now_us)" -ge "$deadline" ]; then
		timed_out=1
		kill -KILL "$qpid" 2>/dev/null || true
		break
	fi
	sleep 0.2
done
qpid=

if [ -n "$ready" ]; then
	# Let the streamers drain the output files; they exit on their own.
	wait "${tail_pids[@]}" 2>/dev/null || true
	tail_pids=()
else
	# The guest finished within one polling interval of being ready (or
	# never got there): no streaming needed, just show what there is.
	[ ! -e "$ctl/ready" ] || report_ready
	cat "$run/stdout"
	cat "$run/stderr" >&2
fi

show_logs() {
	[ -n "${SBR_VM_DEBUG:-}" ] && return 0
	if [ -s "$run/qemu.log" ]; then
		msg "qemu said:"
		sed 's/^/  /' "$run/qemu.log" >&2
	fi
	if [ -s "$run/console.log" ]; then
		msg "last lines of the guest console:"
		tail -n 30 "$run/console.log" | sed 's/^/  /' >&2
	fi
}

if [ -n "$timed_out" ]; then
	msg "timed out after $timeout s${ready:+ (the VM had booted)}; killed the VM"
	show_logs
	exit 124
fi
if [ -s "$ctl/status" ]; then
	status=$(cat "$ctl/status")
	case $status in
	'' | *[!0-9]*) die "bad status '$status' from the guest" ;;
	esac
	exit "$status"
fi
if [ -s "$ctl/error" ]; then
	msg "VM setup failed: $(cat "$ctl/error")"
else
	msg "VM failed: it stopped without running the command"
fi
show_logs
exit 125
