/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * receiver-internal.h - what receiver.c (lanes, validation, ordering,
 * stats) shares with its accept thread (receiver-accept.c), the probing of
 * quiet lanes (receiver-liveness.c), frame reassembly (receiver-frames.c),
 * the application's calls about devices (receiver-devices.c) and the
 * mechanism-specific halves (receiver-status-byte.c,
 * receiver-sliding-window.c).
 *
 * Lifetimes: a lane is referenced by the receiver while its sender is
 * connected and by every block the application has not released.  The lane
 * (and its QP and memory) goes when the last reference does, whichever
 * thread drops it.  The receiver object is referenced by itself and by every
 * lane, so blocks outliving sbr_receiver_free stay valid.
 */
#ifndef SBR_RECEIVER_INTERNAL_H
#define SBR_RECEIVER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "sbr-testing.h"
#include "wire/block.h"
#include "util/clock.h"
#include "engine/pace.h"
#include "transport/transport.h"

enum sbr__recv_state {
  SBR__RECV_FREE,      /* empty or being written by the sender */
  SBR__RECV_PENDING,   /* validated, waiting for its turn */
  SBR__RECV_DELIVERED, /* with the application (status 1 or 2) */
  /* A continuation block of a spanning block that is pending or
   * delivered (its head's state says which): nothing lands here until
   * the head is released, which frees it too. */
  SBR__RECV_SPANNED,
};

struct sbr_block {
  struct sbr__lane *lane;     /* owner */
  uint32_t index;             /* in the lane */
  int state;                  /* enum sbr__recv_state, atomic: release
                                 runs on any thread */
  uint64_t found_scan;        /* scan generation that found it */
  uint64_t stale_since_ns;    /* receiver thread: first seen behind the
                                 lane's next seq (the backstop), or with
                                 its span's continuation bytes not landed;
                                 0 = not */
  uint32_t span;              /* receive blocks it covers: 1, or a span's k
                                 (this block and the k-1 after it) */
  struct sbr_block_info info; /* decoded header */
};

struct sbr__lane;

/* Mechanism half of the receiver. */
struct sbr__receiver_engine {
  const char *name;
  int (*start)(struct sbr__lane *lane); /* after accept */
  void (*stop)(struct sbr__lane *lane); /* before close */
  /* Receiver thread: mark blocks that arrived since the last call by
   * calling sbr__lane_arrived(lane, index) for each, in arrival order when
   * the mechanism knows it.  <0 when the lane's connection failed. */
  int (*scan)(struct sbr__lane *lane);
  /* Any thread: the application is done with the block (or it was
   * rejected): hand it back to the sender. */
  void (*release)(struct sbr__lane *lane, uint32_t index);
  /* Any thread: the application keeps the block for a while. */
  void (*hold)(struct sbr__lane *lane, uint32_t index);
  /* A block left alone is found again by the next scan (a status byte
   * still 1), so one seen too early may wait for its data; false where
   * arrival is a completion, which comes only once the data is placed. */
  bool looks_again;
  /* Receiver thread, optional: has a block landed that scan would find?
   * No side effects: the look after announcing a sleep (transport.h,
   * sleep_prepare), for mechanisms whose arrival is a status byte. */
  bool (*landed)(struct sbr__lane *lane);
};

extern const struct sbr__receiver_engine sbr__receiver_status_byte;
extern const struct sbr__receiver_engine sbr__receiver_sliding_window;

/* Per device, per lane: where its stream stands. */
struct sbr__device_track {
  bool seen;            /* a block of this device was delivered */
  uint16_t next_packet; /* expected packet number */
  /* Frame being reassembled (next_frame). */
  struct sbr_frame partial;
  bool partial_active;
};

