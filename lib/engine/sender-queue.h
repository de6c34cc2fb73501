/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sender-queue.h - the sender's queue of submitted blocks: one FIFO per
 * device, served round robin, one block per device in turn.
 *
 * Twelve cameras capture at the same instants and their frames are queued
 * one after another; a single FIFO posted one device's whole frame before
 * the next device's first block, so a small frame (or the first fragment
 * of a big one) waited behind every big frame queued before it.  Served
 * round robin, every device with a frame pending gets a block onto the
 * wire per turn.  Each device's own blocks keep their order (its packet
 * numbers are assigned as they are taken, in that order); the lane's
 * sequence numbers too, so the lane is still posted in sequence order
 * (protocol.md, "Delivery order").  A frame posted as one spanning block
 * is taken whole (sbr__queue_pop_n): round robin interleaves frames then,
 * not fragments.
 *
 * No locking of its own: the sender calls it under s->lock.
 */
#ifndef SBR_SENDER_QUEUE_H
#define SBR_SENDER_QUEUE_H

#include <stdbool.h>
#include <stdint.h>

#include "sbr.h"

struct sbr_send_block;

#define SBR__QUEUE_NONE UINT16_MAX

struct sbr__send_queue {
  struct {
    struct sbr_send_block *head, *tail; /* this device's blocks, oldest first */
    uint16_t prev, next;                /* ring of devices with blocks */
  } dev[SBR_MAX_DEVICES];
  uint16_t cur; /* device served next; SBR__QUEUE_NONE when empty */
  uint32_t n;   /* blocks queued, all devices */
  bool fifo;    /* one FIFO for all devices (dev[0]): submit order */
};

/* fifo: post in submit order instead of round robin. */
void sbr__queue_init(struct sbr__send_queue *q, bool fifo);
/* Appends b (linked through b->next) to its device's FIFO; a device that
 * had nothing queued joins the ring last, after every device waiting.  In
 * fifo mode every block goes to one FIFO. */
void sbr__queue_push(struct sbr__send_queue *q, struct sbr_send_block *b);
/* The oldest block of the device whose turn it is (NULL when empty); the
 * turn passes to the next device. */
struct sbr_send_block *sbr__queue_pop(struct sbr__send_queue *q);
/* Pops up to n blocks of the FIFO whose turn it is, in order, then passes
 * the turn as pop does (a spanning frame's fragments go together).
 * Returns how many it popped. */
uint32_t sbr__queue_pop_n(struct sbr__send_queue *q,
                          struct sbr_send_block **out, uint32_t n);
/* The block pop would return, left queued (NULL when empty). */
struct sbr_send_block *sbr__queue_peek(const struct sbr__send_queue *q);
/* Puts b back at the front of its device's FIFO and makes that device the
 * next served (undoing pops: call in the reverse order of the pops). */
void sbr__queue_push_front(struct sbr__send_queue *q, struct sbr_send_block *b);

#endif
