/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * transport.h - the small RDMA-shaped interface the engines run on.
 *
 * The sender and receiver engines (status-byte and sliding-window) never call
 * libibverbs directly: they call these operations, which two back ends
 * implement:
 *
 *   verbs  rdma-core (librdmacm for setup, libibverbs for the data path).
 *   shm    same host, across processes.  The receiver's lane lives in a memfd
 *          passed over a Unix socket; a "NIC" thread in the sender process
 *          executes posted WRITE/READ requests in order with memcpy and
 *          completes them.  The receiver stays passive.  Tests inject
 *          faults into its connections (added delay, completion errors)
 *          from outside this interface: transport/fault-injection.h.
 *
 * The vocabulary is the verbs one on purpose: a work request (sbr__wr) is an
 * RDMA WRITE, WRITE WITH IMMEDIATE, READ or SEND; chains are posted with one
 * call (one doorbell); completions (sbr__wc) are polled without blocking.
 *
 * Remote addresses are whatever the back end put in the lane description:
 * virtual addresses for verbs, offsets into the shared segment for shm.  The
 * engines only ever add "index * block_size" to them.
 *
 * Threads: one conn is used by one thread at a time for post_send/poll_cq
 * (the engine serialises); post_recv may be called from another thread than
 * poll_cq (the sliding-window receiver does so from its own thread only);
 * execute_claimed runs beside them, on the thread that claimed a chain.
 * Listener operations (listen, get_event, accept, reject, close_listener)
 * run on the receiver's accept thread, beside the receive thread's
 * disconnect/close of lanes and the application's close of a released one.
 *
 * Queue accounting: an unsignaled WR occupies a send-queue slot until a
 * later signaled completion is polled; max_send_wr counts those, and a post
 * that would exceed it fails with -ENOMEM.  wr_ids of WRs in flight should be
 * unique so an error completion is attributed to the right request.
 *
 * Lifetimes: accept consumes the request whether it succeeds or not (a
 * failed accept rejects the peer).  close_listener may come before the close
 * of connections it accepted; lane memory stays valid until that close.
 * Lane memory starts zeroed.  accept may return before the connection is
 * established; a peer that gave up meanwhile shows up as DISCONNECTED.
 *
 * Processes: verbs device contexts are per process.  A child forked after
 * the parent used verbs can't use them; tests fork before touching verbs.
 */
#ifndef SBR_TRANSPORT_H
#define SBR_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "sbr.h"
#include "transport/fabric.h"
#include "util/errors.h"
#include "wire/private-data.h"

/* A sliding-window sender without a block count hint posts this many ACK
 * receives beyond its 4 spare ones: the most slots it can acknowledge. */
#define SBR__SW_DEFAULT_ACK_SLOTS 1020

/* Memory access flags for sbr__reg_mr (mirror IBV_ACCESS_*). */
enum {
  SBR__ACCESS_LOCAL_WRITE = 1 << 0,
  SBR__ACCESS_REMOTE_WRITE = 1 << 1,
  SBR__ACCESS_REMOTE_READ = 1 << 2,
};

struct sbr__mr {
  void *addr;    /* start of the registered range */
  size_t length; /* bytes */
  uint32_t lkey; /* local key, for sge.lkey */
  uint32_t rkey; /* remote key */
  void *impl;    /* back end's own handle (struct ibv_mr *, ...) */
};

enum sbr__opcode {
  SBR__OP_WRITE,
  SBR__OP_WRITE_IMM,
  SBR__OP_READ,
  SBR__OP_SEND,
  SBR__OP_RECV, /* only in completions */
};

/* One work request.  A chain is an array posted in order with one call. */
struct sbr__wr {
  uint64_t wr_id;
  enum sbr__opcode opcode;
  void *local_addr; /* source (WRITE/SEND) or destination (READ) */
  uint32_t length;
  uint32_t lkey;        /* ignored for inline sends */
  uint64_t remote_addr; /* WRITE/WRITE_IMM/READ */
  uint32_t rkey;
  uint32_t imm_data; /* WRITE_IMM only: host order */
  bool signaled;     /* generate a completion */
  bool inline_data;  /* copy the source at post time (<= max_inline) */
};

enum sbr__wc_status {
  SBR__WC_SUCCESS = 0,
  SBR__WC_FLUSH = 1, /* QP went to error; request not executed */
  SBR__WC_ERROR = 2, /* request failed; the QP is now in error */
};

