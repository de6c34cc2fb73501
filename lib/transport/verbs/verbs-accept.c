/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * verbs-accept.c - the receiver's side of connection set-up: listen, read
 * rdma_cm events, accept a sender into a lane of its own (memory,
 * registration, keys) or refuse it with a reason.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "util/clock.h"
#include "util/log.h"
#include "transport/transport.h"
#include "transport/verbs/verbs-async.h"
#include "transport/verbs/verbs-caps.h"
#include "transport/verbs/verbs-internal.h"
#include "transport/verbs/verbs-keys.h"

/* -------------------------------------------------------------- receiver */

int sbr__verbs_listen(const char *addr, uint16_t port,
                      struct sbr__listener **out, char *errbuf, size_t errlen)
{
  int ret;
  if (!out)
    return -EINVAL;
  if (!addr || !*addr)
    addr = "0.0.0.0";

  /* Before this process registers anything (ibv_fork_init's rule). */
  sbr__verbs_fork_setup();
  struct sbr__listener *l = calloc(1, sizeof *l);
  if (!l) {
    sbr__errf(errbuf, errlen, "verbs: out of memory");
    return -ENOMEM;
  }
  atomic_init(&l->refs, 1);
  pthread_mutex_init(&l->lanes_lock, NULL);
  sbr__verbs_format_hostport(l->name, sizeof l->name, addr, port);

  ret = sbr__verbs_open_channel(l->name, &l->channel, errbuf, errlen);
  if (ret)
    goto out_free_listener;
  /* Context NULL: accepted ids inherit it, and NULL means "not a lane
   * (yet)" to get_event. */
  if (rdma_create_id(l->channel, &l->id, NULL, RDMA_PS_TCP)) {
    ret = neg_errno(ENOMEM);
    sbr__errf(errbuf, errlen, "rdma_cm: rdma_create_id failed: %s",
              strerror(-ret));
    goto out_destroy_channel;
  }

  char service[8];
  snprintf(service, sizeof service, "%u", port);
  struct addrinfo hints = {
      .ai_family = AF_UNSPEC,
      .ai_socktype = SOCK_STREAM,
      .ai_flags = AI_PASSIVE | AI_NUMERICSERV,
  };
  struct addrinfo *res = NULL;
  int gai = getaddrinfo(addr, service, &hints, &res);
  if (gai != 0) {
    ret = -EINVAL;
    sbr__errf(errbuf, errlen, "rdma_cm: cannot resolve %s: %s", l->name,
              gai_strerror(gai));
    goto out_destroy_id;
  }
  ret = rdma_bind_addr(l->id, res->ai_addr) ? neg_errno(EADDRNOTAVAIL) : 0;
  if (res->ai_addrlen <= sizeof l->bound)
    memcpy(&l->bound, res->ai_addr, res->ai_addrlen);
  freeaddrinfo(res);
  if (ret) {
    sbr__errf(errbuf, errlen, "rdma_cm: cannot bind %s: %s%s", l->name,
              strerror(-ret),
              ret == -EADDRINUSE ? " (another receiver on that port?)"
              : ret == -EADDRNOTAVAIL || ret == -ENODEV
                  ? " (no RDMA device has that address?)"
                  : "");
    goto out_destroy_id;
  }
  if (rdma_listen(l->id, VERBS_LISTEN_BACKLOG)) {
    ret = neg_errno(EIO);
    sbr__errf(errbuf, errlen, "rdma_cm: cannot listen on %s: %s", l->name,
              strerror(-ret));
    goto out_destroy_id;
  }
  /* Bound to one device's address: probe its windows now, not while
   * the first sender waits.  A wildcard listener probes each device at
   * its first lane there. */
  if (l->id->verbs)
    sbr__verbs_listener_windows(l, l->id->verbs);
  SBR_DEBUG("verbs: listening on %s", l->name);
  *out = l;
  return 0;

out_destroy_id:
  rdma_destroy_id(l->id);
out_destroy_channel:
  rdma_destroy_event_channel(l->channel);
out_free_listener:
  pthread_mutex_destroy(&l->lanes_lock);
  free(l);
  return ret;
}

/* CONNECT_REQUEST: fills ev with a request, or with a bad one (another
 * protocol version, not sbr) that the engine refuses through reject. */
