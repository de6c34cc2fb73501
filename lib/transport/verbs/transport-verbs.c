/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * transport-verbs.c - the rdma-core back end: librdmacm sets connections up,
 * libibverbs moves the data.
 *
 * Connection setup (DESIGN.md section 4), one RC QP per sender:
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
 * The private data codec lives in transport.c; this file only carries the
 * bytes.  The receiver's lane is two allocations: the blocks (registered
 * LOCAL_WRITE | REMOTE_WRITE only, so a READ of them fails: rule 8) and the
 * status array (LOCAL_WRITE | REMOTE_READ | REMOTE_WRITE, the sender reads it
 * to synchronise).  Where the device binds type-2 memory windows, those
 * rights come from two windows bound to the lane's QP and the MRs have none
 * (verbs-keys.h says why and in which order).  Nothing is registered with
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
 * (transport.h); rdma_reject makes that an IB CM REJ with reason 28
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
#include "transport/verbs/verbs-caps.h"
#include "transport/verbs/verbs-keys.h"
#include "transport/verbs/verbs-sent.h"

/* rdma_cm carries at most this much private data from the active side. */
#define VERBS_CONNECT_PRIV_MAX 56
/* Outstanding RDMA READs the sender asks for.  The status-byte engine has at
 * most one status READ in flight; a little headroom costs nothing. */
#define VERBS_READ_DEPTH 4
/* Completions each CQ holds beyond its queue's depth. */
#define VERBS_CQ_SLACK 4
/* Work requests post_send builds on the stack; longer chains use the heap. */
#define VERBS_STACK_WRS 16
/* Completions taken per ibv_poll_cq call. */
#define VERBS_POLL_BATCH 16
/* The sender looks at its event channel at most this often while idle. */
#define VERBS_CM_CHECK_MS 10
/* Bytes of one bounce slot: an "inline" WR copied at post time where the
 * QP got less inline room than the engine posts (engines post at most
 * 64 inline bytes, transport.h's caps). */
#define VERBS_BOUNCE_SLOT 64
/* Devices whose window probe a wildcard listener remembers. */
#define VERBS_PROBED_DEVICES 8
#define VERBS_LISTEN_BACKLOG 16
/* Used when the caller passes no connect timeout: never wait forever. */
#define VERBS_DEFAULT_TIMEOUT_MS 5000

/* Transport retries of an RC QP before a WR fails with retry exceeded
 * (the receiver's QP takes the sender's REQ value).  6, not the maximum
 * 7: rxe takes 7 for "retry forever" (rxe_comp.c), so a probe of a dead
 * sender's lane (receiver.c) would never fail there; on hardware 6
 * retries of a 134 ms ACK timeout still outlast any congestion. */
#define VERBS_RETRY_COUNT 6
/* The sender's ACK timeout exponent: 4.096 us x 2^15 = 134 ms a try, so
 * its QP fails about 0.9 s into a silence (rdma_cm's default on RoCE,
 * from the path's packet lifetime, is seconds a try).  It matters most when the
 * receiver closed the lane while the link was dead (its probe, receiver.c): the
 * DREQ was lost, and only the sender's own retries tell it to reconnect once
 * the link is back. */
#define VERBS_SENDER_ACK_TIMEOUT 15
/* Send WRs a lane with windows needs before its engine posts any: the
 * two binds. */
#define VERBS_WINDOW_WRS 2
/* A bind is local work, but the emulated VM is slow: generous. */
#define VERBS_WINDOW_BIND_MS 5000

/* IB CM reject reasons (IBTA 12.6.7.2) that say something to a user. */
#define VERBS_REJ_INVALID_SERVICE_ID 8
#define VERBS_REJ_CONSUMER_DEFINED 28

