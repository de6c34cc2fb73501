/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * verbs-connect.c - the sender's side of connection set-up: resolve the
 * receiver, create the queues, connect with the connect private data and
 * read the lane description from the accept (the steps are in
 * transport-verbs.c's overview).
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
#include "transport/verbs/verbs-caps.h"
#include "transport/verbs/verbs-internal.h"
#include "transport/verbs/verbs-keys.h"

/* ---------------------------------------------------------------- sender */

/* A hint for each way rdma_cm says no, for the error the user reads. */
static const char *cm_failure_hint(const struct rdma_cm_event *e)
{
  switch (e->event) {
  case RDMA_CM_EVENT_ADDR_ERROR:
    if (e->status == -ENODEV)
      return "no RDMA device can reach that address (the route to it leaves "
             "by an interface without RDMA)";
    if (e->status == -ENETUNREACH)
      return "no route to that address";
    return "no RDMA device can reach that address (no route, or no ARP "
           "answer)?";
  case RDMA_CM_EVENT_ROUTE_ERROR:
    return "no route to that address over an RDMA device?";
  case RDMA_CM_EVENT_UNREACHABLE:
    return "the peer's RDMA stack does not answer (no RDMA device there, "
           "or UDP port 4791 blocked)?";
  case RDMA_CM_EVENT_REJECTED:
    if (e->status == VERBS_REJ_INVALID_SERVICE_ID)
      return "no receiver listening on that port?";
    if (e->status == VERBS_REJ_CONSUMER_DEFINED)
      return "the receiver refused the request (version or mechanism "
             "mismatch, or no lane free)?";
    return "rejected by the peer's connection manager";
  case RDMA_CM_EVENT_CONNECT_ERROR:
    return "the connection could not be completed";
  case RDMA_CM_EVENT_DEVICE_REMOVAL:
    return "the RDMA device went away";
  default:
    return "unexpected event";
  }
}

static int cm_failure_errno(const struct rdma_cm_event *e)
{
  /* rdma_resolve_addr/_route's own timeout and our deadline are the same
   * instant: report both as a timeout.  The two that no retry fixes keep
   * their errno: no RDMA device for that address (the route leaves by a
   * netdev without one), and no route at all.  Everything else may heal:
   * an ARP answer that did not come shows as ETIMEDOUT (the kernel keeps
   * asking until the resolve timeout), an "unreachable" route or an ICMP
   * error as EHOSTUNREACH. */
  if (e->event == RDMA_CM_EVENT_ADDR_ERROR ||
      e->event == RDMA_CM_EVENT_ROUTE_ERROR) {
    if (e->status == -ETIMEDOUT || e->status == -ENODEV ||
        e->status == -ENETUNREACH)
      return e->status;
  }
  switch (e->event) {
  case RDMA_CM_EVENT_REJECTED:
    return -ECONNREFUSED;
  case RDMA_CM_EVENT_ADDR_ERROR:
  case RDMA_CM_EVENT_ROUTE_ERROR:
  case RDMA_CM_EVENT_UNREACHABLE:
    return -EHOSTUNREACH;
  case RDMA_CM_EVENT_DEVICE_REMOVAL:
    return -ENODEV;
  default:
    return -ECONNABORTED;
  }
}

/* Waits for the event `expected` on the sender's channel until deadline.
 * Success: 0 and *out, still to be acked by the caller (its private data
 * lives until then).  Failure: the event (if any) is acked, errbuf says
 * what happened, a negative errno is returned. */
static int wait_cm_event(struct sbr__conn *c, uint64_t deadline, int timeout_ms,
                         enum rdma_cm_event_type expected, const char *hostport,
                         struct rdma_cm_event **out, char *errbuf,
                         size_t errlen)
{
  struct rdma_cm_event *e;
  for (;;) {
    int left = ms_left(deadline);
    if (left == 0) {
      sbr__errf(errbuf, errlen,
                "rdma_cm: cannot reach %s: timed out after %d ms waiting for "
                "%s",
                hostport, timeout_ms, rdma_event_str(expected));
      return -ETIMEDOUT;
    }
    struct pollfd pfd = {.fd = c->channel->fd, .events = POLLIN};
    int n = poll(&pfd, 1, left);
    if (n < 0 && errno != EINTR) {
      int ret = neg_errno(EIO);
      sbr__errf(errbuf, errlen, "rdma_cm: %s: poll failed: %s", hostport,
                strerror(-ret));
      return ret;
    }
    if (n <= 0)
      continue;
    if (rdma_get_cm_event(c->channel, &e) == 0)
      break;
    if (errno != EAGAIN && errno != EINTR) {
      int ret = neg_errno(EIO);
      sbr__errf(errbuf, errlen, "rdma_cm: %s: rdma_get_cm_event failed: %s",
                hostport, strerror(-ret));
      return ret;
    }
  }

  if (e->event == expected && e->status == 0) {
    *out = e;
    return 0;
  }
  int ret = cm_failure_errno(e);
  struct sbr__refusal why;
  /* An sbr receiver's refusal says why in the REJ's private data (status
   * is then 28, IB's consumer-defined reject); anything else (nobody on
   * that port: status 8, an old receiver's bare reject) is only refused. */
  if (e->event == RDMA_CM_EVENT_REJECTED &&
      sbr__reject_priv_decode(e->param.conn.private_data,
                              e->param.conn.private_data_len, &why) == 0) {
    char where[128];
    snprintf(where, sizeof where, "rdma_cm: the receiver at %s", hostport);
    sbr__refusal_errf(errbuf, errlen, where, &why);
    ret = sbr__refusal_errno(&why);
  } else {
    sbr__errf(errbuf, errlen, "rdma_cm: cannot reach %s: %s (status %d): %s",
              hostport, rdma_event_str(e->event), e->status,
              cm_failure_hint(e));
  }
  rdma_ack_cm_event(e);
  return ret;
}

/* Resolves host:port to the first IPv4/IPv6 address. */
static int resolve_host(const char *host, uint16_t port,
                        struct sockaddr_storage *ss, const char *hostport,
                        char *errbuf, size_t errlen)
{
  char service[8];
  snprintf(service, sizeof service, "%u", port);
  struct addrinfo hints = {
      .ai_family = AF_UNSPEC,
      .ai_socktype = SOCK_STREAM,
      .ai_flags = AI_NUMERICSERV,
  };
  struct addrinfo *res = NULL;
  int gai = getaddrinfo(host, service, &hints, &res);
  if (gai != 0) {
    sbr__errf(errbuf, errlen, "rdma_cm: cannot resolve %s: %s", hostport,
              gai_strerror(gai));
    return -EHOSTUNREACH;
  }
  int ret = -EHOSTUNREACH;
  for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
    if ((ai->ai_family == AF_INET || ai->ai_family == AF_INET6) &&
        ai->ai_addrlen <= sizeof *ss) {
      memcpy(ss, ai->ai_addr, ai->ai_addrlen);
      ret = 0;
      break;
    }
  }
  freeaddrinfo(res);
  if (ret)
    sbr__errf(errbuf, errlen, "rdma_cm: %s has no IPv4 or IPv6 address",
              hostport);
  return ret;
}

