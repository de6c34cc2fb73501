#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The one test command (README "Testing"; what .ci/run calls): installs what
# is missing, builds, runs every suite, then prints each step's result and
# wall-clock time and "N passed, M failed", and exits non-zero if anything
# failed.  Every count is meson's: the install and package checks are meson
# tests counted check by check (TAP), the fuzz targets meson tests too.
#
#   1. dependencies (scripts/install-deps.sh) and the C formatting;
#   2. build with warnings as errors, then suite 'timing' alone;
#   3. in the background at nice 10, the two VMs side by side
#      (tests/softroce/ci-vms.sh): the verbs suite and the README's demo
#      over Soft-RoCE, suite 'siw' over soft-iWARP;
#   4. the ASan + UBSan and ThreadSanitizer builds and the fuzz targets
#      (tests/fuzz/run.sh), then the host suites side by side: unit, shm,
#      gst and samples; unit and shm under ASan + UBSan and under TSan;
#      the elements under ASan + UBSan; install and package;
#   5. the VMs' results.
#
# Why this order: suite 'timing' asserts lateness against a real-time
# clock (tests/meson.build says which and why), so it runs with nothing
# beside it: beside the two VMs, even at nice 10, twelve cameras into a
# compositor dropped late frames.  Nothing else asserts a timing, so the
# rest shares the two cores (every host suite side by side, the two
# element suites too), and the VMs start right after it.  The timing
# tests don't run under the sanitizers: that would need a second quiet
# phase on the critical path, and the code they run is what the other
# element and library tests run there.
#
# Environment: SBR_SKIP_VM=1 leaves the VMs out and SBR_VM_SIW=0 the
# soft-iWARP one (each counted as a failure, so such a run never looks
# green); SBR_SKIP_ASAN=1, SBR_SKIP_TSAN=1 and SBR_SKIP_FUZZ=1 leave out
# those builds and their suites.
set -u
cd "$(dirname "$0")/.." || exit 1

passed=0 failed=0 skipped=0
summary=() times=()
note() { printf '\n=== %s\n' "$*"; }
step_failed() {
  failed=$((failed + 1))
  summary+=("$1")
}

# tally LABEL LOG.json [RC]: adds a meson log's results.  meson failing
# for itself (RC non-zero, no test failed) leaves a log of only the tests
# that finished: one failure more.
tally() {
  local label=$1 log=$2 rc=${3:-0} p f s
  read -r p f s < <(tests/tally.py "$log")
  passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
  summary+=("$label: $p passed, $f failed, $s skipped")
  if [ "$rc" != 0 ] && [ "$f" = 0 ]; then
    step_failed "$label: meson test exited $rc with no test failed (see above)"
  fi
}

# timed LABEL COMMAND...: runs COMMAND and notes its wall clock.
timed() {
  local label=$1 t=$SECONDS rc
  shift
  note "$label"
  "$@"
  rc=$?
  times+=("$label: $((SECONDS - t)) s")
  return $rc
}

# build DIR MESON-OPTIONS...: configures once, then builds.
build() {
  local dir=$1
  shift
  { [ -d "$dir" ] || meson setup "$dir" "$@" >/dev/null; } && ninja -C "$dir"
}

sanitizer_env=(ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1)
# The element tests under ASan: the plugin is loaded into the sanitized
# test binary (no gst-plugin-scanner, which isn't sanitized), leaks go
# unchecked (GStreamer keeps process-wide caches it never frees), and
# ASan's runtime is preloaded for the gst-launch-1.0 some tests run.
gst_asan_env=("${sanitizer_env[@]}" GST_REGISTRY_FORK=no
  LD_PRELOAD="$(gcc -print-file-name=libasan.so)")

timed "dependencies" scripts/install-deps.sh || step_failed "install-deps failed"
# shellcheck disable=SC2046
if timed "format (.clang-format)" clang-format --dry-run -Werror \
  $(git ls-files '*.c' '*.h' '*.cpp'); then
  passed=$((passed + 1))
  summary+=("format: every C/C++ file follows .clang-format")
else
  step_failed "format: clang-format would change the files above"
fi

# --- the first build and suite 'timing' ------------------------------------
build_ok=0 asan_ok=0 tsan_ok=0
if timed "build (werror)" build build-ci -Dwerror=true; then
  build_ok=1
  timed "timing suite, alone" meson test -C build-ci --suite timing \
    --print-errorlogs --logbase timing
  tally "timing, alone" build-ci/meson-logs/timing.json $?
else
  step_failed "build failed"
fi

# --- the VMs in the background ------------------------------------------
vm_out=$(mktemp -d)
vm_pid=
if [ "${SBR_SKIP_VM:-0}" = 1 ]; then
  step_failed "VM steps not run (SBR_SKIP_VM=1)"
elif [ "$build_ok" = 1 ]; then
  note "VM steps started in the background (reported at the end)"
  # renice: the subshell and all it starts (qemu) yield to the host suites.
  (
    renice -n 10 -p "$BASHPID" >/dev/null
    tests/softroce/ci-vms.sh build-ci "$vm_out"
  ) &
  vm_pid=$!
fi

if [ "${SBR_SKIP_ASAN:-0}" != 1 ]; then
  if timed "build (ASan + UBSan)" build build-asan \
    -Db_sanitize=address,undefined -Db_lundef=false; then
    asan_ok=1
  else
    step_failed "sanitizer build failed"
  fi
fi

if [ "${SBR_SKIP_TSAN:-0}" != 1 ]; then
  if timed "build (ThreadSanitizer)" build build-tsan -Db_sanitize=thread \
    -Db_lundef=false -Dplugin=disabled -Dsamples=disabled; then
    tsan_ok=1
  else
    step_failed "ThreadSanitizer build failed"
  fi
