#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Does a receiver give back what each lane took?  One sbr-soak receiver;
# N senders, each SIGKILLed after a few seconds of twelve cameras.  After
# each, with no lane open, prints the receiver's anonymous RSS, fds and
# malloc's live bytes (mallinfo2, from its state file).  Numbers that keep
# growing lane after lane are a leak; ones that settle are caches warming.
#
#   tests/soak/lane-churn.sh [N]                       # shm, on the host
#   tests/softroce/run-in-vm.sh -- env SBR_SOAK_BACKEND=verbs \
#       tests/soak/lane-churn.sh 16                    # verbs, in the VM
set -eu
n=${1:-16}
here=$(cd "$(dirname "$0")" && pwd)
bin=${SBR_SOAK_BIN:-$here/../../build/tests/soak/sbr-soak}
backend=${SBR_SOAK_BACKEND:-shm}
addr=${SBR_RDMA_ADDR:-127.0.0.1}
[ "$backend" = shm ] && addr=127.0.0.1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
args="--backend $backend --port ${SBR_SOAK_PORT:-7735} --devices 12
      --size 28800 --rate 10 --block-size 65536"
# shellcheck disable=SC2086
"$bin" receive $args --address "$addr" --state "$dir/rx.state" \
	--log "$dir/rx.log" &
rx=$!
sleep 1
# Offsets in the receiver's state file (sbr-soak.c, struct rx_state).
u64() { od -An -t u8 -j "$1" -N 8 "$dir/rx.state" | tr -d ' '; }
echo "lane anon_kB fds heap_live_B lanes_closed"
i=1
while [ "$i" -le "$n" ]; do
	# shellcheck disable=SC2086
	"$bin" send $args --host "$addr" --state "$dir/tx.state" \
		--log "$dir/tx.log" &
	tx=$!
	sleep 3
	kill -9 "$tx"
	wait "$tx" 2>/dev/null || true
	sleep 1.5
	anon=$(awk '/^RssAnon/ {print $2}' "/proc/$rx/status")
	fds=$(ls "/proc/$rx/fd" | wc -l)
	echo "$i $anon $fds $(u64 128) $(u64 56)"
	i=$((i + 1))
done
kill "$rx"
wait "$rx" || true
