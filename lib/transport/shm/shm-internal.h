/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * shm-internal.h - what the three files of the shm back end share: a
 * simulated RDMA NIC between two processes on one host.
 *
 *   shm-connection.c  the Unix-socket handshake, the listener, accept and
 *                     reject, a conn's life, and the ops table
 *   shm-segment.c     the lane's segment: its layout, creating it (the
 *                     receiver), mapping and bounds-checking it (the sender)
 *   shm-nic.c         the emulated NIC: MR registry, rings, the NIC
 *                     thread, and the data path (post, poll, wait)
 *
 * The receiver's lane lives in a memfd that the receiver hands to the sender
 * over a Unix socket when it accepts.  The sender maps it, and a "NIC" thread
 * in the sender process executes the posted work requests in order with
 * memcpy, so the receiver stays as passive as it is over verbs.  Where an
 * engine could tell the difference, the back end behaves like a verbs RC QP:
 * remote keys and bounds are checked per WR, the blocks region refuses READs
 * (rule 8), local ranges must lie in the registered MR their lkey names (lkey
 * 0 means unregistered memory, which shm accepts: it needs no registration,
 * and raw shm tools rely on that), a failed WR puts the QP in error and
 * flushes what follows, inline data is copied at post time,
 * only signaled WRs (and every failure) complete, a send queue slot is freed
 * only when a completion covering it has been polled, and a full send queue
 * refuses posts with -ENOMEM.
 */
#ifndef SBR_TRANSPORT_SHM_INTERNAL_H
#define SBR_TRANSPORT_SHM_INTERNAL_H

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "transport/transport.h"

#define NS_PER_MS 1000000ull
#define NS_PER_S 1000000000ull

#define SHM_MAX_INLINE 256 /* bytes a WR may carry inline */
#define SHM_MAX_MSG 64     /* bytes one SEND may carry */
#define SHM_MAX_PRIV 56    /* connect private data, as rdma_cm allows */
/* Any setup message's payload: the accept's is the longest (rdma_cm's
 * passive side may send 196). */
#define SHM_MAX_SETUP 64
static_assert(SHM_MAX_SETUP >= SBR__ACCEPT_PRIV_SIZE &&
                  SHM_MAX_SETUP >= SHM_MAX_PRIV,
              "setup buffers fit every message");
#define SHM_MSG_HDR 4       /* setup message: kind byte + 3 zero bytes */
#define SHM_MAX_QUEUE 65536 /* largest send/receive queue we size */
#define SHM_RING_MIN_SLOTS 16
/* The sender's receive depth is unknown when the receiver sizes the
 * segment; the sender's credits bound the use, this bounds the memory. */
#define SHM_TO_SENDER_SLOTS 256
#define SHM_PAGE 4096
#define SHM_PEER_CHECK_NS (50 * NS_PER_MS) /* hang-up noticed within this */
#define SHM_RNR_TIMEOUT_MS 2000     /* NIC waits this long for a receive */
#define SHM_SEND_RNR_TIMEOUT_MS 200 /* receiver's synchronous SEND waits */
#define SHM_MAX_PENDING 16          /* sockets whose request hasn't come */
#define SHM_PENDING_TIMEOUT_NS (5 * NS_PER_S)
#define SHM_CTRL_MAGIC 0x4d485342u /* "SBHM" little-endian */
#define SHM_CTRL_VERSION 3         /* 2: ring doorbells; 3: receiver wake */

/* -------------------------------------------------------- shared layout */

/* One message in a ring: what a RECV completion reports, plus the bytes of
 * a SEND.  The producer fills it before publishing head (release); the
 * consumer reads it after loading head (acquire). */
struct shm_msg {
  uint32_t imm_data; /* host order */
  uint32_t byte_len; /* WRITE_IMM: bytes written; SEND: message length */
  uint8_t has_imm;   /* 1 after WRITE_IMM */
  uint8_t is_send;   /* 1 when data[] holds a message */
  uint8_t reserved[6];
  uint8_t data[SHM_MAX_MSG];
};
static_assert(sizeof(struct shm_msg) == 80, "shm_msg is segment layout");

