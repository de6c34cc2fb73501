/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * verbs-async.c - the devices' asynchronous events: what each means
 * (verbs-async.h has the table), reading and acking them, and the
 * receiver's list of lanes an event may end.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "util/log.h"
#include "transport/verbs/verbs-async.h"
#include "transport/verbs/verbs-internal.h"

enum sbr__verbs_async_action sbr__verbs_async_action(enum ibv_event_type type)
{
  switch (type) {
  case IBV_EVENT_QP_FATAL:
  case IBV_EVENT_QP_REQ_ERR:
  case IBV_EVENT_QP_ACCESS_ERR:
  case IBV_EVENT_CQ_ERR:
    return SBR__VERBS_ASYNC_CONN_FAILED;
  case IBV_EVENT_PORT_ERR:
  case IBV_EVENT_PORT_ACTIVE:
  case IBV_EVENT_LID_CHANGE:
  case IBV_EVENT_GID_CHANGE:
    return SBR__VERBS_ASYNC_PORT;
  case IBV_EVENT_DEVICE_FATAL:
    return SBR__VERBS_ASYNC_DEVICE_FATAL;
  case IBV_EVENT_COMM_EST:
    return SBR__VERBS_ASYNC_COMM_EST;
  default:
    /* SQ_DRAINED, LAST_WQE_REACHED, SRQ events, path migration, P_Key and
     * SM changes, client reregistration, WQ_FATAL: nothing of ours uses
     * them or can do anything about them. */
    return SBR__VERBS_ASYNC_NOTHING;
  }
}

int sbr__verbs_async_nonblocking(struct ibv_context *ctx)
{
  int flags = fcntl(ctx->async_fd, F_GETFL);
  if (flags < 0 || fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK) < 0)
    return neg_errno(EIO);
  return 0;
}

/* Marks c failed, once; its owner acts on the mark (the receiver's
 * listener reports it as a lane gone, the sender's poll_cq fails). */
static void conn_mark_failed(struct sbr__conn *c, const char *what)
{
  if (atomic_load(&c->closing) || atomic_exchange(&c->async_failed, true))
    return;
  SBR_WARN("verbs: %s: %s: closing the connection", c->peer, what);
  if (c->listener)
    atomic_store(&c->listener->async_pending, true);
}

/* The connection an event's QP or CQ belongs to: set as their context
 * when created (sbr__verbs_conn_create_queues); NULL for a QP or CQ of
 * nobody's connection (the window probe's). */
static struct sbr__conn *event_conn(const struct ibv_async_event *e)
{
  if (e->event_type == IBV_EVENT_CQ_ERR)
    return e->element.cq ? e->element.cq->cq_context : NULL;
  return e->element.qp ? e->element.qp->qp_context : NULL;
}

/* Every lane of l, and self, on ctx: failed. */
static void device_failed(struct ibv_context *ctx, struct sbr__listener *l,
                          struct sbr__conn *self)
{
  if (self && self->id && self->id->verbs == ctx)
    conn_mark_failed(self, "its RDMA device failed");
  if (!l)
    return;
  pthread_mutex_lock(&l->lanes_lock);
  for (struct sbr__conn *c = l->lanes; c; c = c->lane_next)
    if (c->id && c->id->verbs == ctx)
      conn_mark_failed(c, "its RDMA device failed");
  pthread_mutex_unlock(&l->lanes_lock);
}

/* Before the ack: until then the QP or CQ, and so its connection, can't
 * be destroyed (ibv_destroy_qp waits for its events' acks). */
