/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * transport-verbs.c - the rdma-core back end: librdmacm sets connections up,
 * libibverbs moves the data.
 *
 * Connection setup (docs/protocol.md, "Connection setup"), one RC QP per
 * sender:
 *
 *   sender                                  receiver
 *   ------                                  --------
 *                                           rdma_bind_addr, rdma_listen
 *   rdma_resolve_addr  -> ADDR_RESOLVED
 *   rdma_resolve_route -> ROUTE_RESOLVED
 *   PD, CQ, QP
 *   rdma_connect(connect priv, 16 bytes) -> CONNECT_REQUEST
 *                                           PD, CQ, QP, lane memory + 2 MRs
 *                                           [windows: QP to RTS, 2 binds]
 *                     ESTABLISHED <-------- rdma_accept(accept priv, 56 bytes)
 *   decode the lane                         ESTABLISHED (just acked)
 *
 * The private data codecs live in wire/private-data.c; this file only
 * carries the bytes.  The receiver's lane is two allocations: the blocks
 * (registered LOCAL_WRITE | REMOTE_WRITE only, so a READ of them fails: rule 8)
 * and the status array (LOCAL_WRITE | REMOTE_READ | REMOTE_WRITE, the sender
 * reads it to synchronise).  Where the device binds type-2 memory windows,
 * those rights come from two windows bound to the lane's QP and the MRs have
 * none (verbs-keys.h says why and in which order).  Nothing is registered with
 * IBV_ACCESS_RELAXED_ORDERING (rule 1: the status WRITE must land after the
 * data WRITE it follows).
 *
 * Event channels.  A sender owns one channel for its one cm_id; its fd is
 * non-blocking so poll_cq can look for DISCONNECTED without waiting.  On the
 * receiver, rdma_cm reports events of every accepted id on the listener's
 * channel, so that channel is shared: the listener and every conn it
 * accepted hold a reference, and the last one to go closes it (a lane may
 * outlive sbr_receiver_free while the application still holds blocks, and
 * closing the channel under a live id would leave librdmacm writing to a
 * dead fd).
 *
 * Error codes: connect returns the errno of the receiver's refusal when a
 * REJECTED event carries sbr reject private data (sbr__refusal_errno:
 * -EPROTONOSUPPORT, -EACCES, -EPROTO, -EBUSY, -ECONNREFUSED), else
 * -ECONNREFUSED (REJECTED), -ENODEV (no rdma_cm, no RDMA device for that
 * address, device removal), -ENETUNREACH (no route), -EHOSTUNREACH (other
 * ADDR_ERROR, ROUTE_ERROR, UNREACHABLE, name lookup failure), -ECONNABORTED
 * (CONNECT_ERROR, anything unexpected), -ETIMEDOUT (deadline, or address/
 * route resolution timed out), -EPROTO (the receiver's lane description is
 * unusable).  timeout_ms <= 0 means 5 s: a connect never waits forever.
 *
 * Refusals: the receiver rejects with 16 bytes of reject private data
 * (wire/private-data.h); rdma_reject makes that an IB CM REJ with reason 28
 * (consumer defined) whose private data the sender's REJECTED event
 * carries (148 bytes over IB CM, the rest zero).
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
#include "transport/nic-counters.h"
#include "transport/verbs/verbs-async.h"
#include "transport/verbs/verbs-caps.h"
#include "transport/verbs/verbs-keys.h"
#include "transport/verbs/verbs-internal.h"

void sbr__verbs_format_hostport(char *buf, size_t len, const char *host,
                                uint16_t port)
{
  if (strchr(host, ':'))
    snprintf(buf, len, "[%s]:%u", host, port);
  else
    snprintf(buf, len, "%s:%u", host, port);
}