/* One direction of two-sided traffic.  Counters run free as uint32 (lock
 * free on every target, which sharing across processes needs) and are
 * compared by difference.  Each sits on its own cache line.
 *
 * bell is the consumer's doorbell, a futex word shared by both processes:
 * whoever makes a completion pollable for the consumer (the producer of a
 * message, and for the sender's own WRs its NIC thread) bumps it, and
 * wakes it when bell_waiters says someone sleeps in wait_cq.  A waiter
 * counts itself in, reads bell, checks for completions and sleeps only
 * while bell is unchanged, so no wake-up is lost. */
struct shm_ring {
  alignas(64) _Atomic uint32_t posted; /* receives the consumer posted */
  alignas(64) _Atomic uint32_t head;   /* messages the producer wrote */
  alignas(64) _Atomic uint32_t tail;   /* messages the consumer took */
  alignas(64) uint32_t slot_count;     /* power of two, set before sharing */
  uint32_t slot_offset;                /* segment offset of the slots */
  _Atomic uint32_t bell;               /* bumped per pollable completion */
  _Atomic uint32_t bell_waiters;       /* consumers asleep on bell */
};
static_assert(sizeof(struct shm_ring) == 256, "shm_ring is segment layout");
static_assert(ATOMIC_INT_LOCK_FREE == 2, "ring counters must be lock-free");

/* The status-byte receiver's sleep, which the writer of a status byte ends
 * (the sender's NIC thread, or a producer executing its own chain: direct
 * placement's submit is a status WRITE too).  Over verbs nothing can wake
 * a passive receiver; here the writer is a process of the same host.
 *
 * The receive thread stores asleep = 1, then (full fence) reads seq, checks
 * its status bytes once more and sleeps on seq only while it still holds
 * that value (FUTEX_WAIT compares and queues atomically).  A writer stores
 * the status byte, then (full fence) reads asleep, and only when it is set
 * bumps seq and wakes: no system call while the receiver polls.  The two
 * fences make the classic lost wake-up impossible: of "receiver reads the
 * byte" and "writer reads the flag", at least one sees the other's store.
 * If the writer saw the flag, its bump lands either before the receiver
 * read seq (then that read also shows the byte, which was stored before
 * the bump) or after (the futex sees seq changed, or is woken). */
struct shm_wake {
  alignas(64) _Atomic uint32_t seq; /* futex word: bumped per wake */
  _Atomic uint32_t asleep;          /* 1 while the receiver may sleep */
};

/* The control area at offset 0 of the segment. */
struct shm_ctrl {
  uint32_t magic;                          /* SHM_CTRL_MAGIC */
  uint32_t version;                        /* SHM_CTRL_VERSION */
  uint32_t ctrl_size;                      /* bytes, page multiple */
  uint32_t reserved;                       /* zero */
  alignas(64) struct shm_ring to_receiver; /* sender's WRITE_IMM/SEND */
  struct shm_ring to_sender;               /* receiver's SEND */
  struct shm_wake rx_wake;                 /* v3: the receiver's sleep */
};
static_assert(sizeof(struct shm_ctrl) == 640, "shm_ctrl is segment layout");

/* ---------------------------------------------------- per-process state */

enum shm_role {
  SHM_SENDER,   /* maps the lane, runs the NIC thread */
  SHM_RECEIVER, /* owns the lane; executes its SENDs synchronously */
};

enum shm_state {
  SHM_UP,    /* working */
  SHM_ERROR, /* a WR failed: QP in error, later WRs and receives flushed */
  SHM_GONE,  /* the peer hung up: as SHM_ERROR, then -ENOTCONN */
};

/* A remote region of the lane, as offsets into the segment. */
struct shm_region {
  uint64_t off;  /* first byte */
  uint64_t len;  /* bytes */
  uint32_t rkey; /* key a WR must name */
  bool read_ok;  /* REMOTE_READ allowed (status: yes, blocks: no) */
  /* WRITEs must end within the first write_len bytes: the status region's
   * pause bitmap is the receiver's alone (verbs can't tell a sub-range of
   * one MR apart, so there the engine's rule is all; here a sender that
   * broke it fails loudly). */
  uint64_t write_len;
  bool status; /* stores are release stores of status bytes */
};

