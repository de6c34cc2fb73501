/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sender-thread.c - the sender thread ("sbr-sender") and what the posting
 * engines call on it: it sleeps until there is work, lets the engine post
 * and reap, fails the connection on an error; the engines take queued
 * blocks, give them back, report completions and the receiver's pause and
 * refused bitmaps through the sbr__sender_* helpers here.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "util/log.h"
#include "engine/sender-internal.h"
#include "wire/byteorder.h"

/* A sender thread with nothing queued re-checks this often anyway (so a
 * dead connection is noticed while idle). */
#define IDLE_CHECK_MS 50
/* After a producer of a refused device (or, under DROP, of a paused one)
 * was turned away, keep the forced status READs going this long, so the
 * next one learns whether the bit cleared (a camera tries at least once a
 * second). */
#define TURNED_AWAY_POLL_WINDOW_NS (1000ull * 1000u * 1000u)

/* Does a producer wait for a paused device, or was one of a refused (or
 * paused, under DROP) device turned away lately?  Either must learn when
 * its bit clears: a DROP sender of one paused camera sends nothing else
 * that would bring a READ, and stayed paused for good. */
bool sbr__sender_pause_waiting_locked(const struct sbr_sender *s)
{
  for (const struct sbr__free_waiter *w = s->free_waiters_head; w; w = w->next)
    if (sbr__sender_dev_paused_locked(s, w->device))
      return true;
  return s->refused_try_ns != 0 &&
         sbr__now_ns() - s->refused_try_ns < TURNED_AWAY_POLL_WINDOW_NS;
}

/* Status-byte only: the sliding window has no READ to force. */
static bool pause_poll_locked(const struct sbr_sender *s)
{
  return s->cfg.pause_poll_us > 0 && s->cfg.mechanism == SBR_MECH_STATUS_BYTE &&
         sbr__sender_pause_waiting_locked(s);
}

void *sbr__sender_thread(void *arg)
{
  struct sbr_sender *s = arg;
  pthread_setname_np(pthread_self(), "sbr-sender");
  sbr__thread_precise_sleeps();
  for (;;) {
    pthread_mutex_lock(&s->lock);
    bool stop = s->stopping;
    bool connected = s->connected;
    /* A producer waiting for a paused device keeps the engine READing,
     * and so does a direct placement pool producers draw on. */
    bool busy = s->n_queued > 0 || s->n_posted > 0 || s->reads_pending > 0 ||
                pause_poll_locked(s) || sbr__direct_wanted_locked(s);
    if (!stop && (!connected || !busy)) {
      /* Nothing to post, nothing to reap: sleep until a submit. */
      struct timespec ts;
      sbr__deadline_after_us(&ts, (uint64_t)IDLE_CHECK_MS * 1000u);
      pthread_cond_timedwait(&s->work_cond, &s->lock, &ts);
      stop = s->stopping;
      connected = s->connected;
      busy = s->n_queued > 0 || s->n_posted > 0 || s->reads_pending > 0 ||
             pause_poll_locked(s) || sbr__direct_wanted_locked(s);
    }
    pthread_mutex_unlock(&s->lock);
    if (stop)
      break;
    if (!connected)
      continue;

    pthread_mutex_lock(&s->engine_lock);
    int r = s->conn ? s->engine->progress(s) : 0;
    if (r == 0 && busy && s->conn && !sbr__backoff_spin(&s->backoff)) {
      /* Sleep on what the engine waits for rather than a fixed nap: a
       * completion is noticed when it comes, not after the nap. */
      r = s->engine->sleep(s, sbr__backoff_next_sleep_us(&s->backoff));
    }
    if (r < 0)
      sbr__sender_fail_connection(s, r);
    pthread_mutex_unlock(&s->engine_lock);
    /* Here, with no lock held: the application's callback may take its
     * own locks, and producers may post meanwhile. */
    sbr__sender_deliver_key_units(s);
    if (r > 0)
      sbr__backoff_reset(&s->backoff);
  }
  return NULL;
}

