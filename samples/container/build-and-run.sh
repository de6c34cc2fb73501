#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Builds samples/container's image without a container registry and runs the
# receiver container against a sender on this host over shm.  One command,
# as root, on Debian 12 (a fresh machine is fine: it installs what it needs):
#
#   samples/container/build-and-run.sh [--frames N] [--port N]
#
# 1. The base image the Containerfile names (FROM docker.io/library/debian:12)
#    is made the offline way: debootstrap a Debian 12 root from the apt
#    mirror this machine is configured with, tar it, `podman import` it under
#    that name.  The tarball is cached under $SBR_CONTAINER_CACHE
#    (/var/cache/gst-rdma-container), so only the first run pays for it.
# 2. `podman build` of samples/container/Containerfile from this checkout
#    (podman's layer cache makes a second build of the same tree quick).
# 3. The plugin is built on the host (meson, in build-container/), and
#    `rdmasink transport=shm` sends N frames to the container's
#    rdma-analytics (rdmasrc), which prints one JSON line per frame.
#
# It ends with a verdict (frames received / sent) and exits non-zero unless
# every frame and the EOS arrived.  Not part of CI: the first run downloads
# and builds for several minutes.
set -euo pipefail

frames=100
port=
while [ $# -gt 0 ]; do
  case "$1" in
    --frames) frames=$2; shift 2 ;;
    --port) port=$2; shift 2 ;;
    -h|--help) sed -n '3,8p' "$0"; exit 0 ;;
    *) echo "build-and-run: unknown option $1" >&2; exit 2 ;;
  esac
done

here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
cache=${SBR_CONTAINER_CACHE:-/var/cache/gst-rdma-container}
image=gst-rdma-analytics
# The base image's name comes from the Containerfile itself, so the two can't
# drift apart.
base=$(sed -n 's/^FROM[[:space:]]\+\([^[:space:]]\+\).*/\1/p' "$here/Containerfile" | head -n1)
host_build=$src/build-container
rootfs_tar=$cache/debian-12-rootfs.tar
start=$SECONDS