/* A posted send WR, as the NIC sees it. */
struct shm_swr {
  struct sbr__wr wr;           /* as posted; inline data points at inl */
  uint64_t post_ns;            /* when posted; injected delay counts from it */
  uint64_t visible_ns;         /* its completion may be polled from then on */
  enum sbr__wc_status status;  /* result, set by the NIC thread */
  int vendor_err;              /* why it failed */
  uint8_t inl[SHM_MAX_INLINE]; /* inline payload, copied at post time */
};

/* A posted receive. */
struct shm_rwr {
  uint64_t wr_id; /* reported in its completion */
  void *addr;     /* where a SEND's bytes go */
  uint32_t len;   /* room there */
};

/* One connection, either end.  Fields after `lock` are guarded by it unless
 * marked otherwise; those before it are set up once and then read-only. */
struct sbr__conn {
  enum shm_role role;       /* which end this is */
  int sock;                 /* socket to the peer; -1 when closed */
  int memfd;                /* sender: the lane's memfd (map_blocks); -1 */
  uint8_t *seg;             /* shared segment mapping; NULL if unmapped */
  size_t seg_len;           /* its length */
  struct shm_ring *tx;      /* ring we produce into */
  struct shm_msg *tx_slots; /* its slots (validated copy of the layout) */
  uint32_t tx_mask;         /* slot count - 1 */
  struct shm_ring *rx;      /* ring of messages for our receives */
  struct shm_msg *rx_slots; /* its slots */
  uint32_t rx_mask;         /* slot count - 1 */
  struct shm_wake *rx_wake; /* the receiver's sleep (shm_ctrl.rx_wake) */
  struct shm_region blocks; /* sender: REMOTE_WRITE only (rule 8) */
  struct shm_region status; /* sender: REMOTE_READ | REMOTE_WRITE */
  uint64_t delay_ns;        /* sender: injected round trip */
  _Atomic uint64_t fail_at; /* sender: 1-based WR to fail, 0 = none; the
                               NIC thread reads it unlocked (test_fail) */
  uint64_t stall_at;        /* sender: 1-based WR from which the NIC does
                               nothing more, 0 = none (c->lock) */
  char peer[64];            /* "shm:pid=N", for logs */

  pthread_mutex_t lock; /* guards the rest, except where noted */
  bool lock_ready;      /* lock initialised (teardown) */
  pthread_cond_t wake;  /* NIC thread: work posted or stop */
  bool wake_ready;      /* wake initialised (teardown) */
  enum shm_state state; /* see enum shm_state */
  struct shm_swr *sq;   /* send queue, sq_depth slots */
  uint32_t sq_depth;    /* caps->max_send_wr */
  uint64_t sq_posted;   /* WRs ever posted */
  uint64_t sq_executed; /* WRs the NIC finished (or flushed) */
  /* A posting thread claimed WRs sq_executed..sq_claim_end to execute
   * itself (sbr__shm_post_send_here): the NIC thread leaves them alone while it
   * executes them (claim_started), and takes them over while it hasn't
   * started (a producer preempted before its copy must not stop the
   * lane).  claim_callers counts claimers that haven't returned from
   * execute_claimed yet: they hold c, so close waits for them. */
  bool sq_inline;
  bool claim_started;
  pthread_t claim_owner;
  uint64_t sq_claim_end;
  unsigned claim_callers;
  pthread_cond_t inline_done;  /* a claimer returned (close waits for it) */
  uint64_t sq_scanned;         /* WRs poll_cq looked at */
  uint64_t sq_retired;         /* slots freed by a polled completion */
  struct shm_rwr *rq;          /* posted receives, FIFO, rq_depth slots */
  uint32_t rq_depth;           /* caps->max_recv_wr */
  uint64_t rq_posted;          /* receives ever posted (posted_recv_count) */
  uint64_t rq_completed;       /* receives completed or flushed */
  uint32_t rx_tail;            /* our copy of rx->tail (we are its writer) */
  uint32_t tx_head;            /* our copy of tx->head (NIC thread for the
                                  sender, post_send for the receiver) */
  struct sbr__wc *lcq;         /* receiver: its SENDs' completions */
  uint64_t lcq_head, lcq_tail; /* produced / polled */
  uint64_t next_check_ns;      /* receiver: next hang-up check in poll_cq */
  uint32_t armed_rung;         /* rx->bell at arm_cq (the waiter's only) */
  bool armed;                  /* arm_cq came since the last wait_cq */