fi
if [ "${SBR_SKIP_FUZZ:-0}" != 1 ]; then
  timed "fuzz targets (fixed runs and seed, regressions replayed)" \
    tests/fuzz/run.sh -- --logbase fuzz
  tally "fuzz" build-fuzz/meson-logs/fuzz.json $?
fi

# --- the host suites, side by side --------------------------------------
# They mostly wait (sleeps, timeouts, other processes).  Each runs in a
# network namespace of its own where this machine lets us make one: a shm
# receiver's name is an abstract unix socket named by its port, and those
# are per namespace, so two suites' tests that pick the same port never
# meet.  Without namespaces they run one after the other.
host_out=$(mktemp -d)
isolated=0
unshare --net sh -c 'ip link set lo up' 2>/dev/null && isolated=1
pids=()

# suite LABEL LOGBASE DIR [ENV=VALUE...] -- MESON-TEST-ARGS...: in the
# background; its output, exit status and wall clock into $host_out.
# netns=0 before it: in this namespace.
suite() {
  local label=$1 logbase=$2 dir=$3 envs=() net=() own_net=${netns:-$isolated}
  shift 3
  while [ "$1" != -- ]; do
    envs+=("$1")
    shift
  done
  shift
  [ "$own_net" = 0 ] || net=(unshare --net sh -c 'ip link set lo up && exec "$@"' sh)
  echo "$logbase $dir $label" >>"$host_out/order"
  (
    t=$SECONDS
    "${net[@]}" env "${envs[@]}" meson test -C "$dir" --no-rebuild \
      --print-errorlogs --logbase "$logbase" "$@" >"$host_out/$logbase.log" 2>&1
    echo $? >"$host_out/$logbase.rc"
    echo "$label: $((SECONDS - t)) s" >"$host_out/$logbase.time"
  ) &
  pids+=($!)
  [ "$isolated" = 1 ] || wait "${pids[-1]}" # one at a time
}

t_host=$SECONDS
note "host suites $([ "$isolated" = 1 ] && echo "side by side" || echo "one after the other")"
if [ "$build_ok" = 1 ]; then
  suite "host (unit, shm, gst, samples)" host build-ci -- --suite unit \
    --suite shm --suite gst --suite samples --no-suite timing
  # In this namespace: the package check mounts and chroots, the install
  # check builds a copy of the tree; their shm ports are their own.
  netns=0 suite "install and package" checks build-ci -- \
    --suite install --suite package
fi
if [ "$asan_ok" = 1 ]; then
  suite "sanitizers (unit, shm)" asan-lib build-asan \
    "${sanitizer_env[@]/detect_leaks=0/detect_leaks=1}" -- \
    --suite unit --suite shm --no-suite timing
fi
if [ "$tsan_ok" = 1 ]; then
  # The library's threads.  Not the elements: GLib's GMutex/GCond are
  # futex-based and invisible to TSan (tests/fuzz/README.md).
  suite "ThreadSanitizer (unit, shm)" tsan build-tsan \
    TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 -- \
    --suite unit --suite shm --no-suite timing
fi
if [ "$asan_ok" = 1 ]; then
  suite "sanitizers (gst elements)" asan-gst build-asan "${gst_asan_env[@]}" \
    -- --suite gst --no-suite timing
fi
wait "${pids[@]}"
times+=("host suites: $((SECONDS - t_host)) s")
while read -r logbase dir label; do
  note "$label"
  cat "$host_out/$logbase.log"
  tally "$label" "$dir/meson-logs/$logbase.json" "$(cat "$host_out/$logbase.rc" 2>/dev/null || echo missing)"
  times+=("  $(cat "$host_out/$logbase.time" 2>/dev/null || echo "$label: ? s")")
done < <(cat "$host_out/order" 2>/dev/null)
rm -rf "$host_out"

# --- the VMs' results -----------------------------------------------------
if [ -n "$vm_pid" ]; then
  timed "waiting for the VM steps" wait "$vm_pid"
  note "verbs suite in the Soft-RoCE VM"
  cat "$vm_out/rxe.log"
  tally "Soft-RoCE VM (verbs)" build-ci/meson-logs/verbs-rxe.json \
    "$(cat "$vm_out/rxe.rc" 2>/dev/null || echo missing)"
  note "demo (12 cameras over Soft-RoCE)"
  cat "$vm_out/demo.log"
  if [ "$(cat "$vm_out/demo.rc" 2>/dev/null)" = 0 ]; then
    passed=$((passed + 1))
    summary+=("demo: $(tail -n 1 build-ci/demo-out/stats.txt)")
  else
    step_failed "demo: scripts/demo.sh failed (see above)"
  fi
  if [ "${SBR_VM_SIW:-1}" != 0 ]; then
    note "suite siw in the soft-iWARP VM"
    cat "$vm_out/siw.log"
    tally "soft-iWARP VM (siw)" build-ci/meson-logs/verbs-siw.json \
      "$(cat "$vm_out/siw.rc" 2>/dev/null || echo missing)"
  else
    step_failed "soft-iWARP VM not run (SBR_VM_SIW=0)"
  fi
  while IFS= read -r line; do times+=("  $line"); done <"$vm_out/times"
fi
rm -rf "$vm_out"

note "summary"
printf '  %s\n' "${summary[@]}"
echo "times (wall clock; the VM steps ran beside the host suites):"
printf '  %s\n' "${times[@]}"
echo "  total: $SECONDS s"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