struct sbr__lane {
  struct sbr_receiver *rx;    /* owner (referenced) */
  atomic_int refs;            /* receiver + blocks out */
  uint32_t id;                /* lane number, in logs and blocks */
  char peer[64];              /* the sender, "ip:port" or "shm:pid" */
  struct sbr__conn *conn;     /* this sender's connection */
  struct sbr__lane_desc desc; /* geometry as sent to the sender */
  struct sbr__lane_mem mem;   /* blocks and status bytes */
  struct sbr_block *blocks;   /* desc.block_count handles */
  const struct sbr__receiver_engine *engine;
  void *engine_state;
  pthread_mutex_t lock; /* engine's release vs scan */
  atomic_bool closed;   /* lane closed: release = no-op */
  bool disconnected;    /* sender gone; deliver what landed */
  /* Liveness (receiver thread): when a block last landed or a probe was
   * answered, and whether a probe is in flight (receiver-liveness.c). */
  uint64_t heard_ns;
  bool probing;
  uint64_t probe_ns; /* when the probe in flight was posted */
  /* The sender's address (AF_UNSPEC where the back end has none): a new
   * lane from it replaces a quiet one. */
  struct sockaddr_storage peer_addr;
  bool final_scan_done; /* after disconnect: what landed is taken in */
  uint64_t scan_gen;    /* completed scans */
  uint64_t next_seq;    /* next block sequence to deliver */
  uint32_t next_index;  /* where it usually is: after the last delivered */
  bool seq_known;       /* next_seq is valid */
  uint32_t n_pending;
  atomic_uint n_out;    /* receive blocks delivered, not yet released
                           (a span counts its k; any thread) */
  atomic_int releasing; /* releases between status 0 and state FREE */
  struct sbr__device_track dev[SBR_MAX_DEVICES];
  /* Invalid blocks' warnings (receiver thread): the first of each reason
   * is logged whole, the rest counted and summed up at most every
   * sbr__warn_summary_ns, and at close.  The stats count every one. */
  struct {
    bool warned;         /* the first was logged */
    uint64_t suppressed; /* since the last summary */
  } invalid[SBR__BLOCK_ERROR_LAST + 1];
  uint64_t invalid_summary_ns; /* the next summary is due; 0 = none yet */
  /* When each device's newest all-headers key-unit request was made on
   * this lane (r->stats_lock; receiver-devices.c). */
  uint64_t key_headers_ns[SBR_MAX_DEVICES];
  struct sbr__lane *next; /* receiver's list of open lanes */
};

/* Tests only: the shortest time between two summaries of a lane's invalid
 * blocks (default 10 s). */
extern uint64_t sbr__warn_summary_ns;

/* How long a block may stay behind its lane's next sequence number before
 * the backstop drops it (docs/protocol.md, "Placement order"); tests may
 * change it. */
extern uint64_t sbr__stale_bound_ns;

#define SBR__MAX_NIC_PORTS 4

/* What the accept thread hands the receive thread, in the order it
 * happened (receiver-accept.c). */
enum sbr__handoff_kind {
  SBR__HANDOFF_LANE,         /* lane: accepted, set up, counted active */
  SBR__HANDOFF_DISCONNECTED, /* conn: its sender left */
  SBR__HANDOFF_REFUSAL,      /* for on_refusal: peer, reason, text */
};

struct sbr__handoff {
  enum sbr__handoff_kind kind;
  struct sbr__lane *lane;  /* LANE */
  struct sbr__conn *conn;  /* DISCONNECTED: compared, never dereferenced */
  enum sbr_refusal reason; /* REFUSAL */
  char peer[64];           /* REFUSAL */
  char text[256];          /* REFUSAL */
  struct sbr__handoff *next;
};

struct sbr_receiver {
  struct sbr_receiver_config cfg;
  char address[256];
  const struct sbr__transport_ops *ops;
  const struct sbr__receiver_engine *engine;
  struct sbr__listener *listener;
  atomic_int refs;         /* self + lanes */
  struct sbr__lane *lanes; /* open lanes (receiver thread) */
  uint32_t next_lane_id;
  uint16_t next_epoch;
  atomic_bool wakeup;
  struct sbr__backoff backoff;
  uint64_t last_event_check_ns;
  /* Who may connect (NULL: anyone), and the connection-rate bucket:
   * tokens left (at most max_connects_per_s) as of connect_refill_ns.
   * Receiver thread. */
  sbr_addr_list *allowed;
  double connect_tokens;
  uint64_t connect_refill_ns;
  /* Adaptive poll mode (receiver thread): the devices' periods, when the
   * scans under way started, whether they are the first since a timed
   * sleep, and verdicts not yet added to stats. */
  struct sbr__pace pace;
  uint64_t scan_ns;
  bool after_sleep;
  /* Liveness probes posted (receiver thread; read by tests). */
  atomic_uint_fast64_t probes_posted;
  uint64_t pace_verdicts[3]; /* by enum sbr__pace_verdict */
  /* Sleeps a status WRITE ended / that ran to their end (receiver
   * thread, added to stats by sbr_receiver_next). */
  uint64_t sleeps_woken, sleeps_timed_out;
  /* sbr_receiver_set_device_period (any thread, atomic loads/stores). */
  uint64_t period_hint[SBR_MAX_DEVICES];

