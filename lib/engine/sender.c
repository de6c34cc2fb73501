/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sender.c - the sender: send blocks, the thread-safe fill API for many
 * producers, fragmentation and backpressure.  Its connection is
 * sender-connect.c; the sender thread that hands queued blocks to the
 * posting engine of the chosen mechanism is sender-thread.c.
 *
 * Each device's blocks queue in submit order (sender-queue.c: one FIFO
 * per device, served round robin); sequence and packet numbers are
 * assigned when the engine takes a block, so blocks are posted in
 * sequence order and every device's packets in packet order (the receiver
 * relies on that), and a frame the engine posts as one spanning block
 * takes one packet number, as fragments one each.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/log.h"
#include "util/sized.h"
#include "engine/sender-internal.h"

#define DEFAULT_SEND_BLOCKS 16
#define DEFAULT_CONNECT_TIMEOUT_MS 5000
#define DEFAULT_WAIT_TIMEOUT_MS 1000
/* A forced status READ at least every millisecond of sending: a paused
 * device is seen within ~1 ms + a round trip, for at most one READ (a
 * cache line) per millisecond, which even Soft-RoCE doesn't notice. */
#define DEFAULT_PAUSE_POLL_US 1000

static void config_defaults(struct sbr_sender_config *cfg)
{
  memset(cfg, 0, sizeof *cfg);
  cfg->struct_size = sizeof *cfg;
  cfg->backend = SBR_BACKEND_VERBS;
  cfg->mechanism = SBR_MECH_STATUS_BYTE;
  cfg->host = "127.0.0.1";
  cfg->port = SBR_DEFAULT_PORT;
  cfg->send_blocks = DEFAULT_SEND_BLOCKS;
  cfg->connect_timeout_ms = DEFAULT_CONNECT_TIMEOUT_MS;
  cfg->backpressure = SBR_BACKPRESSURE_WAIT;
  cfg->wait_timeout_ms = DEFAULT_WAIT_TIMEOUT_MS;
  cfg->pause_poll_us = DEFAULT_PAUSE_POLL_US;
  cfg->send_order = SBR_SEND_ORDER_FIFO;
  sbr__backoff_config_fill(&cfg->backoff);
  struct sbr__fabric f;
  sbr__fabric_defaults(&f);
  cfg->tos = f.tos;
  cfg->ack_timeout = f.ack_timeout;
  cfg->retry_count = f.retry_count;
  cfg->comp_vector = f.comp_vector;
}

void sbr_sender_config_init_sized(struct sbr_sender_config *cfg, size_t size)
{
  struct sbr_sender_config d;
  config_defaults(&d);
  sbr__sized_config_init(cfg, size, &d, sizeof d);
}

int sbr__sender_config_read(const struct sbr_sender_config *app,
                            size_t min_size, struct sbr_sender_config *cfg,
                            char *errbuf, size_t errlen)
{
  config_defaults(cfg);
  return sbr__sized_config_read(cfg, sizeof *cfg, app, min_size,
                                "sbr_sender_config", errbuf, errlen);
}

/* The application's config (its struct_size) over the defaults. */
static int config_read(const struct sbr_sender_config *app,
                       struct sbr_sender_config *cfg, char *errbuf,
                       size_t errlen)
{
  return sbr__sender_config_read(app, SBR__SENDER_CONFIG_MIN_SIZE, cfg, errbuf,
                                 errlen);
}

void sbr_block_meta_init(struct sbr_block_meta *meta, uint8_t device)
{
  memset(meta, 0, sizeof *meta);
  meta->device = device;
  meta->kind = SBR_KIND_DATA;
  meta->flags = SBR_FLAG_FIRST | SBR_FLAG_LAST;
  meta->pts = meta->dts = meta->duration = SBR_TIME_NONE;
  meta->capture_time = SBR_TIME_NONE;
}

static void deadline_after_ms(struct timespec *ts, int ms)
{
  sbr__deadline_after_us(ts, (uint64_t)ms * 1000u);
}

static void init_cond(pthread_cond_t *c)
{
  /* Timed waits use CLOCK_MONOTONIC: wall clock jumps must not matter. */
  pthread_condattr_t a;
  pthread_condattr_init(&a);
  pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  pthread_cond_init(c, &a);
  pthread_condattr_destroy(&a);
}

/* ------------------------------------------------------------ blocks */

int sbr__sender_alloc_blocks(struct sbr_sender *s, uint32_t block_size)
{
  size_t total = (size_t)s->n_blocks * block_size;
  if (posix_memalign((void **)&s->block_mem, 4096, total) != 0)
    return -ENOMEM;
  memset(s->block_mem, 0, total);
  s->blocks = calloc(s->n_blocks, sizeof *s->blocks);
  if (!s->blocks) {
    free(s->block_mem);
    s->block_mem = NULL;
    return -ENOMEM;
  }
  s->block_size = block_size;
  s->free_list = NULL;
  for (uint32_t i = s->n_blocks; i-- > 0;) {
    struct sbr_send_block *b = &s->blocks[i];
    b->index = i;
    b->mem = s->block_mem + (size_t)i * block_size;
    b->capacity = (uint32_t)sbr__block_capacity(block_size);
    b->state = SBR__SEND_FREE;
    b->next = s->free_list;
    s->free_list = b;
  }
  s->n_free = s->n_blocks;
  return 0;
}

