/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * receiver-liveness.c - is a quiet lane's sender still there?  On the
 * receive thread: a lane nothing landed in for probe_after_ms is probed
 * (a zero-length WRITE, or a READ over iWARP), and closed as departed when
 * the probe fails or goes unanswered; a sender that connects again from a
 * quiet lane's address replaces that lane.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "util/log.h"
#include "engine/receiver-internal.h"

/* A probe a live sender's NIC has not answered in this long has lost a
 * try at least (the ACK timeout is 134 ms): its lane may be replaced by
 * a new one from the same address. */
#define PROBE_UNANSWERED_NS 250000000u
/* A READ probe (iWARP) has no NIC retry budget that ends it: TCP would
 * retransmit it for minutes (tcp_retries2).  So the receiver gives it the
 * budget ack_timeout gives the WRITE on RoCE (probe_read_deadline_ns),
 * but never less than this: a live sender's kernel answers in
 * milliseconds, and the floor is generous for a loaded host.  By
 * default a dead sender's lane closes about 3 s after its last block,
 * against RoCE's 2 s. */
#define PROBE_READ_MIN_NS 2000000000u
/* The tries a RoCE NIC makes with the receiver's retry count (6). */
#define PROBE_READ_TRIES 7u
/* The probe's wr_id: the status-byte receiver posts nothing else. */
#define PROBE_WR_ID UINT64_MAX

/* Whether quiet lanes are probed: only where a peer can vanish unheard
 * (verbs), and only under the status-byte engine, which posts nothing
 * else on the lane's QP and polls nothing (the sliding-window engine's
 * ACK thread owns its CQ). */
bool sbr__receiver_probes_lanes(const struct sbr_receiver *r)
{
  return r->ops->peer_can_vanish && r->cfg.probe_after_ms &&
         r->cfg.mechanism == SBR_MECH_STATUS_BYTE;
}

/* The sender stopped answering: the lane ends as if it had left. */
static void lane_silent(struct sbr_receiver *r, struct sbr__lane *lane,
                        const char *why)
{
  SBR_WARN("receiver: lane %u for %s: %s; closing it", lane->id, lane->peer,
           why);
  pthread_mutex_lock(&r->stats_lock);
  r->stats.lanes_silent_closed++;
  pthread_mutex_unlock(&r->stats_lock);
  sbr__lane_disconnected(lane);
}

/* The READ probe's deadline (PROBE_READ_MIN_NS). */
static uint64_t probe_read_deadline_ns(const struct sbr_receiver *r)
{
  /* Each try 4.096 us x 2^ack_timeout (0: rdma_cm's own, unknown here). */
  uint64_t ns = r->cfg.ack_timeout && r->cfg.ack_timeout < 32
                    ? (4096ull << r->cfg.ack_timeout) * PROBE_READ_TRIES
                    : 0;
  return ns > PROBE_READ_MIN_NS ? ns : PROBE_READ_MIN_NS;
}

/* A lane nothing landed in for probe_after_ms gets one signaled
 * zero-length RDMA WRITE (no rkey needed: IBTA C9-88).  The sender's NIC
 * answers it whatever its process is doing; when no ACK comes, the NIC
 * retries (ack_timeout, the sender's retry count) and completes it in
 * error, and the lane closes.  Over iWARP the WRITE completes once TCP
 * has it, so there the sender offers a few bytes to READ instead
 * (lane_mem.probe), which complete only when its host answers, and the
 * READ gets a deadline of its own (probe_read_deadline_ns): past it the
 * lane closes as departed, and its close moves the QP to error, which
 * flushes the READ.  Receiver thread. */
void sbr__lane_check_alive(struct sbr_receiver *r, struct sbr__lane *lane,
                           uint64_t now)
{
  const struct sbr__lane_mem *m = &lane->mem;
  if (lane->probing) {
    struct sbr__wc wc;
    int n = r->ops->poll_cq(lane->conn, &wc, 1);
    uint64_t limit = probe_read_deadline_ns(r);
    if (n == 0 && m->probe.len && now >= lane->probe_ns &&
        now - lane->probe_ns >= limit) {
      char why[80];
      snprintf(why, sizeof why, "it did not answer a READ probe in %.1f s",
               (double)limit / 1e9);
      lane->probing = false;
      lane_silent(r, lane, why);
      return;
    }
    if (n == 0)
      return;
    lane->probing = false;
    if (n > 0 && wc.status == SBR__WC_SUCCESS) {
      lane->heard_ns = now;
      return;
    }
    lane_silent(r, lane,
                n < 0 ? "its connection failed while probed"
                      : "it did not answer a probe (the NIC gave up)");
    return;
  }
  /* now is when this pass began, and a lane accepted during it was heard
   * later: without the first test the difference wraps and the new lane
   * is probed at once.  Over iWARP that WRITE could reach the sender with
   * the MPA reply, before its connect completed, and siw fails that
   * connect (extra data after the reply: CONNECT_ERROR, EINVAL); MPA
   * (RFC 5044 7.1.2) wants the responder to let the initiator send
   * first. */
  if (now < lane->heard_ns ||
      now - lane->heard_ns < (uint64_t)r->cfg.probe_after_ms * 1000000u)
    return;
  struct sbr__wr wr = {
      .wr_id = PROBE_WR_ID, .opcode = SBR__OP_WRITE, .signaled = true};
  if (m->probe.len) {
    wr.opcode = SBR__OP_READ;
    wr.local_addr = m->probe_sink;
    wr.lkey = m->probe_lkey;
    wr.length = m->probe.len;
    wr.remote_addr = m->probe.addr;
    wr.rkey = m->probe.rkey;
  }
  int ret = r->ops->post_send(lane->conn, &wr, 1);
  if (ret == 0) {
    lane->probing = true;
    lane->probe_ns = now;
    atomic_fetch_add(&r->probes_posted, 1);
  } else if (ret != -ENOTCONN)
    SBR_WARN("receiver: lane %u: probe not posted: %d", lane->id, ret);
}

static bool same_host(const struct sockaddr_storage *a,
                      const struct sockaddr_storage *b)
{
  if (a->ss_family != b->ss_family)
    return false;
  if (a->ss_family == AF_INET)
    return !memcmp(&((const struct sockaddr_in *)a)->sin_addr,
                   &((const struct sockaddr_in *)b)->sin_addr,
                   sizeof(struct in_addr));
  if (a->ss_family == AF_INET6)
    return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                   &((const struct sockaddr_in6 *)b)->sin6_addr,
                   sizeof(struct in6_addr));
  return false; /* AF_UNSPEC: no address to compare */
}

/* A sender that comes back (rebooted, its link healed) connects from the
 * address of its quiet old lane before the probe of it has failed: that
 * lane closes now, so its devices are free for the new one.  Only a lane
 * whose probe is going unanswered: one host may run several senders,
 * and an idle or paused one answers its probe at once. */
void sbr__lane_replace_quiet(struct sbr_receiver *r,
                             const struct sbr__lane *fresh)
{
  if (!sbr__receiver_probes_lanes(r))
    return;
  uint64_t now = sbr__now_ns();
  for (struct sbr__lane *l = r->lanes; l; l = l->next)
    if (!l->disconnected && l->probing &&
        now - l->probe_ns >= PROBE_UNANSWERED_NS &&
        same_host(&l->peer_addr, &fresh->peer_addr))
      lane_silent(r, l, "quiet, and its address connected again");
}