static void handle_request(struct sbr__listener *l, struct rdma_cm_event *e,
                           struct sbr__listen_event *ev)
{
  struct rdma_cm_id *id = e->id;
  struct sbr__conn_request *req = &ev->req;
  const void *priv = e->param.conn.private_data;
  size_t len = e->param.conn.private_data_len;
  /* Not a lane until accept says so. */
  id->context = NULL;
  req->impl = id;
  sbr__verbs_format_sockaddr(req->peer, sizeof req->peer,
                             rdma_get_peer_addr(id));
  const struct sockaddr *sa = rdma_get_peer_addr(id);
  if (sa && (sa->sa_family == AF_INET || sa->sa_family == AF_INET6))
    memcpy(&req->peer_addr, sa,
           sa->sa_family == AF_INET ? sizeof(struct sockaddr_in)
                                    : sizeof(struct sockaddr_in6));
  req->no_write_imm =
      id->verbs && id->verbs->device->transport_type == IBV_TRANSPORT_IWARP;
  int dec = sbr__connect_priv_decode(priv, len, &req->mechanism,
                                     &req->block_size, &req->block_count);
  if (dec == 0)
    dec = sbr__connect_priv_probe(priv, len, &req->probe);
  if (dec == 0) {
    ev->type = SBR__EV_CONNECT_REQUEST;
    return;
  }
  /* IB CM pads a REQ's private data to 92 bytes: the length says little. */
  if (dec == -EPROTONOSUPPORT)
    sbr__refusal_set(&req->refusal, SBR_REFUSAL_VERSION, SBR__PRIV_VERSION,
                     (uint32_t)sbr__priv_version(priv, len));
  else
    sbr__refusal_set(&req->refusal, SBR_REFUSAL_MALFORMED, 0, (uint32_t)len);
  SBR_DEBUG("verbs: %s: connect request from %s is not one we read (%d)",
            l->name, req->peer, dec);
  ev->type = SBR__EV_BAD_REQUEST;
}

/* An accepted id's peer is gone.  A conn being closed is not reported: its
 * owner is tearing it down (and close() waits in rdma_destroy_id until this
 * event is acked, so c is still valid here).  Each conn is reported once. */
static void report_lane_gone(struct sbr__listener *l, struct rdma_cm_event *e,
                             struct sbr__conn *c, struct sbr__listen_event *ev)
{
  if (!c || atomic_load(&c->closing) || atomic_exchange(&c->disconnected, true))
    return;
  SBR_DEBUG("verbs: %s: %s from %s (status %d)", l->name,
            rdma_event_str(e->event), c->peer, e->status);
  ev->type = SBR__EV_DISCONNECTED;
  ev->conn = c;
}

/* A lane an async event marked failed: reported as gone (the receiver
 * closes it), with async_error for its count.  More may be marked: the
 * next call looks again. */
static bool report_async_failed(struct sbr__listener *l,
                                struct sbr__listen_event *ev)
{
  struct sbr__conn *c = sbr__verbs_lanes_take_failed(l);
  if (!c)
    return false;
  atomic_store(&l->async_pending, true);
  ev->type = SBR__EV_DISCONNECTED;
  ev->conn = c;
  ev->async_error = true;
  return true;
}

/* Is the listener bound to one address (not 0.0.0.0 or ::)? */
static bool listener_explicit(const struct sbr__listener *l)
{
  if (l->bound.ss_family == AF_INET)
    return ((const struct sockaddr_in *)&l->bound)->sin_addr.s_addr !=
           htonl(INADDR_ANY);
  if (l->bound.ss_family == AF_INET6)
    return !IN6_IS_ADDR_UNSPECIFIED(
        &((const struct sockaddr_in6 *)&l->bound)->sin6_addr);
  return false;
}

/* The listening id is gone with its device (or its address moved): from
 * the event's ack on, get_event binds the address again (listener_retry).
 * Lanes on the device get events of their own and close. */
static void listener_lost(struct sbr__listener *l, const char *why)
{
  SBR_WARN("verbs: %s: %s; listening again as soon as the address can be "
           "bound",
           l->name, why);
  l->relisten_ms = now_ms() + VERBS_RELISTEN_FIRST_MS;
  l->relisten_backoff_ms = VERBS_RELISTEN_FIRST_MS;
  l->relisten_failing = false;
}

