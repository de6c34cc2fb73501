#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Installs what building and testing need, from Debian's packages, and only
# what is missing (CI machines start empty; developers' machines don't).
# The Soft-RoCE VM's own packages are installed by tests/softroce/run-in-vm.sh.
set -eu

packages=(
  # build
  gcc meson ninja-build pkg-config clang-format
  # tests/abi/: abidiff against lib/abi/ (scripts/update-abi.sh: abidw)
  abigail-tools
  # run-tests.sh: each host suite in a network namespace of its own, with
  # its loopback up (ip)
  iproute2
  # tests/fuzz/: libFuzzer comes with clang's runtime libraries
  clang libclang-rt-14-dev
  # core library: rdma-core
  libibverbs-dev librdmacm-dev rdma-core ibverbs-providers
  # GStreamer plugin and its tests
  libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev gstreamer1.0-tools
  gstreamer1.0-plugins-base gstreamer1.0-plugins-good
  # pipelines/ and the demo: textoverlay (pango) and Python GStreamer apps
  gstreamer1.0-x python3-gi gir1.2-gstreamer-1.0 gir1.2-gst-plugins-base-1.0
  # benchmarks and plots (shmsink/shmsrc peers are in plugins-bad)
  python3 python3-matplotlib perftest valgrind gstreamer1.0-plugins-bad
  # samples/: the OpenCV app (only its modules: libopencv-dev would pull
  # every module and VTK; meson finds these without opencv4.pc) and numpy
  g++ libopencv-core-dev libopencv-imgproc-dev libopencv-video-dev
  libopencv-objdetect-dev libopencv-imgcodecs-dev python3-numpy
  # samples/python/rdma-opencv.py: cv2 with its GStreamer back end
  python3-opencv
  # debian/ and tests/package/: dpkg-buildpackage, lintian
  debhelper dpkg-dev lintian
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
    missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}" >&2
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: need root to install: ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive INITRD=No
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