/* Step 1 of connect: the sender's own event channel and its one cm_id.
 * poll_cq later looks for DISCONNECTED on the channel without blocking.
 * On failure sbr__verbs_conn_free undoes whichever exists. */
static int connect_create_id(struct sbr__conn *c, const char *hostport,
                             const struct sbr__fabric *f, char *errbuf,
                             size_t errlen)
{
  int ret = sbr__verbs_open_channel(hostport, &c->channel, errbuf, errlen);
  if (ret)
    return ret;
  if (rdma_create_id(c->channel, &c->id, c, RDMA_PS_TCP)) {
    ret = neg_errno(ENOMEM);
    sbr__errf(errbuf, errlen, "rdma_cm: rdma_create_id failed: %s",
              strerror(-ret));
    return ret;
  }
  /* Both before resolving: the TOS goes into the route (RoCE v2: the
   * packets' traffic class and DSCP), and the ACK timeout is applied when
   * rdma_cm takes the QP to RTS.  A kernel without an option keeps its
   * default. */
  return sbr__verbs_set_id_options(c->id, f, hostport, errbuf, errlen);
}

/* Step 2: the peer's address and a route to it, which also picks the
 * device (c->id->verbs).  A source address binds the connection to the
 * device that has it. */
static int connect_resolve(struct sbr__conn *c, const char *host, uint16_t port,
                           const char *source, const char *hostport,
                           uint64_t deadline, int timeout_ms, char *errbuf,
                           size_t errlen)
{
  struct rdma_cm_event *e;
  struct sockaddr_storage dst;
  int ret = resolve_host(host, port, &dst, hostport, errbuf, errlen);
  if (ret)
    return ret;

  struct sockaddr_storage src;
  if (source) {
    ret = resolve_host(source, 0, &src, source, errbuf, errlen);
    if (ret)
      return -EINVAL;
  }

  /* rdma_cm's own resolution timeout ends with our deadline (at least
   * 1 ms: 0 would mean its default); either way the wait below ends. */
  if (rdma_resolve_addr(c->id, source ? (struct sockaddr *)&src : NULL,
                        (struct sockaddr *)&dst, ms_left(deadline) + 1)) {
    ret = neg_errno(EHOSTUNREACH);
    sbr__errf(errbuf, errlen, "rdma_cm: cannot reach %s: rdma_resolve_addr: %s",
              hostport, strerror(-ret));
    return ret;
  }
  ret = wait_cm_event(c, deadline, timeout_ms, RDMA_CM_EVENT_ADDR_RESOLVED,
                      hostport, &e, errbuf, errlen);
  if (ret)
    return ret;
  rdma_ack_cm_event(e);

  if (rdma_resolve_route(c->id, ms_left(deadline) + 1)) {
    ret = neg_errno(EHOSTUNREACH);
    sbr__errf(errbuf, errlen,
              "rdma_cm: cannot reach %s: rdma_resolve_route: %s", hostport,
              strerror(-ret));
    return ret;
  }
  ret = wait_cm_event(c, deadline, timeout_ms, RDMA_CM_EVENT_ROUTE_RESOLVED,
                      hostport, &e, errbuf, errlen);
  if (ret)
    return ret;
  rdma_ack_cm_event(e);
  return 0;
}