/* Binds and listens on the address again; on failure waits twice as
 * long, up to VERBS_RELISTEN_MAX_MS.  Logged once per change: the first
 * failure and the success. */
static void listener_retry(struct sbr__listener *l)
{
  struct rdma_cm_id *id = NULL;
  int ret = 0;
  /* librdmacm keeps the removed device's context open until it looks at
   * the device list again, and rdma_get_devices makes it look: the
   * context is closed once nothing of ours uses it.  Where the provider
   * can't revoke a context (rxe, siw: no disassociate), the kernel
   * finishes removing the device, and can add it again, only then. */
  struct ibv_context **devs = rdma_get_devices(NULL);
  if (devs)
    rdma_free_devices(devs);
  if (rdma_create_id(l->channel, &id, NULL, RDMA_PS_TCP))
    ret = neg_errno(ENOMEM);
  else if (rdma_bind_addr(id, (struct sockaddr *)&l->bound))
    ret = neg_errno(EADDRNOTAVAIL);
  else if (rdma_listen(id, VERBS_LISTEN_BACKLOG))
    ret = neg_errno(EIO);
  if (ret) {
    if (id)
      rdma_destroy_id(id);
    if (!l->relisten_failing)
      SBR_INFO("verbs: %s: cannot listen yet (%s); trying again, every %u "
               "ms at most",
               l->name, strerror(-ret), VERBS_RELISTEN_MAX_MS);
    l->relisten_failing = true;
    l->relisten_ms = now_ms() + l->relisten_backoff_ms;
    l->relisten_backoff_ms = l->relisten_backoff_ms * 2 > VERBS_RELISTEN_MAX_MS
                                 ? VERBS_RELISTEN_MAX_MS
                                 : l->relisten_backoff_ms * 2;
    return;
  }
  /* A device that came back is a new context: what was probed of the
   * old one says nothing about it. */
  memset(l->probed, 0, sizeof l->probed);
  l->id = id;
  l->relisten_ms = 0;
  if (id->verbs)
    sbr__verbs_listener_windows(l, id->verbs);
  SBR_WARN("verbs: %s: listening again (%s)", l->name,
           id->verbs ? ibv_get_device_name(id->verbs->device) : "no device");
}

/* While the listener is lost, the timeout that wakes get_event when the
 * next bind is due (binding first when it is due now); else timeout_ms. */
static int listener_relisten_timeout(struct sbr__listener *l, int timeout_ms)
{
  if (l->id || !l->relisten_ms)
    return timeout_ms;
  int wait = ms_left(l->relisten_ms);
  if (wait == 0) {
    listener_retry(l);
    wait = ms_left(l->relisten_ms);
  }
  /* The lanes' events still come on the channel meanwhile. */
  if (l->relisten_ms && (timeout_ms < 0 || wait < timeout_ms))
    timeout_ms = wait;
  return timeout_ms;
}

/* Waits at most timeout_ms for the rdma_cm channel and, beside it, each
 * watched device's async events (out of memory for the poll set: those
 * that fit), and reads the async events that came (marking the lanes they
 * name: async_pending).  1 when something came (*cm_ready: an rdma_cm
 * event), 0 at the timeout or on a signal, -errno. */
static int listener_poll(struct sbr__listener *l, int timeout_ms,
                         bool *cm_ready)
{
  unsigned nctx = sbr__verbs_listener_watched(l);
  if (l->pfd_cap < 1 + nctx) {
    struct pollfd *p = realloc(l->pfd, (1 + nctx) * sizeof *p);
    if (p) {
      l->pfd = p;
      l->pfd_cap = 1 + nctx;
    } else if (!l->pfd) {
      return neg_errno(ENOMEM);
    }
  }
  if (nctx > l->pfd_cap - 1)
    nctx = l->pfd_cap - 1;
  /* unwatch below adds to the dead set only: watched stays as it is. */
  struct ibv_context **ctxs = l->watched.v;
  struct pollfd *pfd = l->pfd;
  unsigned nfd = 0;
  pfd[nfd++] = (struct pollfd){.fd = l->channel->fd, .events = POLLIN};
  for (unsigned i = 0; i < nctx; i++)
    pfd[nfd++] = (struct pollfd){.fd = ctxs[i]->async_fd, .events = POLLIN};
  int n = poll(pfd, nfd, timeout_ms < 0 ? -1 : timeout_ms);
  if (n < 0)
    return errno == EINTR ? 0 : neg_errno(EIO);
  if (n == 0)
    return 0;
  for (unsigned i = 1; i < nfd; i++) {
    if (!pfd[i].revents)
      continue;
    struct ibv_context *ctx = ctxs[i - 1];
    /* A device gone under us (disassociated): its fd only says so from
     * now on. */
    if ((pfd[i].revents & (POLLERR | POLLHUP | POLLNVAL)) ||
        sbr__verbs_async_read(ctx, l, NULL) < 0)
      sbr__verbs_listener_unwatch(l, ctx);
  }
  *cm_ready = pfd[0].revents != 0;
  return 1;
}

