/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * verbs-internal.h - what the files of the rdma-core back end share: the
 * listener and connection control blocks, their constants, and the
 * functions one file calls in another.
 *
 *   transport-verbs.c  queues and teardown of a connection, small helpers,
 *                      the ops table (the overview of the back end is there)
 *   verbs-connect.c    the sender's side of connection set-up
 *   verbs-accept.c     the receiver's side: listening, events, accepting
 *   verbs-datapath.c   registration, posting, completions, closing
 *   verbs-keys.c       which keys a lane grants (MRs or type-2 windows)
 *   verbs-caps.c       what a device can do (inline, windows, limits)
 *   verbs-async.c      the devices' async events (QP, CQ, port, device)
 */
#ifndef SBR_VERBS_INTERNAL_H
#define SBR_VERBS_INTERNAL_H

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "transport/transport.h"
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
/* A listener whose device went away (DEVICE_REMOVAL) binds its address
 * again after this long, doubling up to the ceiling while it can't. */
#define VERBS_RELISTEN_FIRST_MS 100
#define VERBS_RELISTEN_MAX_MS 5000
/* The sender looks at its event channel at most this often while idle. */
#define VERBS_CM_CHECK_MS 10
/* Bytes of one bounce slot: an "inline" WR copied at post time where the
 * QP got less inline room than the engine posts (engines post at most
 * 64 inline bytes, transport.h's caps). */
#define VERBS_BOUNCE_SLOT 64
/* Devices whose window probe a wildcard listener remembers; on a host
 * with more, a device past them is probed again at each accept (a
 * window allocated, bound and freed: correct, a little slower). */
#define VERBS_PROBED_DEVICES 8
#define VERBS_LISTEN_BACKLOG 16
/* Used when the caller passes no connect timeout: never wait forever. */
#define VERBS_DEFAULT_TIMEOUT_MS 5000

/* The retry count a receiver's accept names.  Its QP takes the
 * sender's (the connect request's, sbr_sender_config.retry_count, 6 by
 * default, never 7: rxe takes 7 for "retry forever" (rxe_comp.c), so a
 * probe of a dead sender's lane (receiver.c) would never fail there).
 * The ACK timeouts are the configs' (fabric.h). */
#define VERBS_RETRY_COUNT 6
/* Send WRs a lane with windows needs before its engine posts any: the
 * two binds. */
#define VERBS_WINDOW_WRS 2
/* A bind is local work, but the emulated VM is slow: generous. */
#define VERBS_WINDOW_BIND_MS 5000

/* IB CM reject reasons (IBTA 12.6.7.2) that say something to a user. */
#define VERBS_REJ_INVALID_SERVICE_ID 8
#define VERBS_REJ_CONSUMER_DEFINED 28

/* A growable set of device contexts (verbs-async.c). */
struct sbr__ctx_set {
  struct ibv_context **v; /* n of them, room for cap */
  unsigned n, cap;
};

struct sbr__listener {
  struct rdma_event_channel *channel; /* the listen id's and accepted ids' */
  struct rdma_cm_id *id;              /* listening id; NULL once closed */
  atomic_int refs;                    /* 1 (listener) + 1 per accepted conn */
  atomic_bool no_windows; /* a windowed accept failed: MRs from then on */
  /* Devices whose type-2 windows were probed (allocate, free), and the
   * answer: once per device, on the accept thread only. */
  struct ibv_context *probed[VERBS_PROBED_DEVICES];
  bool probed_ok[VERBS_PROBED_DEVICES];
  char name[80]; /* "addr:port", for logs */
  /* After DEVICE_REMOVAL or ADDR_CHANGE of the listening id (id NULL):
   * the address it was bound to, bound again when relisten_ms comes
   * (accept thread), with back-off. */
  struct sockaddr_storage bound;
  uint64_t relisten_ms;         /* next try (now_ms clock); 0 = listening */
  uint32_t relisten_backoff_ms; /* the wait after the next failed try */
  bool relisten_failing;        /* a try failed (logged once) */
  /* Async events (verbs-async.h), accept thread only: the device
   * contexts whose fds were made non-blocking, those whose fd failed (a
   * device gone), the contexts in use (scratch), and get_event's poll
   * set (the channel, then watched's fds).  Grown as needed: a wildcard
   * listener's lanes may be on every device of the host (ten or more on
   * GPU servers, more with SR-IOV functions), ... */
  struct sbr__ctx_set watched, dead, used;
  struct pollfd *pfd;
  unsigned pfd_cap;
  /* ... and the accepted lanes, which an event may mark failed: added by
   * accept, taken out by conn_free (any thread), under lanes_lock. */
  pthread_mutex_t lanes_lock;
  struct sbr__conn *lanes;   /* singly linked through lane_next */
  atomic_bool async_pending; /* a lane was marked: report it */
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
  struct ibv_mr *bounce_mr; /* bounce, local access only */
  /* The READ probe's page (iWARP): the sender's target, REMOTE_READ
   * only, or the receiver's sink, local (verbs_mr_access). */
  uint8_t *probe;
  size_t probe_map_len;         /* bytes mapped at probe */
  struct ibv_mr *probe_mr;      /* SBR__PROBE_MAX bytes of it */
  struct verbs_sent *sent;      /* send WRs in flight, a ring */
  uint32_t sent_cap;            /* ring size = the QP's max_send_wr */
  uint32_t sent_head;           /* oldest WR in flight */
  uint32_t sent_count;          /* WRs in flight */
  atomic_bool disconnected;     /* rdma_cm said the peer left */
  atomic_bool closing;          /* close() began: stop reporting it */
  atomic_bool async_failed;     /* its device reported the QP or CQ (or
                                   itself) failed (verbs-async.h) */
  struct sbr__conn *lane_next;  /* receiver: the listener's next lane */
  bool lane_listed;             /* receiver: in the listener's lanes */
  bool async_nonblock;          /* sender: its device's async fd is
                                   non-blocking */
  _Atomic uint64_t posted_recv; /* receive WRs ever posted */
  uint64_t next_cm_check_ms;    /* sender: next look at the channel */
  int comp_vector;              /* the CQs' completion vector */
  int numa_node;                /* receiver: node the lane prefers, or -1 */
  bool huge_advised;            /* receiver: lane madvised MADV_HUGEPAGE */
  char peer[96];                /* "host:port", for logs */
};