uint32_t sbr__sender_take_queued(struct sbr_sender *s,
                                 struct sbr_send_block **out,
                                 uint32_t max_blocks, uint64_t max_bytes,
                                 uint32_t span_max)
{
  uint32_t n = 0;
  uint64_t bytes = 0;
  pthread_mutex_lock(&s->lock);
  struct sbr_send_block *b;
  while ((b = sbr__queue_peek(&s->queue)) != NULL) {
    /* A block placed directly goes alone, whatever max_blocks says: it
     * needs no free receive block, it is one (its post is its status
     * WRITE); copies don't join it. */
    if (b->direct_mem ? n > 0
                      : n >= max_blocks || (n > 0 && out[0]->direct_mem))
      break;
    if (n > 0 && bytes + b->wire_len > max_bytes)
      break;
    /* A frame that may span is the engine's to post whole (post_span),
     * even one queued since the engine last looked at the head. */
    if (!b->direct_mem && b->frame_blocks > 1 && b->frame_blocks <= span_max)
      break;
    bytes += b->wire_len;
    sbr__queue_pop(&s->queue);
    /* The lane's sequence numbers follow the posting order, which the
     * round robin makes differ from the submit order (the receiver
     * delivers a lane in sequence order). */
    b->header.seq = s->next_seq++;
    /* Packet numbers too are given in posting order, which is each
     * device's submit order (its FIFO): a frame posted as one spanning
     * block takes one, as fragments one each, with no gap either way. */
    b->header.packet = s->next_packet[b->header.device]++;
    b->frame_blocks = 0; /* posted as fragments */
    sbr__block_encode(sbr__send_block_wire(b), s->block_size, &b->header);
    sbr__direct_posting_locked(s, b);
    s->n_queued--;
    s->n_posted++;
    b->next = NULL;
    b->state = SBR__SEND_POSTED;
    out[n++] = b;
  }
  pthread_mutex_unlock(&s->lock);
  return n;
}

uint32_t sbr__sender_head_frame_blocks(struct sbr_sender *s)
{
  pthread_mutex_lock(&s->lock);
  struct sbr_send_block *b = sbr__queue_peek(&s->queue);
  uint32_t n = b && !b->direct_mem ? b->frame_blocks : 0;
  pthread_mutex_unlock(&s->lock);
  return n > 1 ? n : 0;
}

uint32_t sbr__sender_take_span(struct sbr_sender *s,
                               struct sbr_send_block **out, uint32_t n)
{
  pthread_mutex_lock(&s->lock);
  struct sbr_send_block *head = sbr__queue_peek(&s->queue);
  if (!head || head->direct_mem || head->frame_blocks != n || n < 2) {
    pthread_mutex_unlock(&s->lock);
    return 0;
  }
  uint32_t got = sbr__queue_pop_n(&s->queue, out, n);
  /* sbr_sender_send queued them together under one lock hold: the FIFO
   * holds all n in order (a later one can't have gone before). */
  struct sbr__header h = head->header;
  h.seq = s->next_seq++;
  h.packet = s->next_packet[h.device]++;
  h.flags |= SBR_FLAG_LAST | SBR__FLAG_SPAN;
  h.frame_offset = 0;
  h.payload_len = h.frame_size;
  sbr__header_encode(head->mem, &h);
  struct sbr_send_block *last = out[got - 1];
  sbr__put_le64(last->mem + SBR__HEADER_SIZE + last->header.payload_len, h.seq);
  head->header = h;
  head->frame_blocks = 0;
  for (uint32_t k = 0; k < got; k++) {
    s->n_queued--;
    s->n_posted++;
    out[k]->state = SBR__SEND_POSTED;
  }
  pthread_mutex_unlock(&s->lock);
  return got;
}

void sbr__sender_requeue_front(struct sbr_sender *s,
                               struct sbr_send_block *const *blocks, uint32_t n)
{
  pthread_mutex_lock(&s->lock);
  struct sbr_send_block *head = n ? blocks[0] : NULL;
  if (head && (head->header.flags & SBR__FLAG_SPAN)) {
    /* A span that could not be posted is fragments again, as queued
     * (sbr__sender_take_span changed only the first's header). */
    head->header.flags &= (uint8_t) ~(SBR__FLAG_SPAN | SBR_FLAG_LAST);
    head->header.payload_len = head->wire_len - SBR__BLOCK_OVERHEAD;
    head->frame_blocks = n;
  }
  for (uint32_t k = n; k-- > 0;) {
    struct sbr_send_block *b = blocks[k];
    b->state = SBR__SEND_QUEUED;
    sbr__direct_requeued_locked(s, b);
    sbr__queue_push_front(&s->queue, b); /* a new seq when taken again */
    s->n_queued++;
    s->n_posted--;
  }
  pthread_mutex_unlock(&s->lock);
}

bool sbr__sender_pause_waiting(struct sbr_sender *s)
{
  pthread_mutex_lock(&s->lock);
  bool waiting = sbr__sender_pause_waiting_locked(s);
  pthread_mutex_unlock(&s->lock);
  return waiting;
}

