/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sender-status-byte.c - the status-byte posting engine (DESIGN §1).
 *
 * For each queued block: pick a receive block whose cached status is 0
 * (round robin, skipping 1 = not consumed yet and 2 = held), post ONE chain
 *
 *     WRITE  header+payload+trailer -> blocks_addr + i * block_size  unsignaled
 *     WRITE  inline byte 1          -> status_addr + i               signaled
 *
 * and set the cached status to 1 at post time.  RC executes the chain in
 * order, so the receiver can't see the status byte before the data (rule 1);
 * the status byte is inline, so no source buffer can race (rule 1); the
 * signaled status WRITE's completion covers the data WRITE before it, so the
 * send block is reused only after it (rule 6).
 *
 * When the cache has no 0, one RDMA READ fetches the receiver's whole status
 * array (the paper's sync-when-empty).  With read_ahead = k > 0 the READ is
 * issued as soon as k or fewer cached blocks are free, and writes go on
 * while it is in flight (the CoNEXT '24 observation: a READ round trip
 * hurts more than writes as RTT grows, so hide it).  The READ lands in its
 * own buffer; when it completes, the result replaces the cache except for
 * blocks written after the READ was posted: RC executes the READ after the
 * writes posted before it but says nothing of later ones, so those stay 1.
 * A READ that finds no free block is repeated only after a back-off, so a
 * stalled receiver isn't hammered.  After (re)connect the cache starts
 * all-busy, so the first post is preceded by a READ (rule 7).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "sender-internal.h"

#define READ_WR_ID UINT64_MAX
#define POLL_BATCH 32

struct status_byte_state {
  uint8_t *cache;           /* cached receiver status array */
  uint32_t cache_free;      /* zeros in cache */
  uint8_t *read_buf;        /* status READ target, block_count bytes */
  struct sbr__mr *read_mr;  /* its registration */
  bool *written_since_read; /* posted after the READ in flight was */
  uint32_t cursor;          /* next receive block to try */
  bool read_in_flight;      /* a status READ is posted */
  uint64_t read_posted_ns;  /* for sync latency */
  uint64_t next_read_ns;    /* earliest next READ after a fruitless one */
  uint32_t retry_us;        /* current back-off between fruitless READs */
};

static const uint8_t status_data = SBR__STATUS_DATA;

static void free_state(struct sbr_sender *s, struct status_byte_state *st)
{
  if (st->read_mr)
    s->ops->dereg_mr(st->read_mr);
  free(st->read_buf);
  free(st->written_since_read);
  free(st->cache);
  free(st);
}

static int sb_start(struct sbr_sender *s)
{
  uint32_t n = s->lane.block_count;
  struct status_byte_state *st = calloc(1, sizeof *st);
  if (!st)
    return -ENOMEM;
  st->cache = malloc(n);
  st->read_buf = malloc(n);
  st->written_since_read = calloc(n, sizeof *st->written_since_read);
  if (!st->cache || !st->read_buf || !st->written_since_read) {
    free_state(s, st);
    return -ENOMEM;
  }
  /* Rule 7: nothing is known about the lane until a READ says so. */
  memset(st->cache, SBR__STATUS_DATA, n);
  st->cache_free = 0;
  int ret = s->ops->reg_mr(s->conn, st->read_buf, n, SBR__ACCESS_LOCAL_WRITE,
                           &st->read_mr);
  if (ret < 0) {
    free_state(s, st);
    return ret;
  }
  st->retry_us = s->cfg.backoff.min_sleep_us;
  s->engine_state = st;
  return 0;
}

static void sb_stop(struct sbr_sender *s)
{
  struct status_byte_state *st = s->engine_state;
  if (!st)
    return;
  free_state(s, st);
  s->engine_state = NULL;
}

/* A free receive block at or after the cursor (round robin), or -1. */
static int find_free(const struct sbr_sender *s,
                     const struct status_byte_state *st)
{
  uint32_t n = s->lane.block_count;
  for (uint32_t k = 0; k < n; k++) {
    uint32_t i = (st->cursor + k) % n;
    if (st->cache[i] == SBR__STATUS_EMPTY)
      return (int)i;
  }
  return -1;
}

static int post_status_read(struct sbr_sender *s, struct status_byte_state *st)
{
  struct sbr__wr wr = {
      .wr_id = READ_WR_ID,
      .opcode = SBR__OP_READ,
      .local_addr = st->read_buf,
      .length = s->lane.block_count,
      .lkey = st->read_mr->lkey,
      .remote_addr = s->lane.status_addr,
      .rkey = s->lane.status_rkey,
      .signaled = true,
  };
  int ret = s->ops->post_send(s->conn, &wr, 1);
  if (ret < 0)
    return ret;
  st->read_in_flight = true;
  st->read_posted_ns = sbr__now_ns();
  memset(st->written_since_read, 0,
         s->lane.block_count * sizeof *st->written_since_read);
  pthread_mutex_lock(&s->lock);
  s->stats.wr_posted++;
  pthread_mutex_unlock(&s->lock);
  return 0;
}

static void read_completed(struct sbr_sender *s, struct status_byte_state *st)
{
  uint64_t now = sbr__now_ns();
  uint64_t took = now - st->read_posted_ns;
  st->read_in_flight = false;
  /* What the sync found: held (2) and unconsumed (1) blocks are skipped
   * until the next one. */
  uint32_t held = 0, busy = 0;
  st->cache_free = 0;
  for (uint32_t i = 0; i < s->lane.block_count; i++) {
    if (!st->written_since_read[i])
      st->cache[i] = st->read_buf[i];
    held += st->cache[i] == SBR__STATUS_HELD;
    busy += st->cache[i] == SBR__STATUS_DATA;
    st->cache_free += st->cache[i] == SBR__STATUS_EMPTY;
  }
  bool any_free = st->cache_free > 0;
  if (any_free) {
    st->retry_us = s->cfg.backoff.min_sleep_us;
    st->next_read_ns = 0;
  } else {
    st->next_read_ns = now + (uint64_t)st->retry_us * 1000u;
    st->retry_us *= 2;
    if (st->retry_us > s->cfg.backoff.max_sleep_us)
      st->retry_us = s->cfg.backoff.max_sleep_us;
  }
  pthread_mutex_lock(&s->lock);
  s->stats.sync_reads++;
  s->stats.sync_read_ns_total += took;
  if (took > s->stats.sync_read_ns_max)
    s->stats.sync_read_ns_max = took;
  if (!any_free)
    s->stats.no_free_waits++;
  s->stats.held_skipped += held;
  s->stats.busy_skipped += busy;
  pthread_mutex_unlock(&s->lock);
}

static int post_block(struct sbr_sender *s, struct status_byte_state *st,
                      struct sbr_send_block *b, uint32_t i)
{
  struct sbr__wr chain[2] = {
      {
          .wr_id = b->index,
          .opcode = SBR__OP_WRITE,
          .local_addr = b->mem,
          .length = b->wire_len,
          .lkey = s->blocks_mr->lkey,
          .remote_addr = sbr__send_block_remote(s, i),
          .rkey = s->lane.blocks_rkey,
      },
      {
          .wr_id = b->index,
          .opcode = SBR__OP_WRITE,
          .local_addr = (void *)&status_data,
          .length = 1,
          .remote_addr = s->lane.status_addr + i,
          .rkey = s->lane.status_rkey,
          .signaled = true,
          .inline_data = true,
      },
  };
  int ret = s->ops->post_send(s->conn, chain, 2);
  if (ret < 0)
    return ret;
  st->cache[i] = SBR__STATUS_DATA; /* at post time, as the design says */
  st->cache_free--;
  if (st->read_in_flight)
    st->written_since_read[i] = true;
  st->cursor = (i + 1) % s->lane.block_count;
  return 0;
}

static int sb_progress(struct sbr_sender *s)
{
  struct status_byte_state *st = s->engine_state;
  struct sbr__wc wc[POLL_BATCH];
  int progress = 0;

  int n = s->ops->poll_cq(s->conn, wc, POLL_BATCH);
  if (n < 0)
    return n;
  for (int k = 0; k < n; k++) {
    if (wc[k].status != SBR__WC_SUCCESS) {
      SBR_WARN("sender: work request %s failed (%s, vendor error 0x%x)",
               wc[k].wr_id == READ_WR_ID ? "status READ" : "block WRITE",
               wc[k].status == SBR__WC_FLUSH ? "flushed" : "error",
               wc[k].vendor_err);
      return -EIO;
    }
    if (wc[k].wr_id == READ_WR_ID)
      read_completed(s, st);
    else
      sbr__sender_block_done(s, (uint32_t)wc[k].wr_id);
    progress++;
  }
  struct sbr_send_block *b;
  bool waiting = false; /* a block is queued and no free one is known */
  int posted = 0;
  while ((b = sbr__sender_take_queued(s)) != NULL) {
    int i = find_free(s, st);
    if (i < 0) {
      sbr__sender_requeue_front(s, b);
      waiting = true;
      break;
    }
    sbr__sender_count_post(s, b, 2);
    int ret = post_block(s, st, b, (uint32_t)i);
    if (ret < 0) {
      sbr__sender_requeue_front(s, b);
      return ret;
    }
    posted++;
  }
  progress += posted;
  /* Sync when a block waits for a free one, or early when read-ahead asks
   * for it while blocks are flowing. */
  bool want = waiting || (posted > 0 && st->cache_free <= s->cfg.read_ahead);
  if (want && !st->read_in_flight && sbr__now_ns() >= st->next_read_ns) {
    int ret = post_status_read(s, st);
    if (ret < 0)
      return ret;
    progress++;
  }
  return progress;
}

const struct sbr__sender_engine sbr__sender_status_byte = {
    .name = "status-byte",
    .start = sb_start,
    .stop = sb_stop,
    .progress = sb_progress,
};
