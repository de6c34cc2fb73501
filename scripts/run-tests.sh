#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The one test command (README "Testing", and what .ci/run calls):
#   1. installs missing dependencies and checks the C formatting,
#   2. builds with warnings as errors, with ASan + UBSan and with
#      ThreadSanitizer,
#   3. builds the libFuzzer targets (clang) and runs each for a fixed
#      number of runs, replaying every saved crash first (tests/fuzz/),
#   4. installs into a temporary prefix and uses what was installed
#      (tests/install/); later (step 5's end) builds the Debian packages
#      and uses them installed in a throw-away root (tests/package/),
#   5. runs the unit (with the ABI checks of tests/abi/), shm, element
#      (gst) and samples suites; the unit, shm
#      and element suites under ASan + UBSan; the unit and shm suites
#      under ThreadSanitizer,
#   6. meanwhile, in the background, two VMs side by side, one emulated
#      CPU each: one boots with Soft-RoCE, runs the verbs suite on real
#      verbs, then the README's demo (12 cameras over Soft-RoCE into a
#      mosaic); the other boots with soft-iWARP (siw) and runs the verbs
#      suite over iWARP (tests skip, saying why, only what siw can't do),
# then prints "N passed, M failed" and each step's time, and exits
# non-zero if anything failed.
#
# Why two phases: the timing tests (suite 'timing': lateness against a
# real-time clock) run alone, each right after its build (warnings as
# errors, then ASan + UBSan).  Then the two VMs start in the background at
# a lower priority (nice 10), and the rest runs beside them: the TSan
# build, the fuzz runs and the install check (which the VMs yield to),
# then the four host suites side by side (they mostly wait: sleeps,
# timeouts, other processes), then the Debian packages.  The VMs are the
# critical path: each keeps about one core busy.
#
# Environment: SBR_SKIP_VM=1 skips step 6 (counted as failed, not passed,
# so a run without the VM can never look green), SBR_VM_SIW=0 its iWARP
# part (counted as failed too) and SBR_VM_SIW=lib runs only the library's
# tests over iWARP, not the elements'; SBR_SKIP_ASAN=1 skips the
# ASan build and suites, SBR_SKIP_TSAN=1 the TSan ones, SBR_SKIP_FUZZ=1
# step 3; SBR_SERIAL=1 runs step 6 after step 5 instead of beside it.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

passed=0
failed=0
skipped=0
summary=()

note() { printf '\n=== %s\n' "$*"; }

# Wall-clock time of each step, printed with the summary: what CI's
# duration is made of.
times=()
t_step=$SECONDS
t_name=
step_time() {
  [ -z "$t_name" ] || times+=("$t_name: $((SECONDS - t_step)) s")
  t_name=$1
  t_step=$SECONDS
}

# Adds one meson test log's results to the totals.
tally() {
  local log=$1 label=$2
  if [ ! -f "$log" ]; then
    failed=$((failed + 1))
    summary+=("$label: no test log (the run did not happen)")
    return
  fi
  read -r p f s < <(python3 - "$log" <<'PY'
import json, sys
p = f = s = 0
for line in open(sys.argv[1]):
    r = json.loads(line)["result"]
    if r == "OK":
        p += 1
    elif r == "SKIP":
        s += 1
    else:
        f += 1
print(p, f, s)
PY
)
  passed=$((passed + p))
  failed=$((failed + f))
  skipped=$((skipped + s))
  summary+=("$label: $p passed, $f failed, $s skipped")
}

step_failed() {
  failed=$((failed + 1))
  summary+=("$1")
}

# run_checks PREFIX SCRIPT LABEL: runs a check script whose lines
# "PREFIX: ok ..." and "PREFIX: FAILED ..." are its checks, and counts
# them (a script that checked nothing is a failure).
run_checks() {
  local prefix=$1 script=$2 label=$3 log n_ok n_bad
  log=$(mktemp)
  "$script" | tee "$log"
  n_ok=$(grep -c "^$prefix: ok" "$log")
  n_bad=$(grep -c "^$prefix: FAILED" "$log")
  passed=$((passed + n_ok))
  failed=$((failed + n_bad))
  [ "$n_ok" -gt 0 ] || [ "$n_bad" -gt 0 ] ||
    step_failed "$prefix: $(basename "$script") checked nothing"
  summary+=("$label: $n_ok checks passed, $n_bad failed")
  rm -f "$log"
}