/* Returns b to the free list; the caller then wakes waiters with
 * sbr__sender_wake_free_waiters_locked for everything it freed. */
static void push_free_locked(struct sbr_sender *s, struct sbr_send_block *b)
{
  sbr__direct_detach_locked(s, b, false);
  if (b->state != SBR__SEND_FREE)
    s->dev_held[b->owner]--;
  b->state = SBR__SEND_FREE;
  b->keep = false;
  b->release_pending = false;
  b->next = s->free_list;
  s->free_list = b;
  s->n_free++;
}

/* A submitted block is done with (its WRITE completed, or its connection
 * went): back on the free list, or DONE and still the caller's when it
 * was kept and not released.  The caller wakes free waiters. */
bool sbr__sender_settle_locked(struct sbr_sender *s, struct sbr_send_block *b)
{
  if (b->keep && !b->release_pending) {
    b->state = SBR__SEND_DONE;
    /* sbr_sender_wait_block waits on idle_cond. */
    pthread_cond_broadcast(&s->idle_cond);
    return false;
  }
  push_free_locked(s, b);
  return true;
}

/* Paused or refused: the device takes no send block now. */
static bool dev_stopped_locked(const struct sbr_sender *s, uint8_t device)
{
  return sbr__sender_dev_paused_locked(s, device) ||
         sbr__sender_dev_refused_locked(s, device);
}

/* Devices other than device with a producer waiting for blocks (paused
 * or refused ones don't count: they take none). */
static uint32_t other_waiting_devices_locked(const struct sbr_sender *s,
                                             uint8_t device)
{
  uint8_t seen[SBR_MAX_DEVICES / 8] = {0};
  uint32_t n = 0;
  for (const struct sbr__free_waiter *w = s->free_waiters_head; w;
       w = w->next) {
    uint8_t bit = (uint8_t)(1u << (w->device % 8));
    if (w->device == device || dev_stopped_locked(s, w->device) ||
        (seen[w->device / 8] & bit))
      continue;
    seen[w->device / 8] |= bit;
    n++;
  }
  return n;
}

/* Fairness (design.md, "Sharing the send blocks"): while producers of
 * other devices wait, a device may hold (taken + queued + in flight) at
 * most its share of the send blocks, max(n, send_blocks / devices
 * competing); with nobody else waiting it may take them all.  extra: blocks
 * the caller already promised this device. */
static bool within_share(const struct sbr_sender *s, uint8_t device, uint32_t n,
                         uint32_t extra, uint32_t others)
{
  if (others == 0)
    return true;
  uint32_t share = s->n_blocks / (others + 1);
  if (share < n)
    share = n;
  return s->dev_held[device] + extra + n <= share;
}

static bool within_share_locked(const struct sbr_sender *s, uint8_t device,
                                uint32_t n)
{
  return within_share(s, device, n, 0, other_waiting_devices_locked(s, device));
}

static bool has_unpaused_waiter_locked(const struct sbr_sender *s,
                                       uint8_t device)
{
  if (dev_stopped_locked(s, device))
    return false;
  for (const struct sbr__free_waiter *w = s->free_waiters_head; w; w = w->next)
    if (w->device == device)
      return true;
  return false;
}

/* May a producer of device take n blocks now? */
static bool may_take_locked(const struct sbr_sender *s, uint8_t device,
                            uint32_t n)
{
  return s->n_free >= n && !dev_stopped_locked(s, device) &&
         within_share_locked(s, device, n);
}

/* Blocks came back, a device resumed or a waiter left: wake the waiters
 * that can now take blocks, one device at a time, the device holding the
 * fewest blocks first (ties: the oldest waiter), until the free blocks not
 * yet promised to a woken waiter run out.  Twelve camera pipelines wait
 * for blocks at once: waking all of them to let one through (perf: the
 * sender's futex traffic in B6) cost more than the send, so each waiter
 * sleeps on its own condition variable (a pthread_cond_signal among
 * several waiters of one variable can be lost in older glibc, sourceware
 * #25847) and only those chosen are woken.  A woken waiter that finds its
 * blocks taken meanwhile queues again. */
void sbr__sender_wake_free_waiters_locked(struct sbr_sender *s)
{
  if (!s->free_waiters_head || s->n_free == 0)
    return;
  uint32_t promised = 0;
  for (struct sbr__free_waiter *w = s->free_waiters_head; w; w = w->next)
    if (w->woken)
      promised += w->need;
  /* Every candidate below is an unpaused waiter itself, so the devices
   * competing with it are all but its own: counted once, here. */
  uint32_t competing = other_waiting_devices_locked(s, 0) +
                       (has_unpaused_waiter_locked(s, 0) ? 1u : 0u);
  uint32_t extra[SBR_MAX_DEVICES] = {0};
  while (promised < s->n_free) {
    uint32_t available = s->n_free - promised;
    struct sbr__free_waiter *best = NULL;
    for (struct sbr__free_waiter *w = s->free_waiters_head; w; w = w->next) {
      if (w->woken || w->need > available || dev_stopped_locked(s, w->device) ||
          !within_share(s, w->device, w->need, extra[w->device], competing - 1))
        continue;
      if (!best || s->dev_held[w->device] + extra[w->device] <
                       s->dev_held[best->device] + extra[best->device])
        best = w;
    }
    if (!best)
      break;
    sbr__sender_wake_waiter_locked(best);
    promised += best->need;
    extra[best->device] += best->need;
  }
}

