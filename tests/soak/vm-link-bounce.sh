#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Does rdma_cm still connect after the link under rxe went down and up?
# Run inside the Soft-RoCE VM, without libsbr (rping, ibv_rc_pingpong):
#
#   tests/softroce/run-in-vm.sh -- tests/soak/vm-link-bounce.sh
#
# Three cases: a bounce with no connection open, then a bounce while an
# rping connection is live; after each, a fresh rping (rdma_cm) and, after
# the second, ibv_rc_pingpong (no rdma_cm).  The soak's link-down fault
# met the second case (tests/soak/README.md).  Prints one line per check.
set -u
addr=${SBR_RDMA_ADDR:-10.77.0.1}
netdev=${SBR_SOAK_NETDEV:-veth0}
state=/sys/class/infiniband/rxe0/ports/1/state

# rping on a fresh port; "ok" when the client exchanged its pings.
rping_check() {
	rping -s -a "$addr" -p "$1" -C 3 >/dev/null 2>&1 &
	srv=$!
	sleep 1
	if timeout 20 rping -c -a "$addr" -p "$1" -C 3 -v 2>/dev/null |
		grep -q "ping data"; then
		echo "rping (rdma_cm) $2: ok"
	else
		echo "rping (rdma_cm) $2: FAILS"
	fi
	kill "$srv" 2>/dev/null
	wait "$srv" 2>/dev/null
}

bounce() {
	ip link set "$netdev" down
	sleep 4
	ip link set "$netdev" up
	i=0
	until grep -q ACTIVE "$state" || [ "$i" -ge 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	sleep 2
}

rping_check 7801 "before any bounce"
bounce
rping_check 7802 "after a bounce with no connection open"

# A live connection across the bounce: a long rping.
rping -s -a "$addr" -p 7803 -C 1000000 >/dev/null 2>&1 &
srv=$!
sleep 1
rping -c -a "$addr" -p 7803 -C 1000000 >/dev/null 2>&1 &
cli=$!
sleep 3
bounce
kill "$cli" "$srv" 2>/dev/null
wait "$cli" "$srv" 2>/dev/null
rping_check 7804 "after a bounce with a live connection"
sleep 10
rping_check 7805 "10 s later"

ibv_rc_pingpong -d rxe0 -g 1 -n 5 >/dev/null 2>&1 &
sleep 1
if timeout 20 ibv_rc_pingpong -d rxe0 -g 1 -n 5 127.0.0.1 >/dev/null 2>&1; then
	echo "ibv_rc_pingpong (no rdma_cm) after it: ok"
else
	echo "ibv_rc_pingpong (no rdma_cm) after it: FAILS"
fi
wait
echo "kernel $(uname -r)"
