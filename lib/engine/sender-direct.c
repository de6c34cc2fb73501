/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sender-direct.c - direct placement: over a same-host back end (shm) with
 * the status-byte mechanism, the send block a producer acquires is a
 * receive block of the lane itself, so the frame a camera renders into it
 * is never copied on its way to the receiver.  Posting it is the status
 * byte's WRITE alone (sender-status-byte.c, post_run).
 *
 * Which receive block: one the status cache knows free (a status READ
 * found it 0, and nothing was written to it since: rule 7 as for any
 * block).  The cache is the engine's, on the sender thread, while acquire
 * runs on producers' threads; so the engine moves free cache entries into
 * a pool here (marking them reserved in its cache, which READs then leave
 * alone), and acquire takes one from the pool under s->lock.  The engine
 * refills the pool, and READs for it, while producers acquire; it takes
 * entries back when copies wait for a free receive block and the cache
 * has none.  The pool plus the blocks reserved by producers are at most
 * half the lane, so the copying path (caps, EOS, sbr_sender_send, the
 * fallbacks below) always has the other half.
 *
 * Fairness and the bitmaps: a reservation comes with a send block, after
 * acquire's wait for one (per-device share, paused and refused devices),
 * so a device holds at most its share of reservations.
 *
 * What falls back to the copy (the block's own registered memory, as
 * without direct placement), counted in direct_fallbacks:
 *   - an acquire that finds the pool empty and can't wait for it (drop
 *     backpressure: a live camera never waits), or whose wait timed out
 *     or was interrupted;
 *   - a block reserved in a lane that closed before its submit (a
 *     reconnect): its payload is copied into the block's own memory and
 *     sent on the new lane, so the frame arrives intact.
 * Never placed directly: sbr_sender_send (a copy by contract: frames
 * larger than one block, caps, EOS, foreign memory), the sliding window
 * (its slot is seq mod N, known only at post time) and verbs (the lane is
 * remote).
 *
 * Lifetimes: a view (the lane's blocks region mapped here, transport.h
 * map_blocks) is referenced by its connection and by every block reserved
 * in it, and unmapped when the last goes: a producer still writing into a
 * block of a lane that closed writes into a segment nobody reads.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "engine/sender-internal.h"

/* After an acquire, the engine keeps the pool filled this long (and READs
 * for it): a camera acquires at least once a second, and a sender nobody
 * acquires from costs nothing. */
#define DIRECT_WANT_NS (1000ull * 1000u * 1000u)

void sbr__direct_view_unref_locked(struct sbr_sender *s,
                                   struct sbr__direct_view *v)
{
  if (--v->refs > 0)
    return;
  for (struct sbr__direct_view **p = &s->direct.views; *p; p = &(*p)->next) {
    if (*p == v) {
      *p = v->next;
      break;
    }
  }
  s->ops->unmap_blocks(v->base, v->len);
  free(v);
}

void sbr__direct_init(struct sbr_sender *s)
{
  /* Timed waits use CLOCK_MONOTONIC, as the sender's other waits. */
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&s->direct.cond, &ca);
  pthread_condattr_destroy(&ca);
}

void sbr__direct_connect(struct sbr_sender *s)
{
  if (s->knobs.copy_into_lane || s->cfg.mechanism != SBR_MECH_STATUS_BYTE ||
      !s->ops->map_blocks || s->lane.block_count < 2)
    return;
  struct sbr__direct_view *v = calloc(1, sizeof *v);
  uint32_t *pool = NULL;
  if (!v)
    goto out_copy;
  pthread_mutex_lock(&s->lock);
  pool = s->direct.pool;
  uint32_t cap = s->direct.pool_cap;
  pthread_mutex_unlock(&s->lock);
  if (cap < s->lane.block_count) {
    /* Only this thread (engine_lock) resizes it; producers see the pool
     * empty meanwhile (no view). */
    pool = realloc(pool, s->lane.block_count * sizeof *pool);
    if (!pool)
      goto out_copy;
    pthread_mutex_lock(&s->lock);
    s->direct.pool = pool;
    s->direct.pool_cap = s->lane.block_count;
    pthread_mutex_unlock(&s->lock);
  }
  int ret = s->ops->map_blocks(s->conn, &v->base, &v->len);
  if (ret < 0) {
    SBR_WARN("sender: cannot map the lane for direct placement (%s); "
             "copying instead",
             strerror(-ret));
    goto out_copy;
  }
  v->refs = 1;
  pthread_mutex_lock(&s->lock);
  struct sbr__direct *d = &s->direct;
  v->next = d->views;
  d->views = v;
  d->view = v;
  d->stride = s->lane.block_size;
  d->n_pool = 0;
  d->held = 0;
  /* Half the lane, and no more than the send blocks could hold. */
  d->limit = s->lane.block_count / 2;
  if (d->limit > s->n_blocks)
    d->limit = s->n_blocks;
  /* The pool fills from the first acquire on, not now: a sender that
   * only copies (sbr_sender_send) never takes receive blocks from its
   * copies.  That first acquire waits for the READ (rule 7) it needs. */
  d->want_until_ns = 0;
  pthread_cond_broadcast(&d->cond);
  pthread_mutex_unlock(&s->lock);
  return;

out_copy:
  free(v);
}