static void handle(struct ibv_context *ctx, const struct ibv_async_event *e,
                   struct sbr__listener *l, struct sbr__conn *self)
{
  const char *dev = ibv_get_device_name(ctx->device);
  const char *what = ibv_event_type_str(e->event_type);
  struct sbr__conn *c;
  char line[160];
  switch (sbr__verbs_async_action(e->event_type)) {
  case SBR__VERBS_ASYNC_CONN_FAILED:
    c = event_conn(e);
    snprintf(line, sizeof line, "%s: %s on its %s", dev, what,
             e->event_type == IBV_EVENT_CQ_ERR ? "CQ" : "QP");
    if (c)
      conn_mark_failed(c, line);
    else
      SBR_WARN("verbs: %s (not a connection's)", line);
    break;
  case SBR__VERBS_ASYNC_PORT:
    /* The connections over the port find out on their own (rdma_cm, the
     * ACK timeout, the receiver's probe); the line says why. */
    if (e->event_type == IBV_EVENT_PORT_ERR)
      SBR_WARN("verbs: %s port %d: %s", dev, e->element.port_num, what);
    else
      SBR_INFO("verbs: %s port %d: %s", dev, e->element.port_num, what);
    break;
  case SBR__VERBS_ASYNC_DEVICE_FATAL:
    SBR_ERROR("verbs: %s: %s: closing every connection on it", dev, what);
    device_failed(ctx, l, self);
    break;
  case SBR__VERBS_ASYNC_COMM_EST:
    /* Data reached the QP before rdma_cm's ESTABLISHED (the RTU was
     * lost or is late): librdmacm wants to hear it. */
    c = event_conn(e);
    if (c && c->id && rdma_notify(c->id, IBV_EVENT_COMM_EST))
      SBR_DEBUG("verbs: %s: rdma_notify: %s", c->peer, strerror(errno));
    else
      SBR_DEBUG("verbs: %s: %s", dev, what);
    break;
  case SBR__VERBS_ASYNC_NOTHING:
    SBR_DEBUG("verbs: %s: %s", dev, what);
    break;
  }
}

int sbr__verbs_async_read(struct ibv_context *ctx, struct sbr__listener *l,
                          struct sbr__conn *self)
{
  struct ibv_async_event e;
  if (ibv_get_async_event(ctx, &e)) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
      return 0;
    return neg_errno(EIO);
  }
  handle(ctx, &e, l, self);
  ibv_ack_async_event(&e);
  return 1;
}

void sbr__verbs_lanes_add(struct sbr__listener *l, struct sbr__conn *c)
{
  pthread_mutex_lock(&l->lanes_lock);
  c->lane_next = l->lanes;
  l->lanes = c;
  c->lane_listed = true;
  pthread_mutex_unlock(&l->lanes_lock);
  /* Marked between its QP's creation and now: report it all the same. */
  if (atomic_load(&c->async_failed))
    atomic_store(&l->async_pending, true);
}

void sbr__verbs_lanes_remove(struct sbr__listener *l, struct sbr__conn *c)
{
  pthread_mutex_lock(&l->lanes_lock);
  if (c->lane_listed) {
    for (struct sbr__conn **p = &l->lanes; *p; p = &(*p)->lane_next) {
      if (*p == c) {
        *p = c->lane_next;
        break;
      }
    }
    c->lane_listed = false;
  }
  pthread_mutex_unlock(&l->lanes_lock);
}

struct sbr__conn *sbr__verbs_lanes_take_failed(struct sbr__listener *l)
{
  struct sbr__conn *found = NULL;
  pthread_mutex_lock(&l->lanes_lock);
  for (struct sbr__conn *c = l->lanes; c && !found; c = c->lane_next)
    if (atomic_load(&c->async_failed) && !atomic_load(&c->closing) &&
        !atomic_exchange(&c->disconnected, true))
      found = c;
  pthread_mutex_unlock(&l->lanes_lock);
  /* The engine compares the pointer with its lanes' and never follows it,
   * so a close racing with this report is harmless (as for rdma_cm's). */
  return found;
}

static bool ctx_in(const struct sbr__ctx_set *set,
                   const struct ibv_context *ctx)
{
  for (unsigned i = 0; i < set->n; i++)
    if (set->v[i] == ctx)
      return true;
  return false;
}

