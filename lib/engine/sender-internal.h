/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sender-internal.h - what sender.c (fill API, queue, thread, connection)
 * shares with the posting engines (sender-status-byte.c,
 * sender-sliding-window.c).
 *
 * Locking: s->lock guards the free list, the queue, the per-device counters
 * and the stats.  The engine runs on the sender thread (and, for the sliding
 * window, its ACK thread) and takes s->lock only through the helpers below.
 */
#ifndef SBR_SENDER_INTERNAL_H
#define SBR_SENDER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "sbr-testing.h"
#include "wire/block.h"
#include "util/clock.h"
#include "engine/sender-queue.h"
#include "transport/transport.h"
#include "transport/test-hooks.h"

enum sbr__send_state {
  SBR__SEND_FREE,    /* on the free list */
  SBR__SEND_FILLING, /* a producer has it */
  SBR__SEND_QUEUED,  /* submitted, waiting for the sender thread */
  SBR__SEND_POSTED,  /* posted; reusable after its completion (rule 6) */
  /* Kept (sbr_sender_submit_keep): its WRITE completed, or its connection
   * went; the caller's until sbr_sender_release, still in its device's
   * share (dev_held). */
  SBR__SEND_DONE,
};

struct sbr_send_block {
  uint32_t index; /* in s->blocks; also the WR id */
  uint8_t *mem;   /* block_size bytes of registered memory */
  /* Direct placement (sender-direct.c): the receive block of the lane
   * this block is, the producer's payload going straight there; NULL when
   * the block is copied from mem.  (s->lock) */
  uint8_t *direct_mem;
  uint32_t direct_index;                /* that receive block's index */
  struct sbr__direct_view *direct_view; /* the mapping it lies in */
  uint32_t capacity;                    /* payload bytes it can carry */
  enum sbr__send_state state;
  uint8_t owner;               /* device it was taken for (fairness) */
  struct sbr__header header;   /* as queued; seq and packet given when
                                  taken for posting */
  uint32_t wire_len;           /* header + payload + trailer */
  struct sbr_send_block *next; /* free list / queue link */
  /* Submitted with sbr_sender_submit_keep: DONE, not free, at completion;
   * and released while in flight: free at completion.  (s->lock) */
  bool keep;
  bool release_pending;
  /* Kept after direct placement: the receive block its frame was written
   * into stays reserved, unwritten, until the block is freed, so a
   * pointer into it taken before the submit still reads the frame
   * (sbr__direct_keep_locked).  NULL: none.  (s->lock) */
  struct sbr__direct_view *kept_view;
  uint32_t kept_index;
  /* The first fragment of a frame sbr_sender_send queued as n > 1
   * fragments, its others right behind it in its FIFO: n, which the
   * status-byte engine may post as one spanning block (else 0).  (s->lock) */
  uint32_t frame_blocks;
};

/* A posting engine: one per mechanism. */
struct sbr__sender_engine {
  const char *name;
  /* After (re)connect: set up state for s->lane, e.g. invalidate the remote
   * status cache (rule 7), post receives, start an ACK thread. */
  int (*start)(struct sbr_sender *s);
  /* On the sender thread: reap completions, post queued blocks.  Returns >0
   * when it made progress, 0 when it had nothing to do, <0 when the
   * connection failed. */
  int (*progress)(struct sbr_sender *s);
  /* On the sender thread, when progress found nothing to do while blocks
   * are queued or in flight and the spin phase is over: sleep until what
   * the engine waits for happens (a completion, a freed slot, a submit) or
   * timeout_us passes; may return early.  Returns like progress. */
  int (*sleep)(struct sbr_sender *s, uint32_t timeout_us);
  /* Before the connection closes: stop threads, free state. */
  void (*stop)(struct sbr_sender *s);
  /* On a producer's thread, with engine_lock held, right after it queued
   * n blocks when nothing else was queued: post at most n queued blocks
   * (its own) if free receive blocks are known for them, and nothing else
   * (no reaping, no READ: the sender thread does those).  Sets *claimed
   * when the back end claimed the chain for this thread: the caller must
   * then call ops->execute_claimed(conn) once it dropped engine_lock
   * (transport.h).  Returns the blocks posted, or <0 (then they are
   * queued again and the sender thread meets the error).  NULL: the
   * engine posts only on its own threads. */
  int (*post_own)(struct sbr_sender *s, uint32_t n, bool *claimed);
  /* On a producer's thread, with engine_lock held, when the direct
   * placement pool is empty: move the free receive blocks the cache knows
   * into it (sender-direct.c), as the sender thread does after a READ, so
   * a producer needn't wait for that thread while the cache has some.
   * NULL: the engine doesn't place directly. */
  void (*refill_direct)(struct sbr_sender *s);
};