struct sbr__wc {
  uint64_t wr_id;
  enum sbr__opcode opcode;
  enum sbr__wc_status status;
  uint32_t byte_len; /* RECV: bytes received */
  uint32_t imm_data; /* RECV after WRITE_IMM / SEND with imm: host order */
  bool has_imm;
  int vendor_err; /* back end's detail, for logs */
};

struct sbr__conn;
struct sbr__listener;

/* An RDMA device port, named as the NIC's counters name it. */
struct sbr__nic_port {
  char device[64]; /* ibv_get_device_name */
  unsigned port;   /* 1-based port number */
};

/* Receiver-side lane memory, allocated and registered by the back end when it
 * accepts (verbs: aligned heap + ibv_reg_mr; shm: a memfd mapping). */
struct sbr__lane_mem {
  uint8_t *blocks;          /* block_count * block_size bytes */
  volatile uint8_t *status; /* block_count status bytes, then the pause
                               bitmap at pause_offset */
  /* verbs: the rkeys are type-2 memory windows bound to the lane's QP
   * (else memory regions; always false over shm). */
  bool windows;
  /* The liveness probe is a READ of the sender's probe target into
   * probe_sink (probe_lkey) when probe.len is nonzero (verbs, a sender
   * that offered one: iWARP), else a zero-length WRITE (receiver.c). */
  struct sbr__probe_target probe;
  void *probe_sink;
  uint32_t probe_lkey;
};

/* A pending connection request on a listener. */
struct sbr__conn_request {
  void *impl;           /* back end's handle (struct rdma_cm_id *, fd) */
  uint8_t mechanism;    /* from the connect private data */
  uint32_t block_size;  /* hint from the sender, 0 = none */
  uint32_t block_count; /* hint from the sender, 0 = none */
  bool no_write_imm;    /* the device has no WRITE with immediate (iWARP) */
  struct sbr__probe_target probe; /* from the connect private data */
  char peer[64];                  /* "ip:port" or "shm:pid" for logs */
  /* The peer's address for the access list; ss_family AF_UNSPEC (left
   * zeroed) for a back end without one (shm: a process on this host). */
  struct sockaddr_storage peer_addr;
  /* SBR__EV_BAD_REQUEST: why the back end can't make a lane of it. */
  struct sbr__refusal refusal;
};

/* Listener events the receiver engine reacts to. */
enum sbr__listen_event_type {
  SBR__EV_NONE = 0,
  SBR__EV_CONNECT_REQUEST, /* req is filled; answer with accept or reject */
  SBR__EV_DISCONNECTED,    /* conn is the lane's connection; peer left/died */
  /* A connect request the back end could not read (another protocol
   * version, not sbr at all): req.peer and req.refusal are filled, the
   * rest is not; answer with reject (req.refusal) and nothing else. */
  SBR__EV_BAD_REQUEST,
};

struct sbr__listen_event {
  enum sbr__listen_event_type type;
  struct sbr__conn_request req; /* CONNECT_REQUEST */
  struct sbr__conn *conn;       /* DISCONNECTED */
  /* DISCONNECTED: the device reported the lane's QP or CQ (or itself)
   * failed (verbs: an async event), not the peer. */
  bool async_error;
};

/* Parameters the engine hands a back end.  Queue sizes are maxima the engine
 * guarantees never to exceed (outstanding WRs), so the back end can size QPs
 * and CQs exactly. */
struct sbr__queue_caps {
  uint32_t max_send_wr;
  uint32_t max_recv_wr;
  uint32_t max_inline; /* bytes the engine may post inline */
  /* The fabric settings (TOS, ACK timeout and retries, completion
   * vector: verbs only) and the lane memory's placement (NUMA node, huge
   * pages: a receiver's lanes, both back ends); NULL = the defaults
   * (sbr__fabric_defaults).  Read during the call only. */
  const struct sbr__fabric *fabric;
};

struct sbr__transport_ops {
  const char *name;
  /* A peer may die without a word reaching us (verbs: power loss, a cut
   * cable; no DREQ).  The status-byte receiver then probes a quiet lane
   * with a signaled zero-length WRITE (a READ where lane_mem.probe says)
   * through post_send and polls its completion with poll_cq
   * (receiver.c).  shm: false (a dead process's socket closes). */
  bool peer_can_vanish;

  /* Sender: resolve, connect with the private data, wait until established
   * or timeout_ms passes; fill lane from the accept private data.  source:
   * the local address to bind (NULL = routing decides; shm ignores it). */
  int (*connect)(const char *host, uint16_t port, const char *source,
                 const uint8_t *priv, size_t priv_len,
                 const struct sbr__queue_caps *caps, int timeout_ms,
                 struct sbr__conn **out, struct sbr__lane_desc *lane,
                 char *errbuf, size_t errlen);