/* Takes one rdma_cm event off the listener's channel and turns it into
 * ev (or into nothing the engine needs to see). */
static int listener_take_cm_event(struct sbr__listener *l,
                                  struct sbr__listen_event *ev)
{
  struct rdma_cm_event *e;
  if (rdma_get_cm_event(l->channel, &e)) {
    /* Someone else's wake-up, or an event librdmacm consumed itself. */
    if (errno == EAGAIN || errno == EINTR)
      return 0;
    return neg_errno(EIO);
  }

  struct sbr__conn *c = e->id->context;
  bool lost = false;
  switch (e->event) {
  case RDMA_CM_EVENT_CONNECT_REQUEST:
    handle_request(l, e, ev);
    break;
  case RDMA_CM_EVENT_ESTABLISHED:
    if (c)
      SBR_DEBUG("verbs: %s: lane with %s established", l->name, c->peer);
    break;
  case RDMA_CM_EVENT_DEVICE_REMOVAL:
    /* mlx5 health recovery, devlink reload, a Soft-RoCE link deleted. */
    if (e->id == l->id) {
      listener_lost(l, "the RDMA device went away");
      lost = true;
    } else {
      report_lane_gone(l, e, c, ev);
    }
    break;
  case RDMA_CM_EVENT_ADDR_CHANGE:
    /* A bond failed over: the address is on another port (or device)
     * now.  Only a listener bound to it needs to follow. */
    if (e->id == l->id && listener_explicit(l)) {
      listener_lost(l, "its address changed (a bond failed over?)");
      lost = true;
    } else {
      SBR_INFO("verbs: %s: %s", l->name, rdma_event_str(e->event));
    }
    break;
  case RDMA_CM_EVENT_DISCONNECTED:
  case RDMA_CM_EVENT_REJECTED:
  case RDMA_CM_EVENT_UNREACHABLE:
  case RDMA_CM_EVENT_CONNECT_ERROR:
    /* The last three: the sender gave up between our accept and its RTU. */
    report_lane_gone(l, e, c, ev);
    break;
  default:
    /* TIMEWAIT_EXIT, ...: nothing for the engine. */
    SBR_DEBUG("verbs: %s: %s (status %d)", l->name, rdma_event_str(e->event),
              e->status);
    break;
  }
  rdma_ack_cm_event(e);
  if (lost) {
    /* After the ack: rdma_destroy_id waits for its events' acks. */
    rdma_destroy_id(l->id);
    l->id = NULL;
  }
  return 0;
}

/* Three jobs, in order: bind the address again when the listener was
 * lost and it is time; wait for the channel and the devices' async
 * events; turn what came into one listener event. */
int sbr__verbs_get_event(struct sbr__listener *l, int timeout_ms,
                         struct sbr__listen_event *ev)
{
  if (!l || !ev)
    return -EINVAL;
  memset(ev, 0, sizeof *ev);
  ev->type = SBR__EV_NONE;
  timeout_ms = listener_relisten_timeout(l, timeout_ms);

  /* A lane an async event marked (read here or by a sender of this
   * process on the same device) goes first. */
  if (atomic_exchange(&l->async_pending, false) && report_async_failed(l, ev))
    return 0;
  bool cm_ready = false;
  int ret = listener_poll(l, timeout_ms, &cm_ready);
  if (ret <= 0)
    return ret;
  if (atomic_exchange(&l->async_pending, false) && report_async_failed(l, ev))
    return 0;
  if (!cm_ready)
    return 0;
  return listener_take_cm_event(l, ev);
}