/* A mapping of one lane's blocks region into this process (shm), for
 * direct placement.  It outlives its connection while a block points into
 * it: a producer may be writing a frame there when the lane closes. */
struct sbr__direct_view {
  uint8_t *base;                 /* receive block i at base + i * stride */
  size_t len;                    /* bytes mapped */
  uint32_t refs;                 /* blocks in it, +1 while its lane is
                                    the connection's (s->lock) */
  struct sbr__direct_view *next; /* s->direct.views (s->lock) */
};

/* Direct placement's state, all under s->lock (sender-direct.c). */
struct sbr__direct {
  struct sbr__direct_view *view;  /* the connection's; NULL: direct off */
  struct sbr__direct_view *views; /* every view not yet unmapped */
  uint32_t stride;                /* the lane's block size */
  uint32_t *pool;         /* receive blocks reserved for producers (the engine
                             took them from its status cache), not handed out */
  uint32_t n_pool;        /* entries in pool */
  uint32_t pool_cap;      /* entries allocated */
  uint32_t held;          /* reserved blocks send blocks hold, filling or
                             queued (taken for posting: no longer counted) */
  uint32_t limit;         /* n_pool + held at most this */
  uint32_t waiters;       /* producers waiting in acquire for an entry */
  pthread_cond_t cond;    /* entries came, or the view changed */
  uint64_t want_until_ns; /* refill the pool until then (acquires came) */
};

extern const struct sbr__sender_engine sbr__sender_status_byte;
extern const struct sbr__sender_engine sbr__sender_sliding_window;

struct sbr_sender {
  struct sbr_sender_config cfg;            /* copy; cfg.host points at host */
  struct sbr__sender_knobs knobs;          /* tests' knobs (sbr-testing.h) */
  char host[256];                          /* receiver host */
  char source[256];                        /* local address, if cfg.source */
  const struct sbr__transport_ops *ops;    /* back end */
  const struct sbr__sender_engine *engine; /* mechanism */

  /* Connection (changed only with engine_lock held, thread parked). */
  struct sbr__conn *conn;     /* NULL when disconnected */
  struct sbr__lane_desc lane; /* the receiver's lane for us */
  struct sbr__mr *blocks_mr;  /* registration of block_mem */
  void *engine_state;         /* engine's private data */

  /* Send blocks: one allocation, registered once per connection. */
  uint8_t *block_mem;  /* n_blocks * block_size */
  uint32_t block_size; /* fixed at first connect */
  uint32_t n_blocks;
  struct sbr_send_block *blocks;

  pthread_mutex_t lock;     /* fill side, see above */
  pthread_cond_t work_cond; /* something queued / state change */
  pthread_cond_t idle_cond; /* queue and in-flight drained */
  struct sbr_send_block *free_list;
  uint32_t n_free;
  /* Producers waiting for free blocks, oldest first (sender.c). */
  struct sbr__free_waiter *free_waiters_head, *free_waiters_tail;
  /* Blocks each device holds: taken, queued or in flight (fairness). */
  uint32_t dev_held[SBR_MAX_DEVICES];
  /* Pause bitmap as the newest status READ found it, and since when each
   * paused device is paused (for paused_ns). */
  uint8_t paused[SBR_MAX_DEVICES / 8];
  uint64_t paused_since_ns[SBR_MAX_DEVICES];
  /* Refused bitmap as the newest status READ of this lane found it, and
   * when a producer of a refused device, or under DROP of a paused one,
   * was last turned away (0: never; keeps the forced READs going,
   * sender-thread.c; the name kept from when only refusals did). */
  uint8_t refused[SBR_MAX_DEVICES / 8];
  uint64_t refused_try_ns;
  /* Key units (sender-keyunit.c): each device's request word as the newest
   * status READ of this lane found it (a new lane starts at 0, as its
   * memory does), and the devices whose requests were seen and not yet
   * handed to on_key_unit, with their all-headers bits. */
  uint8_t key_seen[SBR_MAX_DEVICES];
  uint8_t key_pending[SBR_MAX_DEVICES / 8];
  uint8_t key_pending_headers[SBR_MAX_DEVICES / 8];
  bool key_pending_any;
  struct sbr__send_queue queue; /* submitted blocks (sender-queue.h) */
  uint32_t n_queued;
  uint32_t n_posted; /* posted, completion pending */
  /* Status READs posted, completion pending (status-byte): the sender
   * thread stays on the engine for them, so what a READ brought (pause,
   * refusal, key-unit requests) is acted on when it lands, not at the
   * next submit, a frame interval later. */
  uint32_t reads_pending;
  uint16_t next_packet[SBR_MAX_DEVICES];
  uint64_t next_seq;
  bool connected;
  bool stopping;
  uint64_t wakeups; /* sbr_sender_wakeup calls */
  /* Devices whose waits for a block end in -EINTR, now and later, until
   * cleared (sbr_sender_interrupt_device). */
  uint8_t interrupted[SBR_MAX_DEVICES / 8];
  bool thread_waits; /* the sender thread sleeps on work_cond (engine) */
  /* The sender thread sleeps on a completion (status-byte sb_sleep), so
   * s->conn is valid: a producer that queues a block kicks it
   * (sbr__sender_wake_locked, sender.c). */
  bool engine_sleeps;

