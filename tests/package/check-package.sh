#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The Debian packages, as a distro builds them and a user installs them
# (issue #20 item 4; debian/README.source):
#   1. copies the source files git knows into a temporary directory and
#      runs `dpkg-buildpackage -b -us -uc` there (with the nocheck profile:
#      the test command's own builds run the suites), so the checkout gets
#      no file; its `git status` must be the same after;
#   2. every package holds the files it must (the list below: a file that
#      moves out of its package fails here, loudly, whatever the .install
#      files say) and libsbr0 ships the public symbols of debian/;
#   3. lintian on the .changes: no error (warnings are printed);
#   4. in a throw-away root, the host's root read-only under a RAM overlay
#      in a mount namespace of its own, with this checkout and /tmp hidden
#      and a clean environment: dpkg -i the four packages, then
#      gst-inspect-1.0 rdma, twelve cameras over shm into one rdmasrc
#      (round-trip.py), sbr-consumer.c compiled against libsbr-dev, and
#      sbr-perf (in-root.sh).
# Needs root (dpkg -i, mounts); installs what it needs through
# scripts/install-deps.sh.  Costs about 40 s on two idle cores (the build
# about 20 s of it).  Prints "package: ok: ..." or "package: FAILED: ..."
# per check; exits 0 when all passed.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd -P)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
ok() { echo "package: ok: $*"; }
fail() { echo "package: FAILED: $*"; failed=$((failed + 1)); }

if ! "$top/scripts/install-deps.sh"; then
  fail "scripts/install-deps.sh (debhelper, lintian, build dependencies)"
  exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
  fail "needs root: dpkg -i and mounts in the throw-away root"
  exit 1
fi

status_before=$(git -C "$top" status --porcelain --ignored=no)
src=$work/src
mkdir "$src"
# Tracked and new (not ignored) files, as they are in the working tree:
# what a commit of it would hold, without build directories.
# (--ignore-failed-read: a tracked file deleted in the working tree is left
# out, as a commit would.)
(cd "$top" && git ls-files -z --cached --others --exclude-standard |
  tar --null -T - --ignore-failed-read -cf - 2>/dev/null) | tar -C "$src" -xf -
start=$(date +%s)
if (cd "$src" && DEB_BUILD_OPTIONS="nocheck parallel=$(nproc)" \
  dpkg-buildpackage -b -us -uc -Pnocheck) >"$work/build.log" 2>&1; then
  ok "dpkg-buildpackage -b in $(($(date +%s) - start)) s"
else
  tail -40 "$work/build.log"
  fail "dpkg-buildpackage -b (log above)"
  exit 1
fi
if [ "$(git -C "$top" status --porcelain --ignored=no)" = "$status_before" ]; then
  ok "the checkout is as it was (git status)"
else
  git -C "$top" status --short
  fail "building the packages changed the checkout"
fi

ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
version=$(cd "$src" && dpkg-parsechangelog -SVersion)
upstream=${version%-*}
lib=usr/lib/$ma
# package: files it must hold
declare -A must=(
  [libsbr0]="$lib/libsbr.so.0 $lib/libsbr.so.$upstream"
  [libsbr-dev]="usr/include/sbr/sbr.h $lib/libsbr.so $lib/pkgconfig/sbr.pc"
  [gstreamer1.0-rdma]="$lib/gstreamer-1.0/libgstrdma.so"
  [sbr-tools]="usr/bin/sbr-perf usr/share/man/man1/sbr-perf.1.gz"
)
for p in "${!must[@]}"; do
  deb=$work/${p}_${version}_$arch.deb
  if [ ! -f "$deb" ]; then
    fail "no package $p was built"
    continue
  fi
  listing=$(dpkg-deb -c "$deb" | awk '{ print $6 }')
  missing=()
  for f in ${must[$p]} usr/share/doc/$p/copyright; do
    grep -qx "\./$f" <<<"$listing" || missing+=("$f")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    ok "$p holds ${must[$p]}"
  else
    fail "$p lacks ${missing[*]}"
  fi
done
want=$(grep -c '^ sbr_[^_]' "$top/debian/libsbr0.symbols")
have=$(dpkg-deb -I "$work/libsbr0_${version}_$arch.deb" symbols 2>/dev/null |
  grep -c '^ sbr_[^_]')
if [ "$want" -gt 0 ] && [ "$have" = "$want" ]; then
  ok "libsbr0's symbols file lists the $want public sbr_ symbols"
else
  fail "libsbr0's symbols file: $have public symbols, debian/ has $want"
fi

if lintian --fail-on error "$work/gst-rdma_${version}_$arch.changes" \
  >"$work/lintian.log" 2>&1; then
  sed 's/^/  /' "$work/lintian.log" | grep -v 'running with root'
  ok "lintian: no error ($(grep -c '^W:' "$work/lintian.log") warnings, debian/README.source)"
else
  cat "$work/lintian.log"
  fail "lintian found errors"
fi

# The throw-away root: an overlay whose lower layer is / (read-only to
# it) and whose upper layer is a tmpfs, in a mount namespace that dies
# with the command, so dpkg -i changes nothing on the host.  Only / itself
# is overlaid; /proc, /dev and /sys are bound in, /tmp is a fresh tmpfs
# and the checkout is covered by an empty one.
run=$work/run
mkdir -p "$run/test"
cp "$work"/{libsbr0,libsbr-dev,gstreamer1.0-rdma,sbr-tools}_"${version}_$arch.deb" \
  "$top/tests/install/sbr-consumer.c" "$top/tests/package/round-trip.py" \
  "$top/tests/package/in-root.sh" "$run/test/"
# shellcheck disable=SC2016 # expanded by the inner shell
unshare --mount --propagation private --fork -- bash -euc '
  run=$1 top=$2
  mkdir -p "$run/ovl"
  mount -t tmpfs -o size=2g sbr-package "$run/ovl"
  mkdir "$run/ovl/upper" "$run/ovl/work" "$run/ovl/root"
  mount -t overlay sbr-package -o "lowerdir=/,upperdir=$run/ovl/upper,workdir=$run/ovl/work" "$run/ovl/root"
  r=$run/ovl/root
  mount -t proc proc "$r/proc"
  mount --rbind /dev "$r/dev"
  mount --rbind /sys "$r/sys"
  mount -t tmpfs tmp "$r/tmp"
  # (a checkout under /tmp is hidden already)
  [ ! -d "$r$top" ] || mount -t tmpfs hidden "$r$top"
  mkdir "$r/tmp/package-test"
  cp "$run"/test/* "$r/tmp/package-test/"
  cd "$r/tmp/package-test"
  exec chroot "$r" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
    bash -c "cd /tmp/package-test && exec bash ./in-root.sh \"\$1\"" _ "$top"
' _ "$run" "$top" 2>&1 | tee "$work/in-root.log"
n_bad=$(grep -c '^package: FAILED' "$work/in-root.log")
n_ok=$(grep -c '^package: ok' "$work/in-root.log")
failed=$((failed + n_bad))
if [ "$n_ok" -eq 0 ] && [ "$n_bad" -eq 0 ]; then
  fail "the throw-away root ran no check (unshare, overlay or chroot failed: above)"
fi

[ "$failed" -eq 0 ]
