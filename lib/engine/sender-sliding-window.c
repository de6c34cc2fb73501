/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sender-sliding-window.c - the sending half of the baseline from the
 * paper.  The sender thread WRITEs WITH IMMEDIATE (imm = slot) into slot
 * seq mod N while fewer than N slots are unacknowledged; an ACK thread polls
 * the completion queue, frees slots strictly in order as ACKs arrive (one
 * per slot, reposting a receive for the next ACK) and recycles send blocks
 * on their WRITE completions.  Both threads share the QP, so post and poll
 * go through one lock, as a verbs provider's own locks would serialise them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wire/byteorder.h"
#include "util/log.h"
#include "engine/sender-internal.h"

#define POLL_BATCH 32
#define ACK_SIZE 8

struct sw_state {
  pthread_mutex_t conn_lock; /* post_send / post_recv / poll_cq */
  pthread_t ack_thread;
  atomic_bool stop;           /* ask the ACK thread to leave */
  atomic_int failed;          /* first error the ACK thread saw, or 0 */
  uint32_t slots;             /* N: the receiver's block count */
  uint64_t posted;            /* slots written (sender thread) */
  atomic_uint_fast64_t acked; /* slots acknowledged (ACK thread) */
  uint64_t acked_seen;        /* acked when sw_progress last looked */
  uint8_t *ack_bufs;          /* N receive buffers of ACK_SIZE */
  struct sbr__mr *ack_mr;
};

static int post_ack_recv(struct sbr_sender *s, struct sw_state *st, uint32_t i)
{
  return s->ops->post_recv(s->conn, i, st->ack_bufs + (size_t)i * ACK_SIZE,
                           ACK_SIZE, st->ack_mr);
}

static void *ack_thread(void *arg)
{
  struct sbr_sender *s = arg;
  struct sw_state *st = s->engine_state;
  struct sbr__backoff backoff;
  sbr__backoff_init(&backoff, &s->cfg.backoff);
  bool armed = false; /* the poll just made came after an arm_cq */
  pthread_setname_np(pthread_self(), "sbr-acks");
  sbr__thread_precise_sleeps();
  while (!atomic_load(&st->stop) && !atomic_load(&st->failed)) {
    struct sbr__wc wc[POLL_BATCH];
    uint32_t done[POLL_BATCH];
    uint32_t n_done = 0;
    pthread_mutex_lock(&st->conn_lock);
    int n = s->ops->poll_cq(s->conn, wc, POLL_BATCH);
    pthread_mutex_unlock(&st->conn_lock);
    if (n < 0) {
      atomic_store(&st->failed, n);
      break;
    }
    for (int k = 0; k < n; k++) {
      if (wc[k].status != SBR__WC_SUCCESS) {
        SBR_WARN("sender: %s failed (vendor error 0x%x)",
                 wc[k].opcode == SBR__OP_RECV ? "ACK receive" : "WRITE_IMM",
                 wc[k].vendor_err);
        atomic_store(&st->failed, -EIO);
        break;
      }
      if (wc[k].opcode != SBR__OP_RECV) {
        done[n_done++] = (uint32_t)wc[k].wr_id;
        continue;
      }
      uint32_t buf = (uint32_t)wc[k].wr_id;
      uint64_t slot = sbr__get_le64(st->ack_bufs + (size_t)buf * ACK_SIZE);
      uint64_t expect = atomic_load(&st->acked) % st->slots;
      if (slot != expect) {
        SBR_WARN("sender: ACK for slot %llu, expected %llu",
                 (unsigned long long)slot, (unsigned long long)expect);
        atomic_store(&st->failed, -EPROTO);
        break;
      }
      pthread_mutex_lock(&st->conn_lock);
      int ret = post_ack_recv(s, st, buf);
      pthread_mutex_unlock(&st->conn_lock);
      if (ret < 0) {
        atomic_store(&st->failed, ret);
        break;
      }
      pthread_mutex_lock(&s->lock);
      atomic_fetch_add(&st->acked, 1); /* frees the oldest slot */
      s->stats.acks++;
      if (s->thread_waits) /* in sw_sleep, for a slot */
        pthread_cond_signal(&s->work_cond);
      pthread_mutex_unlock(&s->lock);
    }
    sbr__sender_blocks_done(s, done, n_done);
    /* Past the spin phase, sleep until an ACK or a completion comes
     * rather than for a fixed nap: arm, poll once more (the next turn),
     * and only if that found nothing, wait. */
    if (n > 0) {
      sbr__backoff_reset(&backoff);
      armed = false;
    } else if (armed) {
      s->ops->wait_cq(s->conn, sbr__backoff_next_sleep_us(&backoff));
      armed = false;
    } else if (!sbr__backoff_spin(&backoff)) {
      pthread_mutex_lock(&st->conn_lock);
      s->ops->arm_cq(s->conn);
      pthread_mutex_unlock(&st->conn_lock);
      armed = true;
    }
  }
  /* Failed or asked to stop: a sender thread waiting for a slot must look
   * now (sw_progress reports the failure). */
  pthread_mutex_lock(&s->lock);
  if (s->thread_waits)
    pthread_cond_signal(&s->work_cond);
  pthread_mutex_unlock(&s->lock);
  return NULL;
}