step() { printf '\n== [%4ds] %s\n' $((SECONDS - start)) "$*"; }
die() { echo "build-and-run: FAIL: $*" >&2; echo "VERDICT: FAIL ($*)"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run as root (apt-get, debootstrap and podman's root store)"
[ -n "$base" ] || die "no FROM line in $here/Containerfile"

# --- 1. what this script needs, from Debian's packages ----------------------
step "packages"
# podman + debootstrap for the image; the rest builds the sender's plugin and
# runs it (videotestsrc is in plugins-base).  The verbs back end is left to
# meson's auto: shm needs no rdma-core on the host.
need=(podman debootstrap
      gcc meson ninja-build pkg-config
      libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev
      gstreamer1.0-tools gstreamer1.0-plugins-base)
# crun (podman's default on Debian 12) refuses a hybrid cgroup layout -- v1
# controllers plus a cgroup2 "unified" mount that holds controllers of its
# own ("cgroups in hybrid mode not supported"); runc runs there, on v1.
runtime=()
if [ "$(stat -fc %T /sys/fs/cgroup)" != cgroup2fs ] &&
   grep -qs . /sys/fs/cgroup/unified/cgroup.controllers; then
  need+=(runc)
  runtime=(--runtime runc)
fi
missing=()
for p in "${need[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
    missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # Other jobs on a shared machine may hold dpkg's lock: wait for it rather
  # than fail.
  mkdir -p "$cache"
  { nice apt-get -o DPkg::Lock::Timeout=900 update -qq &&
    nice apt-get -o DPkg::Lock::Timeout=900 install -y -qq \
      --no-install-recommends "${missing[@]}"; } > "$cache/apt.log" 2>&1 ||
    { tail -n 20 "$cache/apt.log"; die "apt-get (log: $cache/apt.log)"; }
else
  echo "all installed"
fi
podman --version

# --- 2. the base image, debootstrapped and imported --------------------------
step "base image $base"
# The Debian archive as this machine's apt reaches it (one-line .list or
# deb822 .sources; comments skipped); SBR_DEBIAN_MIRROR overrides.
apt_uri() {
  # Some of these files don't exist (cat fails) and head stops reading
  # early: neither is an error here, hence the subshell without pipefail.
  ( set +o pipefail
    cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
        /etc/apt/sources.list.d/*.sources 2>/dev/null |
      grep -v '^[[:space:]]*#' |
      grep -oE "https?://[^[:space:]]+/$1/?([[:space:]]|\$)" |
      head -n1 | tr -d '[:space:]' | sed 's:/$::' )
}
mirror=${SBR_DEBIAN_MIRROR:-$(apt_uri debian)}
security=${SBR_DEBIAN_SECURITY_MIRROR:-$(apt_uri debian-security)}
if podman image exists "$base"; then
  echo "already in podman's store: $(podman image inspect -f '{{.Id}}' "$base" | cut -c1-12)"
else
  if [ -s "$rootfs_tar" ]; then
    echo "cached root: $rootfs_tar"
  else
    [ -n "$mirror" ] || die "no Debian mirror in /etc/apt/sources.list*; set SBR_DEBIAN_MIRROR"
    echo "debootstrap bookworm from $mirror"
    mkdir -p "$cache"
    root=$cache/rootfs.tmp
    rm -rf "$root"
    # minbase: what debian:12 images hold (essential + apt), no init or
    # kernel; the Containerfile installs the rest.
    nice debootstrap --variant=minbase bookworm "$root" "$mirror" \
      > "$cache/debootstrap.log" 2>&1 ||
      { tail -n 20 "$cache/debootstrap.log"; die "debootstrap (log: $cache/debootstrap.log)"; }
    # The same suites as the official image (updates and security too), from
    # the mirror this machine can reach.
    {
      echo "deb $mirror bookworm main"
      echo "deb $mirror bookworm-updates main"
      [ -z "$security" ] || echo "deb $security bookworm-security main"
    } > "$root/etc/apt/sources.list"
    # Like the official image: no package lists or .debs baked in.
    rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb
    tar --numeric-owner -C "$root" -cf "$rootfs_tar.tmp" .
    mv "$rootfs_tar.tmp" "$rootfs_tar"
    rm -rf "$root"
  fi
  podman import -q --change 'CMD ["bash"]' \
    --message "debootstrap --variant=minbase bookworm from ${mirror:-cache}" \
    "$rootfs_tar" "$base" >/dev/null
  echo "imported: $(podman image inspect -f '{{.Id}}' "$base" | cut -c1-12)"
fi

# --- 3. the image -------------------------------------------------------------
step "podman on this host"
# Root podman raises the container's nofile and nproc limits (to 1048576 and
# more); a host that won't let even root raise its limits (some VMs) then
# fails every container with "error setting rlimit ... operation not
# permitted".  Try podman's defaults first, then limits within reach.
limits=()
if ! podman "${runtime[@]}" run --rm "$base" true > "$cache/probe.log" 2>&1; then
  grep -q rlimit "$cache/probe.log" || { cat "$cache/probe.log"; die "podman can't run a container"; }
  limits=(--ulimit nofile=4096:4096 --ulimit nproc=4096:4096)
  podman "${runtime[@]}" run --rm "${limits[@]}" "$base" true > "$cache/probe.log" 2>&1 ||
    { cat "$cache/probe.log"; die "podman can't run a container, even with ${limits[*]}"; }
fi
echo "runtime: ${runtime[*]:-default}; ulimits: ${limits[*]:-as podman sets them}"

step "podman build -t $image (from $src)"
# --pull=never: the base is local, and no registry answers here; a missing
# base should fail at once, not after a registry timeout.  --network host:
# the RUN steps need only the apt mirror the host reaches, and host
# networking needs no bridge or NAT set up.  The ignore file keeps build
# directories and .git out of the context (and the layer cache stable).
nice podman "${runtime[@]}" build --pull=never --network host "${limits[@]}" \
  --ignorefile "$here/containerignore" \
  -f "$here/Containerfile" -t "$image" "$src" > "$cache/podman-build.log" 2>&1 ||
  { tail -n 30 "$cache/podman-build.log"; die "podman build (log: $cache/podman-build.log)"; }
grep -E '^(STEP|--> Using cache)|^Need to get' "$cache/podman-build.log" || true
echo "image: $(podman image inspect -f '{{.Id}}' "$image" | cut -c1-12)" \
     "$(podman image inspect -f '{{.Size}}' "$image" | awk '{printf "%.0f MB", $1/1e6}')"

# --- 4. the sender's plugin on the host ---------------------------------------
step "host plugin (meson in $host_build)"
if [ ! -f "$host_build/build.ninja" ]; then
  meson setup "$host_build" "$src" -Dplugin=enabled -Dsamples=disabled \
    -Dtests=disabled > "$cache/host-meson.log" 2>&1 ||
    { tail -n 30 "$cache/host-meson.log"; die "meson setup"; }
fi
nice ninja -C "$host_build" > "$cache/host-ninja.log" 2>&1 ||
  { tail -n 30 "$cache/host-ninja.log"; die "ninja"; }
tail -n1 "$cache/host-ninja.log"
export GST_PLUGIN_PATH=$host_build/gst
gst-inspect-1.0 rdmasink > /dev/null || die "the host build has no rdmasink"

# --- 5. the runs: receiver in the container, sender on the host, shm ---------
# The shm receiver listens on the abstract Unix socket "sbr-shm:<port>",
# which lives in a network namespace: the container shares the host's
# (--network host), and nothing else -- the memfds travel over that socket,
# so no /dev/shm or IPC namespace is shared.  Pick a port no one on this
# host listens on (other jobs may run shm tests in the host's namespace).
if [ -z "$port" ]; then
  port=27471
  while grep -q "@sbr-shm:$port\$" /proc/net/unix; do port=$((port + 1)); done
elif grep -q "@sbr-shm:$port\$" /proc/net/unix; then
  die "port $port is taken (@sbr-shm:$port in /proc/net/unix)"
fi
name=gst-rdma-rx-$$
out=$(mktemp -d)
cleanup() { podman rm -f "$name" >/dev/null 2>&1 || true; rm -rf "$out"; }
trap cleanup EXIT
# The receiver gives up after this long if the EOS never comes.
limit=$((frames / 25 + 60))

# run_pair TAG READY-REGEX IMAGE-ARGS...: the receiver container (output in
# $out/TAG.out and .err) started, once READY-REGEX shows in either, the
# sender on the host; sets tx_status and rx_status.
run_pair() {
  local tag=$1 ready=$2 rx i
  shift 2
  podman "${runtime[@]}" run --rm --name "$name" --network host "${limits[@]}" \
    "$@" > "$out/$tag.out" 2> "$out/$tag.err" &
  rx=$!
  for i in $(seq 1 300); do
    grep -qE "$ready" "$out/$tag.out" "$out/$tag.err" && break
    kill -0 "$rx" 2>/dev/null || break
    sleep 0.2
  done
  grep -qE "$ready" "$out/$tag.out" "$out/$tag.err" ||
    { cat "$out/$tag.err"; die "the $tag receiver didn't start (after $((i / 5)) s)"; }
  tx_status=0
  gst-launch-1.0 -q videotestsrc num-buffers="$frames" is-live=true \
    ! video/x-raw,width=320,height=240,framerate=25/1 \
    ! rdmasink transport=shm port="$port" device-id=0 > "$out/$tag.tx" 2>&1 ||
    tx_status=$?
  sed 's/^/  tx: /' "$out/$tag.tx"
  rx_status=0
  wait "$rx" || rx_status=$?
  echo "  sender exit $tx_status, receiver container exit $rx_status"
}
send_cmd="gst-launch-1.0 videotestsrc num-buffers=$frames is-live=true ! video/x-raw,width=320,height=240,framerate=25/1 ! rdmasink transport=shm port=$port device-id=0"

# 5a. The transport: rdmasrc into fakesink, one line per frame (-v prints
# fakesink's last-message), every frame expected -- nothing here is slow
# enough to fall a lane behind.  coreutils' timeout bounds it.
step "run 1: container rdmasrc ! fakesink (shm port $port) <- host sender ($frames frames)"
echo "  host: $send_cmd"
run_pair transport '^Setting pipeline to PLAYING' \
  --entrypoint timeout "$image" "$limit" \
  gst-launch-1.0 -v rdmasrc transport=shm port="$port" device-id=0 \
  ! fakesink silent=false
t_got=$(grep -c 'last-message = chain' "$out/transport.out" || true)
t_eos=$(grep -c 'type: eos' "$out/transport.out" || true)
t_ok=0
[ "$tx_status" -eq 0 ] && [ "$rx_status" -eq 0 ] && [ "$t_got" -eq "$frames" ] &&
  [ "$t_eos" -ge 1 ] && t_ok=1
grep -E 'Got EOS|Execution ended' "$out/transport.out" | sed 's/^/  rx: /' || true
echo "  rdmasrc delivered $t_got of $frames frames (EOS: $t_eos)"

# 5b. The image's app, as its CMD runs it but over shm.  Its analysis
# branch is a leaky queue and a dropping appsink (live analytics keeps
# the newest frame), so on a busy host it analyses fewer frames than it
# receives: expected are the EOS and frames, not all of them.  --devices 1:
# the app ends when the one camera's EOS arrives; --seconds is the safety
# net if it never does.
step "run 2: container rdma-analytics (shm port $port) <- host sender ($frames frames)"
run_pair app 'listening' \
  "$image" --transport shm --port "$port" --devices 1 --seconds "$limit"
echo "  rx stdout (JSON per frame): first and last lines"
head -n3 "$out/app.out" | sed 's/^/    /'
echo "    ..."
tail -n2 "$out/app.out" | sed 's/^/    /'
echo "  rx stderr:"
sed 's/^/    /' "$out/app.err"
a_got=$(grep -c '"packet"' "$out/app.out" || true)
a_eos=$(grep -c '"event":"eos"' "$out/app.out" || true)
a_ok=0
[ "$tx_status" -eq 0 ] && [ "$rx_status" -eq 0 ] && [ "$a_got" -ge 1 ] &&
  [ "$a_eos" -ge 1 ] && a_ok=1
echo "  rdma-analytics analysed $a_got of $frames frames (EOS: $a_eos; any not analysed were dropped by its leaky queue; load: $(cut -d' ' -f1-3 /proc/loadavg))"

step "done"
if [ "$t_ok" -eq 1 ] && [ "$a_ok" -eq 1 ]; then
  echo "VERDICT: PASS: over shm into the container, rdmasrc received $t_got of $frames frames and the EOS; rdma-analytics analysed $a_got of $frames and saw the EOS ($((SECONDS - start)) s in all)"
else
  echo "VERDICT: FAIL: rdmasrc received $t_got of $frames frames (EOS: $t_eos); rdma-analytics analysed $a_got (EOS: $a_eos)"
  exit 1
fi
