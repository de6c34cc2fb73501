#!/bin/busybox sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# shellcheck shell=dash
#
# Stage 1 of the Soft-RoCE test VM: /init of the tiny initramfs that
# run-in-vm.sh builds (busybox + a handful of kernel modules).
#
# Its only job is to assemble the real root and switch_root into it:
#   * the host's root filesystem, shared read-only over 9p (tag sbr-root),
#     with a tmpfs overlay on top so the guest can write anywhere;
#   * a tmpfs on /run with the per-run control directory (tag sbr-ctl)
#     mounted at /run/sbr; it holds stage 2 (guest-init.sh) and the job.
# Everything else (network, rxe, the command) happens in stage 2, which
# runs the host's own tools after switch_root.  switch_root rather than
# chroot matters: the kernel's usermode helpers (request_module ->
# /sbin/modprobe, used by `rdma link add`) resolve paths against the real
# root of PID 1, which chroot would leave pointing at this initramfs.
#
# Any failure powers the VM off without writing a status file; the host
# then reports a VM failure and shows the tail of this console output.

set -eu
export PATH=/bin

/bin/busybox --install -s /bin

die() {
	echo "softroce initramfs: $*"
	# sysrq 'o' is an immediate power-off; qemu runs with -no-reboot, so a
	# panic (PID 1 exiting) would end the VM too, just less politely.
	echo o >/proc/sysrq-trigger
	sleep 30
	exit 1
}

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

# Modules in dependency order (computed on the host with
# `modprobe --show-depends`).  A failure is logged, not fatal: e.g.
# crc32_pclmul needs a CPU feature that some -cpu models lack, and the
# generic crc32 covers for it; anything truly needed fails a mount below.
while read -r mod; do
	insmod "/modules/$mod" || echo "softroce initramfs: insmod $mod failed"
done </modules/order

# 9p over virtio.  msize raises the 8 KiB default so reads of big shared
# libraries take fewer round trips through the (emulated) transport.
p9opts=trans=virtio,version=9p2000.L,msize=262144

# Retry: the virtio devices are probed as their drivers load, and a mount
# could race a probe that is still finishing.
mount9p() {
	tries=0
	until mount -t 9p -o "$p9opts,$3" "$1" "$2"; do
		tries=$((tries + 1))
		[ "$tries" -lt 20 ] || die "cannot mount 9p share $1 on $2"
		sleep 0.1
	done
}

mkdir -p /lower /rw /newroot
# cache=loose: the host root does not change under a test run, so letting
# the guest cache it is safe and saves most 9p round trips.
mount9p sbr-root /lower ro,cache=loose
mount -t tmpfs -o mode=0755 tmpfs /rw
mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work \
	overlay /newroot || die "cannot mount the overlay root"

# A fresh /run: the host's /run (sockets of daemons that do not exist in
# here) would only confuse programs.
mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs /newroot/run
mkdir -p /newroot/run/sbr
mount9p sbr-ctl /newroot/run/sbr cache=none
[ -r /newroot/run/sbr/guest-init.sh ] || die "no guest-init.sh in the control share"

for fs in dev proc sys; do
	mount --move "/$fs" "/newroot/$fs"
done

# The host's /bin/sh (dash on Debian) runs stage 2.
exec switch_root /newroot /bin/sh /run/sbr/guest-init.sh