step_time "dependencies"
note "dependencies"
scripts/install-deps.sh || step_failed "install-deps failed"

step_time "format"
note "format (.clang-format)"
# shellcheck disable=SC2046
if clang-format --dry-run -Werror $(git ls-files '*.c' '*.h' '*.cpp'); then
  passed=$((passed + 1))
  summary+=("format: every C/C++ file follows .clang-format")
else
  step_failed "format: clang-format would change the files above"
fi

# --- phase 1: what keeps both cores busy --------------------------------

step_time "build (werror) and timing tests"
note "build (werror)"
build_ok=0
if { [ -d build-ci ] || meson setup build-ci -Dwerror=true >/dev/null; } &&
  ninja -C build-ci; then
  build_ok=1
  # Tests that measure lateness against a real-time clock (a sink's QoS,
  # late drops) or assert a timing: alone, on a machine doing nothing
  # else, before the VM starts; phase 2 runs everything else.
  note "timing tests, alone"
  meson test -C build-ci --suite timing --print-errorlogs --logbase timing
  tally build-ci/meson-logs/timing.json "host, alone (timing)"
else
  step_failed "build failed"
fi

asan_ok=0
if [ "${SBR_SKIP_ASAN:-0}" != 1 ]; then
  step_time "build (ASan + UBSan) and timing tests"
  note "build (ASan + UBSan)"
  if { [ -d build-asan ] ||
    meson setup build-asan -Db_sanitize=address,undefined \
      -Db_lundef=false >/dev/null; } &&
    ninja -C build-asan; then
    asan_ok=1
    note "timing tests under sanitizers, alone"
    GST_REGISTRY_FORK=no ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
      UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
      LD_PRELOAD="$(gcc -print-file-name=libasan.so)" \
      meson test -C build-asan --suite timing --no-suite samples \
      --print-errorlogs --logbase timing
    tally build-asan/meson-logs/timing.json "sanitizers, alone (timing)"
  else
    step_failed "sanitizer build failed"
  fi
fi

# --- phase 2: the VMs in the background, the rest meanwhile ------------
# (from here on nothing asserts a timing: the VMs start as soon as the
# timing tests are done)

# The VM steps, each into its own log and status file under $vm_out, for
# vm_report to tally: the Soft-RoCE VM (verbs suite, then the demo) and
# the soft-iWARP one, run side by side (vm_steps).
vm_out=$(mktemp -d)
rxe_steps() {
  local t=$SECONDS
  # The verbs suite over Soft-RoCE.  Its own log name, so the host suites
  # running meanwhile in the same build never read or overwrite it.
  rm -f build-ci/meson-logs/verbs-rxe.json
  tests/softroce/run-in-vm.sh --cpus 1 -- meson test -C build-ci \
    --suite verbs --print-errorlogs --no-rebuild --logbase verbs-rxe \
    >"$vm_out/rxe.log" 2>&1
  echo "VM: verbs suite over Soft-RoCE: $((SECONDS - t)) s" >"$vm_out/times-rxe"
  t=$SECONDS
  # The README's demo, as a user runs it: 12 cameras over Soft-RoCE into a
  # mosaic; it fails when a frame is lost or either side fails.
  rm -rf demo-out
  if scripts/demo.sh --seconds 3 >"$vm_out/demo.log" 2>&1 &&
    [ -s demo-out/mosaic.avi ] && [ -s demo-out/stats.txt ]; then
    echo 0 >"$vm_out/demo.rc"
  else
    echo 1 >"$vm_out/demo.rc"
  fi
  echo "VM: demo: $((SECONDS - t)) s" >>"$vm_out/times-rxe"
}