void sbr__verbs_format_sockaddr(char *buf, size_t len,
                                const struct sockaddr *sa)
{
  char ip[INET6_ADDRSTRLEN] = "?";
  if (sa && sa->sa_family == AF_INET) {
    const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
    inet_ntop(AF_INET, &in->sin_addr, ip, sizeof ip);
    snprintf(buf, len, "%s:%u", ip, ntohs(in->sin_port));
  } else if (sa && sa->sa_family == AF_INET6) {
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
    inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof ip);
    snprintf(buf, len, "[%s]:%u", ip, ntohs(in6->sin6_port));
  } else {
    snprintf(buf, len, "?");
  }
}

static int set_nonblocking(int fd)
{
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
    return neg_errno(EIO);
  return 0;
}

/* A new event channel whose fd never blocks: every wait here polls it with
 * a deadline, and nothing may sleep in rdma_get_cm_event.  Returns 0 or a
 * negative errno with errbuf naming where. */
int sbr__verbs_open_channel(const char *hostport,
                            struct rdma_event_channel **out, char *errbuf,
                            size_t errlen)
{
  struct rdma_event_channel *ch = rdma_create_event_channel();
  if (!ch) {
    /* ENODEV whatever librdmacm said (ENOENT without /dev/infiniband/
     * rdma_cm): no RDMA here, and no retry brings it. */
    sbr__errf(errbuf, errlen,
              "rdma_cm: %s: cannot open the RDMA connection manager: %s (no "
              "RDMA device, or rdma_ucm not loaded?)",
              hostport, strerror(errno ? errno : ENODEV));
    return -ENODEV;
  }
  int ret = set_nonblocking(ch->fd);
  if (ret) {
    sbr__errf(errbuf, errlen,
              "rdma_cm: %s: cannot make the channel non-blocking: %s", hostport,
              strerror(-ret));
    rdma_destroy_event_channel(ch);
    return ret;
  }
  *out = ch;
  return 0;
}

void sbr__verbs_listener_unref(struct sbr__listener *l)
{
  if (atomic_fetch_sub(&l->refs, 1) != 1)
    return;
  /* Last user: every id on the channel is destroyed by now. */
  rdma_destroy_event_channel(l->channel);
  sbr__verbs_listener_watch_free(l);
  pthread_mutex_destroy(&l->lanes_lock);
  free(l);
}

/* A windowed lane of l failed (the device refused a bind or took too long
 * over one, or an older librdmacm refused rdma_accept on an id without a
 * QP, verbs-keys.h): every later lane of this listener gets MR keys.  A
 * bind that times out counts too: iWARP-like devices never complete a
 * bind before the accept, and one slow bind already cost the receiver's
 * thread VERBS_WINDOW_BIND_MS; "slow" isn't worth a second try. */
void sbr__verbs_windows_failed(struct sbr__listener *l)
{
  atomic_store(&l->no_windows, true);
}

/* Whether a lane of l on the device ctx gets windows: not once a windowed
 * lane of l failed, not where configuration says so, and only where the
 * device advertises type-2 windows (never on iWARP, verbs-caps.h) and two
 * can really be allocated: bnxt_re's kernel advertises windows its
 * provider can't allocate.  That probe runs once per device (at listen
 * when the listener is bound to a device's address). */
bool sbr__verbs_listener_windows(struct sbr__listener *l,
                                 struct ibv_context *ctx)
{
  if (atomic_load(&l->no_windows) || sbr__verbs_config()->windows_off)
    return false;
  int i;
  for (i = 0; i < VERBS_PROBED_DEVICES && l->probed[i]; i++)
    if (l->probed[i] == ctx)
      return l->probed_ok[i];
  bool ok = sbr__verbs_windows_supported(ctx) && sbr__verbs_windows_probe(ctx);
  SBR_DEBUG("verbs: %s: %s: lane keys are %s", l->name,
            ibv_get_device_name(ctx->device),
            ok ? "type-2 memory windows" : "memory regions");
  if (i < VERBS_PROBED_DEVICES) {
    l->probed[i] = ctx;
    l->probed_ok[i] = ok;
  }
  return ok;
}