  pthread_t nic;    /* sender: NIC thread */
  bool nic_running; /* started, not yet joined */
  atomic_bool stop; /* close asks the NIC thread to leave */

  struct sbr__listener *listener; /* receiver: who watches us for hang-up
                                     (shm_watch_lock) */
  struct sbr__conn *watch_next;   /* next in its list (shm_watch_lock) */
  uint64_t watch_id;              /* unique, to match poll results */
};

/* ------------------------------------------------------- small helpers */

static inline uint64_t shm_now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

static inline void shm_sleep_ns(uint64_t ns)
{
  struct timespec ts = {(time_t)(ns / NS_PER_S), (long)(ns % NS_PER_S)};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
    ;
}

/* ---------------------------------------------- shm-connection.c */

/* Allocates a conn with its queues; nothing shared yet. */
struct sbr__conn *sbr__shm_conn_new(enum shm_role role,
                                    const struct sbr__queue_caps *caps);
/* Tears a conn down from any stage of setup. */
void sbr__shm_conn_destroy(struct sbr__conn *c);
/* Has the peer hung up?  Never blocks. */
bool sbr__shm_peer_gone(int sock);

/* ---------------------------------------------- shm-segment.c */

/* Receiver: creates, sizes, seals and maps the segment; returns the memfd
 * or negative errno. */
int sbr__shm_segment_create(struct sbr__conn *c,
                            const struct sbr__queue_caps *caps,
                            struct sbr__lane_desc *lane);
/* Sender: maps the receiver's segment after checking its layout. */
int sbr__shm_map_lane(struct sbr__conn *c, int memfd,
                      const struct sbr__lane_desc *lane, char *errbuf,
                      size_t errlen);

/* Sender: maps the lane's blocks region once more, for direct placement
 * (transport.h, map_blocks); unmap_blocks undoes it. */
int sbr__shm_map_blocks(struct sbr__conn *c, uint8_t **base, size_t *len);
void sbr__shm_unmap_blocks(uint8_t *base, size_t len);

/* ---------------------------------------------- shm-nic.c */

int sbr__shm_start_nic(struct sbr__conn *c);
int sbr__shm_reg_mr(struct sbr__conn *c, void *addr, size_t len, int access,
                    struct sbr__mr **out);
void sbr__shm_dereg_mr(struct sbr__mr *mr);
int sbr__shm_post_send(struct sbr__conn *c, const struct sbr__wr *wrs, int n);
int sbr__shm_post_send_here(struct sbr__conn *c, const struct sbr__wr *wrs,
                            int n);
void sbr__shm_execute_claimed(struct sbr__conn *c);
int sbr__shm_post_recv(struct sbr__conn *c, uint64_t wr_id, void *addr,
                       uint32_t len, const struct sbr__mr *mr);
int sbr__shm_poll_cq(struct sbr__conn *c, struct sbr__wc *wc, int max);
void sbr__shm_arm_cq(struct sbr__conn *c);
void sbr__shm_wait_cq(struct sbr__conn *c, uint32_t timeout_us);
void sbr__shm_kick_cq(struct sbr__conn *c);
uint64_t sbr__shm_posted_recv_count(struct sbr__conn *c);
uint32_t sbr__shm_sleep_prepare(struct sbr__conn *c);
int sbr__shm_sleep_wait(struct sbr__conn *c, uint32_t token, uint64_t until_ns);
void sbr__shm_sleep_end(struct sbr__conn *c);
int sbr__shm_test_fail(struct sbr__conn *c);
/* A sender's conn, before its first WR (test-hooks.h): every WR takes
 * delay_us more to complete, the fail_after_wrs-th (1-based; 0 = none)
 * completes in error, and from the stall_after_wrs-th (0 = none) on
 * nothing executes or completes. */
void sbr__shm_inject_faults(struct sbr__conn *c, uint32_t delay_us,
                            uint32_t fail_after_wrs, uint32_t stall_after_wrs);

#endif