/* Every waiter looks again (wakeup, disconnect, stop). */
void sbr__sender_wake_all_free_waiters_locked(struct sbr_sender *s)
{
  for (struct sbr__free_waiter *w = s->free_waiters_head; w; w = w->next)
    sbr__sender_wake_waiter_locked(w);
  /* And those waiting for a receive block to place a frame directly. */
  pthread_cond_broadcast(&s->direct.cond);
}

void sbr__sender_count_drop_locked(struct sbr_sender *s,
                                   const struct sbr_send_block *b)
{
  /* A frame counts once: at its last fragment (or unfragmented block). */
  if (b->header.kind == SBR_KIND_DATA && !(b->header.flags & SBR_FLAG_LAST))
    return;
  s->dev_stats[b->header.device].drops++;
  s->stats.drops++;
}

/* Frees what sbr_sender_new set up, once the connection is closed and the
 * thread is gone. */
static void destroy_sender(struct sbr_sender *s)
{
  sbr__direct_free(s);
  free(s->blocks);
  free(s->block_mem);
  pthread_cond_destroy(&s->idle_cond);
  pthread_cond_destroy(&s->work_cond);
  pthread_mutex_destroy(&s->engine_lock);
  pthread_mutex_destroy(&s->lock);
  free(s);
}

int sbr_sender_new(const struct sbr_sender_config *cfg, sbr_sender **out,
                   char *errbuf, size_t errlen)
{
  return sbr__sender_new_knobs(cfg, NULL, out, errbuf, errlen);
}

int sbr__sender_new_knobs(const struct sbr_sender_config *app,
                          const struct sbr__sender_knobs *knobs,
                          sbr_sender **out, char *errbuf, size_t errlen)
{
  sbr__errf(errbuf, errlen, "%s", "");
  if (!app || !out)
    return -EINVAL;
  struct sbr_sender_config full;
  int ret = config_read(app, &full, errbuf, errlen);
  if (ret < 0)
    return ret;
  const struct sbr_sender_config *cfg = &full;
  if (!cfg->host)
    return -EINVAL;
  const struct sbr__transport_ops *ops = sbr__transport_get(cfg->backend);
  if (!ops) {
    sbr__backend_missing_errf(errbuf, errlen, cfg->backend);
    return -ENOTSUP;
  }
  if (cfg->mechanism != SBR_MECH_STATUS_BYTE &&
      cfg->mechanism != SBR_MECH_SLIDING_WINDOW)
    return -EINVAL;
  if (cfg->send_order != SBR_SEND_ORDER_ROUND_ROBIN &&
      cfg->send_order != SBR_SEND_ORDER_FIFO)
    return -EINVAL;
  struct sbr__fabric fabric;
  sbr__sender_fabric(cfg, 0, &fabric);
  int fret = sbr__fabric_check(&fabric, errbuf, errlen);
  if (fret)
    return fret;
  SBR_DEBUG("sender for %s: fabric settings: tos %d, ACK timeout %u, retry "
            "count %u, completion vector %d%s",
            cfg->host, cfg->tos, cfg->ack_timeout, cfg->retry_count,
            cfg->comp_vector,
            cfg->backend == SBR_BACKEND_SHM ? " (ignored over shm)" : "");

  struct sbr_sender *s = calloc(1, sizeof *s);
  if (!s)
    return -ENOMEM;
  s->cfg = *cfg;
  if (knobs)
    s->knobs = *knobs;
  /* The sliding window acknowledges slots strictly in order: interleaved
   * devices' partial frames, each holding slots until its last fragment,
   * could hold every slot and stop the acknowledgements for good (the
   * status-byte receiver releases blocks one by one, and copies a partial
   * frame out when the lane runs short). */
  sbr__queue_init(&s->queue, cfg->send_order == SBR_SEND_ORDER_FIFO ||
                                 cfg->mechanism == SBR_MECH_SLIDING_WINDOW);
  snprintf(s->host, sizeof s->host, "%s", cfg->host);
  s->cfg.host = s->host;
  if (cfg->source) {
    snprintf(s->source, sizeof s->source, "%s", cfg->source);
    s->cfg.source = s->source;
  }
  if (s->cfg.port == 0)
    s->cfg.port = SBR_DEFAULT_PORT;
  if (s->cfg.send_blocks == 0)
    s->cfg.send_blocks = DEFAULT_SEND_BLOCKS;
  if (s->cfg.connect_timeout_ms <= 0)
    s->cfg.connect_timeout_ms = DEFAULT_CONNECT_TIMEOUT_MS;
  sbr__backoff_config_fill(&s->cfg.backoff);
  s->n_blocks = s->cfg.send_blocks;
  s->ops = ops;
  s->engine = cfg->mechanism == SBR_MECH_STATUS_BYTE
                  ? &sbr__sender_status_byte
                  : &sbr__sender_sliding_window;
  pthread_mutex_init(&s->lock, NULL);
  pthread_mutex_init(&s->engine_lock, NULL);
  init_cond(&s->work_cond);
  init_cond(&s->idle_cond);
  sbr__direct_init(s);
  sbr__backoff_init(&s->backoff, &s->cfg.backoff);

  ret = sbr__sender_connect_locked(s, errbuf, errlen);
  if (ret < 0)
    goto out_free;
  ret = pthread_create(&s->thread, NULL, sbr__sender_thread, s);
  if (ret != 0) {
    ret = -ret;
    sbr__errf(errbuf, errlen, "cannot start the sender thread");
    goto out_disconnect;
  }
  s->thread_started = true;
  *out = s;
  return 0;

out_disconnect:
  sbr__sender_disconnect_engine_locked(s);
out_free:
  destroy_sender(s);
  return ret;
}