/* ------------------------------------------------- conn setup/teardown */

/* The bounce slots for "inline" WRs the QP can't take inline: one per
 * send-queue slot, so a slot is reused only after its WR completed. */
static int conn_create_bounce(struct sbr__conn *c, char *errbuf, size_t errlen)
{
  c->bounce_len = (size_t)c->sent_cap * VERBS_BOUNCE_SLOT;
  c->bounce = sbr__verbs_map(c->bounce_len);
  if (!c->bounce) {
    sbr__errf(errbuf, errlen, "verbs: out of memory");
    return -ENOMEM;
  }
  c->bounce_mr =
      ibv_reg_mr(c->pd, c->bounce, c->bounce_len, IBV_ACCESS_LOCAL_WRITE);
  if (!c->bounce_mr) {
    int ret = neg_errno(ENOMEM);
    sbr__errf(errbuf, errlen, "verbs: registering %zu bounce bytes: %s",
              c->bounce_len, strerror(-ret));
    sbr__verbs_unmap(c->bounce, c->bounce_len);
    c->bounce = NULL;
    return ret;
  }
  return 0;
}

int sbr__verbs_conn_create_probe(struct sbr__conn *c, int ibv_access)
{
  /* A page of its own (mmap): fork support's madvise then hides nothing
   * else from a child. */
  c->probe_map_len = SBR__PROBE_MAX;
  c->probe = sbr__verbs_map(c->probe_map_len);
  if (!c->probe)
    return -ENOMEM;
  c->probe_mr = ibv_reg_mr(c->pd, c->probe, SBR__PROBE_MAX, ibv_access);
  if (!c->probe_mr)
    return neg_errno(ENOMEM);
  return 0;
}

/* rdma_create_qp with the most inline room the device takes, up to
 * want_inline: a device with less (X722: 48) or none refuses the QP
 * outright, so each refusal steps the size down, to 0 at worst.  attr's
 * cap says what the QP got. */
static int conn_create_qp(struct sbr__conn *c, struct ibv_qp_init_attr *attr,
                          uint32_t want_inline)
{
  uint32_t inl = want_inline;
  for (;;) {
    attr->cap.max_inline_data = inl;
    if (rdma_create_qp(c->id, c->pd, attr) == 0)
      return 0;
    int ret = neg_errno(EINVAL);
    if (inl == 0 || (ret != -EINVAL && ret != -ENOMEM))
      return ret;
    inl = sbr__verbs_inline_after(inl);
  }
}

/* The queue depths caps asks for, checked and clamped to c's device.  Every
 * WR that can complete has a CQ slot, so neither CQ can overrun while the
 * engine keeps within its caps.  A device with smaller queues gets smaller
 * ones rather than no QP at all (every device listed in docs/hardware.md
 * takes thousands); an engine that then posts more than fits gets -ENOMEM
 * from post_send, after this warning said why. */
static int conn_size_queues(struct sbr__conn *c,
                            const struct sbr__queue_caps *caps,
                            struct sbr__verbs_queues *q, char *errbuf,
                            size_t errlen)
{
  if (caps->max_send_wr > (1u << 20) || caps->max_recv_wr > (1u << 20)) {
    sbr__errf(errbuf, errlen, "verbs: queue sizes %u/%u are too large",
              caps->max_send_wr, caps->max_recv_wr);
    return -EINVAL;
  }
  if (caps->max_inline > VERBS_BOUNCE_SLOT) {
    sbr__errf(errbuf, errlen, "verbs: %u inline bytes asked for (at most %d)",
              caps->max_inline, VERBS_BOUNCE_SLOT);
    return -EINVAL;
  }
  struct ibv_device_attr dev;
  if (ibv_query_device(c->id->verbs, &dev)) {
    int ret = neg_errno(EIO);
    sbr__errf(errbuf, errlen, "verbs: ibv_query_device failed: %s",
              strerror(-ret));
    return ret;
  }
  sbr__verbs_size_queues(caps->max_send_wr, caps->max_recv_wr, VERBS_CQ_SLACK,
                         dev.max_qp_wr, dev.max_cqe, q);
  if (q->clamped)
    SBR_WARN("verbs: %s: %s takes queues of %d WRs and CQs of %d entries: "
             "send/receive queues of %u/%u instead of %u/%u",
             c->peer, ibv_get_device_name(c->id->verbs->device), dev.max_qp_wr,
             dev.max_cqe, q->send_wr, q->recv_wr, caps->max_send_wr,
             caps->max_recv_wr);
  return 0;
}

