/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * verbs-async.h - the devices' asynchronous events (ibv_get_async_event):
 * what each one means for a connection, and reading them.
 *
 * A device reports some failures only there, never on a completion: a QP
 * or CQ gone to error while nothing was posted (the receiver posts
 * nothing), the port going down or up, the whole device failing.  And
 * librdmacm asks for COMM_EST to be passed on (rdma_notify) when data
 * reaches a QP before rdma_cm's ESTABLISHED.
 *
 *   QP_FATAL, QP_REQ_ERR,   the connection on that QP or CQ ends as a
 *   QP_ACCESS_ERR, CQ_ERR   failed one (a receiver's lane closes, a sender
 *                           reconnects), counted (async_errors), logged
 *   DEVICE_FATAL            every connection on the device ends so
 *   PORT_ERR, PORT_ACTIVE,  logged, one line each: the connections find
 *   LID_CHANGE, GID_CHANGE  out for themselves (rdma_cm, the probe)
 *   COMM_EST                rdma_notify on the QP's id
 *   the rest                logged at debug level (SRQ, path migration)
 *
 * Who reads: the receiver on its accept thread (sbr__verbs_get_event
 * polls the async fd of each device its listener and lanes use), the
 * sender where it looks at its event channel (poll_cq, when idle).  A
 * device context is shared by every id of the process, so in a process
 * that is sender and receiver on one device either may read an event of
 * the other's connection: the event marks the connection (async_failed),
 * whoever read it, and its owner acts on the mark.
 */
#ifndef SBR_VERBS_ASYNC_H
#define SBR_VERBS_ASYNC_H

#include <stdbool.h>

#include <infiniband/verbs.h>

struct sbr__conn;
struct sbr__listener;

enum sbr__verbs_async_action {
  SBR__VERBS_ASYNC_NOTHING,      /* debug log only */
  SBR__VERBS_ASYNC_CONN_FAILED,  /* the QP's or CQ's connection ends */
  SBR__VERBS_ASYNC_PORT,         /* logged */
  SBR__VERBS_ASYNC_DEVICE_FATAL, /* every connection on the device ends */
  SBR__VERBS_ASYNC_COMM_EST,     /* rdma_notify */
};

/* What an event type asks of us; pure (tests/transport/test-verbs-async.c). */
enum sbr__verbs_async_action sbr__verbs_async_action(enum ibv_event_type type);

/* Makes ctx's async fd non-blocking (shared by the whole process: nobody
 * here blocks on it).  0 or -errno. */
int sbr__verbs_async_nonblocking(struct ibv_context *ctx);

/* Reads and handles at most one event of ctx without blocking, and acks
 * it.  l: the receiver's listener reading (DEVICE_FATAL marks each of its
 * lanes on ctx), else NULL; self: the sender's connection reading (marked
 * by a DEVICE_FATAL on its device), else NULL.  1 when an event was
 * handled, 0 when none was waiting, -errno when the fd failed (a device
 * gone). */
int sbr__verbs_async_read(struct ibv_context *ctx, struct sbr__listener *l,
                          struct sbr__conn *self);

/* The receiver's lanes, for DEVICE_FATAL and for reporting marked ones:
 * accept adds a lane once accepted, conn_free takes it out. */
void sbr__verbs_lanes_add(struct sbr__listener *l, struct sbr__conn *c);
void sbr__verbs_lanes_remove(struct sbr__listener *l, struct sbr__conn *c);
/* A lane of l marked by an async event and not reported yet, now marked
 * reported (disconnected); NULL when none. */
struct sbr__conn *sbr__verbs_lanes_take_failed(struct sbr__listener *l);

/* The device contexts whose async events the listener reads now, in
 * l->watched: the listening id's and its lanes' (live ids hold them
 * open; a context kept after its last id could be closed under us once
 * its device is removed), non-blocking, less those unwatch gave up on;
 * as many as there are (a wildcard listener's lanes may be on every
 * device of the host).  Accept thread; returns how many. */
unsigned sbr__verbs_listener_watched(struct sbr__listener *l);
/* ctx's async fd failed (its device is gone): not polled again while
 * anything of ours still uses it. */
void sbr__verbs_listener_unwatch(struct sbr__listener *l,
                                 struct ibv_context *ctx);
/* Frees what the two above allocated (listener teardown). */
void sbr__verbs_listener_watch_free(struct sbr__listener *l);

/* TEST ONLY (fault hook): handles an event of type on c's QP as if its
 * device had reported it.  rxe and siw can't be made to raise QP_FATAL
 * from outside; this takes the same path from the handler on.  0, or
 * -EINVAL when c has no QP. */
int sbr__verbs_test_async_event(struct sbr__conn *c, enum ibv_event_type type);

#endif /* SBR_VERBS_ASYNC_H */