/* Bytes a lane's two regions pin; 0 when the geometry overflows. */
static uint64_t lane_pinned_bytes(const struct sbr__lane_desc *lane)
{
  size_t blocks_len = (size_t)lane->block_count * lane->block_size;
  if (lane->block_count == 0 ||
      blocks_len / lane->block_count != lane->block_size)
    return 0;
  return sbr__verbs_pinned_bytes(blocks_len) +
         sbr__verbs_pinned_bytes(sbr__lane_status_len(lane));
}

/* The lane's two mappings and their MRs.  On failure none is left. */
static int conn_alloc_lane(struct sbr__conn *c,
                           const struct sbr__lane_desc *lane,
                           const struct sbr__fabric *f, bool windows)
{
  int ret;
  size_t blocks_len = (size_t)lane->block_count * lane->block_size;
  if (lane->block_count == 0 || lane->block_size == 0 ||
      blocks_len / lane->block_count != lane->block_size)
    return -EINVAL;

  /* From mmap, not the heap: page-aligned, so registration pins and the
   * NIC translates the fewest pages, and sharing no page with anything
   * else, so fork support's madvise(DONTFORK) hides only the lane from a
   * child.  Zeroed: the receiver only looks at a block whose status is
   * 1, and a fresh lane's first look is deterministic. */
  c->blocks = sbr__verbs_map(blocks_len);
  if (!c->blocks)
    return neg_errno(ENOMEM);
  c->blocks_len = blocks_len;

  /* Status bytes, padding, pause and refused bitmaps: one region the
   * sender READs; zero = every block empty, nothing paused or refused. */
  size_t status_len = sbr__lane_status_len(lane);
  c->status = sbr__verbs_map(status_len);
  if (!c->status) {
    ret = neg_errno(ENOMEM);
    goto out_unmap_blocks;
  }
  c->status_len = status_len;

  /* Placed before registration pins (first touches) the pages: on the
   * NIC's NUMA node by default, whose DMA then crosses no socket link,
   * and in huge pages where the host allows them. */
  c->numa_node = sbr__fabric_numa_node(
      f->numa_node, f->numa_node == SBR__NUMA_DEVICE
                        ? sbr__fabric_device_node(
                              "/sys", ibv_get_device_name(c->id->verbs->device))
                        : -1);
  bool bound = false;
  sbr__fabric_place(c->blocks, blocks_len, f->huge_pages, c->numa_node, c->peer,
                    &c->huge_advised, &bound);
  sbr__fabric_place(c->status, status_len, f->huge_pages, c->numa_node, c->peer,
                    NULL, NULL);
  if (!bound)
    c->numa_node = -1;

  /* Rule 8: no REMOTE_READ on the blocks.  Rule 1: no relaxed ordering.
   * REMOTE_WRITE needs LOCAL_WRITE in verbs.  With windows the MRs grant
   * no remote access at all: the windows bound to them do. */
  c->blocks_mr =
      ibv_reg_mr(c->pd, c->blocks, blocks_len,
                 windows ? sbr__verbs_window_mr_access()
                         : IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!c->blocks_mr) {
    ret = neg_errno(ENOMEM);
    goto out_unmap_status;
  }
  /* The sender READs the status array (and the bitmaps after it) to
   * synchronise and WRITEs status bytes after blocks.  It never WRITEs
   * the bitmaps; one MR can't forbid that, the engine's rule does. */
  c->status_mr =
      ibv_reg_mr(c->pd, c->status, status_len,
                 windows ? sbr__verbs_window_mr_access()
                         : IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
                               IBV_ACCESS_REMOTE_WRITE);
  if (!c->status_mr) {
    ret = neg_errno(ENOMEM);
    goto out_dereg_blocks;
  }
  return 0;

out_dereg_blocks:
  ibv_dereg_mr(c->blocks_mr);
  c->blocks_mr = NULL;
out_unmap_status:
  sbr__verbs_unmap(c->status, status_len);
  c->status = NULL;
out_unmap_blocks:
  sbr__verbs_unmap(c->blocks, blocks_len);
  c->blocks = NULL;
  return ret;
}

/* The lane's keys as type-2 windows bound to its QP: the QP to RTS first
 * (binds are send WRs), then one window per region with the access the
 * MR would otherwise have had (rule 8: no READ of the blocks). */