void sbr__direct_disconnect(struct sbr_sender *s)
{
  pthread_mutex_lock(&s->lock);
  struct sbr__direct *d = &s->direct;
  if (d->view) {
    struct sbr__direct_view *v = d->view;
    d->view = NULL;
    sbr__direct_view_unref_locked(s, v);
  }
  /* The pool's receive blocks and the held ones belong to the closed lane:
   * its blocks that are still reserved are copied at submit. */
  d->n_pool = 0;
  d->held = 0;
  pthread_cond_broadcast(&d->cond);
  pthread_mutex_unlock(&s->lock);
}

void sbr__direct_free(struct sbr_sender *s)
{
  /* Every block is back (sbr_sender_free's contract), the connection
   * closed: only views no block references remain, if any. */
  while (s->direct.views) {
    struct sbr__direct_view *v = s->direct.views;
    s->direct.views = v->next;
    s->ops->unmap_blocks(v->base, v->len);
    free(v);
  }
  free(s->direct.pool);
  pthread_cond_destroy(&s->direct.cond);
}

void sbr__direct_reserve_locked(struct sbr_sender *s, struct sbr_send_block *b)
{
  struct sbr__direct *d = &s->direct;
  struct sbr__direct_view *v = d->view;
  if (!v)
    return;
  d->want_until_ns = sbr__now_ns() + DIRECT_WANT_NS;
  if (d->n_pool == 0 && d->held < d->limit && s->engine->refill_direct) {
    /* What the cache knows free goes to the pool on this thread, when the
     * engine is free (as post_own posts): waking the sender thread for it
     * costs a thread wake-up per frame on a loaded host.  engine_lock
     * comes before s->lock. */
    pthread_mutex_unlock(&s->lock);
    if (pthread_mutex_trylock(&s->engine_lock) == 0) {
      if (s->conn)
        s->engine->refill_direct(s);
      pthread_mutex_unlock(&s->engine_lock);
    }
    pthread_mutex_lock(&s->lock);
  }
  if (d->n_pool == 0 && s->cfg.backpressure == SBR_BACKPRESSURE_WAIT) {
    /* A stream that waits (non-live, or over-budget=wait) waits for a
     * receive block here rather than copy: a copied frame goes nowhere
     * either until the receiver frees a block, so waiting gives up only
     * the producer's lead (filling its next frame meanwhile) and saves a
     * copy of every frame, which flat out is the CPU the producers lack
     * (B6: two frames in three were copied while the wait ended after
     * two looks at the lane).  Reservations at their limit come back as
     * their producers submit.  Bounded as any wait for a block is
     * (wait_timeout_ms): a producer holding many acquired blocks
     * unsubmitted, or a receiver that keeps every block, gets the copy. */
    struct timespec deadline;
    if (s->cfg.wait_timeout_ms >= 0)
      sbr__deadline_after_us(&deadline,
                             (uint64_t)s->cfg.wait_timeout_ms * 1000u);
    uint64_t wakeups = s->wakeups;
    d->waiters++;
    sbr__sender_wake_locked(s);
    while (d->n_pool == 0 && d->view == v && s->connected && !s->stopping &&
           s->wakeups == wakeups &&
           !sbr__sender_dev_interrupted_locked(s, b->owner)) {
      int r = s->cfg.wait_timeout_ms >= 0
                  ? pthread_cond_timedwait(&d->cond, &s->lock, &deadline)
                  : pthread_cond_wait(&d->cond, &s->lock);
      if (r == ETIMEDOUT)
        break;
    }
    d->waiters--;
  }
  if (d->n_pool == 0 || d->view != v) {
    s->stats.direct_fallbacks++;
    return;
  }
  uint32_t i = d->pool[--d->n_pool];
  d->held++;
  v->refs++;
  b->direct_index = i;
  b->direct_view = v;
  b->direct_mem = v->base + (size_t)i * d->stride;
}

void sbr__direct_detach_locked(struct sbr_sender *s, struct sbr_send_block *b,
                               bool abandoned)
{
  struct sbr__direct *d = &s->direct;
  struct sbr__direct_view *kv = b->kept_view;
  if (kv) {
    /* Kept, now freed: its receive block, reserved and never written, is
     * free for the pool again (if its lane is still ours). */
    if (kv == d->view) {
      d->held--;
      d->pool[d->n_pool++] = b->kept_index;
      if (d->waiters)
        pthread_cond_signal(&d->cond);
    }
    b->kept_view = NULL;
    sbr__direct_view_unref_locked(s, kv);
  }
  struct sbr__direct_view *v = b->direct_view;
  if (!v)
    return;
  if (v == d->view) {
    if (b->state == SBR__SEND_FILLING || b->state == SBR__SEND_QUEUED)
      d->held--;
    if (abandoned && b->state == SBR__SEND_FILLING) {
      /* Never submitted: its receive block is still free and reserved. */
      d->pool[d->n_pool++] = b->direct_index;
      if (d->waiters)
        pthread_cond_signal(&d->cond);
    }
  }
  b->direct_view = NULL;
  __atomic_store_n(&b->direct_mem, NULL, __ATOMIC_RELEASE);
  sbr__direct_view_unref_locked(s, v);
}