/* Step 3b, iWARP only: a probe target for the receiver's liveness READ.
 * There a zero-length WRITE completes once TCP has it and can't find a
 * dead sender; a READ completes only when this host answers it
 * (protocol.md, "Roles").  IB and RoCE acknowledge the WRITE in the NIC,
 * so they offer none and keep the key unexposed.  An sbr connect
 * request (16 bytes) is copied into full with the target appended, and
 * *priv, *priv_len point at it; other private data (tests) is left. */
static int connect_offer_probe(struct sbr__conn *c, const uint8_t **priv,
                               size_t *priv_len,
                               uint8_t full[SBR__CONNECT_PRIV_PROBE_SIZE],
                               const char *hostport, char *errbuf,
                               size_t errlen)
{
  if (c->id->verbs->device->transport_type != IBV_TRANSPORT_IWARP ||
      *priv_len != SBR__CONNECT_PRIV_SIZE)
    return 0;
  /* REMOTE_READ only: the receiver reads these zeros and nothing else. */
  int ret = sbr__verbs_conn_create_probe(c, IBV_ACCESS_REMOTE_READ);
  if (ret) {
    sbr__errf(errbuf, errlen, "verbs: %s: registering the probe target: %s",
              hostport, strerror(-ret));
    return ret;
  }
  memcpy(full, *priv, SBR__CONNECT_PRIV_SIZE);
  struct sbr__probe_target t = {.addr = (uintptr_t)c->probe,
                                .rkey = c->probe_mr->rkey,
                                .len = 8}; /* a few bytes do */
  sbr__connect_priv_add_probe(full, &t);
  *priv = full;
  *priv_len = SBR__CONNECT_PRIV_PROBE_SIZE;
  return 0;
}

/* Step 4: rdma_connect with the private data and wait for ESTABLISHED.
 * Success: *out is the event, to be acked by the caller once it has read
 * the accept's private data. */
static int connect_establish(struct sbr__conn *c, const uint8_t *priv,
                             size_t priv_len, uint8_t retry_count,
                             const char *hostport, uint64_t deadline,
                             int timeout_ms, struct rdma_cm_event **out,
                             char *errbuf, size_t errlen)
{
  /* The sender READs the status array: ask for READ credits (initiator
   * depth), clipped to what the device allows or rdma_connect says EINVAL.
   * responder_resources: one, for the receiver's liveness READ over iWARP
   * (connect_offer_probe; it has one probe in flight at most). */
  struct ibv_device_attr dev;
  int ret;
  if (ibv_query_device(c->id->verbs, &dev)) {
    ret = neg_errno(EIO);
    sbr__errf(errbuf, errlen, "verbs: ibv_query_device failed: %s",
              strerror(-ret));
    return ret;
  }
  struct rdma_conn_param param = {
      .private_data = priv,
      .private_data_len = (uint8_t)priv_len,
      .initiator_depth = (uint8_t)(dev.max_qp_init_rd_atom < VERBS_READ_DEPTH
                                       ? dev.max_qp_init_rd_atom
                                       : VERBS_READ_DEPTH),
      .responder_resources = dev.max_qp_rd_atom < 1 ? 0 : 1,
      /* Transport retries (both QPs: the receiver's takes the REQ's);
       * rnr 7 = retry forever: the sliding-window receiver may be
       * briefly out of receives. */
      .retry_count = retry_count,
      .rnr_retry_count = 7,
  };
  if (rdma_connect(c->id, &param)) {
    ret = neg_errno(ECONNABORTED);
    sbr__errf(errbuf, errlen, "rdma_cm: cannot reach %s: rdma_connect: %s",
              hostport, strerror(-ret));
    return ret;
  }
  return wait_cm_event(c, deadline, timeout_ms, RDMA_CM_EVENT_ESTABLISHED,
                       hostport, out, errbuf, errlen);
}

/* Step 5: the lane from the ESTABLISHED event's private data (acked here:
 * the data lives in the event), checked against what was asked for. */
