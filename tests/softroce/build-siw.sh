#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Build the soft-iWARP driver (siw.ko) for a Debian kernel that lacks it.
#
#   tests/softroce/build-siw.sh KVER OUTPUT
#
# Debian's 6.1 kernels are configured with CONFIG_RDMA_SIW unset, so there
# is no siw.ko to load; but Debian ships the kernel's sources
# (linux-source-X.Y, a tarball under /usr/src) and the headers of each
# kernel build (linux-headers-KVER), and drivers/infiniband/sw/siw builds
# out of tree against those.  This script installs what is missing (make,
# the headers, the sources of the kernel package's own version where the
# archive still has it), extracts just the siw directory, builds it, checks
# that the module's vermagic names KVER, strips its debug info (the VM
# unpacks it on an emulated CPU) and writes it to OUTPUT.
#
# run-in-vm.sh --family siw calls this once per kernel and caches OUTPUT
# beside the VM's kernel.  Exit status 0 on success; anything else comes
# with a message on stderr that says what to install or where the
# compiler's log is.

set -eu

prog=build-siw

msg() {
	printf '%s: %s\n' "$prog" "$*" >&2
}

die() {
	msg "$*"
	exit 1
}

[ $# -eq 2 ] || die "usage: $0 KVER OUTPUT"
kver=$1
out=$2

work=
# shellcheck disable=SC2317 # called from the EXIT trap
cleanup() {
	[ -z "$work" ] || rm -rf "$work"
}
trap cleanup EXIT

pkg_installed() {
	dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

# linux-source-6.1 for 6.1.0-56-amd64: the sources are packaged per
# major.minor, the headers per build.
series=$(printf '%s\n' "$kver" | sed -n 's/^\([0-9]\+\.[0-9]\+\)\..*/\1/p')
[ -n "$series" ] || die "cannot tell the kernel series of '$kver'"
src_pkg=linux-source-$series
hdr_pkg=linux-headers-$kver
tarball=/usr/src/linux-source-$series.tar.xz

# The sources of the very version the kernel package was built from, so
# siw matches the rest of the kernel; the archive keeps a few older point
# releases (bookworm-security), not all of them.
kernel_version=
if command -v dpkg-query >/dev/null; then
	kernel_version=$(dpkg-query -W -f='${source:Version}' "linux-image-$kver" 2>/dev/null) ||
		kernel_version=
fi

apt=()
# Runs apt-get update once, as the runner does (run-in-vm.sh,
# ensure_packages): as root or through sudo -n, waiting for another apt
# run rather than failing.
apt_update() {
	[ ${#apt[@]} -eq 0 ] || return 0
	local sudo=()
	if [ "$(id -u)" != 0 ]; then
		command -v sudo >/dev/null ||
			die "missing packages ($*); run as root to install them"
		sudo=(sudo -n)
	fi
	apt=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive INITRD=No
		apt-get -q -o DPkg::Lock::Timeout=600)
	"${apt[@]}" update >&2 || die "apt-get update failed"
}

ensure_packages() {
	local missing=()
	command -v dpkg-query >/dev/null ||
		die "not a Debian system: build siw.ko for $kver by hand (drivers/infiniband/sw/siw, CONFIG_RDMA_SIW=m)"
	pkg_installed make || missing+=(make)
	pkg_installed "$hdr_pkg" || missing+=("$hdr_pkg")
	if ! pkg_installed "$src_pkg"; then
		missing+=("$src_pkg")
	elif [ -n "$kernel_version" ] &&
		[ "$(dpkg-query -W -f='${Version}' "$src_pkg")" != "$kernel_version" ]; then
		missing+=("$src_pkg") # another point release: try for the right one
	fi
	[ ${#missing[@]} -gt 0 ] || return 0

	msg "installing ${missing[*]} (to build siw.ko for $kver)"
	apt_update "${missing[@]}"
	# The sources pinned to the kernel's version if the archive has it.
	local i
	for i in "${!missing[@]}"; do
		if [ "${missing[$i]}" != "$src_pkg" ] || [ -z "$kernel_version" ]; then
			continue
		fi
		if apt-cache madison "$src_pkg" | awk -F'|' '{ gsub(/ /, "", $2); print $2 }' |
			grep -qxF -- "$kernel_version"; then
			missing[i]=$src_pkg=$kernel_version
		else
			msg "the archive has no $src_pkg $kernel_version (the kernel's version); using its newest"
		fi
	done
	"${apt[@]}" install -y --no-install-recommends --allow-downgrades "${missing[@]}" >&2 ||
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

kbuild=/lib/modules/$kver/build
[ -e "$kbuild/Makefile" ] || die "no kernel headers at $kbuild (package $hdr_pkg)"
[ -r "$tarball" ] || die "no kernel sources at $tarball (package $src_pkg)"

work=$(mktemp -d "${TMPDIR:-/tmp}/sbr-siw.XXXXXX") || die "mktemp failed"
msg "building siw.ko for $kver from $tarball"

# Only the driver's directory: tar still reads the whole stream, but
# writes a few hundred KB instead of a full tree.
tar -xJf "$tarball" -C "$work" --wildcards '*/drivers/infiniband/sw/siw/*' ||
	die "could not extract drivers/infiniband/sw/siw from $tarball"
dir=$(find "$work" -type d -path '*/drivers/infiniband/sw/siw' | head -n 1)
if [ -z "$dir" ] || [ ! -e "$dir/Makefile" ]; then
	die "$tarball has no drivers/infiniband/sw/siw"
fi

# The driver's own Makefile (obj-$(CONFIG_RDMA_SIW) += siw.o) with the
# option set on the command line; Kbuild's out-of-tree module build.
jobs=$(nproc 2>/dev/null || echo 1)
if ! make -C "$kbuild" M="$dir" CONFIG_RDMA_SIW=m -j"$jobs" modules \
	>"$work/build.log" 2>&1; then
	tail -n 40 "$work/build.log" >&2
	die "building siw.ko against $kbuild failed (the compiler's last lines are above)"
fi
ko=$dir/siw.ko
[ -s "$ko" ] || die "the build made no siw.ko"

# A module built against other headers would be refused by the kernel
# with a terse "Invalid module format"; say it here instead.
magic=$(/sbin/modinfo -F vermagic "$ko" 2>/dev/null || modinfo -F vermagic "$ko")
case $magic in
"$kver "*) ;;
*) die "siw.ko has vermagic '$magic', not for $kver" ;;
esac

# Debian builds with debug info; the VM doesn't need it.
strip --strip-debug "$ko" 2>/dev/null || true
cp "$ko" "$out" || die "cannot write $out"
msg "built $out"