/* What wakes a sender's thread that sleeps on a completion (wait_cq): a
 * completion channel, non-blocking so wait_cq can drain it after poll(),
 * and kick_cq's eventfd beside it.  Only for a conn with its own event
 * channel (a sender's); the receiver's lanes never sleep on completions.
 * On failure the caller's teardown (conn_destroy_wakeup) undoes what was
 * made. */
static int conn_create_wakeup(struct sbr__conn *c, char *errbuf, size_t errlen)
{
  if (!c->channel)
    return 0;
  c->comp = ibv_create_comp_channel(c->id->verbs);
  if (!c->comp || set_nonblocking(c->comp->fd) < 0) {
    int ret = neg_errno(ENOMEM);
    sbr__errf(errbuf, errlen, "verbs: ibv_create_comp_channel failed: %s",
              strerror(-ret));
    return ret;
  }
  c->kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (c->kick_fd < 0) {
    int ret = neg_errno(ENOMEM);
    sbr__errf(errbuf, errlen, "verbs: eventfd failed: %s", strerror(-ret));
    return ret;
  }
  c->kick_ready = true;
  return 0;
}

static void conn_destroy_wakeup(struct sbr__conn *c)
{
  if (c->kick_ready)
    close(c->kick_fd);
  c->kick_ready = false;
  if (c->comp)
    ibv_destroy_comp_channel(c->comp);
  c->comp = NULL;
}

/* One CQ of cqe entries on c's completion channel (if any) and vector,
 * with c as its context (an async event on it names its connection). */
static int conn_create_cq(struct sbr__conn *c, int cqe, struct ibv_cq **out,
                          char *errbuf, size_t errlen)
{
  *out = ibv_create_cq(c->id->verbs, cqe, c, c->comp, c->comp_vector);
  if (*out)
    return 0;
  int ret = neg_errno(ENOMEM);
  sbr__errf(errbuf, errlen, "verbs: ibv_create_cq(%d) failed: %s", cqe,
            strerror(-ret));
  return ret;
}

/* Two CQs: a completion's CQ says which queue it came from even when its
 * opcode is undefined (error and flush completions).  Lanes spread over
 * the completion vectors (their interrupts reach as many cores) unless
 * the fabric settings pin one.  On failure the caller's teardown
 * (conn_destroy_cqs) undoes what was made. */
static int conn_create_cqs(struct sbr__conn *c, const struct sbr__fabric *f,
                           const struct sbr__verbs_queues *q, char *errbuf,
                           size_t errlen)
{
  struct sbr__fabric defaults;
  if (!f) {
    sbr__fabric_defaults(&defaults);
    f = &defaults;
  }
  c->comp_vector = sbr__fabric_comp_vector(f->comp_vector, f->comp_index,
                                           c->id->verbs->num_comp_vectors);
  int ret = conn_create_cq(c, q->send_cqe, &c->send_cq, errbuf, errlen);
  if (ret)
    return ret;
  return conn_create_cq(c, q->recv_cqe, &c->recv_cq, errbuf, errlen);
}