  /* Receiver: bind and listen.  The listener never blocks the caller longer
   * than the timeout given to get_event. */
  int (*listen)(const char *addr, uint16_t port, struct sbr__listener **out,
                char *errbuf, size_t errlen);
  /* Waits at most timeout_ms (0 = just look) for one event. 0 on success
   * (ev->type may be SBR__EV_NONE), negative errno on failure. */
  int (*get_event)(struct sbr__listener *l, int timeout_ms,
                   struct sbr__listen_event *ev);
  /* Allocate + register the lane for this request (blocks REMOTE_WRITE only,
   * the status region of sbr__lane_status_len bytes REMOTE_READ|REMOTE_WRITE,
   * rule 8), fill in addrs/rkeys of *lane (block_size, block_count, epoch,
   * lane_id, mechanism, pause_offset set by the caller),
   * and accept with the encoded lane as private data.  Posts no receives.
   * When it fails, it has refused the peer already: with req->refusal
   * when it set a reason there (verbs: SBR_REFUSAL_MEMLOCK), else with
   * SBR_REFUSAL_RESOURCES and the errno it returns. */
  int (*accept)(struct sbr__listener *l, struct sbr__conn_request *req,
                const struct sbr__queue_caps *caps, struct sbr__lane_desc *lane,
                struct sbr__conn **out, struct sbr__lane_mem *mem);
  /* Refuses the request, telling the sender why (reject private data). */
  void (*reject)(struct sbr__listener *l, struct sbr__conn_request *req,
                 const struct sbr__refusal *why);
  void (*close_listener)(struct sbr__listener *l);