struct sbr__listener {
  struct rdma_event_channel *channel; /* the listen id's and accepted ids' */
  struct rdma_cm_id *id;              /* listening id; NULL once closed */
  atomic_int refs;                    /* 1 (listener) + 1 per accepted conn */
  atomic_bool no_windows; /* a windowed accept failed: MRs from then on */
  /* Devices whose type-2 windows were probed (allocate, free), and the
   * answer: once per device, on the receiver's thread only. */
  struct ibv_context *probed[VERBS_PROBED_DEVICES];
  bool probed_ok[VERBS_PROBED_DEVICES];
  char name[80]; /* "addr:port", for logs */
};

/* One control block per connection owns every verbs object of it. */
struct sbr__conn {
  struct rdma_cm_id *id;              /* the connection; id->context == this */
  struct rdma_event_channel *channel; /* sender: its own; receiver: NULL */
  struct sbr__listener *listener;     /* receiver: shares its channel (ref) */
  struct ibv_pd *pd;                  /* protection domain of QP and MRs */
  struct ibv_cq *send_cq;             /* send queue completions */
  struct ibv_cq *recv_cq;             /* receive queue completions */
  struct ibv_comp_channel *comp;      /* sender: wakes wait_cq; else NULL */
  int kick_fd;                        /* sender: eventfd kick_cq writes */
  bool kick_ready;                    /* kick_fd is open (only with comp) */
  bool qp_created;                    /* rdma_create_qp done (QP is id->qp) */
  struct ibv_mr *blocks_mr;           /* receiver: blocks, REMOTE_WRITE only */
  struct ibv_mr *status_mr;           /* receiver: status, REMOTE_READ|WRITE */
  struct ibv_mw *blocks_mw;           /* receiver, windows: grants the blocks */
  struct ibv_mw *status_mw;           /* receiver, windows: grants status */
  uint8_t *blocks;                    /* receiver: lane blocks (mmap) */
  uint8_t *status;                    /* receiver: status bytes (mmap) */
  size_t blocks_len;                  /* receiver: bytes mapped at blocks */
  size_t status_len;                  /* receiver: bytes mapped at status */
  uint32_t max_inline;                /* inline bytes the QP really got */
  uint8_t *bounce;   /* inline short: a VERBS_BOUNCE_SLOT per sent slot */
  size_t bounce_len; /* bytes mapped at bounce */
  struct ibv_mr *bounce_mr;     /* bounce, local access only */
  struct verbs_sent *sent;      /* send WRs in flight, a ring */
  uint32_t sent_cap;            /* ring size = the QP's max_send_wr */
  uint32_t sent_head;           /* oldest WR in flight */
  uint32_t sent_count;          /* WRs in flight */
  atomic_bool disconnected;     /* rdma_cm said the peer left */
  atomic_bool closing;          /* close() began: stop reporting it */
  _Atomic uint64_t posted_recv; /* receive WRs ever posted */
  uint64_t next_cm_check_ms;    /* sender: next look at the channel */
  char peer[96];                /* "host:port", for logs */
};

/* ------------------------------------------------------------- helpers */