static int conn_bind_windows(struct sbr__conn *c, struct sbr__lane_desc *lane)
{
  /* initiator depth 0: the receiver never READs (as in its accept). */
  int ret = sbr__verbs_qp_to_rts(c->id, 0);
  if (ret)
    return ret;
  ret = sbr__verbs_bind_window(c->id->qp, c->send_cq, c->blocks_mr,
                               IBV_ACCESS_REMOTE_WRITE, VERBS_WINDOW_BIND_MS,
                               &c->blocks_mw, &lane->blocks_rkey);
  if (ret)
    return ret;
  return sbr__verbs_bind_window(
      c->id->qp, c->send_cq, c->status_mr,
      IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE, VERBS_WINDOW_BIND_MS,
      &c->status_mw, &lane->status_rkey);
}

/* Refuses a request with reason and its two values (the id stays the
 * caller's to destroy). */
static void reject_id(struct rdma_cm_id *id, enum sbr_refusal reason,
                      uint32_t receiver_value, uint32_t sender_value)
{
  struct sbr__refusal why;
  uint8_t priv[SBR__REJECT_PRIV_SIZE];
  sbr__refusal_set(&why, reason, receiver_value, sender_value);
  sbr__reject_priv_encode(priv, &why);
  rdma_reject(id, priv, sizeof priv);
}

/* Refuses a lane the host can't pin at once, and for good (not as
 * "resources", which a sender retries until its timeout): 0 when the
 * lane fits under RLIMIT_MEMLOCK. */
static int lane_check_memlock(struct sbr__listener *l, struct sbr__conn *c,
                              const struct sbr__lane_desc *lane,
                              uint32_t *limit_kib, uint32_t *need_kib)
{
  struct sbr__verbs_memlock m;
  char msg[512];
  if (sbr__verbs_memlock_read(&m) < 0)
    return 0; /* can't tell: let the registration say */
  uint64_t need = lane_pinned_bytes(lane);
  if (sbr__verbs_memlock_check(&m, need, "a lane", msg, sizeof msg) == 0)
    return 0;
  SBR_ERROR("verbs: %s: cannot accept %s: %s", l->name, c->peer, msg);
  *limit_kib =
      (uint32_t)(m.limit / 1024 > UINT32_MAX ? UINT32_MAX : m.limit / 1024);
  *need_kib = (uint32_t)(need / 1024 > UINT32_MAX ? UINT32_MAX : need / 1024);
  return -ENOMEM;
}

/* Queues, lane memory and keys of a lane: windows bound to its QP, or its
 * MRs' keys.  *windows_broke says a failure came from the windows (the
 * caller then tries again without).  On failure sbr__verbs_conn_free_verbs
 * undoes what exists. */
static int conn_setup_lane(struct sbr__listener *l, struct sbr__conn *c,
                           const struct sbr__queue_caps *caps,
                           struct sbr__lane_desc *lane, bool windows,
                           bool *windows_broke)
{
  char errbuf[256] = "";
  int ret;
  *windows_broke = false;
  /* The binds are two send WRs on the lane's QP before anything else is
   * posted. */
  struct sbr__queue_caps qcaps = *caps;
  if (windows && qcaps.max_send_wr < VERBS_WINDOW_WRS)
    qcaps.max_send_wr = VERBS_WINDOW_WRS;
  ret = sbr__verbs_conn_create_queues(c, &qcaps, errbuf, sizeof errbuf);
  if (ret) {
    SBR_WARN("verbs: %s: cannot accept %s: %s", l->name, c->peer, errbuf);
    return ret;
  }
  struct sbr__fabric defaults;
  const struct sbr__fabric *f = caps->fabric;
  if (!f) {
    sbr__fabric_defaults(&defaults);
    f = &defaults;
  }
  ret = conn_alloc_lane(c, lane, f, windows);
  if (ret) {
    SBR_WARN("verbs: %s: cannot accept %s: lane of %u x %u bytes: %s", l->name,
             c->peer, lane->block_count, lane->block_size, strerror(-ret));
    return ret;
  }
  lane->blocks_addr = (uintptr_t)c->blocks;
  lane->status_addr = (uintptr_t)c->status;
  if (!windows) {
    lane->blocks_rkey = c->blocks_mr->rkey;
    lane->status_rkey = c->status_mr->rkey;
    return 0;
  }
  ret = conn_bind_windows(c, lane);
  if (ret) {
    SBR_WARN("verbs: %s: %s: memory windows: %s; memory regions from now on",
             l->name, c->peer, strerror(-ret));
    *windows_broke = true;
  }
  return ret;
}