static void conn_destroy_cqs(struct sbr__conn *c)
{
  if (c->recv_cq)
    ibv_destroy_cq(c->recv_cq);
  c->recv_cq = NULL;
  if (c->send_cq)
    ibv_destroy_cq(c->send_cq);
  c->send_cq = NULL;
}

/* The RC QP on c's CQs, with as much of the engine's max_inline as the
 * device (and the config) allows: c->max_inline says how much it got. */
static int conn_create_rc_qp(struct sbr__conn *c, uint32_t max_inline,
                             const struct sbr__verbs_queues *q, char *errbuf,
                             size_t errlen)
{
  /* c as the QP's and CQs' context: an async event on them names its
   * connection (verbs-async.c). */
  struct ibv_qp_init_attr attr = {
      .qp_context = c,
      .send_cq = c->send_cq,
      .recv_cq = c->recv_cq,
      .qp_type = IBV_QPT_RC,
      .cap =
          {
              .max_send_wr = q->send_wr,
              .max_recv_wr = q->recv_wr,
              .max_send_sge = 1,
              .max_recv_sge = 1,
          },
      /* Selective signalling: the engine decides which WRs complete. */
      .sq_sig_all = 0,
  };
  uint32_t want_inline = max_inline;
  int cfg_inline = sbr__verbs_config()->max_inline;
  if (cfg_inline >= 0 && want_inline > (uint32_t)cfg_inline)
    want_inline = (uint32_t)cfg_inline;
  int ret = conn_create_qp(c, &attr, want_inline);
  if (ret) {
    /* EINVAL is also what a connect request says once its sender has
     * given up on it (rdma_cm cannot set up a QP for a dead request). */
    sbr__errf(errbuf, errlen,
              "verbs: rdma_create_qp (send %u, recv %u, inline %u down to 0) "
              "on %s failed: %s%s",
              q->send_wr, q->recv_wr, want_inline,
              ibv_get_device_name(c->id->verbs->device), strerror(-ret),
              ret == -EINVAL ? " (sizes beyond the device, or the peer "
                               "already gave up?)"
                             : "");
    return ret;
  }
  c->qp_created = true;
  /* The provider may round up (rxe: 0 becomes 16); it never gives less
   * than asked.  A configured cap holds even so: it stands for a device
   * that has no more. */
  c->max_inline = attr.cap.max_inline_data;
  if (c->max_inline > want_inline)
    c->max_inline = want_inline;
  c->sent_cap = attr.cap.max_send_wr;
  return 0;
}

/* PD, two CQs, RC QP, the in-flight ring and, where the QP's inline room
 * is short, the bounce slots on c->id (which must have id->verbs: address
 * resolved or a connect request).  Queue depths are clamped to the
 * device.  On failure none of them is left. */
int sbr__verbs_conn_create_queues(struct sbr__conn *c,
                                  const struct sbr__queue_caps *caps,
                                  char *errbuf, size_t errlen)
{
  struct sbr__verbs_queues q;
  int ret = conn_size_queues(c, caps, &q, errbuf, errlen);
  if (ret)
    return ret;
  c->pd = ibv_alloc_pd(c->id->verbs);
  if (!c->pd) {
    ret = neg_errno(ENOMEM);
    sbr__errf(errbuf, errlen, "verbs: ibv_alloc_pd on %s failed: %s",
              ibv_get_device_name(c->id->verbs->device), strerror(-ret));
    return ret;
  }
  ret = conn_create_wakeup(c, errbuf, errlen);
  if (ret)
    goto out_destroy_wakeup;
  ret = conn_create_cqs(c, caps->fabric, &q, errbuf, errlen);
  if (ret)
    goto out_destroy_cqs;
  ret = conn_create_rc_qp(c, caps->max_inline, &q, errbuf, errlen);
  if (ret)
    goto out_destroy_cqs;
  /* One slot per send-queue entry (verbs-sent.h). */
  c->sent = calloc(c->sent_cap, sizeof *c->sent);
  if (!c->sent) {
    ret = -ENOMEM;
    sbr__errf(errbuf, errlen, "verbs: out of memory");
    goto out_destroy_qp;
  }
  if (c->max_inline < caps->max_inline) {
    SBR_INFO("verbs: %s: the QP takes %u inline bytes, the engine posts up "
             "to %u: longer ones are copied into registered memory at post "
             "time",
             c->peer, c->max_inline, caps->max_inline);
    ret = conn_create_bounce(c, errbuf, errlen);
    if (ret)
      goto out_free_sent;
  }
  return 0;

out_free_sent:
  free(c->sent);
  c->sent = NULL;
out_destroy_qp:
  rdma_destroy_qp(c->id);
  c->qp_created = false;
out_destroy_cqs:
  conn_destroy_cqs(c);
out_destroy_wakeup:
  conn_destroy_wakeup(c);
  ibv_dealloc_pd(c->pd);
  c->pd = NULL;
  return ret;
}

