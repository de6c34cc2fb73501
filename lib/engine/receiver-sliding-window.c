/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * receiver-sliding-window.c - the receiving half of the baseline from the
 * paper: the sender WRITEs WITH IMMEDIATE into slot seq mod N; the receiver
 * keeps N receives posted, learns of each block from its completion,
 * processes in order and returns one ACK per slot by SEND, strictly in slot
 * order, reposting the receive first.  A held block therefore stops every
 * ACK behind it: that is the behaviour being compared, so it is kept.
 */
#include <errno.h>
#include <stdlib.h>

#include "wire/byteorder.h"
#include "util/log.h"
#include "engine/receiver-internal.h"

#define POLL_BATCH 32
#define ACK_SIZE 8

struct sw_state {
  uint32_t head;         /* next slot to acknowledge */
  bool *released;        /* slot done by the application, ACK not yet sent */
  bool *arrived;         /* completion seen, block not yet taken in */
  uint8_t ack[ACK_SIZE]; /* inline source of the ACK being posted */
};

static int sw_start(struct sbr__lane *lane)
{
  struct sw_state *st = calloc(1, sizeof *st);
  if (!st)
    return -ENOMEM;
  st->released = calloc(lane->desc.block_count, sizeof *st->released);
  st->arrived = calloc(lane->desc.block_count, sizeof *st->arrived);
  if (!st->released || !st->arrived)
    goto out_free;
  for (uint32_t i = 0; i < lane->desc.block_count; i++) {
    /* WRITE WITH IMMEDIATE consumes a receive but puts no data in it. */
    int ret = lane->rx->ops->post_recv(lane->conn, i, NULL, 0, NULL);
    if (ret < 0) {
      free(st->arrived);
      free(st->released);
      free(st);
      return ret;
    }
  }
  lane->engine_state = st;
  return 0;

out_free:
  free(st->arrived);
  free(st->released);
  free(st);
  return -ENOMEM;
}

static void sw_stop(struct sbr__lane *lane)
{
  struct sw_state *st = lane->engine_state;
  if (!st)
    return;
  free(st->arrived);
  free(st->released);
  free(st);
  lane->engine_state = NULL;
}

static int sw_scan(struct sbr__lane *lane)
{
  struct sw_state *st = lane->engine_state;
  struct sbr__wc wc[POLL_BATCH];
  pthread_mutex_lock(&lane->lock);
  int n = lane->rx->ops->poll_cq(lane->conn, wc, POLL_BATCH);
  pthread_mutex_unlock(&lane->lock);
  if (n < 0)
    return n;
  /* Arrivals before an error in the same batch are real blocks (a sender
   * that left flushes the receives behind its last writes): take them in
   * and report the error after. */
  int err = 0;
  for (int k = 0; k < n && !err; k++) {
    if (wc[k].status != SBR__WC_SUCCESS) {
      SBR_WARN("receiver: lane %u: %s failed (vendor error 0x%x)", lane->id,
               wc[k].opcode == SBR__OP_RECV ? "receive" : "ACK send",
               wc[k].vendor_err);
      err = -EIO;
    } else if (wc[k].opcode != SBR__OP_RECV) {
      continue; /* an ACK went out */
    } else if (!wc[k].has_imm || wc[k].imm_data >= lane->desc.block_count) {
      SBR_WARN("receiver: lane %u: immediate %u names no slot", lane->id,
               wc[k].imm_data);
      err = -EPROTO;
    } else {
      st->arrived[wc[k].imm_data] = true;
    }
  }
  /* A slot's completion may come before the thread that released the
   * slot's previous block has marked it free: take it in when it is. */
  for (uint32_t i = 0; i < lane->desc.block_count; i++) {
    if (st->arrived[i] && __atomic_load_n(&lane->blocks[i].state,
                                          __ATOMIC_ACQUIRE) == SBR__RECV_FREE) {
      st->arrived[i] = false;
      sbr__lane_arrived(lane, i);
    }
  }
  return err;
}

static void sw_release(struct sbr__lane *lane, uint32_t index)
{
  struct sw_state *st = lane->engine_state;
  const struct sbr__transport_ops *ops = lane->rx->ops;
  uint32_t sent = 0;
  pthread_mutex_lock(&lane->lock);
  st->released[index] = true;
  while (st->released[st->head]) {
    uint32_t slot = st->head;
    st->released[slot] = false;
    /* The receive goes back before the ACK that lets the sender reuse the
     * slot, so a WRITE WITH IMMEDIATE always finds one. */
    int ret = ops->post_recv(lane->conn, slot, NULL, 0, NULL);
    sbr__put_le64(st->ack, slot);
    struct sbr__wr wr = {
        .wr_id = slot,
        .opcode = SBR__OP_SEND,
        .local_addr = st->ack,
        .length = ACK_SIZE,
        .signaled = true,
        .inline_data = true,
    };
    if (ret == 0)
      ret = ops->post_send(lane->conn, &wr, 1);
    if (ret < 0) {
      SBR_WARN("receiver: lane %u: ACK for slot %u not sent: %d", lane->id,
               slot, ret);
      break;
    }
    sent++;
    st->head = (slot + 1) % lane->desc.block_count;
  }
  pthread_mutex_unlock(&lane->lock);
  if (sent) {
    pthread_mutex_lock(&lane->rx->stats_lock);
    lane->rx->stats.acks_sent += sent;
    pthread_mutex_unlock(&lane->rx->stats_lock);
  }
}

static void sw_hold(struct sbr__lane *lane, uint32_t index)
{
  /* Nothing to tell the sender: an unreleased slot is simply not ACKed. */
  (void)lane;
  (void)index;
}

const struct sbr__receiver_engine sbr__receiver_sliding_window = {
    .name = "sliding-window",
    .start = sw_start,
    .stop = sw_stop,
    .scan = sw_scan,
    .release = sw_release,
    .hold = sw_hold,
};