  /* Both sides. */
  int (*reg_mr)(struct sbr__conn *c, void *addr, size_t len, int access,
                struct sbr__mr **out);
  void (*dereg_mr)(struct sbr__mr *mr);
  /* Post n WRs as one chain, in order (one doorbell).  Returns 0 or negative
   * errno; the chain is checked first, so only a provider failure can leave
   * its front posted (then logged; those WRs complete normally). */
  int (*post_send)(struct sbr__conn *c, const struct sbr__wr *wrs, int n);
  /* Like post_send, for a same-host back end whose "NIC" is a thread.  If
   * that thread is idle the chain is claimed for the caller instead:
   * returns 1, and the caller must call execute_claimed(c) as soon as it
   * has dropped its own locks (WRs posted meanwhile queue behind the
   * chain, and closing the conn waits for it).  Returns 0 when the chain
   * was queued as post_send queues it, or negative errno.  NULL where the
   * NIC is hardware (verbs).  The sender uses it only for a producer
   * posting its own frame (sender.c, post_queued). */
  int (*post_send_here)(struct sbr__conn *c, const struct sbr__wr *wrs, int n);
  /* Executes the chain this thread's post_send_here claimed, on this
   * thread, in order, with the completions and errors the NIC thread
   * would give.  c stays valid until it returns (close waits for it). */
  void (*execute_claimed)(struct sbr__conn *c);
  int (*post_recv)(struct sbr__conn *c, uint64_t wr_id, void *addr,
                   uint32_t len, const struct sbr__mr *mr);
  /* Non-blocking: returns the number of completions (0..max) or negative
   * errno when the connection is gone. */
  int (*poll_cq)(struct sbr__conn *c, struct sbr__wc *wc, int max);
  /* Sleeping instead of polling, for the sender's threads (they have
   * completions to wait for; the status-byte receiver has none).  The
   * pattern is verbs' own: arm_cq, then poll_cq once more (a completion
   * that came before the arm may not wake anyone), and if it found nothing,
   * wait_cq, which returns when a completion (or an error) may be polled,
   * or after timeout_us, or earlier.  verbs: a completion channel with
   * ibv_req_notify_cq; shm: a futex doorbell in the segment that the NIC
   * thread and the peer's SENDs ring. */
  void (*arm_cq)(struct sbr__conn *c);
  void (*wait_cq)(struct sbr__conn *c, uint32_t timeout_us);
  /* Makes the wait_cq in progress return now, or the next one if it comes
   * after the arm_cq that precedes it (never lost in between).  Any
   * thread, while the conn exists.  The sender's producers kick a sender
   * thread asleep on a completion when they queue a block, so the block is
   * posted behind the one in flight instead of after its completion.
   * verbs: an eventfd polled beside the completion channel; shm: the
   * doorbell, rung as a completion would. */
  void (*kick_cq)(struct sbr__conn *c);
  /* Tells the peer this end is gone and stops its requests (the QP goes to
   * error), but keeps lane memory valid until close: a receiver closes a
   * lane at once even while the application still holds its blocks. */
  void (*disconnect)(struct sbr__conn *c);
  /* Receiver lane teardown or sender disconnect; frees lane memory
   * (receiver side) -- callers must be done with it. */
  void (*close)(struct sbr__conn *c);
  /* Optional (NULL where the lane is remote: verbs): maps the lane's
   * blocks region of a sender's conn into this process, read-write, for
   * direct placement (sender-direct.c): receive block i is at
   * *base + i * lane block_size.  The mapping is the caller's and outlives
   * the conn (a producer may still write into a block of a lane that
   * closed; its bytes go nowhere); unmap_blocks undoes it.  0 or -errno. */
  int (*map_blocks)(struct sbr__conn *c, uint8_t **base, size_t *len);
  void (*unmap_blocks)(uint8_t *base, size_t len);
  /* Optional (NULL: no NIC, e.g. shm; then nic_remote_access_errors is
   * NULL too): the RDMA device port the connection runs on.  0, or
   * -errno. */
  int (*nic_port)(struct sbr__conn *c, struct sbr__nic_port *out);
  /* The port's responder remote-access-error count, all processes
   * together (verbs: the driver's sysfs counter, nic-counters.h): 0 and
   * *value, -ENOENT when the port has no such counter, -errno.  Takes a
   * port, not a conn: the receiver counts the ports of lanes that have
   * closed too. */
  int (*nic_remote_access_errors)(const struct sbr__nic_port *port,
                                  uint64_t *value);
  /* How many receive WRs were ever posted on this conn (for the test that
   * proves the status-byte receiver posts none). */
  uint64_t (*posted_recv_count)(struct sbr__conn *c);
  /* Optional (NULL: it has): false when the connection's device has no
   * RDMA WRITE with immediate (iWARP), which sliding-window posts. */
  bool (*has_write_imm)(struct sbr__conn *c);
  /* Optional (NULL: always usable): sbr_backend_check's test of this host,
   * 0 or -errno with errbuf saying why. */
  int (*check_host)(char *errbuf, size_t errlen);
  /* Optional (NULL where nobody can end the receiver's sleep: over verbs
   * the writer of a status byte is a remote NIC, one-sided).  The
   * status-byte receiver's sleep, ended by its peer's status WRITEs on the
   * same host (shm).  Receiver thread, one lane's conn at a time:
   * sleep_prepare announces the sleep and returns a token; the caller then
   * looks at its status bytes once more and, only if none landed, calls
   * sleep_wait(token, until_ns), which returns 1 when a status WRITE came
   * since sleep_prepare (or spuriously), 0 at until_ns (CLOCK_MONOTONIC,
   * absolute).  sleep_end withdraws the announcement, after every
   * prepare. */
  uint32_t (*sleep_prepare)(struct sbr__conn *c);
  int (*sleep_wait)(struct sbr__conn *c, uint32_t token, uint64_t until_ns);
  void (*sleep_end)(struct sbr__conn *c);
  /* Test only (sbr__sender_test_fail_qp): put the connection in error as
   * a NIC fault would; every WR not yet executed completes in error or is
   * flushed.  verbs: the QP goes to ERR; shm: the next WR the NIC thread
   * executes fails as fail_after_wrs does. */
  int (*test_fail)(struct sbr__conn *c);
  /* Optional (NULL: never): whether the device reported the connection's
   * QP or CQ (or itself) failed (verbs: an async event, verbs-async.h),
   * for the sender's count; looks at the device's events first. */
  bool (*async_failed)(struct sbr__conn *c);
};

extern const struct sbr__transport_ops sbr__transport_shm;
#ifdef SBR_HAVE_VERBS
extern const struct sbr__transport_ops sbr__transport_verbs;
#endif

/* Returns the ops for a back end or NULL when it isn't built in. */
const struct sbr__transport_ops *sbr__transport_get(enum sbr_backend backend);

/* The error of a sender or receiver asked for a back end that isn't built
 * in: what is missing and what to do instead. */
void sbr__backend_missing_errf(char *buf, size_t len, enum sbr_backend backend);

#endif /* SBR_TRANSPORT_H */