/* The conn of a connect request: its id (taken from req: the request is
 * consumed, accepted or not, and a later reject() of it is a no-op), its
 * listener and its peer's name.  NULL when out of memory, the request
 * then refused and its id destroyed. */
static struct sbr__conn *conn_of_request(struct sbr__listener *l,
                                         struct sbr__conn_request *req)
{
  struct rdma_cm_id *id = req->impl;
  req->impl = NULL;
  struct sbr__conn *c = calloc(1, sizeof *c);
  if (!c) {
    reject_id(id, SBR_REFUSAL_RESOURCES, ENOMEM, 0);
    rdma_destroy_id(id);
    return NULL;
  }
  c->id = id;
  c->listener = l;
  atomic_fetch_add(&l->refs, 1);
  snprintf(c->peer, sizeof c->peer, "%s", req->peer);
  return c;
}

/* The lane's id options, queues, memory and keys.  *windows says whether
 * its keys are type-2 windows (verbs-keys.h), where the device binds
 * them.  If they fail, this lane is set up again with MR keys, and so is
 * every later one: the sender is not refused for the device's
 * shortcoming. */
static int conn_build_lane(struct sbr__listener *l, struct sbr__conn *c,
                           const struct sbr__queue_caps *caps,
                           struct sbr__lane_desc *lane, bool *windows)
{
  /* The ACK timeout of the lane's QP, which rdma_cm applies when it
   * (or sbr__verbs_qp_to_rts, for windows) takes the QP to RTS: how fast
   * a probe of a quiet lane finds a dead sender (receiver.c).  And the
   * TOS, where rdma_cm uses the passive side's (on RoCE the QP takes the
   * connect request's traffic class). */
  struct sbr__fabric fdefaults;
  if (!caps->fabric)
    sbr__fabric_defaults(&fdefaults);
  char why[256] = "";
  int ret =
      sbr__verbs_set_id_options(c->id, caps->fabric ? caps->fabric : &fdefaults,
                                c->peer, why, sizeof why);
  if (ret) {
    SBR_WARN("verbs: %s: cannot accept %s: %s", l->name, c->peer, why);
    return ret;
  }
  bool broke;
  *windows = sbr__verbs_listener_windows(l, c->id->verbs);
  ret = conn_setup_lane(l, c, caps, lane, *windows, &broke);
  if (ret && broke) {
    sbr__verbs_windows_failed(l);
    sbr__verbs_conn_free_verbs(c);
    *windows = false;
    ret = conn_setup_lane(l, c, caps, lane, *windows, &broke);
  }
  return ret;
}

/* rdma_accept with the lane as private data (over windows, the QP already
 * at RTS: sbr__verbs_accept_ready).  read_probe: the receiver will READ
 * the sender's probe target, so it needs READ credit. */
static int conn_send_accept(struct sbr__listener *l, struct sbr__conn *c,
                            const struct sbr__lane_desc *lane, bool windows,
                            bool read_probe)
{
  struct rdma_cm_id *id = c->id;
  uint8_t priv[SBR__ACCEPT_PRIV_SIZE];
  sbr__accept_priv_encode(priv, lane);
  struct rdma_conn_param param = {
      .private_data = priv,
      .private_data_len = sizeof priv,
      /* As many READ credits as the sender asked for, clipped to the
       * device (librdmacm computes this for RDMA_MAX_RESP_RES). */
      .responder_resources = RDMA_MAX_RESP_RES,
      /* READs: the probe's, one at a time, within the sender's
       * responder resources (librdmacm clips RDMA_MAX_INIT_DEPTH to
       * them and the device); else none. */
      .initiator_depth = read_probe ? RDMA_MAX_INIT_DEPTH : 0,
      .retry_count = VERBS_RETRY_COUNT,
      .rnr_retry_count = 7,
  };
  /* Before rdma_accept: events for this id may arrive right after it. */
  id->context = c;
  if (windows ? sbr__verbs_accept_ready(id, &param) : rdma_accept(id, &param)) {
    int ret = neg_errno(ECONNABORTED);
    id->context = NULL;
    /* Refused as out of resources, which the sender retries: the id
     * can't be accepted a second time. */
    SBR_WARN("verbs: %s: rdma_accept of %s failed: %s%s", l->name, c->peer,
             strerror(-ret),
             windows ? "; memory regions from now on (the sender retries)"
                     : "");
    if (windows)
      sbr__verbs_windows_failed(l);
    return ret;
  }
  return 0;
}

