/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * shm-nic.c - the shm back end's emulated NIC: the MR registry, the rings
 * of two-sided traffic, the NIC thread and the data path (shm-internal.h
 * says what the back end is and how its files divide it).
 *
 * Two-sided traffic (the sliding-window baseline) goes through two rings in
 * the control area.  WRITE WITH IMMEDIATE and SEND from the sender consume
 * one receive the receiver posted (ring "to_receiver", produced by the NIC
 * thread); SEND from the receiver is executed at once in its post_send and
 * consumes one receive the sender posted (ring "to_sender").  Each ring has
 * one producer and one consumer.  "posted" counts the consumer's receives,
 * so posted - head is the producer's credit; a producer without credit waits
 * like RNR retry and then fails the WR.
 *
 * Errors: a WR that fails completes with SBR__WC_ERROR (vendor_err from enum
 * shm_vendor_err) and puts the conn in error; every later WR, whether posted
 * before or after, completes with SBR__WC_FLUSH and the posted receives are
 * flushed, as on a verbs QP in error.  post_send keeps accepting (and
 * flushing) until the peer is known to be gone; then it returns -ENOTCONN,
 * and poll_cq returns -ENOTCONN once everything has been reported.
 *
 * Fault injection (sender only): delay_us is a round trip; a WR posted at t
 * is executed at t + delay/2 and its completion can be polled from
 * t + delay.  WRs are pipelined, only their order is kept.  fail_after_wrs=N
 * fails the Nth WR posted on the conn (vendor_err SHM_VERR_INJECTED).
 * stall_after_wrs=N leaves the Nth and every later one posted and never
 * executed or completed, as a NIC that went silent without an error would
 * (the sender's completion deadline is what notices).
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/log.h"
#include "transport/shm/shm-internal.h"
#include "transport/test-hooks.h"

/* What a failed completion's vendor_err says. */
enum shm_vendor_err {
  SHM_VERR_RKEY = 0x101,      /* rkey names no region of the lane */
  SHM_VERR_BOUNDS = 0x102,    /* remote range outside its region */
  SHM_VERR_ACCESS = 0x103,    /* operation not allowed on the region */
  SHM_VERR_LKEY = 0x104,      /* local range not inside a registered MR */
  SHM_VERR_RNR = 0x105,       /* peer had no receive posted in time */
  SHM_VERR_PEER_GONE = 0x106, /* peer hung up */
  SHM_VERR_LENGTH = 0x107,    /* message longer than the posted receive */
  SHM_VERR_PROTOCOL = 0x108,  /* peer broke the shared ring protocol */
  SHM_VERR_INJECTED = 0x7fff, /* fault injection: fail_after_wrs */
};

/* Memory registrations.  shm needs none, but a registry lets the NIC check
 * lkeys and local ranges as a real one would, so an engine bug shows here
 * and not first on hardware.  Process-wide: an MR may outlive its conn. */
struct shm_mr {
  struct sbr__mr pub;  /* what the engine holds; pub.impl points here */
  int access;          /* SBR__ACCESS_* */
  struct shm_mr *next; /* registry list (shm_mr_lock) */
};
static pthread_mutex_t shm_mr_lock = PTHREAD_MUTEX_INITIALIZER;
/* What ibv_dereg_mr promises: once it returns, the NIC no longer touches
 * the memory, so the caller may free it.  NIC threads hold this for reading
 * from their lkey check to the end of their copy; dereg takes it for
 * writing.  Writers first, so busy NIC threads can't starve a dereg. */
static pthread_rwlock_t shm_mr_fence =
    PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
static struct shm_mr *shm_mrs;     /* (shm_mr_lock) */
static uint32_t shm_next_lkey = 1; /* (shm_mr_lock) */

static const char *shm_op_name(enum sbr__opcode op)
{
  switch (op) {
  case SBR__OP_WRITE:
    return "WRITE";
  case SBR__OP_WRITE_IMM:
    return "WRITE_IMM";
  case SBR__OP_READ:
    return "READ";
  case SBR__OP_SEND:
    return "SEND";
  case SBR__OP_RECV:
    return "RECV";
  }
  return "?";
}

static const char *shm_verr_str(int verr)
{
  switch (verr) {
  case SHM_VERR_RKEY:
    return "rkey names no region of the lane";
  case SHM_VERR_BOUNDS:
    return "remote range outside its region";
  case SHM_VERR_ACCESS:
    return "READ of the blocks region (REMOTE_WRITE only)";
  case SHM_VERR_LKEY:
    return "local range not inside a registered MR";
  case SHM_VERR_RNR:
    return "peer had no receive posted (RNR retry exceeded)";
  case SHM_VERR_PEER_GONE:
    return "peer hung up";
  case SHM_VERR_LENGTH:
    return "message longer than the posted receive";
  case SHM_VERR_PROTOCOL:
    return "peer broke the shared ring protocol";
  case SHM_VERR_INJECTED:
    return "injected failure (fail_after_wrs)";
  }
  return "unknown";
}

/* ------------------------------------------------------ MR registry */

/* Is [addr, +len) inside the registered MR with key lkey, with access?
 * lkey 0 is unregistered memory, which shm allows (see the top). */
static bool shm_local_ok(uint32_t lkey, const void *addr, uint32_t len,
                         int access)
{
  if (len == 0 || lkey == 0)
    return true;
  uintptr_t a = (uintptr_t)addr;
  bool ok = false;
  pthread_mutex_lock(&shm_mr_lock);
  for (struct shm_mr *m = shm_mrs; m; m = m->next) {
    uintptr_t base = (uintptr_t)m->pub.addr;
    if (m->pub.lkey != lkey || a < base || a - base > m->pub.length ||
        len > m->pub.length - (a - base))
      continue;
    ok = (m->access & access) == access;
    break;
  }
  pthread_mutex_unlock(&shm_mr_lock);
  return ok;
}

int sbr__shm_reg_mr(struct sbr__conn *c, void *addr, size_t len, int access,
                    struct sbr__mr **out)
{
  (void)c; /* registrations are process-wide, see shm_mrs */
  if (!addr || len == 0 || !out)
    return -EINVAL;
  struct shm_mr *m = calloc(1, sizeof *m);
  if (!m)
    return -ENOMEM;
  m->pub.addr = addr;
  m->pub.length = len;
  m->pub.impl = m;
  m->access = access;
  pthread_mutex_lock(&shm_mr_lock);
  m->pub.lkey = shm_next_lkey++;
  if (shm_next_lkey == 0)
    shm_next_lkey = 1;
  m->pub.rkey = m->pub.lkey; /* unused: nothing remote reaches our MRs */
  m->next = shm_mrs;
  shm_mrs = m;
  pthread_mutex_unlock(&shm_mr_lock);
  *out = &m->pub;
  return 0;
}

void sbr__shm_dereg_mr(struct sbr__mr *mr)
{
  if (!mr)
    return;
  struct shm_mr *m = mr->impl;
  pthread_rwlock_wrlock(&shm_mr_fence); /* copies in progress end first */
  pthread_mutex_lock(&shm_mr_lock);
  for (struct shm_mr **p = &shm_mrs; *p; p = &(*p)->next) {
    if (*p == m) {
      *p = m->next;
      break;
    }
  }
  pthread_mutex_unlock(&shm_mr_lock);
  pthread_rwlock_unlock(&shm_mr_fence);
  free(m);
}

/* Enters the error state (first failure wins; GONE overrides ERROR). */
static void shm_set_state(struct sbr__conn *c, enum shm_state s)
{
  if (s > c->state)
    c->state = s;
}

/* ------------------------------------------------------------- rings */

/* Waits until the peer has a receive posted and the ring has room.  The
 * wait is RNR retry: spin a little, then sleep with doubling back-off,
 * checking for stop and for the peer's hang-up.  0, -ETIMEDOUT (RNR),
 * -ENOTCONN (peer gone) or -ECANCELED (conn closing). */
static int shm_tx_reserve(struct sbr__conn *c, int timeout_ms)
{
  uint64_t deadline = 0, next_check = 0, nap = 10000;
  for (int spins = 0;; spins++) {
    uint32_t posted =
        atomic_load_explicit(&c->tx->posted, memory_order_acquire);
    uint32_t tail = atomic_load_explicit(&c->tx->tail, memory_order_acquire);
    uint32_t credit = posted - c->tx_head;
    uint32_t used = c->tx_head - tail;
    /* A credit above 2^31 is the peer's garbage, not a receive. */
    if (credit > 0 && credit < 0x80000000u && used <= c->tx_mask)
      return 0;
    if (atomic_load_explicit(&c->stop, memory_order_relaxed))
      return -ECANCELED;
    if (spins < 64)
      continue;
    uint64_t now = shm_now_ns();
    if (deadline == 0) {
      deadline = now + (uint64_t)timeout_ms * NS_PER_MS;
      next_check = now + SHM_PEER_CHECK_NS;
    }
    if (now >= deadline)
      return -ETIMEDOUT;
    if (now >= next_check) {
      if (sbr__shm_peer_gone(c->sock))
        return -ENOTCONN;
      next_check = now + SHM_PEER_CHECK_NS;
    }
    shm_sleep_ns(nap);
    if (nap < NS_PER_MS)
      nap *= 2;
  }
}

/* Rings r's doorbell: a completion became pollable for its consumer.  The
 * futex is not process-private: the peer may be the one asleep. */
static void shm_bell_ring(struct shm_ring *r)
{
  atomic_fetch_add(&r->bell, 1);
  if (atomic_load(&r->bell_waiters) > 0)
    syscall(SYS_futex, &r->bell, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

/* Publishes one message; shm_tx_reserve said there is room and credit.
 * Everything written before (a WRITE_IMM's data) is visible to the
 * consumer once it sees the new head. */
static void shm_tx_push(struct sbr__conn *c, bool is_send, uint32_t imm,
                        bool has_imm, const void *data, uint32_t len)
{
  struct shm_msg *m = &c->tx_slots[c->tx_head & c->tx_mask];
  m->imm_data = imm;
  m->byte_len = len;
  m->has_imm = has_imm;
  m->is_send = is_send;
  if (is_send && len)
    memcpy(m->data, data, len);
  c->tx_head++;
  atomic_store_explicit(&c->tx->head, c->tx_head, memory_order_release);
  shm_bell_ring(c->tx);
}

/* Turns messages in the rx ring into RECV completions, matched in FIFO
 * order with the posted receives.  Called with c->lock held. */
static int shm_poll_rx(struct sbr__conn *c, struct sbr__wc *wc, int max)
{
  uint32_t head = atomic_load_explicit(&c->rx->head, memory_order_acquire);
  if (head - c->rx_tail > c->rx_mask + 1) {
    if (c->state == SHM_UP)
      SBR_WARN("%s: ring head %" PRIu32 " is %" PRIu32
               " past tail, ring corrupt",
               c->peer, head, head - c->rx_tail);
    shm_set_state(c, SHM_ERROR);
    return 0;
  }
  int n = 0;
  while (n < max && c->rx_tail != head) {
    if (c->rq_completed == c->rq_posted) {
      /* A message without a receive: only a broken peer does that (or
       * one still sending after we flushed).  Drop what is there. */
      if (c->state == SHM_UP)
        SBR_WARN("%s: message without a posted receive", c->peer);
      shm_set_state(c, SHM_ERROR);
      c->rx_tail = head;
      break;
    }
    struct shm_msg m;
    memcpy(&m, &c->rx_slots[c->rx_tail & c->rx_mask], sizeof m);
    struct shm_rwr *r = &c->rq[c->rq_completed % c->rq_depth];
    struct sbr__wc *w = &wc[n++];
    memset(w, 0, sizeof *w);
    w->wr_id = r->wr_id;
    w->opcode = SBR__OP_RECV;
    w->byte_len = m.byte_len;
    w->imm_data = m.imm_data;
    w->has_imm = m.has_imm != 0;
    if (m.is_send && (m.byte_len > SHM_MAX_MSG || m.byte_len > r->len)) {
      w->status = SBR__WC_ERROR;
      w->vendor_err =
          m.byte_len > SHM_MAX_MSG ? SHM_VERR_PROTOCOL : SHM_VERR_LENGTH;
      SBR_WARN("%s: RECV %" PRIu64 " failed: %s (%" PRIu32 " > %" PRIu32 ")",
               c->peer, r->wr_id, shm_verr_str(w->vendor_err), m.byte_len,
               r->len);
      shm_set_state(c, SHM_ERROR);
    } else if (m.is_send && m.byte_len) {
      memcpy(r->addr, m.data, m.byte_len);
    }
    c->rq_completed++;
    c->rx_tail++;
  }
  atomic_store_explicit(&c->rx->tail, c->rx_tail, memory_order_release);
  return n;
}

/* In error, posted receives complete as flushed once the ring is drained. */
static int shm_flush_rq(struct sbr__conn *c, struct sbr__wc *wc, int max)
{
  int n = 0;
  while (n < max && c->rq_completed != c->rq_posted) {
    struct sbr__wc *w = &wc[n++];
    memset(w, 0, sizeof *w);
    w->wr_id = c->rq[c->rq_completed % c->rq_depth].wr_id;
    w->opcode = SBR__OP_RECV;
    w->status = SBR__WC_FLUSH;
    c->rq_completed++;
  }
  return n;
}

/* ------------------------------------------------------ the NIC thread */

static const struct shm_region *shm_region_of(const struct sbr__conn *c,
                                              uint32_t rkey)
{
  if (rkey == c->blocks.rkey)
    return &c->blocks;
  if (rkey == c->status.rkey)
    return &c->status;
  return NULL;
}

/* Copies into the lane.  Status bytes are release stores, so a receiver
 * whose acquire load sees a status byte also sees every block byte this
 * thread wrote before it (rule 2).  (Release stores rather than a fence and
 * relaxed stores: the same code on x86, and ThreadSanitizer models them.)
 * First to last, as the WRITEs of one QP land: the receiver delivers a
 * block whose predecessor it has not seen after one more full scan
 * (receiver.c, lane_pick), so a run's bytes must show in its blocks'
 * sequence order.  Stored last to first, a thread preempted part-way
 * through a run showed its last block alone for as long as it slept: the
 * receiver delivered it past the others, which it then dropped as stale
 * (the faults suite, receiver_blocked_5s, under ThreadSanitizer).  A
 * span's continuation bytes come after its head's 1 then: the receiver
 * looks at such a head again until they are there. */
static void shm_copy_in(const struct shm_region *r, uint8_t *dst,
                        const uint8_t *src, uint32_t len)
{
  if (!r->status) {
    memcpy(dst, src, len);
    return;
  }
  _Atomic uint8_t *st = (_Atomic uint8_t *)dst;
  for (uint32_t i = 0; i < len; i++) {
    atomic_store_explicit(&st[i], src[i], memory_order_release);
    if (sbr__shm_test_status_hook)
      sbr__shm_test_status_hook(i + 1, len);
  }
}

/* Copies out of the status region (the only readable one) with acquire
 * loads: what the receiver wrote before releasing a byte comes with it. */
static void shm_copy_out(uint8_t *dst, const uint8_t *src, uint32_t len)
{
  _Atomic uint8_t *st = (_Atomic uint8_t *)src;
  for (uint32_t i = 0; i < len; i++)
    dst[i] = atomic_load_explicit(&st[i], memory_order_acquire);
}

/* A status byte was stored: end the receiver's sleep if it announced one
 * (struct shm_wake says why this order loses no wake-up).  While the
 * receiver polls, this is a fence and a load, no system call. */
static void shm_wake_receiver(struct sbr__conn *c)
{
  struct shm_wake *w = c->rx_wake;
  atomic_thread_fence(memory_order_seq_cst);
  if (!atomic_load_explicit(&w->asleep, memory_order_relaxed))
    return;
  atomic_fetch_add(&w->seq, 1);
  /* Not FUTEX_PRIVATE: the sleeper is another process. */
  syscall(SYS_futex, &w->seq, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* Executes one WR against the lane, without c->lock.  index is its 0-based
 * position in the posting order.  SBR__WC_SUCCESS, or SBR__WC_ERROR with
 * *verr set. */
static enum sbr__wc_status shm_execute(struct sbr__conn *c,
                                       const struct shm_swr *s, uint64_t index,
                                       int *verr)
{
  const struct sbr__wr *wr = &s->wr;
  const struct shm_region *r = NULL;
  *verr = 0;
  /* >=: a test_fail that raced with this WR's start fails the next one
   * (the conn is in error after the first failure anyway). */
  uint64_t fail_at = atomic_load_explicit(&c->fail_at, memory_order_relaxed);
  if (fail_at && index + 1 >= fail_at) {
    *verr = SHM_VERR_INJECTED;
    return SBR__WC_ERROR;
  }
  if (wr->opcode != SBR__OP_SEND) {
    r = shm_region_of(c, wr->rkey);
    if (!r)
      *verr = SHM_VERR_RKEY;
    else if (wr->opcode == SBR__OP_READ && !r->read_ok)
      *verr = SHM_VERR_ACCESS;
    else if (wr->remote_addr < r->off || wr->remote_addr - r->off > r->len ||
             wr->length > r->len - (wr->remote_addr - r->off))
      *verr = SHM_VERR_BOUNDS;
    else if (wr->opcode != SBR__OP_READ &&
             (wr->remote_addr - r->off > r->write_len ||
              wr->length > r->write_len - (wr->remote_addr - r->off)))
      *verr = SHM_VERR_ACCESS;
    if (*verr)
      return SBR__WC_ERROR;
  }
  if (wr->opcode == SBR__OP_WRITE_IMM || wr->opcode == SBR__OP_SEND) {
    int err = shm_tx_reserve(c, SHM_RNR_TIMEOUT_MS);
    if (err) {
      *verr = err == -ETIMEDOUT ? SHM_VERR_RNR : SHM_VERR_PEER_GONE;
      return SBR__WC_ERROR;
    }
  }
  /* From the lkey check to the end of the copy, no dereg can complete: a
   * sender that deregisters and frees a buffer (a READ's target) while a WR
   * is executing must not get the copy into freed memory. */
  pthread_rwlock_rdlock(&shm_mr_fence);
  if (!wr->inline_data &&
      !shm_local_ok(wr->lkey, wr->local_addr, wr->length,
                    wr->opcode == SBR__OP_READ ? SBR__ACCESS_LOCAL_WRITE : 0)) {
    pthread_rwlock_unlock(&shm_mr_fence);
    *verr = SHM_VERR_LKEY;
    return SBR__WC_ERROR;
  }
  uint8_t *remote = r ? c->seg + wr->remote_addr : NULL;
  switch (wr->opcode) {
  case SBR__OP_WRITE:
    shm_copy_in(r, remote, wr->local_addr, wr->length);
    break;
  case SBR__OP_WRITE_IMM:
    shm_copy_in(r, remote, wr->local_addr, wr->length);
    shm_tx_push(c, false, wr->imm_data, true, NULL, wr->length);
    break;
  case SBR__OP_READ:
    shm_copy_out(wr->local_addr, remote, wr->length);
    break;
  case SBR__OP_SEND:
    shm_tx_push(c, true, 0, false, wr->local_addr, wr->length);
    break;
  case SBR__OP_RECV:
    break; /* refused by post_send */
  }
  pthread_rwlock_unlock(&shm_mr_fence);
  if (r && r->status && wr->opcode != SBR__OP_READ)
    shm_wake_receiver(c);
  return SBR__WC_SUCCESS;
}

static void shm_wait_until(struct sbr__conn *c, uint64_t when_ns)
{
  if (when_ns == UINT64_MAX) {
    pthread_cond_wait(&c->wake, &c->lock);
    return;
  }
  struct timespec ts = {(time_t)(when_ns / NS_PER_S),
                        (long)(when_ns % NS_PER_S)};
  pthread_cond_timedwait(&c->wake, &c->lock, &ts);
}

/* Has the NIC gone silent at the WR with 0-based index (stall_after_wrs)? */
static bool shm_stalled_locked(const struct sbr__conn *c, uint64_t index)
{
  return c->stall_at && index + 1 >= c->stall_at;
}

/* Executes the WR at sq_executed, which is due, and completes it.  Called
 * with c->lock held by the one thread executing (the NIC thread, or a
 * posting thread with sq_inline set); drops the lock for the copy. */
static void shm_execute_next_locked(struct sbr__conn *c)
{
  uint64_t index = c->sq_executed;
  struct shm_swr *s = &c->sq[index % c->sq_depth];
  /* The slot is ours until sq_executed moves past it: post_send only
   * writes slots that poll_cq has retired. */
  pthread_mutex_unlock(&c->lock);
  int verr;
  enum sbr__wc_status st = shm_execute(c, s, index, &verr);
  uint64_t done = shm_now_ns();
  pthread_mutex_lock(&c->lock);
  s->status = st;
  s->vendor_err = verr;
  s->visible_ns = s->post_ns + c->delay_ns;
  if (s->visible_ns < done)
    s->visible_ns = done;
  c->sq_executed++;
  if (st != SBR__WC_SUCCESS && verr != 0 && c->state == SHM_UP) {
    SBR_WARN("%s: %s wr_id %" PRIu64 " failed: %s (vendor_err 0x%x)", c->peer,
             shm_op_name(s->wr.opcode), s->wr.wr_id, shm_verr_str(verr), verr);
    shm_set_state(c, verr == SHM_VERR_PEER_GONE ? SHM_GONE : SHM_ERROR);
  }
  if (s->wr.signaled || st != SBR__WC_SUCCESS)
    shm_bell_ring(c->rx);
}

/* Executes posted WRs in order, each no earlier than post + delay/2.  While
 * idle it sleeps on c->wake, waking at least every SHM_PEER_CHECK_NS to see
 * whether the receiver hung up; it checks as often while busy. */
static void *shm_nic_main(void *arg)
{
  sbr__thread_precise_sleeps();
  struct sbr__conn *c = arg;
  uint64_t next_check = 0;
  pthread_mutex_lock(&c->lock);
  while (!atomic_load(&c->stop)) {
    uint64_t now = shm_now_ns();
    if (c->state != SHM_GONE && now >= next_check) {
      pthread_mutex_unlock(&c->lock);
      bool gone = sbr__shm_peer_gone(c->sock);
      pthread_mutex_lock(&c->lock);
      next_check = now + SHM_PEER_CHECK_NS;
      if (gone) {
        SBR_WARN("%s: receiver hung up; flushing %" PRIu64 " WRs", c->peer,
                 c->sq_posted - c->sq_executed);
        shm_set_state(c, SHM_GONE);
        shm_bell_ring(c->rx);
      }
      continue;
    }
    uint64_t wake = c->state == SHM_GONE ? UINT64_MAX : next_check;
    if (c->sq_inline && !c->claim_started) {
      /* Its claimer hasn't started: take the chain over (execute_claimed
       * then finds it gone).  Order is kept either way. */
      c->sq_inline = false;
      continue;
    }
    if (c->sq_executed == c->sq_posted || c->sq_inline) {
      shm_wait_until(c, wake);
      continue;
    }
    uint64_t index = c->sq_executed;
    struct shm_swr *s = &c->sq[index % c->sq_depth];
    if (c->state != SHM_UP) {
      s->status = SBR__WC_FLUSH;
      s->vendor_err = 0;
      s->visible_ns = now;
      c->sq_executed++;
      shm_bell_ring(c->rx);
      continue;
    }
    if (shm_stalled_locked(c, index)) {
      shm_wait_until(c, wake); /* for stop and the peer check only */
      continue;
    }
    uint64_t due = s->post_ns + c->delay_ns / 2;
    if (now < due) {
      shm_wait_until(c, due < wake ? due : wake);
      continue;
    }
    shm_execute_next_locked(c);
  }
  pthread_mutex_unlock(&c->lock);
  return NULL;
}

/* ------------------------------------------------------------ data path */

/* Checks a chain before anything of it is posted. */
static int shm_check_chain(const struct sbr__conn *c, const struct sbr__wr *wrs,
                           int n)
{
  if (!c || !wrs || n <= 0)
    return -EINVAL;
  for (int i = 0; i < n; i++) {
    const struct sbr__wr *wr = &wrs[i];
    switch (wr->opcode) {
    case SBR__OP_WRITE:
    case SBR__OP_WRITE_IMM:
    case SBR__OP_READ:
      /* The receiver end has no remote memory to reach. */
      if (c->role == SHM_RECEIVER)
        return -EOPNOTSUPP;
      break;
    case SBR__OP_SEND:
      if (wr->length > SHM_MAX_MSG)
        return -EMSGSIZE;
      break;
    default:
      return -EINVAL;
    }
    if (wr->inline_data &&
        (wr->opcode == SBR__OP_READ || wr->length > SHM_MAX_INLINE))
      return -EINVAL;
    if (wr->length && !wr->local_addr)
      return -EINVAL;
  }
  return 0;
}

/* May the thread posting wrs execute them itself?  Only on an idle NIC
 * (nothing posted before them is unexecuted, so the order holds), with no
 * injected delay, and only WRITEs and READs: those never wait for the peer
 * (WRITE WITH IMMEDIATE may wait up to SHM_RNR_TIMEOUT_MS for a receive,
 * which a producer's thread must not). */
static bool shm_may_execute_inline_locked(const struct sbr__conn *c,
                                          const struct sbr__wr *wrs, int n)
{
  if (c->state != SHM_UP || c->delay_ns != 0 || c->sq_inline ||
      c->sq_executed != c->sq_posted)
    return false;
  for (int i = 0; i < n; i++)
    if (wrs[i].opcode != SBR__OP_WRITE && wrs[i].opcode != SBR__OP_READ)
      return false;
  return true;
}

/* Sender: queue the chain for the NIC thread, or (post_send_here) claim
 * it for the posting thread when the NIC is idle.  A real NIC starts on a
 * doorbell at once; the NIC thread has to be woken first, which on a busy
 * 2-core host costs 50-200 us (p50 to p90) before every frame's copy even
 * starts (#11).  Claimed, the copy runs in the posting thread
 * (sbr__shm_execute_claimed, once the sender dropped engine_lock), as shmsink
 * copies in its render: the WRs' order, their completions and the errors
 * they raise are the NIC thread's (shm_execute_next_locked).  WRs posted
 * meanwhile by other threads queue behind and are the NIC thread's once
 * the claim is done.  Only post_send_here claims: the sender thread keeps
 * reaping while the NIC thread copies what it posts. */
static int shm_post_send_nic(struct sbr__conn *c, const struct sbr__wr *wrs,
                             int n, bool may_claim)
{
  uint64_t now = shm_now_ns();
  pthread_mutex_lock(&c->lock);
  int err = 0;
  bool here = false;
  if (c->state == SHM_GONE)
    err = -ENOTCONN;
  else if ((uint64_t)n > c->sq_depth - (c->sq_posted - c->sq_retired))
    err = -ENOMEM;
  else
    here = may_claim && shm_may_execute_inline_locked(c, wrs, n);
  for (int i = 0; !err && i < n; i++) {
    struct shm_swr *s = &c->sq[c->sq_posted % c->sq_depth];
    s->wr = wrs[i];
    if (s->wr.inline_data) {
      if (s->wr.length)
        memcpy(s->inl, s->wr.local_addr, s->wr.length);
      s->wr.local_addr = s->inl;
    }
    s->post_ns = now;
    s->visible_ns = UINT64_MAX;
    s->status = SBR__WC_SUCCESS;
    s->vendor_err = 0;
    c->sq_posted++;
  }
  if (here) {
    /* Claimed: the caller executes it (sbr__shm_execute_claimed). */
    c->sq_inline = true;
    c->claim_started = false;
    c->claim_owner = pthread_self();
    c->sq_claim_end = c->sq_posted;
    c->claim_callers++;
  } else if (!err) {
    pthread_cond_signal(&c->wake);
  }
  pthread_mutex_unlock(&c->lock);
  return err ? err : here ? 1 : 0;
}

void (*sbr__shm_test_claim_hook)(void);
void (*sbr__shm_test_status_hook)(uint32_t stored, uint32_t len);

void sbr__shm_inject_faults(struct sbr__conn *c, uint32_t delay_us,
                            uint32_t fail_after_wrs, uint32_t stall_after_wrs)
{
  c->delay_ns = (uint64_t)delay_us * 1000;
  atomic_store_explicit(&c->fail_at, fail_after_wrs, memory_order_relaxed);
  pthread_mutex_lock(&c->lock);
  c->stall_at = stall_after_wrs;
  pthread_mutex_unlock(&c->lock);
}

void sbr__shm_execute_claimed(struct sbr__conn *c)
{
  if (sbr__shm_test_claim_hook)
    sbr__shm_test_claim_hook();
  pthread_mutex_lock(&c->lock);
  if (c->sq_inline && !c->claim_started &&
      pthread_equal(c->claim_owner, pthread_self())) {
    c->claim_started = true;
    /* Stops at a failure: the NIC thread flushes the rest, as it would. */
    while (c->sq_executed < c->sq_claim_end && c->state == SHM_UP &&
           !shm_stalled_locked(c, c->sq_executed))
      shm_execute_next_locked(c);
    c->sq_inline = false;
    c->claim_started = false;
    if (c->sq_executed != c->sq_posted)
      pthread_cond_signal(&c->wake);
  }
  /* Else the NIC thread took it over. */
  c->claim_callers--;
  pthread_cond_broadcast(&c->inline_done);
  pthread_mutex_unlock(&c->lock);
}

/* Receiver: SENDs execute here and now, into the sender's ring.  Waiting
 * for the sender's credit holds c->lock (at most SHM_SEND_RNR_TIMEOUT_MS),
 * so a post_recv on another thread can wait that long; the sliding-window
 * sender keeps receives posted, so in practice nobody waits. */
static int shm_post_send_sync(struct sbr__conn *c, const struct sbr__wr *wrs,
                              int n)
{
  pthread_mutex_lock(&c->lock);
  int err = 0;
  if (c->state == SHM_GONE)
    err = -ENOTCONN;
  else if ((uint64_t)n > c->sq_depth - (c->lcq_head - c->lcq_tail))
    err = -ENOMEM;
  for (int i = 0; !err && i < n; i++) {
    const struct sbr__wr *wr = &wrs[i];
    int verr = 0;
    enum sbr__wc_status st = SBR__WC_SUCCESS;
    if (c->state != SHM_UP) {
      st = SBR__WC_FLUSH;
    } else if (!wr->inline_data &&
               !shm_local_ok(wr->lkey, wr->local_addr, wr->length, 0)) {
      verr = SHM_VERR_LKEY;
    } else {
      int r = shm_tx_reserve(c, SHM_SEND_RNR_TIMEOUT_MS);
      if (r)
        verr = r == -ETIMEDOUT ? SHM_VERR_RNR : SHM_VERR_PEER_GONE;
      else
        shm_tx_push(c, true, 0, false, wr->local_addr, wr->length);
    }
    if (verr) {
      st = SBR__WC_ERROR;
      SBR_WARN("%s: SEND wr_id %" PRIu64 " failed: %s (vendor_err 0x%x)",
               c->peer, wr->wr_id, shm_verr_str(verr), verr);
      shm_set_state(c, verr == SHM_VERR_PEER_GONE ? SHM_GONE : SHM_ERROR);
    }
    if (wr->signaled || st != SBR__WC_SUCCESS) {
      struct sbr__wc *w = &c->lcq[c->lcq_head++ % c->sq_depth];
      memset(w, 0, sizeof *w);
      w->wr_id = wr->wr_id;
      w->opcode = SBR__OP_SEND;
      w->status = st;
      w->vendor_err = verr;
    }
  }
  pthread_mutex_unlock(&c->lock);
  return err;
}

int sbr__shm_post_send(struct sbr__conn *c, const struct sbr__wr *wrs, int n)
{
  int err = shm_check_chain(c, wrs, n);
  if (err)
    return err;
  return c->role == SHM_SENDER ? shm_post_send_nic(c, wrs, n, false)
                               : shm_post_send_sync(c, wrs, n);
}

int sbr__shm_post_send_here(struct sbr__conn *c, const struct sbr__wr *wrs,
                            int n)
{
  int err = shm_check_chain(c, wrs, n);
  if (err)
    return err;
  return c->role == SHM_SENDER ? shm_post_send_nic(c, wrs, n, true)
                               : shm_post_send_sync(c, wrs, n);
}

int sbr__shm_post_recv(struct sbr__conn *c, uint64_t wr_id, void *addr,
                       uint32_t len, const struct sbr__mr *mr)
{
  if (!c || (len && !addr))
    return -EINVAL;
  /* Checked now rather than when a message lands: simpler, and a receive
   * buffer outside its MR is a bug either way.  No MR: unregistered. */
  if (len && mr && !shm_local_ok(mr->lkey, addr, len, SBR__ACCESS_LOCAL_WRITE))
    return -EINVAL;
  pthread_mutex_lock(&c->lock);
  int err = 0;
  if (c->rq_posted - c->rq_completed >= c->rq_depth) {
    err = -ENOMEM;
  } else {
    struct shm_rwr *r = &c->rq[c->rq_posted % c->rq_depth];
    r->wr_id = wr_id;
    r->addr = addr;
    r->len = len;
    c->rq_posted++;
    /* The FIFO entry exists before the credit does, so a message the
     * peer sends with that credit always finds it. */
    atomic_store_explicit(&c->rx->posted, (uint32_t)c->rq_posted,
                          memory_order_release);
  }
  pthread_mutex_unlock(&c->lock);
  return err;
}

/* Sender: completions of executed WRs, in posting order, each once its
 * (injected) round trip has passed.  A polled completion frees its slot and
 * every unsignaled one before it, as on verbs. */
static int shm_poll_sq(struct sbr__conn *c, struct sbr__wc *wc, int max,
                       uint64_t now)
{
  int n = 0;
  while (n < max && c->sq_scanned != c->sq_executed) {
    struct shm_swr *s = &c->sq[c->sq_scanned % c->sq_depth];
    if (s->visible_ns > now)
      break; /* in order: nothing after it is visible either */
    c->sq_scanned++;
    if (!s->wr.signaled && s->status == SBR__WC_SUCCESS)
      continue;
    struct sbr__wc *w = &wc[n++];
    memset(w, 0, sizeof *w);
    w->wr_id = s->wr.wr_id;
    w->opcode = s->wr.opcode;
    w->status = s->status;
    w->vendor_err = s->vendor_err;
    if (s->wr.opcode == SBR__OP_READ)
      w->byte_len = s->wr.length;
    c->sq_retired = c->sq_scanned;
  }
  return n;
}

int sbr__shm_poll_cq(struct sbr__conn *c, struct sbr__wc *wc, int max)
{
  if (!c || !wc || max <= 0)
    return -EINVAL;
  uint64_t now = shm_now_ns();
  pthread_mutex_lock(&c->lock);
  int n = 0;
  if (c->role == SHM_SENDER) {
    n += shm_poll_sq(c, wc, max, now);
  } else {
    while (n < max && c->lcq_tail != c->lcq_head)
      wc[n++] = c->lcq[c->lcq_tail++ % c->sq_depth];
  }
  n += shm_poll_rx(c, wc + n, max - n);
  /* The receiver has no NIC thread: it looks for a hang-up here, when
   * there is nothing to report, at most every SHM_PEER_CHECK_NS. */
  if (c->role == SHM_RECEIVER && n == 0 && c->state != SHM_GONE &&
      now >= c->next_check_ns) {
    c->next_check_ns = now + SHM_PEER_CHECK_NS;
    if (sbr__shm_peer_gone(c->sock))
      shm_set_state(c, SHM_GONE);
  }
  if (c->state != SHM_UP)
    n += shm_flush_rq(c, wc + n, max - n);
  bool drained =
      c->sq_scanned == c->sq_posted && c->rq_completed == c->rq_posted;
  int ret = n == 0 && c->state == SHM_GONE && drained ? -ENOTCONN : n;
  pthread_mutex_unlock(&c->lock);
  return ret;
}

/* Can poll_cq report something now?  Otherwise *next_ns is when the oldest
 * executed WR's completion becomes visible (injected delay), or
 * UINT64_MAX.  Called with c->lock held. */
static bool shm_cq_ready_locked(struct sbr__conn *c, uint64_t now,
                                uint64_t *next_ns)
{
  *next_ns = UINT64_MAX;
  if (c->state != SHM_UP || c->lcq_tail != c->lcq_head ||
      atomic_load_explicit(&c->rx->head, memory_order_acquire) != c->rx_tail)
    return true;
  if (c->role == SHM_SENDER && c->sq_scanned != c->sq_executed) {
    uint64_t visible = c->sq[c->sq_scanned % c->sq_depth].visible_ns;
    if (visible <= now)
      return true;
    *next_ns = visible;
  }
  return false;
}

void sbr__shm_arm_cq(struct sbr__conn *c)
{
  /* The doorbell needs no arming for completions (a waiter reads the bell
   * before it checks for them), but a kick_cq between this arm and the
   * wait must not be lost: the wait sleeps only while the bell is what it
   * was here. */
  if (!c || !c->rx)
    return;
  c->armed_rung = atomic_load(&c->rx->bell);
  c->armed = true;
}

void sbr__shm_wait_cq(struct sbr__conn *c, uint32_t timeout_us)
{
  if (!c || !c->rx) {
    sbr__sleep_us(timeout_us);
    return;
  }
  struct shm_ring *r = c->rx;
  atomic_fetch_add(&r->bell_waiters, 1);
  uint32_t rung = c->armed ? c->armed_rung : atomic_load(&r->bell);
  c->armed = false;
  uint64_t now = shm_now_ns();
  uint64_t next;
  pthread_mutex_lock(&c->lock);
  bool ready = shm_cq_ready_locked(c, now, &next);
  pthread_mutex_unlock(&c->lock);
  if (!ready) {
    uint64_t wait_ns = (uint64_t)timeout_us * 1000u;
    if (next != UINT64_MAX && next - now < wait_ns)
      wait_ns = next - now;
    struct timespec ts = {(time_t)(wait_ns / NS_PER_S),
                          (long)(wait_ns % NS_PER_S)};
    /* Returns at once when the bell rang since it was read. */
    syscall(SYS_futex, &r->bell, FUTEX_WAIT, rung, &ts, NULL, 0);
  }
  atomic_fetch_sub(&r->bell_waiters, 1);
}

void sbr__shm_kick_cq(struct sbr__conn *c)
{
  /* A pollable completion would ring the same bell: the waiter wakes,
   * polls, and finds whatever there is (perhaps nothing). */
  if (c && c->rx)
    shm_bell_ring(c->rx);
}

uint32_t sbr__shm_sleep_prepare(struct sbr__conn *c)
{
  struct shm_wake *w = c->rx_wake;
  atomic_store_explicit(&w->asleep, 1, memory_order_relaxed);
  /* Pairs with shm_wake_receiver's: the caller's next look at the status
   * bytes, or the writer's look at asleep, sees the other's store. */
  atomic_thread_fence(memory_order_seq_cst);
  return atomic_load_explicit(&w->seq, memory_order_acquire);
}

int sbr__shm_sleep_wait(struct sbr__conn *c, uint32_t token, uint64_t until_ns)
{
  struct shm_wake *w = c->rx_wake;
  /* FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC time, as the
   * adaptive mode's sleep to a window wants (clock_nanosleep's
   * TIMER_ABSTIME); a signal only makes us wait again. */
  struct timespec ts = {(time_t)(until_ns / NS_PER_S),
                        (long)(until_ns % NS_PER_S)};
  for (;;) {
    if (atomic_load_explicit(&w->seq, memory_order_acquire) != token)
      return 1;
    long ret = syscall(SYS_futex, &w->seq, FUTEX_WAIT_BITSET, token, &ts, NULL,
                       FUTEX_BITSET_MATCH_ANY);
    if (ret == 0 || errno == EINTR || errno == EAGAIN)
      continue; /* a wake for an earlier sleep, a signal: check seq again */
    /* A write that came after the timeout but before this thread ran
     * again (a loaded host) did not wait for the timeout either. */
    if (errno == ETIMEDOUT)
      return atomic_load_explicit(&w->seq, memory_order_acquire) != token;
    /* No futex here (a sandbox refusing it): sleep as without a wake, not
     * a return at once that would turn the receiver's wait into a spin. */
    sbr__sleep_until_ns(until_ns);
    return 0;
  }
}

void sbr__shm_sleep_end(struct sbr__conn *c)
{
  atomic_store_explicit(&c->rx_wake->asleep, 0, memory_order_relaxed);
}

uint64_t sbr__shm_posted_recv_count(struct sbr__conn *c)
{
  pthread_mutex_lock(&c->lock);
  uint64_t n = c->rq_posted;
  pthread_mutex_unlock(&c->lock);
  return n;
}

/* Test only: the next WR the NIC thread executes (or the next posted, when
 * none waits) fails with SHM_VERR_INJECTED, which puts the conn in error as
 * fail_after_wrs does. */
int sbr__shm_test_fail(struct sbr__conn *c)
{
  if (!c || c->role != SHM_SENDER)
    return -EINVAL;
  pthread_mutex_lock(&c->lock);
  uint64_t next = c->sq_executed + 1;
  pthread_mutex_unlock(&c->lock);
  atomic_store_explicit(&c->fail_at, next, memory_order_relaxed);
  return 0;
}

/* Starts the NIC thread with every signal blocked: signals are for the
 * application's threads, not ours. */
int sbr__shm_start_nic(struct sbr__conn *c)
{
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int err = pthread_create(&c->nic, NULL, shm_nic_main, c);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (err)
    return -err;
  pthread_setname_np(c->nic, "sbr-shm-nic");
  c->nic_running = true;
  return 0;
}
