/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * verbs-datapath.c - the data path of a connection, both sides: memory
 * registration, posting WRs (with inline bounce slots), polling and
 * waiting on completions, and closing.
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
#include "transport/verbs/verbs-async.h"
#include "transport/verbs/verbs-internal.h"
#include "transport/verbs/verbs-keys.h"

/* ------------------------------------------------------------ both sides */

int sbr__verbs_reg_mr(struct sbr__conn *c, void *addr, size_t len, int access,
                      struct sbr__mr **out)
{
  if (!c || !c->pd || !c->id || !c->id->verbs || !addr || !len || !out)
    return -EINVAL;
  /* Per transport (verbs-caps.h): iWARP's READ sinks need REMOTE_WRITE. */
  int flags =
      sbr__verbs_mr_access(access, c->id->verbs->device->transport_type);
  /* Say what the limit is before the kernel says only ENOMEM. */
  struct sbr__verbs_memlock lim;
  char msg[512];
  if (sbr__verbs_memlock_read(&lim) == 0 &&
      sbr__verbs_memlock_check(&lim, sbr__verbs_pinned_bytes(len),
                               "registering this buffer", msg, sizeof msg)) {
    SBR_ERROR("verbs: %s: %s", c->peer, msg);
    return -ENOMEM;
  }

  struct sbr__mr *m = calloc(1, sizeof *m);
  if (!m)
    return -ENOMEM;
  struct ibv_mr *mr = ibv_reg_mr(c->pd, addr, len, flags);
  if (!mr) {
    int ret = neg_errno(ENOMEM);
    SBR_WARN("verbs: %s: ibv_reg_mr of %zu bytes failed: %s%s", c->peer, len,
             strerror(-ret),
             ret == -ENOMEM ? " (RLIMIT_MEMLOCK too small? ulimit -l)" : "");
    free(m);
    return ret;
  }
  m->addr = addr;
  m->length = len;
  m->lkey = mr->lkey;
  m->rkey = mr->rkey;
  m->impl = mr;
  *out = m;
  return 0;
}

void sbr__verbs_dereg_mr(struct sbr__mr *m)
{
  if (!m)
    return;
  int ret = ibv_dereg_mr(m->impl);
  if (ret)
    SBR_WARN("verbs: ibv_dereg_mr failed: %s", strerror(ret));
  free(m);
}

/* One sbr__wr into one ibv_send_wr (and its SGE).  -EINVAL for requests
 * the QP would refuse anyway, so that a chain is checked whole before any
 * of it is posted. */
static int build_send_wr(const struct sbr__conn *c, const struct sbr__wr *w,
                         uint32_t slot, struct ibv_send_wr *wr,
                         struct ibv_sge *sge)
{
  memset(wr, 0, sizeof *wr);
  wr->wr_id = w->wr_id;
  if (w->length) {
    sge->addr = (uintptr_t)w->local_addr;
    sge->length = w->length;
    sge->lkey = w->lkey;
    wr->sg_list = sge;
    wr->num_sge = 1;
  }
  if (w->signaled)
    wr->send_flags |= IBV_SEND_SIGNALED;
  if (w->inline_data && w->length > c->max_inline) {
    /* The QP got less inline room than the engine posts: copy now, as
     * inline would, into this send-queue slot's bounce slot, which is
     * free again only once this WR has completed (the ring above). */
    if (w->opcode == SBR__OP_READ || !c->bounce ||
        w->length > VERBS_BOUNCE_SLOT)
      return -EINVAL;
    uint8_t *copy = c->bounce + (size_t)slot * VERBS_BOUNCE_SLOT;
    memcpy(copy, w->local_addr, w->length);
    sge->addr = (uintptr_t)copy;
    sge->lkey = c->bounce_mr->lkey;
    atomic_fetch_add_explicit(&sbr__verbs_bounced, 1, memory_order_relaxed);
  } else if (w->inline_data) {
    if (w->opcode == SBR__OP_READ)
      return -EINVAL;
    wr->send_flags |= IBV_SEND_INLINE;
  }
  switch (w->opcode) {
  case SBR__OP_WRITE:
    wr->opcode = IBV_WR_RDMA_WRITE;
    break;
  case SBR__OP_WRITE_IMM:
    wr->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr->imm_data = htonl(w->imm_data);
    break;
  case SBR__OP_READ:
    wr->opcode = IBV_WR_RDMA_READ;
    break;
  case SBR__OP_SEND:
    /* A plain SEND: sbr__wr has no "with immediate" flag and imm_data 0 is
     * a valid immediate, so imm_data is ignored for SEND.  ACKs carry
     * their content in the payload. */
    wr->opcode = IBV_WR_SEND;
    return 0;
  default:
    return -EINVAL;
  }
  wr->wr.rdma.remote_addr = w->remote_addr;
  wr->wr.rdma.rkey = w->rkey;
  return 0;
}