/* Frees every verbs object of c and the memory registered with them,
 * whatever part exists, and leaves c as calloc made it in those fields
 * (the id, its channel and the listener stay).  Order, each step skipped
 * when its setup never happened:
 *   0. Memory windows first: before the QP and the MRs they are bound to.
 *   1. QP before CQs: a CQ cannot be destroyed while a QP reports to it.
 *   2. CQs, then the MRs (lane, bounce), then the PD: a PD cannot go while
 *      a QP or MR uses it.
 *   3. Memory after its MRs: the HCA may write it until deregistered.
 * MRs made with reg_mr belong to the caller, who deregisters them before
 * close; if one is left, the PD is leaked rather than freed under it. */
int sbr__verbs_set_id_options(struct rdma_cm_id *id,
                              const struct sbr__fabric *f, const char *who,
                              char *errbuf, size_t errlen)
{
  if (f->tos != SBR__TOS_UNSET) {
    uint8_t tos = (uint8_t)f->tos;
    if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos,
                        sizeof tos)) {
      int ret = neg_errno(EINVAL);
      sbr__errf(errbuf, errlen, "rdma_cm: %s: tos %d not set: %s", who, f->tos,
                strerror(-ret));
      return ret;
    }
  }
  if (f->ack_timeout &&
      rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT,
                      (void *)&f->ack_timeout, sizeof f->ack_timeout))
    SBR_DEBUG("verbs: %s: ACK timeout %u not set: %s", who, f->ack_timeout,
              strerror(errno));
  return 0;
}

void sbr__verbs_log_fabric(struct sbr__conn *c, const char *who)
{
  struct ibv_qp_attr attr;
  struct ibv_qp_init_attr init;
  if (!c->id || !c->id->qp)
    return;
  memset(&attr, 0, sizeof attr);
  if (ibv_query_qp(c->id->qp, &attr,
                   IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_AV,
                   &init)) {
    SBR_DEBUG("verbs: %s: fabric: ibv_query_qp failed: %s", who,
              strerror(errno));
    return;
  }
  /* 4.096 us x 2^timeout a try, retry_cnt + 1 tries: when the NIC gives
   * a dead peer up (0: no timeout, the NIC waits forever). */
  uint64_t detect_ms = attr.timeout ? (4096ull << attr.timeout) *
                                          (attr.retry_cnt + 1u) / 1000000u
                                    : 0;
  char mem[64] = "no lane memory (sender)";
  if (c->blocks && c->numa_node >= 0)
    snprintf(mem, sizeof mem, "lane memory on NUMA node %d", c->numa_node);
  else if (c->blocks)
    snprintf(mem, sizeof mem, "lane memory on no NUMA node in particular");
  /* A receiver's QP reaches RTS, where the ACK timeout and retries are
   * set, only when the connection is established: say which state the
   * figures are from. */
  SBR_DEBUG("verbs: %s: fabric: QP %s: traffic class %u, ACK timeout %u, "
            "retries %u (a dead peer found after about %llu ms%s); "
            "completion vector %d of %d, %s%s",
            who,
            attr.qp_state == IBV_QPS_RTS   ? "in RTS"
            : attr.qp_state == IBV_QPS_RTR ? "in RTR (not yet RTS)"
                                           : "not yet RTS",
            attr.ah_attr.grh.traffic_class, attr.timeout, attr.retry_cnt,
            (unsigned long long)detect_ms, attr.timeout ? "" : ": never",
            c->comp_vector, c->id->verbs->num_comp_vectors, mem,
            !c->blocks        ? ""
            : c->huge_advised ? ", huge pages advised"
                              : ", no huge pages");
}