/* Room for one more (no duplicate check); false if out of memory. */
static bool ctx_push(struct sbr__ctx_set *set, struct ibv_context *ctx)
{
  if (set->n == set->cap) {
    unsigned cap = set->cap ? set->cap * 2 : 4;
    struct ibv_context **v = realloc(set->v, cap * sizeof *v);
    if (!v)
      return false;
    set->v = v;
    set->cap = cap;
  }
  set->v[set->n++] = ctx;
  return true;
}

/* Out of memory, a context is left out: its events go unread (its
 * connections still end on error completions, rdma_cm and the probe). */
static void ctx_add(struct sbr__ctx_set *set, struct ibv_context *ctx)
{
  if (ctx && !ctx_in(set, ctx))
    (void)ctx_push(set, ctx);
}

unsigned sbr__verbs_listener_watched(struct sbr__listener *l)
{
  /* Every device the listening id and the lanes use: no bound but the
   * host's devices.  The sets grow; once big enough, nothing is
   * allocated here. */
  l->used.n = 0;
  ctx_add(&l->used, l->id ? l->id->verbs : NULL);
  pthread_mutex_lock(&l->lanes_lock);
  for (struct sbr__conn *c = l->lanes; c; c = c->lane_next)
    ctx_add(&l->used, c->id ? c->id->verbs : NULL);
  pthread_mutex_unlock(&l->lanes_lock);

  /* What nothing uses any more is forgotten: a context at the same
   * address later is a new device's.  Dead ones still used stay dead
   * (not polled). */
  unsigned k = 0;
  for (unsigned i = 0; i < l->dead.n; i++)
    if (ctx_in(&l->used, l->dead.v[i]))
      l->dead.v[k++] = l->dead.v[i];
  l->dead.n = k;
  /* A new context is made non-blocking once; one that can't be is dead. */
  k = 0;
  for (unsigned i = 0; i < l->used.n; i++) {
    struct ibv_context *ctx = l->used.v[i];
    if (ctx_in(&l->dead, ctx))
      continue;
    if (!ctx_in(&l->watched, ctx) && sbr__verbs_async_nonblocking(ctx) < 0) {
      SBR_WARN("verbs: %s: %s: async events unread (fcntl: %s)", l->name,
               ibv_get_device_name(ctx->device), strerror(errno));
      ctx_add(&l->dead, ctx);
      continue;
    }
    l->used.v[k++] = ctx;
  }
  l->used.n = k;
  /* What is left is watched now; the old set becomes the scratch. */
  struct sbr__ctx_set old = l->watched;
  l->watched = l->used;
  l->used = old;
  return l->watched.n;
}

void sbr__verbs_listener_unwatch(struct sbr__listener *l,
                                 struct ibv_context *ctx)
{
  SBR_DEBUG("verbs: %s: %s: no more async events", l->name,
            ibv_get_device_name(ctx->device));
  ctx_add(&l->dead, ctx);
}

void sbr__verbs_listener_watch_free(struct sbr__listener *l)
{
  free(l->watched.v);
  free(l->dead.v);
  free(l->used.v);
  free(l->pfd);
  l->watched = l->dead = l->used = (struct sbr__ctx_set){0};
  l->pfd = NULL;
  l->pfd_cap = 0;
}

int sbr__verbs_test_async_event(struct sbr__conn *c, enum ibv_event_type type)
{
  if (!c || !c->id || !c->id->qp)
    return -EINVAL;
  struct ibv_async_event e = {.event_type = type};
  if (type == IBV_EVENT_CQ_ERR)
    e.element.cq = c->send_cq;
  else if (sbr__verbs_async_action(type) == SBR__VERBS_ASYNC_CONN_FAILED ||
           type == IBV_EVENT_COMM_EST)
    e.element.qp = c->id->qp;
  else
    e.element.port_num = c->id->port_num;
  handle(c->id->verbs, &e, c->listener, c->listener ? NULL : c);
  return 0;
}
