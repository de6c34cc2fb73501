#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Stage 2 of the Soft-RoCE test VM: PID 1 after switch_root into the
# host's root filesystem (read-only 9p + tmpfs overlay).  run-in-vm.sh
# copies this file into the per-run control directory, which is mounted
# at /run/sbr, together with:
#   job.sh   sets sbr_cwd, sbr_family (rxe or siw) and the command's argv
#            (`set -- ...`)
#   env.sh   `export NAME='value'` lines for the command's environment
# and this script writes back:
#   ready    once the RDMA device is usable (the host times the boot on it)
#   status   the command's exit status
#   error    a message if the VM could not be set up (no status then)
#
# Setup messages go to the console (a log file on the host, shown only on
# failure); the command's stdout and stderr go to two virtio-serial ports
# that the host streams live.

set -eu
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

ctl=/run/sbr

log() {
	echo "softroce guest: $*"
}

# PID 1 must never return (that would be a kernel panic).  Flush the
# shared directories first: the host reads the status file after qemu
# exits.  busybox's poweroff -f skips init and calls reboot(2) directly;
# sysrq 'o' is the fallback if busybox is somehow missing.
halt() {
	sync
	busybox poweroff -f 2>/dev/null || true
	echo o >/proc/sysrq-trigger
	while :; do sleep 60; done
}

fail() {
	log "$*"
	printf '%s\n' "$*" >"$ctl/error" || true
	halt
}

# Anything unexpected (set -e) still ends in an orderly power-off.
trap 'fail "setup script exited unexpectedly"' EXIT

mkdir -p /dev/pts /dev/shm
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /dev/pts
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /dev/shm
echo softroce >/proc/sys/kernel/hostname

sbr_cwd=
sbr_family=rxe
# shellcheck source=/dev/null
. "$ctl/job.sh"
case $sbr_family in
rxe | siw) ;;
*) fail "unknown NIC family '$sbr_family'" ;;
esac

# The host's working directory, read-write at the same path, so build
# trees made on the host run unchanged and results land on the host.
# cache=mmap: no caching (the host sees every write at once) except what
# shared writable mappings need.
mkdir -p "$sbr_cwd" || fail "cannot create $sbr_cwd"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=mmap \
	sbr-cwd "$sbr_cwd" || fail "cannot mount the working directory"

ip link set lo up || fail "cannot bring lo up"

# The initramfs loaded these already; modprobe is a harmless fallback
# (not for siw, built out of tree: the initramfs is its only way in).
if [ "$sbr_family" = rxe ]; then
	modprobe -a ib_uverbs rdma_ucm rdma_rxe veth 2>/dev/null || true
else
	modprobe -a ib_uverbs rdma_ucm veth 2>/dev/null || true
	[ -d /sys/module/siw ] || fail "the siw module is not loaded (see the console above)"
fi

# rxe and siw need a netdev with carrier; a veth pair gives one without
# any real NIC.  MTU 9000 lets RoCE use active_mtu 4096 (1500 would give
# 1024).
ip link add veth0 mtu 9000 type veth peer name veth1 mtu 9000 ||
	fail "cannot create the veth pair"
ip addr add 10.77.0.1/24 dev veth0
ip link set veth1 up
ip link set veth0 up
rdma link add "${sbr_family}0" type "$sbr_family" netdev veth0 ||
	fail "rdma link add ${sbr_family}0 failed"

# A second device on the veth's other end, for tests whose RoCE packets
# must cross a netdev (tc/netem faults): rxe loops traffic between a
# device and itself back inside the driver, past every qdisc.  Without
# the policy routing, packets between the two local addresses would take
# lo (the local table comes first) and rxe drops what arrives on lo; with
# it, locally sent packets between them leave by the veth, and
# accept_local lets each end take packets from a local source address.
# siw's TCP connections between the two addresses take the same routes,
# so netem on a veth end sees them too.
ip addr add 10.77.0.2/24 dev veth1
for c in all veth0 veth1; do
	echo 1 >"/proc/sys/net/ipv4/conf/$c/accept_local"
	echo 0 >"/proc/sys/net/ipv4/conf/$c/rp_filter"