void sbr_sender_free(sbr_sender *s)
{
  if (!s)
    return;
  sbr_sender_flush(s, 1000);
  pthread_mutex_lock(&s->lock);
  s->stopping = true;
  pthread_cond_broadcast(&s->work_cond);
  sbr__sender_wake_all_free_waiters_locked(s);
  pthread_mutex_unlock(&s->lock);
  if (s->thread_started)
    pthread_join(s->thread, NULL);
  pthread_mutex_lock(&s->engine_lock);
  sbr__sender_disconnect_engine_locked(s);
  pthread_mutex_unlock(&s->engine_lock);
  destroy_sender(s);
}

void sbr_sender_wakeup(sbr_sender *s)
{
  pthread_mutex_lock(&s->lock);
  s->wakeups++;
  sbr__sender_wake_all_free_waiters_locked(s);
  pthread_mutex_unlock(&s->lock);
}

void sbr_sender_interrupt_device(sbr_sender *s, uint8_t device,
                                 bool interrupted)
{
  uint8_t bit = (uint8_t)(1u << (device % 8));

  pthread_mutex_lock(&s->lock);
  if (interrupted) {
    s->interrupted[device / 8] |= bit;
    /* Each waiter looks at its own device's bit; the others sleep again. */
    sbr__sender_wake_all_free_waiters_locked(s);
  } else {
    s->interrupted[device / 8] &= (uint8_t)~bit;
  }
  pthread_mutex_unlock(&s->lock);
}

size_t sbr_sender_block_payload_size(const sbr_sender *s)
{
  return sbr__block_capacity(s->block_size);
}

/* ---------------------------------------------------------- fill API */

/* Queues w at the tail of the waiters and sleeps until a waker picks it,
 * or until deadline (NULL: none).  Returns 0 or ETIMEDOUT; w is off the
 * list again either way. */
static int sleep_free_waiter_locked(struct sbr_sender *s,
                                    struct sbr__free_waiter *w,
                                    const struct timespec *deadline)
{
  w->woken = false;
  w->next = NULL;
  w->prev = s->free_waiters_tail;
  if (w->prev)
    w->prev->next = w;
  else
    s->free_waiters_head = w;
  s->free_waiters_tail = w;
  int ret = 0;
  while (!w->woken && ret != ETIMEDOUT)
    ret = deadline ? pthread_cond_timedwait(&w->cond, &s->lock, deadline)
                   : pthread_cond_wait(&w->cond, &s->lock);
  if (w->woken)
    ret = 0;
  if (w->prev)
    w->prev->next = w->next;
  else
    s->free_waiters_head = w->next;
  if (w->next)
    w->next->prev = w->prev;
  else
    s->free_waiters_tail = w->prev;
  return ret;
}

/* A producer of a refused device, or under DROP of a paused one, is turned
 * away (ret): the sender thread keeps READing for a while
 * (sbr__sender_pause_waiting_locked) so a cleared bit is seen. */
static int turned_away_locked(struct sbr_sender *s, int ret)
{
  bool polling = sbr__sender_pause_waiting_locked(s);
  s->refused_try_ns = sbr__now_ns();
  if (!polling)
    pthread_cond_signal(&s->work_cond);
  return ret;
}

/* Waits for n free blocks for device per the backpressure policy: free
 * ones, device not paused, within its share.  0, -EAGAIN (none in time:
 * the caller counts a drop), -EADDRINUSE (the receiver refuses the
 * device, at once), -EINTR (sbr_sender_wakeup, or the device interrupted:
 * then also at once, rather than wait) or -ENOTCONN. */