void sbr__verbs_conn_free_verbs(struct sbr__conn *c)
{
  int ret;

  /* Windows before the QP they are bound to (rxe: a bound window holds a
   * reference on its QP, and destroying the QP first waits for it, then
   * fails) and before the MRs they grant (ibv_dereg_mr fails while a
   * window is bound).  The QP goes to error first, so that a bind still
   * queued (timed out) is flushed, not executed under the dealloc. */
  struct ibv_mw *mws[2] = {c->blocks_mw, c->status_mw};
  if (c->qp_created && (mws[0] || mws[1])) {
    struct ibv_qp_attr err = {.qp_state = IBV_QPS_ERR};
    ibv_modify_qp(c->id->qp, &err, IBV_QP_STATE);
  }
  for (int i = 0; i < 2; i++) {
    ret = mws[i] ? ibv_dealloc_mw(mws[i]) : 0;
    if (ret)
      SBR_WARN("verbs: %s: ibv_dealloc_mw failed: %s", c->peer, strerror(ret));
  }
  c->blocks_mw = c->status_mw = NULL;
  if (c->qp_created)
    rdma_destroy_qp(c->id);
  c->qp_created = false;
  struct ibv_cq *cqs[2] = {c->send_cq, c->recv_cq};
  for (int i = 0; i < 2; i++) {
    ret = cqs[i] ? ibv_destroy_cq(cqs[i]) : 0;
    if (ret)
      SBR_WARN("verbs: %s: ibv_destroy_cq failed: %s", c->peer, strerror(ret));
  }
  c->send_cq = c->recv_cq = NULL;
  /* After its CQs; every event wait_cq took was acknowledged at once. */
  if (c->comp)
    ibv_destroy_comp_channel(c->comp);
  c->comp = NULL;
  if (c->kick_ready)
    close(c->kick_fd);
  c->kick_ready = false;
  struct ibv_mr *mrs[4] = {c->blocks_mr, c->status_mr, c->bounce_mr,
                           c->probe_mr};
  for (int i = 0; i < 4; i++)
    if (mrs[i])
      ibv_dereg_mr(mrs[i]);
  c->blocks_mr = c->status_mr = c->bounce_mr = c->probe_mr = NULL;
  if (c->pd) {
    ret = ibv_dealloc_pd(c->pd);
    if (ret)
      SBR_WARN("verbs: %s: ibv_dealloc_pd failed: %s (an MR still "
               "registered?)",
               c->peer, strerror(ret));
  }
  c->pd = NULL;
  sbr__verbs_unmap(c->blocks, c->blocks_len);
  sbr__verbs_unmap(c->status, c->status_len);
  sbr__verbs_unmap(c->bounce, c->bounce_len);
  sbr__verbs_unmap(c->probe, c->probe_map_len);
  c->blocks = c->status = c->bounce = c->probe = NULL;
  free(c->sent);
  c->sent = NULL;
  c->sent_cap = c->sent_head = c->sent_count = 0;
}

/* Frees whatever part of c exists: first, a receiver's lane leaves its
 * listener's list (verbs-async.c); its verbs objects
 * (sbr__verbs_conn_free_verbs), then
 *   4. the cm_id after its QP (rdma_destroy_id leaves the QP alone).  It
 *      also discards the id's events not yet read.
 *   5. Sender: its event channel, after its only id.  Receiver: drop the
 *      reference on the listener's channel; the last one closes it. */
