/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sender-queue.c - per-device FIFOs served round robin (sender-queue.h). */
#include "engine/sender-queue.h"

#include "engine/sender-internal.h"

void sbr__queue_init(struct sbr__send_queue *q, bool fifo)
{
  for (unsigned d = 0; d < SBR_MAX_DEVICES; d++) {
    q->dev[d].head = q->dev[d].tail = NULL;
    q->dev[d].prev = q->dev[d].next = SBR__QUEUE_NONE;
  }
  q->cur = SBR__QUEUE_NONE;
  q->n = 0;
  q->fifo = fifo;
}

static uint16_t fifo_of(const struct sbr__send_queue *q,
                        const struct sbr_send_block *b)
{
  return q->fifo ? 0 : b->header.device;
}

/* Links device d into the ring just before cur: the end of the round. */
static void ring_insert(struct sbr__send_queue *q, uint16_t d)
{
  if (q->cur == SBR__QUEUE_NONE) {
    q->dev[d].prev = q->dev[d].next = d;
    q->cur = d;
    return;
  }
  uint16_t last = q->dev[q->cur].prev;
  q->dev[d].prev = last;
  q->dev[d].next = q->cur;
  q->dev[last].next = d;
  q->dev[q->cur].prev = d;
}

static void ring_remove(struct sbr__send_queue *q, uint16_t d)
{
  uint16_t p = q->dev[d].prev, n = q->dev[d].next;
  if (n == d) {
    q->cur = SBR__QUEUE_NONE;
  } else {
    q->dev[p].next = n;
    q->dev[n].prev = p;
    if (q->cur == d)
      q->cur = n;
  }
  q->dev[d].prev = q->dev[d].next = SBR__QUEUE_NONE;
}

void sbr__queue_push(struct sbr__send_queue *q, struct sbr_send_block *b)
{
  uint16_t d = fifo_of(q, b);
  b->next = NULL;
  if (q->dev[d].tail) {
    q->dev[d].tail->next = b;
  } else {
    q->dev[d].head = b;
    ring_insert(q, d);
  }
  q->dev[d].tail = b;
  q->n++;
}

struct sbr_send_block *sbr__queue_peek(const struct sbr__send_queue *q)
{
  return q->cur == SBR__QUEUE_NONE ? NULL : q->dev[q->cur].head;
}

struct sbr_send_block *sbr__queue_pop(struct sbr__send_queue *q)
{
  if (q->cur == SBR__QUEUE_NONE)
    return NULL;
  uint16_t d = q->cur;
  struct sbr_send_block *b = q->dev[d].head;
  q->dev[d].head = b->next;
  b->next = NULL;
  q->n--;
  if (!q->dev[d].head) {
    q->dev[d].tail = NULL;
    ring_remove(q, d); /* the turn passes to the next device */
  } else {
    q->cur = q->dev[d].next;
  }
  return b;
}

uint32_t sbr__queue_pop_n(struct sbr__send_queue *q,
                          struct sbr_send_block **out, uint32_t n)
{
  if (q->cur == SBR__QUEUE_NONE)
    return 0;
  uint16_t d = q->cur;
  uint32_t got = 0;
  while (got < n && q->dev[d].head) {
    struct sbr_send_block *b = q->dev[d].head;
    q->dev[d].head = b->next;
    b->next = NULL;
    q->n--;
    out[got++] = b;
  }
  if (!q->dev[d].head) {
    q->dev[d].tail = NULL;
    ring_remove(q, d);
  } else {
    q->cur = q->dev[d].next;
  }
  return got;
}

void sbr__queue_push_front(struct sbr__send_queue *q, struct sbr_send_block *b)
{
  uint16_t d = fifo_of(q, b);
  b->next = q->dev[d].head;
  q->dev[d].head = b;
  if (!q->dev[d].tail) {
    q->dev[d].tail = b;
    ring_insert(q, d);
  }
  q->cur = d;
  q->n++;
}