static int connect_read_lane(struct rdma_cm_event *e, const uint8_t *priv,
                             size_t priv_len, const char *hostport,
                             struct sbr__lane_desc *lane, char *errbuf,
                             size_t errlen)
{
  size_t got = e->param.conn.private_data_len;
  int ret = sbr__accept_priv_decode(e->param.conn.private_data, got, lane);
  int peer_version = sbr__priv_version(e->param.conn.private_data, got);
  rdma_ack_cm_event(e);
  if (ret == -EPROTONOSUPPORT) {
    sbr__errf(errbuf, errlen,
              "rdma_cm: %s speaks sbr protocol version %d, this sender %d",
              hostport, peer_version, SBR__PRIV_VERSION);
    return ret;
  }
  if (ret) {
    sbr__errf(errbuf, errlen,
              "rdma_cm: %s accepted with an unusable lane description (%zu "
              "bytes of private data): not an sbr receiver, or another "
              "version?",
              hostport, got);
    return ret;
  }
  uint8_t want_mech;
  uint32_t hint_size, hint_count;
  if (sbr__connect_priv_decode(priv, priv_len, &want_mech, &hint_size,
                               &hint_count) == 0 &&
      lane->mechanism != want_mech) {
    sbr__errf(errbuf, errlen,
              "rdma_cm: %s answered with mechanism %u, %u was asked for",
              hostport, lane->mechanism, want_mech);
    return -EPROTO;
  }
  return 0;
}

int sbr__verbs_connect(const char *host, uint16_t port, const char *source,
                       const uint8_t *priv, size_t priv_len,
                       const struct sbr__queue_caps *caps, int timeout_ms,
                       struct sbr__conn **out, struct sbr__lane_desc *lane,
                       char *errbuf, size_t errlen)
{
  struct rdma_cm_event *e;
  char hostport[96];
  int ret;

  if (!host || !caps || !out || !lane || (priv_len && !priv))
    return -EINVAL;
  sbr__verbs_format_hostport(hostport, sizeof hostport, host, port);
  if (priv_len > VERBS_CONNECT_PRIV_MAX) {
    sbr__errf(errbuf, errlen,
              "rdma_cm: %s: %zu bytes of private data (rdma_cm allows %d)",
              hostport, priv_len, VERBS_CONNECT_PRIV_MAX);
    return -EINVAL;
  }
  if (timeout_ms <= 0)
    timeout_ms = VERBS_DEFAULT_TIMEOUT_MS;
  uint64_t deadline = now_ms() + (uint64_t)timeout_ms;

  /* Before this process registers anything (ibv_fork_init's rule). */
  sbr__verbs_fork_setup();
  struct sbr__conn *c = calloc(1, sizeof *c);
  if (!c) {
    sbr__errf(errbuf, errlen, "verbs: out of memory");
    return -ENOMEM;
  }
  snprintf(c->peer, sizeof c->peer, "%s", hostport);
  struct sbr__fabric defaults;
  const struct sbr__fabric *f = caps->fabric;
  if (!f) {
    sbr__fabric_defaults(&defaults);
    f = &defaults;
  }

  ret = connect_create_id(c, hostport, f, errbuf, errlen);
  if (ret)
    goto out_free_conn;
  ret = connect_resolve(c, host, port, source, hostport, deadline, timeout_ms,
                        errbuf, errlen);
  if (ret)
    goto out_free_conn;
  ret = sbr__verbs_conn_create_queues(c, caps, errbuf, errlen);
  if (ret)
    goto out_free_conn;
  uint8_t full[SBR__CONNECT_PRIV_PROBE_SIZE];
  ret =
      connect_offer_probe(c, &priv, &priv_len, full, hostport, errbuf, errlen);
  if (ret)
    goto out_free_conn;
  ret = connect_establish(c, priv, priv_len, f->retry_count, hostport, deadline,
                          timeout_ms, &e, errbuf, errlen);
  if (ret)
    goto out_free_conn;
  ret = connect_read_lane(e, priv, priv_len, hostport, lane, errbuf, errlen);
  if (ret)
    goto out_disconnect;

  c->next_cm_check_ms = now_ms() + VERBS_CM_CHECK_MS;
  SBR_DEBUG("verbs: connected to %s on %s (qp %u, lane %u: %u blocks of %u "
            "bytes, epoch %u)",
            hostport, ibv_get_device_name(c->id->verbs->device),
            c->id->qp->qp_num, lane->lane_id, lane->block_count,
            lane->block_size, lane->epoch);
  sbr__verbs_log_fabric(c, hostport);
  *out = c;
  return 0;

  /* sbr__verbs_conn_free undoes every step that was done (its order is written
   * above it); an established connection is told first that we are leaving. */
out_disconnect:
  rdma_disconnect(c->id);
out_free_conn:
  sbr__verbs_conn_free(c);
  return ret;
}