  pthread_mutex_t engine_lock; /* held while the engine runs */
  pthread_t thread;
  bool thread_started;
  struct sbr__backoff backoff; /* sender thread's idle schedule */

  struct sbr__direct direct; /* direct placement (shm), s->lock */

  struct sbr_sender_stats stats;
  struct sbr_device_stats dev_stats[SBR_MAX_DEVICES];
};

/* Engine helpers (sender-thread.c).  Each takes s->lock once for a whole batch:
 * at small blocks the lock round trips cost more than the engine itself. */

/* Takes queued blocks into out, one device's in turn (sender-queue.h),
 * stamping each with the lane's next sequence number: at most max_blocks,
 * and after the first only while their wire bytes add up to max_bytes.
 * It stops at the first fragment of a frame of 2..span_max blocks (0: no
 * spans), which take_span is for.  Marks them POSTED; the engine must
 * post them or give them back with requeue_front.  Returns how many it
 * took (0 = queue empty, or such a frame at its head). */
uint32_t sbr__sender_take_queued(struct sbr_sender *s,
                                 struct sbr_send_block **out,
                                 uint32_t max_blocks, uint64_t max_bytes,
                                 uint32_t span_max);
/* Takes the frame whose first fragment heads the queue, n blocks (its
 * frame_blocks), to post it as one spanning block: one sequence and one
 * packet number, the span's header encoded into the first block's memory
 * and its trailer after the payload in the last's (sender-thread.c).  The
 * payload stays where sbr_sender_send put it, cap bytes a block, so the
 * engine WRITEs each block's part to its place in the span.  Returns n,
 * or 0 when the queue's head is not such a frame any more. */
uint32_t sbr__sender_take_span(struct sbr_sender *s,
                               struct sbr_send_block **out, uint32_t n);
/* The queue's head: a frame of n > 1 fragments that could span?  n, or 0. */
uint32_t sbr__sender_head_frame_blocks(struct sbr_sender *s);
/* Puts blocks taken with take_queued back at the front, order kept. */
void sbr__sender_requeue_front(struct sbr_sender *s,
                               struct sbr_send_block *const *blocks,
                               uint32_t n);
/* The status-byte engine is about to sleep on a completion, or woke:
 * while it sleeps, queuing a block kicks the wait (transport kick_cq). */
void sbr__sender_engine_sleeps(struct sbr_sender *s, bool sleeps);
/* Is anything queued? */
bool sbr__sender_has_queued(struct sbr_sender *s);
/* A status READ brought the receiver's pause bitmap (SBR__PAUSE_BITMAP_SIZE
 * bytes): record it, and let producers of resumed devices go on. */
void sbr__sender_pause_seen(struct sbr_sender *s, const uint8_t *bitmap);
/* A status READ brought this lane's refused bitmap
 * (SBR__REFUSED_BITMAP_SIZE bytes; lanes that have one): record it; the
 * producers of refused devices get -EADDRINUSE, of accepted ones go on. */
void sbr__sender_refused_seen(struct sbr_sender *s, const uint8_t *bitmap);
/* A status READ brought this lane's key-unit area (SBR__KEY_UNIT_AREA_SIZE
 * bytes; lanes with SBR__FEATURE_KEY_UNIT): the devices whose request
 * word changed since the previous READ are marked pending, once each. */