siw_steps() {
  local t=$SECONDS
  # The verbs suite over iWARP (see the top): the first run on a machine
  # builds siw.ko (Debian's kernel has none; about a minute, then cached).
  local siw_tests=()
  if [ "${SBR_VM_SIW:-all}" = lib ]; then
    mapfile -t siw_tests < <(meson test -C build-ci --list --no-rebuild --suite verbs \
      2>/dev/null | sed -n 's|^[^ ]*:verbs / ||p' | grep -v '^rdma')
  fi
  rm -f build-ci/meson-logs/verbs-siw.json
  tests/softroce/run-in-vm.sh --cpus 1 --family siw -- meson test -C build-ci \
    --suite verbs --print-errorlogs --no-rebuild --logbase verbs-siw \
    "${siw_tests[@]}" >"$vm_out/siw.log" 2>&1
  echo "VM: verbs suite over soft-iWARP: $((SECONDS - t)) s" >"$vm_out/times-siw"
}

# Both VMs side by side, one emulated CPU each.  With two each, the two
# VMs' four vCPU threads shared this machine's two cores, and an emulated
# CPU that waits for another (a spinlock, an IPI) while that one's thread
# is off the core burns its time: each VM's verbs suite cost 520 s of CPU
# and took 581-608 s, against 268 s of CPU and 394-407 s with one CPU
# each (side by side, nothing else running; 327 s alone with two).
vm_steps() {
  rxe_steps &
  local rxe=$!
  if [ "${SBR_VM_SIW:-all}" != 0 ]; then
    siw_steps
  fi
  wait "$rxe"
}

vm_report() {
  note "verbs tests in the Soft-RoCE VM"
  cat "$vm_out/rxe.log"
  tally build-ci/meson-logs/verbs-rxe.json "Soft-RoCE VM (verbs)"
  note "demo (12 cameras over Soft-RoCE)"
  cat "$vm_out/demo.log"
  if [ "$(cat "$vm_out/demo.rc" 2>/dev/null)" = 0 ]; then
    passed=$((passed + 1))
    summary+=("demo: mosaic.avi and stats.txt made; $(tail -n 1 demo-out/stats.txt)")
  else
    step_failed "demo: scripts/demo.sh failed (see above)"
  fi
  if [ "${SBR_VM_SIW:-all}" != 0 ]; then
    note "verbs tests in the soft-iWARP VM"
    cat "$vm_out/siw.log"
    tally build-ci/meson-logs/verbs-siw.json "soft-iWARP VM (verbs)"
  else
    step_failed "verbs tests over soft-iWARP not run (SBR_VM_SIW=0)"
  fi
  for f in "$vm_out/times-rxe" "$vm_out/times-siw"; do
    [ -f "$f" ] || continue
    while IFS= read -r line; do times+=("$line"); done <"$f"
  done
}

# The verbs suite's element tests keep a registry of their own in the
# build (tests/gst/meson.build): made here, natively, with the same paths,
# rather than by the first of those tests in each VM, which scanned every
# system plugin on the emulated CPU (25-30 s of each VM's run in CI).
verbs_registry() {
  local plugins="$top/build-ci/gst" system
  system=$(pkg-config --variable=pluginsdir gstreamer-1.0 2>/dev/null) || return 0
  GST_REGISTRY_1_0="$top/build-ci/tests/gst/registry-verbs.bin" \
    GST_PLUGIN_PATH="$plugins" GST_PLUGIN_PATH_1_0="$plugins" \
    GST_PLUGIN_SYSTEM_PATH="$system" GST_PLUGIN_SYSTEM_PATH_1_0="$system" \
    gst-inspect-1.0 rdmasrc >/dev/null 2>&1 || true
}

vm_pid=
if [ "${SBR_SKIP_VM:-0}" = 1 ]; then
  step_failed "verbs suites and demo not run (SBR_SKIP_VM=1)"
elif [ "$build_ok" != 1 ]; then
  step_failed "verbs suites and demo not run: the build failed"
elif [ "${SBR_SERIAL:-0}" != 1 ]; then
  note "VM steps started in the background (reported at the end)"
  verbs_registry
  # renice: the subshell and every process it starts (qemu) yield to
  # the host suites.
  (
    renice -n 10 -p "$BASHPID" >/dev/null
    vm_steps
  ) &
  vm_pid=$!
fi