static void sent_push(struct sbr__conn *c, const struct sbr__wr *w)
{
  uint32_t tail = c->sent_head + c->sent_count;
  if (tail >= c->sent_cap)
    tail -= c->sent_cap;
  c->sent[tail] = (struct verbs_sent){
      .wr_id = w->wr_id, .opcode = (uint8_t)w->opcode, .signaled = w->signaled};
  c->sent_count++;
}

/* The ring's rule (verbs-sent.h): a completion retires its WR and the
 * unsignaled ones before it, never a signaled one still to complete. */
static bool sent_retire(struct sbr__conn *c, const struct ibv_wc *wc,
                        enum sbr__opcode *opcode)
{
  uint8_t op;
  if (!verbs_sent_retire(c->sent, c->sent_cap, &c->sent_head, &c->sent_count,
                         wc->wr_id, wc->status == IBV_WC_SUCCESS, &op))
    return false;
  *opcode = (enum sbr__opcode)op;
  return true;
}

int sbr__verbs_post_send(struct sbr__conn *c, const struct sbr__wr *wrs, int n)
{
  struct ibv_send_wr stack_wr[VERBS_STACK_WRS];
  struct ibv_sge stack_sge[VERBS_STACK_WRS];
  struct ibv_send_wr *wr = stack_wr;
  struct ibv_sge *sge = stack_sge;
  int ret = 0;

  if (!c || !c->qp_created || n < 0 || (n > 0 && !wrs))
    return -EINVAL;
  if (n == 0)
    return 0;
  if (atomic_load_explicit(&c->disconnected, memory_order_relaxed))
    return -ENOTCONN;
  /* The send queue is full: the engine has more WRs outstanding than it
   * promised (unsignaled ones count until a later signaled completion is
   * polled).  Refused whole rather than half posted. */
  if ((uint32_t)n > c->sent_cap - c->sent_count)
    return -ENOMEM;
  if (n > VERBS_STACK_WRS) {
    wr = malloc((size_t)n * sizeof *wr);
    sge = malloc((size_t)n * sizeof *sge);
    if (!wr || !sge) {
      ret = -ENOMEM;
      goto out_free;
    }
  }

  for (int i = 0; i < n; i++) {
    uint32_t slot = (c->sent_head + c->sent_count + (uint32_t)i) % c->sent_cap;
    ret = build_send_wr(c, &wrs[i], slot, &wr[i], &sge[i]);
    if (ret)
      goto out_free;
    wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
  }

  /* One chain, one doorbell. */
  struct ibv_send_wr *bad = NULL;
  int err = ibv_post_send(c->id->qp, wr, &bad);
  int posted = n;
  if (err) {
    ret = neg_ret(err);
    /* Verbs posts the WRs before bad_wr; they will execute and complete
     * (or flush).  The checks above leave little that can fail here. */
    posted = bad && bad >= wr && bad < wr + n ? (int)(bad - wr) : 0;
    if (posted > 0)
      SBR_WARN("verbs: %s: ibv_post_send failed at WR %d of %d (%s); the "
               "first %d are queued",
               c->peer, posted, n, strerror(-ret), posted);
  }
  for (int i = 0; i < posted; i++)
    sent_push(c, &wrs[i]);

out_free:
  if (wr != stack_wr) {
    free(wr);
    free(sge);
  }
  return ret;
}

int sbr__verbs_post_recv(struct sbr__conn *c, uint64_t wr_id, void *addr,
                         uint32_t len, const struct sbr__mr *mr)
{
  if (!c || !c->qp_created || (len && (!addr || !mr)))
    return -EINVAL;
  /* Rule 8's spirit: never hand the HCA a range outside the MR. */
  if (len &&
      ((uint8_t *)addr < (uint8_t *)mr->addr ||
       (size_t)((uint8_t *)addr - (uint8_t *)mr->addr) + len > mr->length))
    return -EINVAL;

  struct ibv_sge sge = {
      .addr = (uintptr_t)addr, .length = len, .lkey = mr ? mr->lkey : 0};
  struct ibv_recv_wr wr = {
      .wr_id = wr_id,
      .sg_list = len ? &sge : NULL,
      .num_sge = len ? 1 : 0, /* zero-length: a WRITE_IMM doorbell only */
  };
  struct ibv_recv_wr *bad = NULL;
  int err = ibv_post_recv(c->id->qp, &wr, &bad);
  if (err)
    return neg_ret(err);
  atomic_fetch_add_explicit(&c->posted_recv, 1, memory_order_relaxed);
  return 0;
}