void sbr__direct_keep_locked(struct sbr_sender *s, struct sbr_send_block *b,
                             size_t payload_len)
{
  struct sbr__direct_view *v = b->direct_view;
  if (!v)
    return;
  /* Once posted, a receive block is the receiver's, then carries this
   * sender's next frames: the caller, who keeps reading the frame, would
   * see them.  So the frame goes as a copy from the block's own memory,
   * and the receive block it lies in stays reserved (still counted in
   * held, READs leave it alone) until the block is freed: a pointer the
   * caller took into it before the submit stays valid and unchanged, and
   * the view stays mapped (the block's reference moves to kept_view). */
  const uint8_t *src = b->direct_mem + SBR__HEADER_SIZE;
  pthread_mutex_unlock(&s->lock);
  memcpy(b->mem + SBR__HEADER_SIZE, src, payload_len);
  pthread_mutex_lock(&s->lock);
  /* A lane that closed meanwhile gets nothing back at the free
   * (sbr__direct_detach_locked compares views). */
  b->kept_view = v;
  b->kept_index = b->direct_index;
  b->direct_view = NULL;
  __atomic_store_n(&b->direct_mem, NULL, __ATOMIC_RELEASE);
  s->stats.kept_copies++;
}

void sbr__direct_submit_locked(struct sbr_sender *s, struct sbr_send_block *b,
                               size_t payload_len)
{
  struct sbr__direct_view *v = b->direct_view;
  if (!v || v == s->direct.view)
    return;
  /* Reserved in a lane that closed: the frame goes as a copy on the new
   * one.  The old view stays mapped until we are done reading it. */
  const uint8_t *src = b->direct_mem + SBR__HEADER_SIZE;
  b->direct_view = NULL;
  __atomic_store_n(&b->direct_mem, NULL, __ATOMIC_RELEASE);
  s->stats.direct_fallbacks++;
  pthread_mutex_unlock(&s->lock);
  memcpy(b->mem + SBR__HEADER_SIZE, src, payload_len);
  pthread_mutex_lock(&s->lock);
  sbr__direct_view_unref_locked(s, v);
}

void sbr__direct_posting_locked(struct sbr_sender *s, struct sbr_send_block *b)
{
  if (b->direct_view && b->direct_view == s->direct.view)
    s->direct.held--;
}

void sbr__direct_requeued_locked(struct sbr_sender *s, struct sbr_send_block *b)
{
  if (b->direct_view && b->direct_view == s->direct.view)
    s->direct.held++;
}

struct sbr_send_block *sbr__direct_block_at_locked(const struct sbr_sender *s,
                                                   const void *ptr)
{
  for (uint32_t i = 0; i < s->n_blocks; i++) {
    const struct sbr_send_block *b = &s->blocks[i];
    if (b->direct_mem && b->direct_mem + SBR__HEADER_SIZE == ptr)
      return &s->blocks[i];
  }
  return NULL;
}

bool sbr__direct_wanted_locked(const struct sbr_sender *s)
{
  const struct sbr__direct *d = &s->direct;
  if (!d->view || d->n_pool + d->held >= d->limit)
    return false;
  return d->waiters > 0 || sbr__now_ns() < d->want_until_ns;
}

uint32_t sbr__direct_room(struct sbr_sender *s)
{
  pthread_mutex_lock(&s->lock);
  uint32_t room = 0;
  if (sbr__direct_wanted_locked(s))
    room = s->direct.limit - s->direct.n_pool - s->direct.held;
  pthread_mutex_unlock(&s->lock);
  return room;
}

void sbr__direct_pool_add(struct sbr_sender *s, const uint32_t *index,
                          uint32_t n)
{
  pthread_mutex_lock(&s->lock);
  struct sbr__direct *d = &s->direct;
  /* The engine runs only on the connection's lane (engine_lock), whose
   * view this is; the bound is the pool's size. */
  for (uint32_t k = 0; d->view && k < n && d->n_pool < d->pool_cap; k++)
    d->pool[d->n_pool++] = index[k];
  if (n && d->waiters)
    pthread_cond_broadcast(&d->cond);
  pthread_mutex_unlock(&s->lock);
}

uint32_t sbr__direct_pool_take_back(struct sbr_sender *s, uint32_t *out,
                                    uint32_t max)
{
  pthread_mutex_lock(&s->lock);
  struct sbr__direct *d = &s->direct;
  uint32_t n = 0;
  while (n < max && d->n_pool > 0)
    out[n++] = d->pool[--d->n_pool];
  pthread_mutex_unlock(&s->lock);
  return n;
}