void sbr__sender_key_units_seen(struct sbr_sender *s, const uint8_t *area);
/* The sender thread, with engine_lock released: hands the pending
 * requests to on_key_unit (no library lock held during the calls). */
void sbr__sender_deliver_key_units(struct sbr_sender *s);
/* Does a producer wait for a device that is paused, or was one of a
 * refused device turned away within the last second?  Then the engine
 * keeps READing every pause_poll_us, even with nothing to send. */
bool sbr__sender_pause_waiting(struct sbr_sender *s);
/* Completions covered these blocks (by index): back on the free list, or
 * DONE for kept ones the caller hasn't released. */
void sbr__sender_blocks_done(struct sbr_sender *s, const uint32_t *index,
                             uint32_t n);
/* Counts posted blocks, the WRs that carried them and the status WRITEs
 * among those in the stats. */
void sbr__sender_count_posts(struct sbr_sender *s,
                             struct sbr_send_block *const *blocks, uint32_t n,
                             unsigned n_wr, unsigned n_status_writes);

/* TEST ONLY (tests/system/test-faults.c): puts the sender's connection in error
 * as a fatal NIC or link fault would (verbs: the QP goes to ERR; shm: the
 * next WR fails like fail_after_wrs), so the recovery path can be tested
 * on real verbs.  Not part of the API; nothing else calls it.  0,
 * -ENOTCONN when not connected, or the back end's error. */
int sbr__sender_test_fail_qp(struct sbr_sender *s);

/* Wakes the sender thread, whether it sleeps idle or on a completion
 * (sender.c).  Under s->lock. */
void sbr__sender_wake_locked(struct sbr_sender *s);

/* A producer waiting for free send blocks (sender.c, wait_free_locked), on its
 * own condition variable, in s->lock's FIFO list. */
struct sbr__free_waiter {
  pthread_cond_t cond;
  uint32_t need;  /* blocks it waits for */
  uint8_t device; /* for which device */
  bool woken;     /* a waker chose it */
  struct sbr__free_waiter *prev, *next;
};

static inline void sbr__sender_wake_waiter_locked(struct sbr__free_waiter *w)
{
  w->woken = true;
  pthread_cond_signal(&w->cond); /* its only waiter */
}

/* The receiver's word on a device, as the last status READ brought it. */
static inline bool sbr__sender_dev_paused_locked(const struct sbr_sender *s,
                                                 uint8_t device)
{
  return s->paused[device / 8] & (1u << (device % 8));
}

static inline bool sbr__sender_dev_refused_locked(const struct sbr_sender *s,
                                                  uint8_t device)
{
  return s->refused[device / 8] & (1u << (device % 8));
}

/* The producer's own word on a device (sbr_sender_interrupt_device). */
static inline bool
sbr__sender_dev_interrupted_locked(const struct sbr_sender *s, uint8_t device)
{
  return s->interrupted[device / 8] & (1u << (device % 8));
}

/* The waiters that can take blocks now are woken (sender.c); does a
 * producer wait for a paused device, or was one of a refused device
 * turned away lately (sender-thread.c)?  Under s->lock. */
void sbr__sender_wake_free_waiters_locked(struct sbr_sender *s);
bool sbr__sender_pause_waiting_locked(const struct sbr_sender *s);

/* The sender thread's main loop (sender-thread.c); arg: the sender. */
void *sbr__sender_thread(void *arg);

/* Send blocks (sender.c), for the connection and the thread: allocating
 * them at the first connect (their size is the lane's); settling a
 * submitted one (true: back on the free list; the caller wakes free
 * waiters); waking every free waiter (wakeup, disconnect, stop); counting
 * a block lost to a failed connection as a drop.  All but the first
 * under s->lock. */
int sbr__sender_alloc_blocks(struct sbr_sender *s, uint32_t block_size);
bool sbr__sender_settle_locked(struct sbr_sender *s, struct sbr_send_block *b);
void sbr__sender_wake_all_free_waiters_locked(struct sbr_sender *s);
void sbr__sender_count_drop_locked(struct sbr_sender *s,
                                   const struct sbr_send_block *b);

/* The connection (sender-connect.c), engine_lock held: the fabric
 * settings of cfg (index: this connection's place in the spread over
 * completion vectors); connecting (0 or a negative errno, errbuf says
 * why); closing the engine and connection; and failing it on an error,
 * which reclaims every queued or posted block. */