/* Fallback only: the ring knows the opcode of every send completion. */
static enum sbr__opcode map_wc_opcode(enum ibv_wc_opcode op)
{
  switch (op) {
  case IBV_WC_RDMA_WRITE: /* WRITE and WRITE_IMM alike */
    return SBR__OP_WRITE;
  case IBV_WC_RDMA_READ:
    return SBR__OP_READ;
  case IBV_WC_RECV:
  case IBV_WC_RECV_RDMA_WITH_IMM:
    return SBR__OP_RECV;
  case IBV_WC_SEND:
  default:
    return SBR__OP_SEND;
  }
}

static void convert_wc(struct sbr__conn *c, const struct ibv_wc *wc,
                       bool send_queue, struct sbr__wc *o)
{
  memset(o, 0, sizeof *o);
  o->wr_id = wc->wr_id;
  if (!send_queue)
    o->opcode = SBR__OP_RECV;
  else if (!sent_retire(c, wc, &o->opcode)) {
    SBR_WARN("verbs: %s: completion for wr_id %llu, which is not in flight",
             c->peer, (unsigned long long)wc->wr_id);
    o->opcode = map_wc_opcode(wc->opcode);
  }

  if (wc->status == IBV_WC_SUCCESS) {
    o->status = SBR__WC_SUCCESS;
    /* byte_len and the immediate are defined for successes only. */
    o->byte_len = wc->byte_len;
    if (wc->wc_flags & IBV_WC_WITH_IMM) {
      o->has_imm = true;
      o->imm_data = ntohl(wc->imm_data);
    }
  } else if (wc->status == IBV_WC_WR_FLUSH_ERR) {
    /* The QP is in error (an earlier failure or a disconnect); this
     * request never ran.  Expected in bulk: not worth a warning. */
    o->status = SBR__WC_FLUSH;
    o->vendor_err = (int)wc->vendor_err;
  } else {
    o->status = SBR__WC_ERROR;
    o->vendor_err = (int)wc->vendor_err;
    SBR_WARN("verbs: %s: %s work request %llu failed: %s (status %d, "
             "vendor_err 0x%x)",
             c->peer, send_queue ? "send" : "receive",
             (unsigned long long)wc->wr_id, ibv_wc_status_str(wc->status),
             (int)wc->status, wc->vendor_err);
  }
}

/* Up to max completions of one CQ into out; the count or -EIO. */
static int drain_cq(struct sbr__conn *c, struct ibv_cq *cq, bool send_queue,
                    struct sbr__wc *out, int max)
{
  struct ibv_wc wc[VERBS_POLL_BATCH];
  int total = 0;
  while (total < max) {
    int want = max - total < VERBS_POLL_BATCH ? max - total : VERBS_POLL_BATCH;
    int n = ibv_poll_cq(cq, want, wc);
    if (n < 0) {
      SBR_ERROR("verbs: %s: ibv_poll_cq failed (%d)", c->peer, n);
      return total > 0 ? total : -EIO;
    }
    for (int i = 0; i < n; i++)
      convert_wc(c, &wc[i], send_queue, &out[total + i]);
    total += n;
    if (n < want)
      break;
  }
  return total;
}

/* Sender: drain the event channel (non-blocking) for signs of the peer
 * leaving.  Only called from poll_cq when both CQs were empty, at most every
 * VERBS_CM_CHECK_MS. */
/* The device's async events, read where the channel is (a QP error while
 * nothing is posted shows nowhere else; COMM_EST for rdma_notify). */
static void sender_check_async(struct sbr__conn *c)
{
  struct ibv_context *ctx = c->id ? c->id->verbs : NULL;
  if (!ctx)
    return;
  if (!c->async_nonblock) {
    if (sbr__verbs_async_nonblocking(ctx) < 0)
      return;
    c->async_nonblock = true;
  }
  /* Bounded: a device flooding events can't hold the sender here. */
  for (int i = 0; i < VERBS_POLL_BATCH; i++)
    if (sbr__verbs_async_read(ctx, NULL, c) <= 0)
      break;
}