  pthread_mutex_t stats_lock; /* stats, the lane list, pause bitmaps */
  /* Devices paused (sbr_receiver_pause_device), under stats_lock; every
   * open lane's bitmap is kept equal to it. */
  uint8_t paused[SBR_MAX_DEVICES / 8];
  struct sbr_receiver_stats stats;
  struct sbr_device_stats dev_stats[SBR_MAX_DEVICES];
  uint64_t recv_wr_closed_lanes; /* posted receives of gone lanes */
  /* RDMA ports lanes have run on (ops->nic_port), for the NIC's
   * counters; under stats_lock.  A receiver listens on one address, so
   * one port in practice; a few more cost nothing. */
  struct sbr__nic_port nic_ports[SBR__MAX_NIC_PORTS];
  unsigned n_nic_ports;

  /* The accept thread (receiver-accept.c): it alone uses the listener, the
   * connection-rate bucket, next_lane_id and next_epoch. */
  pthread_t accept_thread;
  /* No accept thread: the receive thread reads listener events itself
   * (sbr__receiver_new_without_accept_thread). */
  bool accept_inline;
  atomic_bool accept_stop; /* sbr_receiver_free: end it */
  /* From an event taken to its hand-off queued: a test waits for it to
   * clear before it looks at what the receive thread was handed. */
  atomic_bool accept_busy;
  /* The FIFO of hand-offs.  The receive thread looks at handoff_ready
   * (one atomic load per loop, no lock) and takes the lock only when it
   * is set; with no lane open it sleeps on handoff_cond. */
  pthread_mutex_t handoff_lock;
  pthread_cond_t handoff_cond;
  struct sbr__handoff *handoff_head;
  struct sbr__handoff **handoff_tail;
  atomic_bool handoff_ready;
};

/* receiver-accept.c: the fabric settings of cfg for lane lane_id (its
 * place in the spread over completion vectors); the accept thread's main
 * loop (arg: the receiver); and its work done inline on the receive
 * thread, for a receiver made without an accept thread. */
void sbr__receiver_fabric(const struct sbr_receiver_config *cfg,
                          uint32_t lane_id, struct sbr__fabric *f);
void *sbr__receiver_accept_main(void *arg);
void sbr__receiver_accept_inline(struct sbr_receiver *r);

/* receiver.c: the lane's sender left (or stopped answering); its last
 * blocks are taken in and the lane closes. */
void sbr__lane_disconnected(struct sbr__lane *lane);

/* receiver-devices.c: the receiver's pause bitmap copied into the lane's
 * memory, where its sender READs it.  Under stats_lock. */
void sbr__lane_store_pause_locked(struct sbr_receiver *r,
                                  struct sbr__lane *lane);

/* receiver-frames.c: the device's unfinished frame, if any, is dropped:
 * counted, its blocks released. */
void sbr__lane_drop_partial(struct sbr__lane *lane,
                            struct sbr__device_track *t);

/* receiver-liveness.c, receive thread: whether quiet lanes are probed at
 * all; probing a lane quiet since its last block (now: when this pass
 * began); and closing a quiet lane whose address fresh connects from. */
bool sbr__receiver_probes_lanes(const struct sbr_receiver *r);
void sbr__lane_check_alive(struct sbr_receiver *r, struct sbr__lane *lane,
                           uint64_t now);
void sbr__lane_replace_quiet(struct sbr_receiver *r,
                             const struct sbr__lane *fresh);

/* TEST ONLY (tests/engine/test-accept.c): called on the accept thread just
 * before a request's lane is allocated and registered, so a test can stall
 * an accept there.  NULL otherwise. */
extern void (*_Atomic sbr__receiver_test_accept_hook)(const char *peer);

/* TEST ONLY: true while the accept thread is handling an event it took;
 * once false, whatever it did is queued for the receive thread, which
 * takes it in at the start of its next sbr_receiver_next. */
bool sbr__receiver_accept_busy(sbr_receiver *r);

/* sbr_receiver_new over the given back end instead of cfg->backend's, and
 * with no accept thread: the receive thread reads the listener's events
 * itself, inside sbr_receiver_next, so a back end that isn't thread-safe
 * runs deterministically.  The fuzz targets (tests/fuzz/) run the real
 * receiver so over a back end of their own whose lane memory they write as
 * a hostile sender would. */
int sbr__receiver_new_without_accept_thread(
    const struct sbr_receiver_config *cfg, const struct sbr__transport_ops *ops,
    sbr_receiver **out, char *errbuf, size_t errlen);

/* A block arrived (status 1 seen / WRITE_IMM completion). */
void sbr__lane_arrived(struct sbr__lane *lane, uint32_t index);

#endif