tsan_ok=0
if [ "${SBR_SKIP_TSAN:-0}" != 1 ]; then
  step_time "build (ThreadSanitizer)"
  note "build (ThreadSanitizer)"
  if { [ -d build-tsan ] ||
    meson setup build-tsan -Db_sanitize=thread -Db_lundef=false \
      -Dplugin=disabled -Dsamples=disabled >/dev/null; } &&
    ninja -C build-tsan; then
    tsan_ok=1
  else
    step_failed "ThreadSanitizer build failed"
  fi
fi

if [ "${SBR_SKIP_FUZZ:-0}" != 1 ]; then
  step_time "fuzz smoke"
  note "fuzz smoke (libFuzzer, fixed runs and seed, regressions replayed)"
  fuzz_log=$(mktemp)
  tests/fuzz/run.sh 2>&1 | tee "$fuzz_log" | grep -E '^fuzz |check failed|ERROR'
  n_ok=$(grep -c '^fuzz [^ ]*: ok' "$fuzz_log")
  n_bad=$(grep -c '^fuzz [^ ]*: FAILED' "$fuzz_log")
  if [ "$n_ok" -eq 0 ] && [ "$n_bad" -eq 0 ]; then
    tail -20 "$fuzz_log"
    step_failed "fuzz: tests/fuzz/run.sh built or ran nothing (see above)"
  else
    passed=$((passed + n_ok))
    failed=$((failed + n_bad))
    summary+=("fuzz smoke: $n_ok targets passed, $n_bad failed")
  fi
  rm -f "$fuzz_log"
fi

step_time "install"
note "install into a prefix (tests/install/check-install.sh)"
run_checks install tests/install/check-install.sh install

# The host suites, side by side: they mostly wait (sleeps, timeouts, other
# processes: all four together used 136 s of CPU in 223 s, measured on
# 2026-11-26), so one after the other they added 584 s to CI's wall
# clock.  The two element suites still take turns (below).  Each runs in
# a network namespace of its own when this machine lets us make one: a
# shm receiver's name is an abstract unix socket named by its port, and
# those are per namespace, so tests of two suites that happen to pick the
# same port never meet.  Without namespaces they run one after the other,
# as before.
host_out=$(mktemp -d)
isolated=0
if unshare --net sh -c 'ip link set lo up' 2>/dev/null; then
  isolated=1
fi

# host_suite LOGBASE BUILD-DIR LABEL [ENV=VALUE...] -- MESON-TEST-ARGS...
# In the background: its output into $host_out/LOGBASE.log, meson's exit
# status into LOGBASE.rc and its wall clock into LOGBASE.time, for the
# report below.
host_suite() {
  local logbase=$1 dir=$2 label=$3 envs=()
  shift 3
  while [ "$1" != -- ]; do
    envs+=("$1")
    shift
  done
  shift
  rm -f "$dir/meson-logs/$logbase.json"
  echo "$logbase $dir $label" >>"$host_out/order"
  (
    t=$SECONDS
    # The suite's environment (ASan's LD_PRELOAD among it) for meson and
    # the tests only, not for unshare, sh and ip.
    if [ "$isolated" = 1 ]; then
      unshare --net sh -c 'ip link set lo up && exec env "$@"' sh \
        "${envs[@]}" meson test -C "$dir" --no-rebuild --print-errorlogs \
        --logbase "$logbase" "$@" >"$host_out/$logbase.log" 2>&1
    else
      env "${envs[@]}" meson test -C "$dir" --no-rebuild --print-errorlogs \
        --logbase "$logbase" "$@" >"$host_out/$logbase.log" 2>&1
    fi
    echo $? >"$host_out/$logbase.rc"
    echo "$label: $((SECONDS - t)) s" >"$host_out/$logbase.time"
  ) &
  host_pids+=($!)
  # One at a time without namespaces.
  [ "$isolated" = 1 ] || wait "${host_pids[@]}"
}

host_pids=()
if [ "$isolated" = 1 ]; then
  step_time "host suites (side by side)"
  note "host suites side by side, each in a network namespace of its own"
else
  step_time "host suites (one after the other)"
  note "host suites one after the other (no network namespaces here)"
