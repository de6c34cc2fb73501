/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-hooks.h - what tests and studies reach into the back ends with,
 * kept out of the transport interface (transport.h) so a back end's
 * operations are only what the engines need.
 *
 * Fault injection (sbr-testing.h's struct sbr__fault_injection): a sender
 * built with knobs (sbr__sender_new_knobs) and the transport tests set it
 * on a connection right after connect returns, before its first work
 * request, so it holds from the first WR on.  Only the shm back end
 * honours it (its NIC thread adds the delay and fails the Nth WR); real
 * hardware injects its own faults, so over verbs it does nothing.
 */
#ifndef SBR_TEST_HOOKS_H
#define SBR_TEST_HOOKS_H

#include "sbr-testing.h"
#include "transport/transport.h"

/* Sets faults on c, a connection ops->connect returned; faults NULL or all
 * zero: none. */
void sbr__transport_inject_faults(const struct sbr__transport_ops *ops,
                                  struct sbr__conn *c,
                                  const struct sbr__fault_injection *faults);

/* TEST ONLY (tests/engine/test-sched.c): the shm back end calls it, when set,
 * on a thread about to execute a chain it claimed (post_send_here), before it
 * does, so a test can stall a producer right there.  NULL otherwise. */
extern void (*sbr__shm_test_claim_hook)(void);

/* TEST ONLY (tests/engine/test-backstop.c): the shm back end calls it, when
 * set, after each byte of a WRITE into the status bytes, with how many of
 * its len bytes it stored so far, so a test can stall a run's WRITE part-way
 * (a preempted copy).  NULL otherwise. */
extern void (*sbr__shm_test_status_hook)(uint32_t stored, uint32_t len);

#endif