static uint64_t now_ms(void)
{
  struct timespec ts;
#ifdef CLOCK_MONOTONIC_COARSE
  /* Coarse is enough for deadlines and the 10 ms throttle, and cheaper on
   * the idle poll path. */
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
#else
  clock_gettime(CLOCK_MONOTONIC, &ts);
#endif
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Milliseconds left until deadline, 0 once it has passed. */
static int ms_left(uint64_t deadline)
{
  uint64_t now = now_ms();
  if (now >= deadline)
    return 0;
  uint64_t left = deadline - now;
  return left > 1000000 ? 1000000 : (int)left;
}

/* errno as a negative return value; fallback when a call failed without
 * setting it. */
static int neg_errno(int fallback)
{
  return errno > 0 ? -errno : -fallback;
}

/* ibv_post_* return a positive errno by convention, some providers a
 * negative one. */
static int neg_ret(int ret)
{
  if (ret > 0)
    return -ret;
  return ret < 0 ? ret : -EIO;
}

static void format_hostport(char *buf, size_t len, const char *host,
                            uint16_t port)
{
  if (strchr(host, ':'))
    snprintf(buf, len, "[%s]:%u", host, port);
  else
    snprintf(buf, len, "%s:%u", host, port);
}

static void format_sockaddr(char *buf, size_t len, const struct sockaddr *sa)
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
static int open_channel(const char *hostport, struct rdma_event_channel **out,
                        char *errbuf, size_t errlen)
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

static void listener_unref(struct sbr__listener *l)
{
  if (atomic_fetch_sub(&l->refs, 1) != 1)
    return;
  /* Last user: every id on the channel is destroyed by now. */
  rdma_destroy_event_channel(l->channel);
  free(l);
}

/* A windowed lane of l failed (the device refused a bind or took too long
 * over one, or an older librdmacm refused rdma_accept on an id without a
 * QP, verbs-keys.h): every later lane of this listener gets MR keys.  A
 * bind that times out counts too: iWARP-like devices never complete a
 * bind before the accept, and one slow bind already cost the receiver's
 * thread VERBS_WINDOW_BIND_MS; "slow" isn't worth a second try. */
static void windows_failed(struct sbr__listener *l)
{
  atomic_store(&l->no_windows, true);
}

/* Whether a lane of l on the device ctx gets windows: not once a windowed
 * lane of l failed, not where configuration says so, and only where the
 * device advertises type-2 windows (never on iWARP, verbs-caps.h) and two
 * can really be allocated: bnxt_re's kernel advertises windows its
 * provider can't allocate.  That probe runs once per device (at listen
 * when the listener is bound to a device's address). */
static bool listener_windows(struct sbr__listener *l, struct ibv_context *ctx)
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

/* PD, two CQs, RC QP, the in-flight ring and, where the QP's inline room
 * is short, the bounce slots on c->id (which must have id->verbs: address
 * resolved or a connect request).  Queue depths are clamped to the
 * device.  On failure none of them is left. */
static int conn_create_queues(struct sbr__conn *c,
                              const struct sbr__queue_caps *caps, char *errbuf,
                              size_t errlen)
{
  int ret;

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
    ret = neg_errno(EIO);
    sbr__errf(errbuf, errlen, "verbs: ibv_query_device failed: %s",
              strerror(-ret));
    return ret;
  }
  /* Every WR that can complete has a CQ slot, so neither CQ can overrun
   * while the engine keeps within its caps.  A device with smaller
   * queues gets smaller ones rather than no QP at all (every device
   * listed in docs/hardware.md takes thousands); an engine that then
   * posts more than fits gets -ENOMEM from post_send, after this
   * warning said why. */
  struct sbr__verbs_queues q;
  sbr__verbs_size_queues(caps->max_send_wr, caps->max_recv_wr, VERBS_CQ_SLACK,
                         dev.max_qp_wr, dev.max_cqe, &q);
  if (q.clamped)
    SBR_WARN("verbs: %s: %s takes queues of %d WRs and CQs of %d entries: "
             "send/receive queues of %u/%u instead of %u/%u",
             c->peer, ibv_get_device_name(c->id->verbs->device), dev.max_qp_wr,
             dev.max_cqe, q.send_wr, q.recv_wr, caps->max_send_wr,
             caps->max_recv_wr);

  c->pd = ibv_alloc_pd(c->id->verbs);
  if (!c->pd) {
    ret = neg_errno(ENOMEM);
    sbr__errf(errbuf, errlen, "verbs: ibv_alloc_pd on %s failed: %s",
              ibv_get_device_name(c->id->verbs->device), strerror(-ret));
    return ret;
  }

  /* Two CQs: a completion's CQ says which queue it came from even when
   * its opcode is undefined (error and flush completions).  The sender's
   * threads sleep on a completion channel when they have nothing to do
   * but wait for a completion (wait_cq); it is non-blocking so wait_cq
   * can drain it after poll(). */
  if (c->channel) {
    c->comp = ibv_create_comp_channel(c->id->verbs);
    if (!c->comp || set_nonblocking(c->comp->fd) < 0) {
      ret = neg_errno(ENOMEM);
      sbr__errf(errbuf, errlen, "verbs: ibv_create_comp_channel failed: %s",
                strerror(-ret));
      goto out_destroy_comp;
    }
    /* kick_cq's doorbell: wait_cq polls it beside the channel. */
    c->kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (c->kick_fd < 0) {
      ret = neg_errno(ENOMEM);
      sbr__errf(errbuf, errlen, "verbs: eventfd failed: %s", strerror(-ret));
      goto out_destroy_comp;
    }
    c->kick_ready = true;
  }
  c->send_cq = ibv_create_cq(c->id->verbs, q.send_cqe, NULL, c->comp, 0);
  if (!c->send_cq) {
    ret = neg_errno(ENOMEM);
    sbr__errf(errbuf, errlen, "verbs: ibv_create_cq(%d) failed: %s", q.send_cqe,
              strerror(-ret));
    goto out_destroy_comp;
  }
  c->recv_cq = ibv_create_cq(c->id->verbs, q.recv_cqe, NULL, c->comp, 0);
  if (!c->recv_cq) {
    ret = neg_errno(ENOMEM);
    sbr__errf(errbuf, errlen, "verbs: ibv_create_cq(%d) failed: %s", q.recv_cqe,
              strerror(-ret));
    goto out_destroy_send_cq;
  }

  struct ibv_qp_init_attr attr = {
      .send_cq = c->send_cq,
      .recv_cq = c->recv_cq,
      .qp_type = IBV_QPT_RC,
      .cap =
          {
              .max_send_wr = q.send_wr,
              .max_recv_wr = q.recv_wr,
              .max_send_sge = 1,
              .max_recv_sge = 1,
          },
      /* Selective signalling: the engine decides which WRs complete. */
      .sq_sig_all = 0,
  };
  uint32_t want_inline = caps->max_inline;
  int cfg_inline = sbr__verbs_config()->max_inline;
  if (cfg_inline >= 0 && want_inline > (uint32_t)cfg_inline)
    want_inline = (uint32_t)cfg_inline;
  ret = conn_create_qp(c, &attr, want_inline);
  if (ret) {
    /* EINVAL is also what a connect request says once its sender has
     * given up on it (rdma_cm cannot set up a QP for a dead request). */
    sbr__errf(errbuf, errlen,
              "verbs: rdma_create_qp (send %u, recv %u, inline %u down to 0) "
              "on %s failed: %s%s",
              q.send_wr, q.recv_wr, want_inline,
              ibv_get_device_name(c->id->verbs->device), strerror(-ret),
              ret == -EINVAL ? " (sizes beyond the device, or the peer "
                               "already gave up?)"
                             : "");
    goto out_destroy_recv_cq;
  }
  c->qp_created = true;
  /* The provider may round up (rxe: 0 becomes 16); it never gives less
   * than asked.  A configured cap holds even so: it stands for a device
   * that has no more. */
  c->max_inline = attr.cap.max_inline_data;
  if (c->max_inline > want_inline)
    c->max_inline = want_inline;
  c->sent_cap = attr.cap.max_send_wr;
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
out_destroy_recv_cq:
  ibv_destroy_cq(c->recv_cq);
  c->recv_cq = NULL;
out_destroy_send_cq:
  ibv_destroy_cq(c->send_cq);
  c->send_cq = NULL;
out_destroy_comp:
  if (c->kick_ready)
    close(c->kick_fd);
  c->kick_ready = false;
  if (c->comp)
    ibv_destroy_comp_channel(c->comp);
  c->comp = NULL;
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
static void conn_free_verbs(struct sbr__conn *c)
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
  struct ibv_mr *mrs[3] = {c->blocks_mr, c->status_mr, c->bounce_mr};
  for (int i = 0; i < 3; i++)
    if (mrs[i])
      ibv_dereg_mr(mrs[i]);
  c->blocks_mr = c->status_mr = c->bounce_mr = NULL;
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
  c->blocks = c->status = c->bounce = NULL;
  free(c->sent);
  c->sent = NULL;
  c->sent_cap = c->sent_head = c->sent_count = 0;
}