static int wait_free_locked(struct sbr_sender *s, uint32_t n, uint8_t device)
{
  if (n > s->n_blocks)
    return -EMSGSIZE;
  if (!s->connected || s->stopping)
    return -ENOTCONN;
  if (sbr__sender_dev_refused_locked(s, device))
    return turned_away_locked(s, -EADDRINUSE);
  if (may_take_locked(s, device, n))
    return 0; /* the usual case: no waiter to set up */
  if (s->cfg.backpressure == SBR_BACKPRESSURE_DROP)
    return sbr__sender_dev_paused_locked(s, device)
               ? turned_away_locked(s, -EAGAIN)
               : -EAGAIN;
  /* Interrupted before it would wait: the wakeup that came with the
   * interrupt found nobody waiting, and this call must not sleep through
   * it (a sink's unlock just before its render got here). */
  if (sbr__sender_dev_interrupted_locked(s, device))
    return -EINTR;
  struct timespec deadline;
  if (s->cfg.wait_timeout_ms >= 0)
    deadline_after_ms(&deadline, s->cfg.wait_timeout_ms);
  uint64_t wakeups = s->wakeups;
  struct sbr__free_waiter w = {.need = n, .device = device};
  init_cond(&w.cond);
  int ret = 0;
  while (s->connected && !s->stopping && !may_take_locked(s, device, n)) {
    if (s->wakeups != wakeups ||
        sbr__sender_dev_interrupted_locked(s, device)) {
      ret = -EINTR;
      break;
    }
    if (sbr__sender_dev_refused_locked(s, device)) {
      ret = turned_away_locked(s, -EADDRINUSE);
      break;
    }
    /* Waiting for a resume: the sender thread must keep READing the
     * bitmap even with nothing to send (it looks at the waiters). */
    if (sbr__sender_dev_paused_locked(s, device))
      pthread_cond_signal(&s->work_cond);
    if (sleep_free_waiter_locked(
            s, &w, s->cfg.wait_timeout_ms >= 0 ? &deadline : NULL) ==
        ETIMEDOUT) {
      if (!may_take_locked(s, device, n))
        ret = -EAGAIN;
      break;
    }
  }
  if (ret == 0 && (!s->connected || s->stopping))
    ret = -ENOTCONN;
  /* Our device no longer competes (or was chosen for blocks it won't
   * take): others may go on. */
  if (ret != 0)
    sbr__sender_wake_free_waiters_locked(s);
  pthread_cond_destroy(&w.cond);
  return ret;
}

static struct sbr_send_block *pop_free_locked(struct sbr_sender *s,
                                              uint8_t device)
{
  struct sbr_send_block *b = s->free_list;
  s->free_list = b->next;
  s->n_free--;
  b->next = NULL;
  b->state = SBR__SEND_FILLING;
  b->frame_blocks = 0;
  b->owner = device;
  s->dev_held[device]++;
  return b;
}

static void count_backpressure_drop_locked(struct sbr_sender *s, uint8_t device)
{
  s->dev_stats[device].drops++;
  s->stats.drops++;
  if (sbr__sender_dev_paused_locked(s, device))
    s->dev_stats[device].paused_drops++;
}

/* -EAGAIN and -EADDRINUSE from wait_free_locked are drops for device. */
static void count_wait_drop_locked(struct sbr_sender *s, uint8_t device,
                                   int ret)
{
  if (ret == -EAGAIN) {
    count_backpressure_drop_locked(s, device);
  } else if (ret == -EADDRINUSE) {
    s->dev_stats[device].drops++;
    s->stats.drops++;
    s->dev_stats[device].refused_drops++;
  }
}

int sbr_sender_acquire(sbr_sender *s, uint8_t device, sbr_send_block **out)
{
  pthread_mutex_lock(&s->lock);
  int ret = wait_free_locked(s, 1, device);
  if (ret == 0) {
    *out = pop_free_locked(s, device);
    sbr__sender_wake_free_waiters_locked(s); /* the next device's turn */
    sbr__direct_reserve_locked(s, *out);
  } else {
    count_wait_drop_locked(s, device, ret);
  }
  pthread_mutex_unlock(&s->lock);
  return ret;
}

void *sbr_send_block_payload(sbr_send_block *b, size_t *capacity)
{
  if (capacity)
    *capacity = b->capacity;
  /* Without s->lock: a kept block's owner may map it on one thread while
   * another submits it, which moves a directly placed payload into the
   * block's own memory (both hold the frame then).  The stores that
   * clear direct_mem are atomic too. */
  uint8_t *direct = __atomic_load_n(&b->direct_mem, __ATOMIC_ACQUIRE);
  return (direct ? direct : b->mem) + SBR__HEADER_SIZE;
}

/* Blocks were queued: the sender thread posts them now, whether it sleeps
 * idle (work_cond) or on a completion.  Without the kick a frame queued
 * while the previous one was in flight waited for that completion (or
 * the sleep's timeout) before it was even posted: on shm a whole frame's
 * copy plus two wake-ups, during which the NIC thread idled (#11). */
void sbr__sender_wake_locked(struct sbr_sender *s)
{
  pthread_cond_signal(&s->work_cond);
  if (s->engine_sleeps) {
    s->engine_sleeps = false; /* one kick per sleep is enough */
    s->stats.kicks++;
    s->ops->kick_cq(s->conn);
  }
}

/* A producer just queued n blocks: should it post them itself?  Only when
 * the engine can, they are all that is queued (so it posts nothing of
 * anyone else's), and the sender thread isn't asleep on a completion (it
 * then holds engine_lock; the kick is quicker than waiting for it). */
static bool producer_may_post_locked(const struct sbr_sender *s, uint32_t n)
{
  return s->engine->post_own && !s->knobs.sender_thread_posts &&
         !s->engine_sleeps && s->n_queued == n;
}

/* The producer's side of posting.  Over both back ends the sender thread
 * was woken for every frame only to post it: on an idle sender that is a
 * whole thread wake-up (50-200 us on this 2-core host, p50 to p90, and far
 * more in the VM) between the frame being ready and its WRITE.  So the
 * producer that queued it posts it itself when nobody else is in the
 * engine (engine_lock is free: the sender thread sleeps idle on
 * work_cond): its own blocks only, never blocking beyond the post.  Over
 * shm an idle NIC gives the chain to the producer to copy itself once it
 * dropped engine_lock (transport.h, post_send_here).  The sender thread is
 * still woken to reap the completion, but after the post, off the frame's path.
 * With engine_lock taken (the sender thread is in the engine, or another
 * producer), the blocks wait for whoever holds it, as before: that one
 * sees them queued, and the wake below covers a holder about to sleep.  A
 * failed post leaves the blocks queued and the failure to the sender
 * thread: a producer never tears a connection down. */