void sbr__sender_fabric(const struct sbr_sender_config *cfg, uint32_t index,
                        struct sbr__fabric *f);
int sbr__sender_connect_locked(struct sbr_sender *s, char *errbuf,
                               size_t errlen);
void sbr__sender_disconnect_engine_locked(struct sbr_sender *s);
void sbr__sender_fail_connection(struct sbr_sender *s, int err);

/* Direct placement (sender-direct.c).  A send block a producer acquires
 * is, when the lane is mapped here (shm, status-byte), one of the lane's
 * receive blocks that the engine reserved from its status cache: the
 * producer writes the frame in place, and posting it is the status WRITE
 * alone.  Everything falls back to the copy (the block's own mem) where
 * that can't be: see sender-direct.c. */
void sbr__direct_init(struct sbr_sender *s);
/* After connect (engine_lock held, engine started): map the lane's blocks
 * if the back end can, and start filling the pool. */
void sbr__direct_connect(struct sbr_sender *s);
/* Before the connection closes (engine_lock held): the lane's view stops
 * being the connection's; reservations in it are void. */
void sbr__direct_disconnect(struct sbr_sender *s);
/* Unmaps every view; sbr_sender_free, after the last block came back. */
void sbr__direct_free(struct sbr_sender *s);
/* acquire, under s->lock, with b just taken: make b a receive block of
 * the lane if one is (or soon will be) reserved; else b stays a copy. */
void sbr__direct_reserve_locked(struct sbr_sender *s, struct sbr_send_block *b);
/* sbr_sender_submit_keep of a block placed directly (s->lock held, may
 * drop it meanwhile): copies payload_len bytes of its frame from the lane
 * into the block's own memory, which it is sent from, and keeps its
 * receive block reserved until the block is freed. */
void sbr__direct_keep_locked(struct sbr_sender *s, struct sbr_send_block *b,
                             size_t payload_len);
/* Drops a reference to a view; the last unmaps it. */
void sbr__direct_view_unref_locked(struct sbr_sender *s,
                                   struct sbr__direct_view *v);
/* b leaves its view (completed, dropped, or abandoned: then, unused and
 * still valid, its receive block goes back to the pool).  s->lock. */
void sbr__direct_detach_locked(struct sbr_sender *s, struct sbr_send_block *b,
                               bool abandoned);
/* submit, under s->lock: a block reserved in a lane that closed since is
 * copied into its own mem (dropping and retaking s->lock) and goes the
 * copying way on the new lane. */
void sbr__direct_submit_locked(struct sbr_sender *s, struct sbr_send_block *b,
                               size_t payload_len);
/* take_queued, under s->lock: b is being posted; its reservation is used. */
void sbr__direct_posting_locked(struct sbr_sender *s, struct sbr_send_block *b);
/* requeue_front, under s->lock: the post failed, b is queued again. */
void sbr__direct_requeued_locked(struct sbr_sender *s,
                                 struct sbr_send_block *b);
/* The block whose payload starts at ptr in a view, or NULL.  s->lock. */
struct sbr_send_block *sbr__direct_block_at_locked(const struct sbr_sender *s,
                                                   const void *ptr);
/* Should the sender thread keep working to fill the pool (producers
 * wait, or acquired lately, and the pool is below its limit)?  s->lock. */
bool sbr__direct_wanted_locked(const struct sbr_sender *s);
/* Engine side, without s->lock held (each takes it): how many receive
 * blocks the pool takes now (0 when direct placement is off, or nobody
 * acquired lately); hand it some (the engine marked them reserved in its
 * cache); take up to max back for queued copies that have none. */
uint32_t sbr__direct_room(struct sbr_sender *s);
void sbr__direct_pool_add(struct sbr_sender *s, const uint32_t *index,
                          uint32_t n);
uint32_t sbr__direct_pool_take_back(struct sbr_sender *s, uint32_t *out,
                                    uint32_t max);
/* Where b's wire bytes (header, payload, trailer) are: in the lane when it
 * is placed directly, else in its own registered memory. */
static inline uint8_t *sbr__send_block_wire(const struct sbr_send_block *b)
{
  return b->direct_mem ? b->direct_mem : b->mem;
}

static inline uint64_t sbr__send_block_remote(const struct sbr_sender *s,
                                              uint32_t remote_index)
{
  return s->lane.blocks_addr + (uint64_t)remote_index * s->lane.block_size;
}

#endif