done
ip rule add pref 10 from 10.77.0.1 to 10.77.0.2 iif lo lookup 100
ip rule add pref 11 from 10.77.0.2 to 10.77.0.1 iif lo lookup 101
ip route add 10.77.0.2 dev veth0 table 100
ip route add 10.77.0.1 dev veth1 table 101
ip rule add pref 100 lookup local
ip rule del pref 0
rdma link add "${sbr_family}1" type "$sbr_family" netdev veth1 ||
	fail "rdma link add ${sbr_family}1 failed"

# A bond for tests of a failover: the kernel raises RDMA_CM_EVENT_ADDR_CHANGE
# only on NETDEV_BONDING_FAILOVER, for ids bound to the bond whose MAC
# changed (drivers/infiniband/core/cma.c, cma_netdev_change).  In
# active-backup mode the bond's MAC changes on failover only with
# fail_over_mac=active (it takes the new active slave's).  The slaves are
# veths whose peers stay up (carrier); loading the module made a bond0 of
# the default mode (the initramfs's insmod has no max_bonds=0), so it is
# made afresh.  Optional: without it only the bond's tests skip.
setup_bond() {
	[ -d /sys/module/bonding ] || modprobe bonding 2>/dev/null || return 1
	ip link del bond0 2>/dev/null || true
	ip link add bond0 mtu 9000 type bond mode active-backup \
		fail_over_mac active miimon 100 || return 1
	for s in bslave0 bslave1; do
		ip link add "$s" mtu 9000 type veth peer name "${s}p" mtu 9000 &&
			ip link set "${s}p" up &&
			ip link set "$s" master bond0 || return 1
	done
	ip addr add 10.77.1.1/24 dev bond0 &&
		ip link set bond0 up &&
		rdma link add "${sbr_family}2" type "$sbr_family" netdev bond0
}
bond=
if setup_bond; then
	bond=${sbr_family}2
else
	log "no bond (bonding module missing?): the bond failover tests will skip"
fi

for dev in "${sbr_family}0" "${sbr_family}1" $bond; do
	state=/sys/class/infiniband/$dev/ports/1/state
	i=0
	until grep -q ACTIVE "$state" 2>/dev/null; do
		i=$((i + 1))
		[ "$i" -le 300 ] || fail "$dev port not ACTIVE after 30 s: $(cat "$state" 2>&1)"
		sleep 0.1
	done
done

# Verbs applications register memory; the default 8 MiB lock limit is far
# too small for them.  (dash, the guest's /bin/sh, has ulimit -l.)
# shellcheck disable=SC3045
ulimit -l unlimited || fail "ulimit -l unlimited failed"

# Without udev there are no /dev/virtio-ports/NAME links: look the ports
# up by name in sysfs.
port() {
	for p in /sys/class/virtio-ports/*; do
		if [ "$(cat "$p/name" 2>/dev/null)" = "$1" ]; then
			echo "/dev/${p##*/}"
			return 0
		fi
	done
	return 1
}
out=$(port sbr.stdout) || fail "no sbr.stdout port"
err=$(port sbr.stderr) || fail "no sbr.stderr port"

: >"$ctl/ready"

# The command: argv exec'ed as is (no shell in between), in the shared
# working directory, stdin from /dev/null, with the environment the host
# passed.  A subshell keeps env.sh (e.g. LD_LIBRARY_PATH pointing into a
# build tree) away from the tools above.
set +e
(
	cd "$sbr_cwd" || exit 125
	export TERM=dumb
	# shellcheck source=/dev/null
	. "$ctl/env.sh"
	if [ -n "$bond" ]; then
		export SBR_RDMA_BOND_ADDR=10.77.1.1 SBR_RDMA_BOND_DEV="$bond" \
			SBR_RDMA_BOND_NETDEV=bond0
	fi
	exec "$@"
) </dev/null >"$out" 2>"$err"
status=$?
set -e

trap - EXIT
printf '%s\n' "$status" >"$ctl/status"
halt