static void post_queued(struct sbr_sender *s, uint32_t n)
{
  int posted = 0;
  bool claimed = false;
  struct sbr__conn *conn = NULL;
  if (pthread_mutex_trylock(&s->engine_lock) == 0) {
    conn = s->conn;
    if (conn)
      posted = s->engine->post_own(s, n, &claimed);
    pthread_mutex_unlock(&s->engine_lock);
  }
  /* Outside engine_lock: the sender thread may reap and post meanwhile
   * (behind this chain), and a close waits for the claim. */
  if (claimed)
    s->ops->execute_claimed(conn);
  pthread_mutex_lock(&s->lock);
  if (posted > 0)
    s->stats.producer_posts++;
  if (s->n_queued > 0 || s->n_posted > 0)
    sbr__sender_wake_locked(s);
  pthread_mutex_unlock(&s->lock);
}

void sbr__sender_engine_sleeps(struct sbr_sender *s, bool sleeps)
{
  pthread_mutex_lock(&s->lock);
  s->engine_sleeps = sleeps;
  pthread_mutex_unlock(&s->lock);
}

/* Stamps header + trailer and appends to the queue.  Under s->lock. */
static void enqueue_locked(struct sbr_sender *s, struct sbr_send_block *b,
                           const struct sbr_block_meta *meta,
                           uint32_t payload_len)
{
  struct sbr__header *h = &b->header;
  h->kind = meta->kind;
  h->device = meta->device;
  /* The span flag is the engine's to set, never an application's. */
  h->flags = meta->flags & (uint8_t)~SBR__FLAG_SPAN;
  h->packet = 0; /* given when it is taken for posting (sender-thread.c) */
  h->epoch = s->lane.epoch;
  h->payload_len = payload_len;
  h->pts = meta->pts;
  h->dts = meta->dts;
  h->duration = meta->duration;
  h->capture_time = meta->capture_time;
  h->frame_offset = meta->frame_offset;
  h->frame_size = meta->frame_size;
  /* Encoded, with its sequence number, when it is taken for posting. */
  b->wire_len = (uint32_t)SBR__BLOCK_OVERHEAD + payload_len;
  b->state = SBR__SEND_QUEUED;
  sbr__queue_push(&s->queue, b);
  s->n_queued++;
}

/* Checks and fixes up meta for a block of payload_len: 0 or -EINVAL. */
static int submit_meta(const struct sbr_sender *s,
                       const struct sbr_block_meta *meta, size_t payload_len,
                       struct sbr_block_meta *out)
{
  if (payload_len > sbr__block_capacity(s->block_size) ||
      meta->kind < SBR_KIND_DATA || meta->kind > SBR_KIND_EVENT)
    return -EINVAL;
  struct sbr_block_meta m = *meta;
  if (m.kind == SBR_KIND_DATA && (m.flags & SBR_FLAG_FIRST) &&
      (m.flags & SBR_FLAG_LAST)) {
    m.frame_offset = 0;
    m.frame_size = (uint32_t)payload_len;
  }
  /* What the receiver would reject as a bad fragment is refused here. */
  if (m.kind == SBR_KIND_DATA &&
      ((uint64_t)m.frame_offset + payload_len > m.frame_size ||
       ((m.flags & SBR_FLAG_FIRST) && m.frame_offset != 0) ||
       ((m.flags & SBR_FLAG_LAST) &&
        m.frame_offset + payload_len != m.frame_size)))
    return -EINVAL;
  *out = m;
  return 0;
}

/* Queues b (s->lock held, b checked) and posts it here or wakes the
 * sender thread; releases s->lock.  Not connected: the frame is counted
 * dropped, b settled (free, or DONE when kept), -ENOTCONN. */
static int submit_unlock(struct sbr_sender *s, struct sbr_send_block *b,
                         const struct sbr_block_meta *m, size_t payload_len)
{
  if (!s->connected) {
    sbr__sender_count_drop_locked(
        s, &(struct sbr_send_block){.header = {.kind = m->kind,
                                               .device = m->device,
                                               .flags = m->flags}});
    if (sbr__sender_settle_locked(s, b))
      sbr__sender_wake_free_waiters_locked(s);
    pthread_mutex_unlock(&s->lock);
    return -ENOTCONN;
  }
  enqueue_locked(s, b, m, (uint32_t)payload_len);
  bool post_here = producer_may_post_locked(s, 1);
  if (!post_here)
    sbr__sender_wake_locked(s);
  pthread_mutex_unlock(&s->lock);
  if (post_here)
    post_queued(s, 1);
  return 0;
}

int sbr_sender_submit(sbr_sender *s, sbr_send_block *b,
                      const struct sbr_block_meta *meta, size_t payload_len)
{
  struct sbr_block_meta m;
  if (submit_meta(s, meta, payload_len, &m) < 0 ||
      b->state != SBR__SEND_FILLING)
    return -EINVAL;
  pthread_mutex_lock(&s->lock);
  sbr__direct_submit_locked(s, b, payload_len);
  return submit_unlock(s, b, &m, payload_len);
}