int sbr__verbs_accept(struct sbr__listener *l, struct sbr__conn_request *req,
                      const struct sbr__queue_caps *caps,
                      struct sbr__lane_desc *lane, struct sbr__conn **out,
                      struct sbr__lane_mem *mem)
{
  uint32_t limit_kib = 0, need_kib = 0;
  bool windows;
  int ret;
  if (!l || !req || !req->impl || !caps || !lane || !out || !mem)
    return -EINVAL;
  struct sbr__conn *c = conn_of_request(l, req);
  if (!c)
    return -ENOMEM;

  ret = lane_check_memlock(l, c, lane, &limit_kib, &need_kib);
  if (ret) {
    /* The engine counts and reports it under this reason too. */
    sbr__refusal_set(&req->refusal, SBR_REFUSAL_MEMLOCK, limit_kib, need_kib);
    reject_id(c->id, SBR_REFUSAL_MEMLOCK, limit_kib, need_kib);
    goto out_free_conn;
  }
  ret = conn_build_lane(l, c, caps, lane, &windows);
  if (ret)
    goto out_reject;
  /* A sender that offered a probe target (iWARP) is probed with a READ
   * of it, which lands here: a sink whose key never leaves the host
   * (REMOTE_WRITE on iWARP all the same, verbs-caps.c).  Not with
   * windows (IB only, whose senders offer none): their QP reached RTS
   * with no READ credit (conn_bind_windows). */
  bool read_probe = req->probe.len != 0 && !windows;
  if (read_probe) {
    ret = sbr__verbs_conn_create_probe(
        c, sbr__verbs_mr_access(0, c->id->verbs->device->transport_type));
    if (ret) {
      SBR_WARN("verbs: %s: cannot accept %s: registering the probe sink: %s",
               l->name, c->peer, strerror(-ret));
      goto out_reject;
    }
  }
  ret = conn_send_accept(l, c, lane, windows, read_probe);
  if (ret)
    goto out_reject;

  SBR_DEBUG("verbs: %s: accepted %s (qp %u, lane %u: %u blocks of %u bytes, "
            "%s)",
            l->name, c->peer, c->id->qp->qp_num, lane->lane_id,
            lane->block_count, lane->block_size,
            windows ? "keys: type-2 memory windows bound to the QP"
                    : "keys: memory regions (no type-2 windows)");
  sbr__verbs_log_fabric(c, c->peer);
  sbr__verbs_lanes_add(l, c);
  mem->blocks = c->blocks;
  mem->status = c->status;
  mem->windows = windows;
  if (read_probe) {
    mem->probe = req->probe;
    mem->probe_sink = c->probe;
    mem->probe_lkey = c->probe_mr->lkey;
  }
  *out = c;
  return 0;

out_reject:
  reject_id(c->id, SBR_REFUSAL_RESOURCES, (uint32_t)-ret, 0);
out_free_conn:
  atomic_store(&c->closing, true);
  sbr__verbs_conn_free(c);
  return ret;
}

void sbr__verbs_reject(struct sbr__listener *l, struct sbr__conn_request *req,
                       const struct sbr__refusal *why)
{
  if (!req || !req->impl || !why)
    return;
  struct rdma_cm_id *id = req->impl;
  req->impl = NULL;
  uint8_t priv[SBR__REJECT_PRIV_SIZE];
  sbr__reject_priv_encode(priv, why);
  if (rdma_reject(id, priv, sizeof priv))
    SBR_DEBUG("verbs: %s: rdma_reject of %s failed: %s", l->name, req->peer,
              strerror(errno));
  rdma_destroy_id(id);
}

void sbr__verbs_close_listener(struct sbr__listener *l)
{
  if (!l)
    return;
  /* Pending requests on it are refused by the kernel from now on; lanes
   * already accepted keep the channel alive through their references. */
  if (l->id) {
    rdma_destroy_id(l->id);
    l->id = NULL;
  }
  sbr__verbs_listener_unref(l);
}