void sbr__sender_pause_seen(struct sbr_sender *s, const uint8_t *bitmap)
{
  pthread_mutex_lock(&s->lock);
  if (memcmp(bitmap, s->paused, sizeof s->paused) == 0) {
    pthread_mutex_unlock(&s->lock); /* the usual case */
    return;
  }
  uint64_t now = sbr__now_ns();
  bool resumed = false;
  for (unsigned d = 0; d < SBR_MAX_DEVICES; d++) {
    uint8_t bit = (uint8_t)(1u << (d % 8));
    bool was = s->paused[d / 8] & bit, is = bitmap[d / 8] & bit;
    if (was == is)
      continue;
    if (is) {
      s->paused_since_ns[d] = now;
      SBR_DEBUG("sender: the receiver paused device %u", d);
    } else {
      s->dev_stats[d].paused_ns += now - s->paused_since_ns[d];
      resumed = true;
      SBR_DEBUG("sender: the receiver resumed device %u", d);
    }
  }
  memcpy(s->paused, bitmap, sizeof s->paused);
  if (resumed)
    sbr__sender_wake_free_waiters_locked(s);
  pthread_mutex_unlock(&s->lock);
}

void sbr__sender_refused_seen(struct sbr_sender *s, const uint8_t *bitmap)
{
  pthread_mutex_lock(&s->lock);
  if (memcmp(bitmap, s->refused, sizeof s->refused) == 0) {
    pthread_mutex_unlock(&s->lock); /* the usual case */
    return;
  }
  bool refused = false, accepted = false;
  for (unsigned d = 0; d < SBR_MAX_DEVICES; d++) {
    uint8_t bit = (uint8_t)(1u << (d % 8));
    bool was = s->refused[d / 8] & bit, is = bitmap[d / 8] & bit;
    if (was == is)
      continue;
    if (is) {
      refused = true;
      SBR_INFO("sender: the receiver refuses device %u from this sender "
               "(another sender owns it)",
               d);
    } else {
      accepted = true;
      SBR_INFO("sender: the receiver takes device %u from this sender again",
               d);
    }
  }
  memcpy(s->refused, bitmap, sizeof s->refused);
  /* Newly refused: its waiters return -EADDRINUSE (the others keep their
   * place); accepted again: it may take blocks. */
  if (refused)
    for (struct sbr__free_waiter *w = s->free_waiters_head; w; w = w->next)
      if (sbr__sender_dev_refused_locked(s, w->device))
        sbr__sender_wake_waiter_locked(w);
  if (accepted)
    sbr__sender_wake_free_waiters_locked(s);
  pthread_mutex_unlock(&s->lock);
}

bool sbr__sender_has_queued(struct sbr_sender *s)
{
  pthread_mutex_lock(&s->lock);
  bool queued = s->n_queued > 0;
  pthread_mutex_unlock(&s->lock);
  return queued;
}

void sbr__sender_blocks_done(struct sbr_sender *s, const uint32_t *index,
                             uint32_t n)
{
  uint32_t freed = 0;
  pthread_mutex_lock(&s->lock);
  for (uint32_t k = 0; k < n; k++) {
    if (index[k] >= s->n_blocks)
      continue;
    struct sbr_send_block *b = &s->blocks[index[k]];
    if (b->state == SBR__SEND_POSTED) {
      s->n_posted--;
      freed += sbr__sender_settle_locked(s, b);
    }
  }
  if (freed)
    sbr__sender_wake_free_waiters_locked(s);
  if (n > 0 && s->n_posted == 0 && s->n_queued == 0)
    pthread_cond_broadcast(&s->idle_cond);
  pthread_mutex_unlock(&s->lock);
}

void sbr__sender_count_posts(struct sbr_sender *s,
                             struct sbr_send_block *const *blocks, uint32_t n,
                             unsigned n_wr, unsigned n_status_writes)
{
  pthread_mutex_lock(&s->lock);
  for (uint32_t k = 0; k < n; k++) {
    const struct sbr__header *h = &blocks[k]->header;
    struct sbr_device_stats *d = &s->dev_stats[h->device];
    d->blocks++;
    d->bytes += h->payload_len;
    if (h->kind == SBR_KIND_DATA && (h->flags & SBR_FLAG_LAST))
      d->frames++;
    s->stats.blocks++;
    s->stats.bytes += h->payload_len;
    s->stats.direct_blocks += blocks[k]->direct_mem != NULL;
  }
  s->stats.wr_posted += n_wr;
  s->stats.status_writes += n_status_writes;
  pthread_mutex_unlock(&s->lock);
}