int sbr_sender_submit_keep(sbr_sender *s, sbr_send_block *b,
                           const struct sbr_block_meta *meta,
                           size_t payload_len)
{
  struct sbr_block_meta m;
  if (submit_meta(s, meta, payload_len, &m) < 0)
    return -EINVAL;
  pthread_mutex_lock(&s->lock);
  if (b->state == SBR__SEND_QUEUED || b->state == SBR__SEND_POSTED) {
    /* Its previous WRITE may still read it (sbr_sender_wait_block). */
    pthread_mutex_unlock(&s->lock);
    return -EBUSY;
  }
  if ((b->state != SBR__SEND_FILLING && b->state != SBR__SEND_DONE) ||
      b->release_pending) {
    pthread_mutex_unlock(&s->lock);
    return -EINVAL;
  }
  /* Placed in the lane directly: sent as a copy (sender-direct.c). */
  sbr__direct_keep_locked(s, b, payload_len);
  if (m.device != b->owner) {
    /* Sent for another device than it was taken for (one memory rendered
     * by two sinks): it now counts in that device's share. */
    s->dev_held[b->owner]--;
    s->dev_held[m.device]++;
    b->owner = m.device;
  }
  b->keep = true;
  return submit_unlock(s, b, &m, payload_len);
}

int sbr_sender_wait_block(sbr_sender *s, sbr_send_block *b, int timeout_ms)
{
  struct timespec deadline;
  deadline_after_ms(&deadline, timeout_ms < 0 ? 0 : timeout_ms);
  int ret = 0;
  pthread_mutex_lock(&s->lock);
  /* A completion or a lost connection settles it, and broadcasts. */
  while (b->state == SBR__SEND_QUEUED || b->state == SBR__SEND_POSTED) {
    if (timeout_ms < 0) {
      pthread_cond_wait(&s->idle_cond, &s->lock);
    } else if (pthread_cond_timedwait(&s->idle_cond, &s->lock, &deadline) ==
               ETIMEDOUT) {
      if (b->state == SBR__SEND_QUEUED || b->state == SBR__SEND_POSTED)
        ret = -ETIMEDOUT;
      break;
    }
  }
  pthread_mutex_unlock(&s->lock);
  return ret;
}

void sbr_sender_release(sbr_sender *s, sbr_send_block *b)
{
  pthread_mutex_lock(&s->lock);
  switch (b->state) {
  case SBR__SEND_DONE:
    push_free_locked(s, b);
    sbr__sender_wake_free_waiters_locked(s);
    break;
  case SBR__SEND_QUEUED:
  case SBR__SEND_POSTED:
    if (b->keep)
      b->release_pending = true; /* free at its completion */
    break;
  case SBR__SEND_FILLING:
    /* Never submitted: as sbr_sender_abandon. */
    sbr__direct_detach_locked(s, b, true);
    push_free_locked(s, b);
    sbr__sender_wake_free_waiters_locked(s);
    break;
  case SBR__SEND_FREE:
  default:
    break;
  }
  pthread_mutex_unlock(&s->lock);
}

void sbr_sender_abandon(sbr_sender *s, sbr_send_block *b)
{
  pthread_mutex_lock(&s->lock);
  if (b->state == SBR__SEND_FILLING) {
    sbr__direct_detach_locked(s, b, true);
    push_free_locked(s, b);
    sbr__sender_wake_free_waiters_locked(s);
  }
  pthread_mutex_unlock(&s->lock);
}