/* ------------------------------------------------------------- helpers */

static inline uint64_t now_ms(void)
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
static inline int ms_left(uint64_t deadline)
{
  uint64_t now = now_ms();
  if (now >= deadline)
    return 0;
  uint64_t left = deadline - now;
  return left > 1000000 ? 1000000 : (int)left;
}

/* errno as a negative return value; fallback when a call failed without
 * setting it. */
static inline int neg_errno(int fallback)
{
  return errno > 0 ? -errno : -fallback;
}

/* ibv_post_* return a positive errno by convention, some providers a
 * negative one. */
static inline int neg_ret(int ret)
{
  if (ret > 0)
    return -ret;
  return ret < 0 ? ret : -EIO;
}

/* ----------------------------------------------------- transport-verbs.c */

void sbr__verbs_format_hostport(char *buf, size_t len, const char *host,
                                uint16_t port);

void sbr__verbs_format_sockaddr(char *buf, size_t len,
                                const struct sockaddr *sa);

int sbr__verbs_open_channel(const char *hostport,
                            struct rdma_event_channel **out, char *errbuf,
                            size_t errlen);

void sbr__verbs_listener_unref(struct sbr__listener *l);

void sbr__verbs_windows_failed(struct sbr__listener *l);

bool sbr__verbs_listener_windows(struct sbr__listener *l,
                                 struct ibv_context *ctx);

int sbr__verbs_conn_create_queues(struct sbr__conn *c,
                                  const struct sbr__queue_caps *caps,
                                  char *errbuf, size_t errlen);

void sbr__verbs_conn_free_verbs(struct sbr__conn *c);

/* Maps and registers c->probe (SBR__PROBE_MAX bytes, zeroed) with the
 * ibv access flags given, after the PD exists.  0 or -errno; teardown
 * is sbr__verbs_conn_free_verbs's. */
int sbr__verbs_conn_create_probe(struct sbr__conn *c, int ibv_access);

/* Sets the id's TOS (when f sets one) and ACK timeout (when nonzero),
 * before it resolves a route or is accepted.  A TOS the kernel refuses
 * fails (the traffic would land in the wrong class): -errno and errbuf
 * (may be NULL); an ACK timeout a kernel lacks the option for is logged. */
int sbr__verbs_set_id_options(struct rdma_cm_id *id,
                              const struct sbr__fabric *f, const char *who,
                              char *errbuf, size_t errlen);

/* Logs, at debug level, the fabric settings the connection's QP really
 * has (traffic class, ACK timeout, retries: ibv_query_qp), its CQs'
 * completion vector and the lane memory's placement. */
void sbr__verbs_log_fabric(struct sbr__conn *c, const char *who);

void sbr__verbs_conn_free(struct sbr__conn *c);

/* ------------------------------------------------------- verbs-connect.c */

/* The entries of sbr__transport_verbs (transport.h says what each does). */

int sbr__verbs_connect(const char *host, uint16_t port, const char *source,
                       const uint8_t *priv, size_t priv_len,
                       const struct sbr__queue_caps *caps, int timeout_ms,
                       struct sbr__conn **out, struct sbr__lane_desc *lane,
                       char *errbuf, size_t errlen);

/* -------------------------------------------------------- verbs-accept.c */

int sbr__verbs_listen(const char *addr, uint16_t port,
                      struct sbr__listener **out, char *errbuf, size_t errlen);

int sbr__verbs_get_event(struct sbr__listener *l, int timeout_ms,
                         struct sbr__listen_event *ev);

int sbr__verbs_accept(struct sbr__listener *l, struct sbr__conn_request *req,
                      const struct sbr__queue_caps *caps,
                      struct sbr__lane_desc *lane, struct sbr__conn **out,
                      struct sbr__lane_mem *mem);

void sbr__verbs_reject(struct sbr__listener *l, struct sbr__conn_request *req,
                       const struct sbr__refusal *why);

void sbr__verbs_close_listener(struct sbr__listener *l);

/* ------------------------------------------------------ verbs-datapath.c */

int sbr__verbs_reg_mr(struct sbr__conn *c, void *addr, size_t len, int access,
                      struct sbr__mr **out);

void sbr__verbs_dereg_mr(struct sbr__mr *m);

int sbr__verbs_post_send(struct sbr__conn *c, const struct sbr__wr *wrs, int n);

int sbr__verbs_post_recv(struct sbr__conn *c, uint64_t wr_id, void *addr,
                         uint32_t len, const struct sbr__mr *mr);

int sbr__verbs_poll_cq(struct sbr__conn *c, struct sbr__wc *out, int max);

void sbr__verbs_arm_cq(struct sbr__conn *c);

void sbr__verbs_wait_cq(struct sbr__conn *c, uint32_t timeout_us);

void sbr__verbs_kick_cq(struct sbr__conn *c);

void sbr__verbs_disconnect(struct sbr__conn *c);

void sbr__verbs_close(struct sbr__conn *c);

bool sbr__verbs_async_failed(struct sbr__conn *c);

#endif /* SBR_VERBS_INTERNAL_H */