static void free_state(struct sbr_sender *s, struct sw_state *st)
{
  if (st->ack_mr)
    s->ops->dereg_mr(st->ack_mr);
  free(st->ack_bufs);
  pthread_mutex_destroy(&st->conn_lock);
  free(st);
}

static int sw_start(struct sbr_sender *s)
{
  struct sw_state *st = calloc(1, sizeof *st);
  if (!st)
    return -ENOMEM;
  pthread_mutex_init(&st->conn_lock, NULL);
  st->slots = s->lane.block_count;
  st->ack_bufs = calloc(st->slots, ACK_SIZE);
  int ret = -ENOMEM;
  if (!st->ack_bufs)
    goto out_free;
  ret = s->ops->reg_mr(s->conn, st->ack_bufs, (size_t)st->slots * ACK_SIZE,
                       SBR__ACCESS_LOCAL_WRITE, &st->ack_mr);
  if (ret < 0)
    goto out_free;
  for (uint32_t i = 0; i < st->slots; i++) {
    ret = post_ack_recv(s, st, i);
    if (ret < 0)
      goto out_free;
  }
  s->engine_state = st;
  ret = -pthread_create(&st->ack_thread, NULL, ack_thread, s);
  if (ret < 0) {
    s->engine_state = NULL;
    goto out_free;
  }
  return 0;

out_free:
  free_state(s, st);
  return ret;
}

static void sw_stop(struct sbr_sender *s)
{
  struct sw_state *st = s->engine_state;
  if (!st)
    return;
  atomic_store(&st->stop, true);
  pthread_join(st->ack_thread, NULL);
  free_state(s, st);
  s->engine_state = NULL;
}

static int sw_progress(struct sbr_sender *s)
{
  struct sw_state *st = s->engine_state;
  int failed = atomic_load(&st->failed);
  if (failed)
    return failed;
  int progress = 0;
  st->acked_seen = atomic_load(&st->acked);
  while (st->posted - atomic_load(&st->acked) < st->slots) {
    struct sbr_send_block *b;
    if (sbr__sender_take_queued(s, &b, 1, UINT64_MAX, 0) == 0)
      break;
    uint32_t slot = (uint32_t)(st->posted % st->slots);
    struct sbr__wr wr = {
        .wr_id = b->index,
        .opcode = SBR__OP_WRITE_IMM,
        .local_addr = b->mem,
        .length = b->wire_len,
        .lkey = s->blocks_mr->lkey,
        .remote_addr = sbr__send_block_remote(s, slot),
        .rkey = s->lane.blocks_rkey,
        .imm_data = slot,
        .signaled = true,
    };
    /* Counted before posting: once posted, the ACK thread may recycle b. */
    sbr__sender_count_posts(s, &b, 1, 1, 0);
    pthread_mutex_lock(&st->conn_lock);
    int ret = s->ops->post_send(s->conn, &wr, 1);
    pthread_mutex_unlock(&st->conn_lock);
    if (ret < 0) {
      sbr__sender_requeue_front(s, &b, 1);
      return ret; /* the connection fails; the stats don't matter now */
    }
    st->posted++;
    progress++;
  }
  return progress;
}

/* The sender thread waits for a free slot (the ACK thread signals
 * work_cond when it frees one) or a submit (which signals it too). */
static int sw_sleep(struct sbr_sender *s, uint32_t timeout_us)
{
  struct sw_state *st = s->engine_state;
  struct timespec ts;
  sbr__deadline_after_us(&ts, timeout_us);
  pthread_mutex_lock(&s->lock);
  s->thread_waits = true;
  /* Whether there is work is decided here, under s->lock, not from what
   * sw_progress saw: a block submitted since then (its signal found nobody
   * waiting) must not wait for the timeout.  posted is ours alone. */
  while (atomic_load(&st->acked) == st->acked_seen && !s->stopping &&
         !atomic_load(&st->failed) &&
         (s->n_queued == 0 || st->posted - st->acked_seen >= st->slots) &&
         pthread_cond_timedwait(&s->work_cond, &s->lock, &ts) == 0)
    ;
  s->thread_waits = false;
  pthread_mutex_unlock(&s->lock);
  return 0;
}

const struct sbr__sender_engine sbr__sender_sliding_window = {
    .name = "sliding-window",
    .start = sw_start,
    .stop = sw_stop,
    .progress = sw_progress,
    .sleep = sw_sleep,
};