/* Frees whatever part of c exists: its verbs objects (conn_free_verbs),
 * then
 *   4. the cm_id after its QP (rdma_destroy_id leaves the QP alone).  It
 *      also discards the id's events not yet read.
 *   5. Sender: its event channel, after its only id.  Receiver: drop the
 *      reference on the listener's channel; the last one closes it. */
static void conn_free(struct sbr__conn *c)
{
  conn_free_verbs(c);
  if (c->id)
    rdma_destroy_id(c->id);
  if (c->channel)
    rdma_destroy_event_channel(c->channel);
  if (c->listener)
    listener_unref(c->listener);
  free(c);
}

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
 * On failure conn_free undoes whichever exists. */
static int connect_create_id(struct sbr__conn *c, const char *hostport,
                             char *errbuf, size_t errlen)
{
  int ret = open_channel(hostport, &c->channel, errbuf, errlen);
  if (ret)
    return ret;
  if (rdma_create_id(c->channel, &c->id, c, RDMA_PS_TCP)) {
    ret = neg_errno(ENOMEM);
    sbr__errf(errbuf, errlen, "rdma_cm: rdma_create_id failed: %s",
              strerror(-ret));
    return ret;
  }
  /* Applied when rdma_cm takes the QP to RTS; a kernel without the
   * option keeps its default. */
  uint8_t timeout = VERBS_SENDER_ACK_TIMEOUT;
  if (rdma_set_option(c->id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT,
                      &timeout, sizeof timeout))
    SBR_DEBUG("verbs: %s: ACK timeout not set: %s", hostport, strerror(errno));
  return 0;
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

/* Step 4: rdma_connect with the private data and wait for ESTABLISHED.
 * Success: *out is the event, to be acked by the caller once it has read
 * the accept's private data. */
static int connect_establish(struct sbr__conn *c, const uint8_t *priv,
                             size_t priv_len, const char *hostport,
                             uint64_t deadline, int timeout_ms,
                             struct rdma_cm_event **out, char *errbuf,
                             size_t errlen)
{
  /* The sender READs the status array: ask for READ credits (initiator
   * depth), clipped to what the device allows or rdma_connect says EINVAL.
   * responder_resources: the receiver issues no READs today; one slot keeps
   * that possible and costs one responder resource. */
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
      .retry_count = VERBS_RETRY_COUNT,
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

static int verbs_connect(const char *host, uint16_t port, const char *source,
                         const uint8_t *priv, size_t priv_len,
                         const struct sbr__queue_caps *caps,
                         const struct sbr_fault_injection *faults,
                         int timeout_ms, struct sbr__conn **out,
                         struct sbr__lane_desc *lane, char *errbuf,
                         size_t errlen)
{
  (void)faults; /* real hardware injects its own faults */
  struct rdma_cm_event *e;
  char hostport[96];
  int ret;

  if (!host || !caps || !out || !lane || (priv_len && !priv))
    return -EINVAL;
  format_hostport(hostport, sizeof hostport, host, port);
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

  ret = connect_create_id(c, hostport, errbuf, errlen);
  if (ret)
    goto out_free_conn;
  ret = connect_resolve(c, host, port, source, hostport, deadline, timeout_ms,
                        errbuf, errlen);
  if (ret)
    goto out_free_conn;
  ret = conn_create_queues(c, caps, errbuf, errlen);
  if (ret)
    goto out_free_conn;
  ret = connect_establish(c, priv, priv_len, hostport, deadline, timeout_ms, &e,
                          errbuf, errlen);
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
  *out = c;
  return 0;

  /* conn_free undoes every step that was done (its order is written above
   * it); an established connection is told first that we are leaving. */
out_disconnect:
  rdma_disconnect(c->id);
out_free_conn:
  conn_free(c);
  return ret;
}

/* -------------------------------------------------------------- receiver */

static int verbs_listen(const char *addr, uint16_t port,
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
  format_hostport(l->name, sizeof l->name, addr, port);

  ret = open_channel(l->name, &l->channel, errbuf, errlen);
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
    listener_windows(l, l->id->verbs);
  SBR_DEBUG("verbs: listening on %s", l->name);
  *out = l;
  return 0;

out_destroy_id:
  rdma_destroy_id(l->id);
out_destroy_channel:
  rdma_destroy_event_channel(l->channel);
out_free_listener:
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
  format_sockaddr(req->peer, sizeof req->peer, rdma_get_peer_addr(id));
  const struct sockaddr *sa = rdma_get_peer_addr(id);
  if (sa && (sa->sa_family == AF_INET || sa->sa_family == AF_INET6))
    memcpy(&req->peer_addr, sa,
           sa->sa_family == AF_INET ? sizeof(struct sockaddr_in)
                                    : sizeof(struct sockaddr_in6));
  req->no_write_imm =
      id->verbs && id->verbs->device->transport_type == IBV_TRANSPORT_IWARP;
  int dec = sbr__connect_priv_decode(priv, len, &req->mechanism,
                                     &req->block_size, &req->block_count);
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

static int verbs_get_event(struct sbr__listener *l, int timeout_ms,
                           struct sbr__listen_event *ev)
{
  if (!l || !ev)
    return -EINVAL;
  memset(ev, 0, sizeof *ev);
  ev->type = SBR__EV_NONE;

  struct pollfd pfd = {.fd = l->channel->fd, .events = POLLIN};
  int n = poll(&pfd, 1, timeout_ms < 0 ? -1 : timeout_ms);
  if (n < 0)
    return errno == EINTR ? 0 : neg_errno(EIO);
  if (n == 0)
    return 0;

  struct rdma_cm_event *e;
  if (rdma_get_cm_event(l->channel, &e)) {
    /* Someone else's wake-up, or an event librdmacm consumed itself. */
    if (errno == EAGAIN || errno == EINTR)
      return 0;
    return neg_errno(EIO);
  }

  struct sbr__conn *c = e->id->context;
  int ret = 0;
  switch (e->event) {
  case RDMA_CM_EVENT_CONNECT_REQUEST:
    handle_request(l, e, ev);
    break;
  case RDMA_CM_EVENT_ESTABLISHED:
    if (c)
      SBR_DEBUG("verbs: %s: lane with %s established", l->name, c->peer);
    break;
  case RDMA_CM_EVENT_DEVICE_REMOVAL:
    if (e->id == l->id) {
      SBR_ERROR("verbs: %s: the RDMA device went away", l->name);
      ret = -ENODEV;
    } else {
      report_lane_gone(l, e, c, ev);
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
    /* TIMEWAIT_EXIT, ADDR_CHANGE, ...: nothing for the engine. */
    SBR_DEBUG("verbs: %s: %s (status %d)", l->name, rdma_event_str(e->event),
              e->status);
    break;
  }
  rdma_ack_cm_event(e);
  return ret;
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
                           const struct sbr__lane_desc *lane, bool windows)
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
 * caller then tries again without).  On failure conn_free_verbs undoes
 * what exists. */
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
  ret = conn_create_queues(c, &qcaps, errbuf, sizeof errbuf);
  if (ret) {
    SBR_WARN("verbs: %s: cannot accept %s: %s", l->name, c->peer, errbuf);
    return ret;
  }
  ret = conn_alloc_lane(c, lane, windows);
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

static int verbs_accept(struct sbr__listener *l, struct sbr__conn_request *req,
                        const struct sbr__queue_caps *caps,
                        struct sbr__lane_desc *lane, struct sbr__conn **out,
                        struct sbr__lane_mem *mem)
{
  uint32_t limit_kib = 0, need_kib = 0;
  bool broke;
  int ret;
  if (!l || !req || !req->impl || !caps || !lane || !out || !mem)
    return -EINVAL;

  /* The request is consumed here, accepted or not: a later reject() of it
   * is a no-op. */
  struct rdma_cm_id *id = req->impl;
  req->impl = NULL;

  struct sbr__conn *c = calloc(1, sizeof *c);
  if (!c) {
    reject_id(id, SBR_REFUSAL_RESOURCES, ENOMEM, 0);
    rdma_destroy_id(id);
    return -ENOMEM;
  }
  c->id = id;
  c->listener = l;
  atomic_fetch_add(&l->refs, 1);
  snprintf(c->peer, sizeof c->peer, "%s", req->peer);

  ret = lane_check_memlock(l, c, lane, &limit_kib, &need_kib);
  if (ret) {
    /* The engine counts and reports it under this reason too. */
    sbr__refusal_set(&req->refusal, SBR_REFUSAL_MEMLOCK, limit_kib, need_kib);
    reject_id(id, SBR_REFUSAL_MEMLOCK, limit_kib, need_kib);
    goto out_free_conn;
  }
  /* The ACK timeout of the lane's QP, which rdma_cm applies when it
   * (or sbr__verbs_qp_to_rts, for windows) takes the QP to RTS: how fast
   * a probe of a quiet lane finds a dead sender (receiver.c). */
  if (caps->ack_timeout &&
      rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT,
                      (void *)&caps->ack_timeout, sizeof caps->ack_timeout))
    SBR_DEBUG("verbs: %s: %s: ACK timeout %u not set: %s", l->name, c->peer,
              caps->ack_timeout, strerror(errno));
  /* Type-2 windows where the device binds them (verbs-keys.h).  If they
   * fail, this lane is set up again with MR keys, and so is every later
   * one: the sender is not refused for the device's shortcoming. */
  bool windows = listener_windows(l, id->verbs);
  ret = conn_setup_lane(l, c, caps, lane, windows, &broke);
  if (ret && broke) {
    windows_failed(l);
    conn_free_verbs(c);
    windows = false;
    ret = conn_setup_lane(l, c, caps, lane, windows, &broke);
  }
  if (ret)
    goto out_reject;

  uint8_t priv[SBR__ACCEPT_PRIV_SIZE];
  sbr__accept_priv_encode(priv, lane);
  struct rdma_conn_param param = {
      .private_data = priv,
      .private_data_len = sizeof priv,
      /* As many READ credits as the sender asked for, clipped to the
       * device (librdmacm computes this for RDMA_MAX_RESP_RES). */
      .responder_resources = RDMA_MAX_RESP_RES,
      .initiator_depth = 0, /* the receiver never READs */
      .retry_count = VERBS_RETRY_COUNT,
      .rnr_retry_count = 7,
  };
  /* Before rdma_accept: events for this id may arrive right after it. */
  id->context = c;
  if (windows ? sbr__verbs_accept_ready(id, &param) : rdma_accept(id, &param)) {
    ret = neg_errno(ECONNABORTED);
    id->context = NULL;
    /* Refused as out of resources, which the sender retries: the id
     * can't be accepted a second time. */
    SBR_WARN("verbs: %s: rdma_accept of %s failed: %s%s", l->name, c->peer,
             strerror(-ret),
             windows ? "; memory regions from now on (the sender retries)"
                     : "");
    if (windows)
      windows_failed(l);
    goto out_reject;
  }

  SBR_DEBUG("verbs: %s: accepted %s (qp %u, lane %u: %u blocks of %u bytes, "
            "%s)",
            l->name, c->peer, id->qp->qp_num, lane->lane_id, lane->block_count,
            lane->block_size,
            windows ? "keys: type-2 memory windows bound to the QP"
                    : "keys: memory regions (no type-2 windows)");
  mem->blocks = c->blocks;
  mem->status = c->status;
  mem->windows = windows;
  *out = c;
  return 0;

out_reject:
  reject_id(id, SBR_REFUSAL_RESOURCES, (uint32_t)-ret, 0);
out_free_conn:
  atomic_store(&c->closing, true);
  conn_free(c);
  return ret;
}

static void verbs_reject(struct sbr__listener *l, struct sbr__conn_request *req,
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

static void verbs_close_listener(struct sbr__listener *l)
{
  if (!l)
    return;
  /* Pending requests on it are refused by the kernel from now on; lanes
   * already accepted keep the channel alive through their references. */
  if (l->id) {
    rdma_destroy_id(l->id);
    l->id = NULL;
  }
  listener_unref(l);
}

/* ------------------------------------------------------------ both sides */

static int verbs_reg_mr(struct sbr__conn *c, void *addr, size_t len, int access,
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

static void verbs_dereg_mr(struct sbr__mr *m)
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

static int verbs_post_send(struct sbr__conn *c, const struct sbr__wr *wrs,
                           int n)
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

static int verbs_post_recv(struct sbr__conn *c, uint64_t wr_id, void *addr,
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
}

static int verbs_poll_cq(struct sbr__conn *c, struct sbr__wc *out, int max)
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
  if (atomic_load(&c->disconnected))
    return -ENOTCONN;
  return 0;
}

static void verbs_arm_cq(struct sbr__conn *c)
{
  if (!c || !c->comp)
    return;
  /* Either CQ's next completion writes an event to the channel. */
  ibv_req_notify_cq(c->send_cq, 0);
  ibv_req_notify_cq(c->recv_cq, 0);
}

static void verbs_wait_cq(struct sbr__conn *c, uint32_t timeout_us)
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

static void verbs_kick_cq(struct sbr__conn *c)
{
  if (!c || !c->kick_ready)
    return;
  /* Level-triggered until wait_cq reads it: a kick before the ppoll is
   * not lost. */
  uint64_t one = 1;
  if (write(c->kick_fd, &one, sizeof one) < 0 && errno != EAGAIN)
    SBR_DEBUG("verbs: %s: kicking wait_cq: %s", c->peer, strerror(errno));
}

static void verbs_disconnect(struct sbr__conn *c)
{
  if (!c)
    return;
  /* From here the listener no longer reports this conn. */
  atomic_store(&c->closing, true);
  if (c->id && c->id->verbs && rdma_disconnect(c->id))
    SBR_DEBUG("verbs: %s: rdma_disconnect: %s", c->peer, strerror(errno));
}

static void verbs_close(struct sbr__conn *c)
{
  if (!c)
    return;
  /* From here the listener no longer reports this conn. */
  atomic_store(&c->closing, true);
  /* Moves the QP to error (outstanding WRs flush) and tells the peer.
   * Fails harmlessly when the peer already left. */
  if (c->id && c->id->verbs && rdma_disconnect(c->id))
    SBR_DEBUG("verbs: %s: rdma_disconnect: %s", c->peer, strerror(errno));
  conn_free(c);
}

static int verbs_nic_port(struct sbr__conn *c, char *device, size_t len,
                          unsigned *port)
{
  if (!c || !c->id || !c->id->verbs || !device || !len || !port)
    return -EINVAL;
  snprintf(device, len, "%s", ibv_get_device_name(c->id->verbs->device));
  *port = c->id->port_num;
  return 0;
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
  int ret = open_channel("this host", &ch, errbuf, errlen);
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
    .connect = verbs_connect,
    .listen = verbs_listen,
    .get_event = verbs_get_event,
    .accept = verbs_accept,
    .reject = verbs_reject,
    .close_listener = verbs_close_listener,
    .nic_port = verbs_nic_port,
    .reg_mr = verbs_reg_mr,
    .dereg_mr = verbs_dereg_mr,
    .post_send = verbs_post_send,
    .post_recv = verbs_post_recv,
    .poll_cq = verbs_poll_cq,
    .arm_cq = verbs_arm_cq,
    .wait_cq = verbs_wait_cq,
    .kick_cq = verbs_kick_cq,
    .disconnect = verbs_disconnect,
    .close = verbs_close,
    .posted_recv_count = verbs_posted_recv_count,
    .has_write_imm = verbs_has_write_imm,
    .check_host = verbs_check_host,
    .test_fail = verbs_test_fail,
};