int sbr_sender_send(sbr_sender *s, const struct sbr_block_meta *meta,
                    const void *payload, size_t len)
{
  size_t cap = sbr__block_capacity(s->block_size);
  if (len > UINT32_MAX || cap == 0)
    return -EMSGSIZE;
  uint32_t n = len == 0 ? 1 : (uint32_t)((len + cap - 1) / cap);
  if (n > 1 && meta->kind != SBR_KIND_DATA)
    return -EMSGSIZE; /* caps strings, events and EOS fit one block */
  if (meta->kind == SBR_KIND_EVENT) {
    pthread_mutex_lock(&s->lock);
    bool takes = s->lane.features & SBR__FEATURE_EVENTS;
    bool connected = s->connected;
    pthread_mutex_unlock(&s->lock);
    if (connected && !takes)
      return -ENOTSUP; /* an older receiver would reject the block */
  }
  if (n > s->n_blocks)
    return -EMSGSIZE; /* all fragments are taken at once */

  /* n is at most the send block count, which a user may set large. */
  struct sbr_send_block *frag_small[16];
  struct sbr_send_block **frag =
      n <= 16 ? frag_small : malloc(n * sizeof *frag);
  if (!frag)
    return -ENOMEM;

  pthread_mutex_lock(&s->lock);
  int ret = wait_free_locked(s, n, meta->device);
  if (ret < 0) {
    count_wait_drop_locked(s, meta->device, ret);
    pthread_mutex_unlock(&s->lock);
    goto out;
  }
  for (uint32_t i = 0; i < n; i++)
    frag[i] = pop_free_locked(s, meta->device);
  sbr__sender_wake_free_waiters_locked(s); /* the next device's turn */
  pthread_mutex_unlock(&s->lock);

  /* Copy outside the lock: other producers keep filling meanwhile. */
  const uint8_t *src = payload;
  for (uint32_t i = 0; i < n; i++) {
    size_t off = (size_t)i * cap;
    size_t chunk = len - off < cap ? len - off : cap;
    if (chunk)
      memcpy(frag[i]->mem + SBR__HEADER_SIZE, src + off, chunk);
  }

  pthread_mutex_lock(&s->lock);
  if (!s->connected) {
    for (uint32_t i = 0; i < n; i++)
      push_free_locked(s, frag[i]);
    sbr__sender_wake_free_waiters_locked(s);
    count_backpressure_drop_locked(s, meta->device);
    pthread_mutex_unlock(&s->lock);
    ret = -ENOTCONN;
    goto out;
  }
  /* All fragments enqueue under one lock hold: consecutive packet numbers,
   * never interleaved with another producer's blocks for the same device. */
  for (uint32_t i = 0; i < n; i++) {
    struct sbr_block_meta m = *meta;
    size_t off = (size_t)i * cap;
    size_t chunk = len - off < cap ? len - off : cap;
    if (m.kind == SBR_KIND_DATA) {
      m.flags &= (uint8_t) ~(SBR_FLAG_FIRST | SBR_FLAG_LAST);
      if (i == 0)
        m.flags |= SBR_FLAG_FIRST;
      else
        m.flags &= (uint8_t)~SBR_FLAG_DISCONT;
      if (i == n - 1)
        m.flags |= SBR_FLAG_LAST;
      m.frame_offset = (uint32_t)off;
      m.frame_size = (uint32_t)len;
    }
    enqueue_locked(s, frag[i], &m, (uint32_t)chunk);
    frag[i]->frame_blocks = 0;
  }
  /* The engine may post the whole frame as one spanning block. */
  if (n > 1 && meta->kind == SBR_KIND_DATA)
    frag[0]->frame_blocks = n;
  bool post_here = producer_may_post_locked(s, n);
  if (!post_here)
    sbr__sender_wake_locked(s);
  pthread_mutex_unlock(&s->lock);
  if (post_here)
    post_queued(s, n);
out:
  if (frag != frag_small)
    free(frag);
  return ret;
}

int sbr_sender_flush(sbr_sender *s, int timeout_ms)
{
  struct timespec deadline;
  deadline_after_ms(&deadline, timeout_ms < 0 ? 0 : timeout_ms);
  int ret = 0;
  pthread_mutex_lock(&s->lock);
  while (s->connected && (s->n_queued > 0 || s->n_posted > 0)) {
    if (timeout_ms < 0) {
      pthread_cond_wait(&s->idle_cond, &s->lock);
    } else if (pthread_cond_timedwait(&s->idle_cond, &s->lock, &deadline) ==
               ETIMEDOUT) {
      ret = -ETIMEDOUT;
      break;
    }
  }
  if (ret == 0 && !s->connected)
    ret = -ENOTCONN;
  pthread_mutex_unlock(&s->lock);
  return ret;
}

static bool in_block_mem(const sbr_sender *s, const void *ptr)
{
  const uint8_t *p = ptr;
  return s->block_mem && p >= s->block_mem &&
         p < s->block_mem + (size_t)s->n_blocks * s->block_size;
}

bool sbr__sender_owns(const sbr_sender *s, const void *ptr)
{
  if (in_block_mem(s, ptr))
    return true;
  /* A payload placed in the lane (sender-direct.c).  The lock is the
   * sender's own state, not the caller's: const is the API's promise that
   * nothing observable changes. */
  struct sbr_sender *w = (struct sbr_sender *)s;
  pthread_mutex_lock(&w->lock);
  bool direct = sbr__direct_block_at_locked(s, ptr) != NULL;
  pthread_mutex_unlock(&w->lock);
  return direct;
}

sbr_send_block *sbr__sender_block_from_payload(sbr_sender *s, void *ptr)
{
  if (!in_block_mem(s, ptr)) {
    pthread_mutex_lock(&s->lock);
    struct sbr_send_block *b = sbr__direct_block_at_locked(s, ptr);
    pthread_mutex_unlock(&s->lock);
    return b;
  }
  size_t off = (size_t)((uint8_t *)ptr - s->block_mem);
  if (off % s->block_size != SBR__HEADER_SIZE)
    return NULL;
  return &s->blocks[off / s->block_size];
}

/* ------------------------------------------------------------- stats */

int sbr_sender_get_stats_sized(sbr_sender *s, struct sbr_sender_stats *out,
                               size_t size)
{
  pthread_mutex_lock(&s->lock);
  struct sbr_sender_stats st = s->stats;
  pthread_mutex_unlock(&s->lock);
  sbr__sized_write(out, size, &st, sizeof st);
  return 0;
}

int sbr_sender_get_device_stats_sized(sbr_sender *s, uint8_t device,
                                      struct sbr_device_stats *out, size_t size)
{
  pthread_mutex_lock(&s->lock);
  struct sbr_device_stats st = s->dev_stats[device];
  st.refused = sbr__sender_dev_refused_locked(s, device);
  st.paused = sbr__sender_dev_paused_locked(s, device);
  if (st.paused)
    st.paused_ns += sbr__now_ns() - s->paused_since_ns[device];
  pthread_mutex_unlock(&s->lock);
  sbr__sized_write(out, size, &st, sizeof st);
  return 0;
}