void sbr__verbs_conn_free(struct sbr__conn *c)
{
  /* First: a DEVICE_FATAL looks at the listed lanes' ids. */
  if (c->listener)
    sbr__verbs_lanes_remove(c->listener, c);
  sbr__verbs_conn_free_verbs(c);
  if (c->id)
    rdma_destroy_id(c->id);
  if (c->channel)
    rdma_destroy_event_channel(c->channel);
  if (c->listener)
    sbr__verbs_listener_unref(c->listener);
  free(c);
}

static int verbs_nic_port(struct sbr__conn *c, struct sbr__nic_port *out)
{
  if (!c || !c->id || !c->id->verbs || !out)
    return -EINVAL;
  snprintf(out->device, sizeof out->device, "%s",
           ibv_get_device_name(c->id->verbs->device));
  out->port = c->id->port_num;
  return 0;
}

static int verbs_nic_remote_access_errors(const struct sbr__nic_port *port,
                                          uint64_t *value)
{
  return sbr__nic_remote_access_errors(port->device, port->port, value);
}

static uint64_t verbs_posted_recv_count(struct sbr__conn *c)
{
  return c ? atomic_load(&c->posted_recv) : 0;
}

/* iWARP (RFC 5040) has no WRITE with immediate; providers refuse it. */
static bool verbs_has_write_imm(struct sbr__conn *c)
{
  return !c || !c->id || !c->id->verbs ||
         c->id->verbs->device->transport_type != IBV_TRANSPORT_IWARP;
}

/* sbr_backend_check: what every connect and listen does first. */
static int verbs_check_host(char *errbuf, size_t errlen)
{
  struct rdma_event_channel *ch;
  int ret = sbr__verbs_open_channel("this host", &ch, errbuf, errlen);
  if (ret)
    return ret;
  rdma_destroy_event_channel(ch);
  return 0;
}

/* Test only: the QP goes to ERR as after a fatal NIC or link error; its
 * outstanding WRs flush and the engine sees the connection fail. */
static int verbs_test_fail(struct sbr__conn *c)
{
  if (!c || !c->id || !c->id->qp)
    return -EINVAL;
  struct ibv_qp_attr attr = {.qp_state = IBV_QPS_ERR};
  int ret = ibv_modify_qp(c->id->qp, &attr, IBV_QP_STATE);
  return ret ? -ret : 0;
}

const struct sbr__transport_ops sbr__transport_verbs = {
    .name = "verbs",
    .peer_can_vanish = true,
    .connect = sbr__verbs_connect,
    .listen = sbr__verbs_listen,
    .get_event = sbr__verbs_get_event,
    .accept = sbr__verbs_accept,
    .reject = sbr__verbs_reject,
    .close_listener = sbr__verbs_close_listener,
    .nic_port = verbs_nic_port,
    .nic_remote_access_errors = verbs_nic_remote_access_errors,
    .reg_mr = sbr__verbs_reg_mr,
    .dereg_mr = sbr__verbs_dereg_mr,
    .post_send = sbr__verbs_post_send,
    .post_recv = sbr__verbs_post_recv,
    .poll_cq = sbr__verbs_poll_cq,
    .arm_cq = sbr__verbs_arm_cq,
    .wait_cq = sbr__verbs_wait_cq,
    .kick_cq = sbr__verbs_kick_cq,
    .disconnect = sbr__verbs_disconnect,
    .close = sbr__verbs_close,
    .posted_recv_count = verbs_posted_recv_count,
    .has_write_imm = verbs_has_write_imm,
    .check_host = verbs_check_host,
    .test_fail = verbs_test_fail,
    .async_failed = sbr__verbs_async_failed,
};