static void sender_check_cm(struct sbr__conn *c)
{
  uint64_t now = now_ms();
  if (now < c->next_cm_check_ms)
    return;
  c->next_cm_check_ms = now + VERBS_CM_CHECK_MS;

  struct rdma_cm_event *e;
  while (rdma_get_cm_event(c->channel, &e) == 0) {
    switch (e->event) {
    case RDMA_CM_EVENT_DISCONNECTED:
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
      if (!atomic_exchange(&c->disconnected, true))
        SBR_INFO("verbs: %s: %s", c->peer, rdma_event_str(e->event));
      break;
    default:
      SBR_DEBUG("verbs: %s: %s (status %d)", c->peer, rdma_event_str(e->event),
                e->status);
      break;
    }
    rdma_ack_cm_event(e);
  }
  sender_check_async(c);
}

int sbr__verbs_poll_cq(struct sbr__conn *c, struct sbr__wc *out, int max)
{
  if (!c || !c->send_cq || max < 0 || (max > 0 && !out))
    return -EINVAL;

  /* Send completions first: they free send blocks; receives wait in their
   * own CQ for the next call if max is reached. */
  int n = drain_cq(c, c->send_cq, true, out, max);
  if (n < 0)
    return n;
  if (n < max) {
    int m = drain_cq(c, c->recv_cq, false, out + n, max - n);
    if (m < 0 && n == 0)
      return m;
    n += m > 0 ? m : 0;
  }
  if (n > 0)
    return n;

  /* Nothing to report: is the peer still there?  The receiver's listener
   * sets the flag from its own thread; the sender looks itself. */
  if (c->channel)
    sender_check_cm(c);
  /* A receiver's lane marked by an async event ends when its listener
   * reports it (async_errors), not through a probe that happens to poll
   * first. */
  if (atomic_load(&c->disconnected) ||
      (c->channel && atomic_load(&c->async_failed)))
    return -ENOTCONN;
  return 0;
}

bool sbr__verbs_async_failed(struct sbr__conn *c)
{
  if (!c)
    return false;
  /* An error completion usually comes first: the event may be waiting. */
  if (c->channel)
    sender_check_async(c);
  return atomic_load(&c->async_failed);
}

void sbr__verbs_arm_cq(struct sbr__conn *c)
{
  if (!c || !c->comp)
    return;
  /* Either CQ's next completion writes an event to the channel. */
  ibv_req_notify_cq(c->send_cq, 0);
  ibv_req_notify_cq(c->recv_cq, 0);
}

void sbr__verbs_wait_cq(struct sbr__conn *c, uint32_t timeout_us)
{
  if (!c || !c->comp) {
    sbr__sleep_us(timeout_us);
    return;
  }
  struct pollfd p[2] = {{.fd = c->comp->fd, .events = POLLIN},
                        {.fd = c->kick_fd, .events = POLLIN}};
  struct timespec ts = {timeout_us / 1000000u,
                        (long)(timeout_us % 1000000u) * 1000};
  if (ppoll(p, 2, &ts, NULL) <= 0)
    return;
  uint64_t kicks;
  if (p[1].revents && read(c->kick_fd, &kicks, sizeof kicks) < 0)
    SBR_DEBUG("verbs: %s: reading the kick eventfd: %s", c->peer,
              strerror(errno));
  /* Drain and acknowledge (ibv_destroy_cq waits for every event taken to
   * be acknowledged). */
  struct ibv_cq *cq;
  void *cq_context;
  while (ibv_get_cq_event(c->comp, &cq, &cq_context) == 0)
    ibv_ack_cq_events(cq, 1);
}

void sbr__verbs_kick_cq(struct sbr__conn *c)
{
  if (!c || !c->kick_ready)
    return;
  /* Level-triggered until wait_cq reads it: a kick before the ppoll is
   * not lost. */
  uint64_t one = 1;
  if (write(c->kick_fd, &one, sizeof one) < 0 && errno != EAGAIN)
    SBR_DEBUG("verbs: %s: kicking wait_cq: %s", c->peer, strerror(errno));
}

void sbr__verbs_disconnect(struct sbr__conn *c)
{
  if (!c)
    return;
  /* From here the listener no longer reports this conn. */
  atomic_store(&c->closing, true);
  if (c->id && c->id->verbs && rdma_disconnect(c->id))
    SBR_DEBUG("verbs: %s: rdma_disconnect: %s", c->peer, strerror(errno));
}

void sbr__verbs_close(struct sbr__conn *c)
{
  if (!c)
    return;
  /* From here the listener no longer reports this conn. */
  atomic_store(&c->closing, true);
  /* Moves the QP to error (outstanding WRs flush) and tells the peer.
   * Fails harmlessly when the peer already left. */
  if (c->id && c->id->verbs && rdma_disconnect(c->id))
    SBR_DEBUG("verbs: %s: rdma_disconnect: %s", c->peer, strerror(errno));
  sbr__verbs_conn_free(c);
}