fi
host_gst_pid=
if [ "$build_ok" = 1 ]; then
  host_suite host build-ci "host (unit, shm, gst, samples)" -- \
    --suite unit --suite shm --suite gst --suite samples --no-suite timing
  host_gst_pid=${host_pids[-1]}
fi
if [ "$asan_ok" = 1 ]; then
  host_suite asan-lib build-asan "sanitizers (unit, shm)" \
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 -- \
    --suite unit --suite shm --no-suite timing
fi
if [ "$tsan_ok" = 1 ]; then
  # The library's threads (sender engine, shm NIC thread, receiver,
  # releases from any thread).  The element suite is not run under TSan:
  # GLib's GMutex/GCond are futex-based and invisible to it
  # (tests/fuzz/README.md, "ThreadSanitizer").  What it can't see either:
  # the shm segment is mapped twice (receiver and sender mapping, even
  # within one test process), and TSan tracks addresses, not pages, so
  # accesses through the two mappings are never compared.
  # --no-suite timing: devices-shm-hold asserts a timing TSan's slowdown
  # breaks (tests/meson.build).
  host_suite tsan build-tsan "ThreadSanitizer (unit, shm)" \
    TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 -- \
    --suite unit --suite shm --no-suite timing
fi
if [ "$asan_ok" = 1 ]; then
  # The two element suites never side by side: their pad tasks, starved
  # of CPU beside each other, two VMs and the library suites, made live
  # pads drop and lanes copy in 2 of 3 CI runs (two tests, one each).
  [ -z "$host_gst_pid" ] || wait "$host_gst_pid"
  # The elements too (per-pad threads, state cycles): the plugin is
  # loaded into the sanitized test binary, so the registry is scanned in
  # process (gst-plugin-scanner isn't sanitized).  Leak checking stays
  # off here: GStreamer keeps process-wide caches it never frees.  Some
  # tests run gst-launch-1.0 as a user would; it loads the sanitized
  # plugin into an unsanitized program, so ASan's runtime must be
  # preloaded to come first (it is the same runtime the test binaries
  # link).
  host_suite asan-gst build-asan "sanitizers (gst elements)" \
    GST_REGISTRY_FORK=no ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    LD_PRELOAD="$(gcc -print-file-name=libasan.so)" -- \
    --suite gst --no-suite timing
fi
[ ${#host_pids[@]} -eq 0 ] || wait "${host_pids[@]}"
if [ -f "$host_out/order" ]; then
  while read -r logbase dir label; do
    note "$label"
    cat "$host_out/$logbase.log"
    tally "$dir/meson-logs/$logbase.json" "$label"
    # meson failing for itself (not a test's failure) leaves a log of
    # only the tests that finished.
    rc=$(cat "$host_out/$logbase.rc" 2>/dev/null || echo missing)
    if [ "$rc" != 0 ] && ! grep -q '"result": "\(FAIL\|TIMEOUT\|ERROR\)' \
      "$dir/meson-logs/$logbase.json" 2>/dev/null; then
      step_failed "$label: meson test exited $rc with no test failed (see above)"
    fi
    times+=("$(cat "$host_out/$logbase.time" 2>/dev/null || echo "$label: ? s")")
  done <"$host_out/order"
fi
rm -rf "$host_out"

# Here, while the VM (if any) still runs: its build (~20 s on two cores)
# and the throw-away root's checks take cores the host suites leave idle.
step_time "Debian packages"
note "Debian packages (tests/package/check-package.sh)"
run_checks package tests/package/check-package.sh "Debian packages"

if [ -n "$vm_pid" ]; then
  step_time "waiting for the VM steps (after the host suites)"
  note "waiting for the VM steps"
  wait "$vm_pid"
  vm_report
elif [ "${SBR_SKIP_VM:-0}" != 1 ] && [ "$build_ok" = 1 ]; then
  step_time "VM steps (SBR_SERIAL=1)"
  verbs_registry
  vm_steps
  vm_report
fi
rm -rf "$vm_out"
step_time ""

note "summary"
for line in "${summary[@]}"; do echo "  $line"; done
echo "times (wall clock; the VM steps ran beside the host suites):"
for line in "${times[@]}"; do echo "  $line"; done
echo "  total: $SECONDS s"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
