/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * receiver-frames.c - sbr_receiver_next_frame: a device's fragments,
 * delivered in packet order by sbr_receiver_next, reassembled into whole
 * frames, zero copy while the lane has blocks to spare and into one heap
 * buffer when holding them would leave the sender none.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/log.h"
#include "engine/receiver-internal.h"

static void count_frame_drop(struct sbr_receiver *r, uint8_t device)
{
  pthread_mutex_lock(&r->stats_lock);
  r->dev_stats[device].drops++;
  pthread_mutex_unlock(&r->stats_lock);
}

static void release_frame_blocks(struct sbr_frame *f)
{
  for (uint32_t i = 0; i < f->n_blocks; i++)
    sbr_block_release(f->blocks[i]);
  f->n_blocks = 0;
  free(f->copy);
  f->copy = NULL;
}

void sbr__lane_drop_partial(struct sbr__lane *lane, struct sbr__device_track *t)
{
  if (!t->partial_active)
    return;
  t->partial_active = false;
  lane->rx->pace.assembling--;
  count_frame_drop(lane->rx, t->partial.info.device);
  release_frame_blocks(&t->partial);
}

static void frame_from_block(struct sbr_frame *f, struct sbr_block *b)
{
  memset(f, 0, sizeof *f);
  f->info = b->info;
  f->size = b->info.payload_len;
  f->n_blocks = 1;
  f->blocks[0] = b;
}

/* Whether frame p, being assembled zero-copy, must switch to a copy: the
 * blocks the application and partial frames hold (this fragment included)
 * would leave the sender no block to write the rest of the frame into. */
static bool must_copy(struct sbr__lane *lane, const struct sbr_frame *p)
{
  return p->n_blocks >= SBR_FRAME_MAX_BLOCKS ||
         atomic_load(&lane->n_out) + 1 >= lane->desc.block_count;
}

/* Moves a zero-copy partial frame into one heap buffer and releases its
 * blocks, so a lane can't run out of blocks while frames assemble. */
static int partial_to_copy(struct sbr__lane *lane, struct sbr_frame *p)
{
  /* frame_size comes from the wire: what it can make us allocate is
   * bounded when the block arrives (max_frame_size); checked again here
   * because a malloc of it must never depend on a check elsewhere. */
  if (p->info.frame_size > lane->rx->cfg.max_frame_size) {
    SBR_WARN("receiver: lane %u device %u: a %u-byte frame is too large to "
             "reassemble",
             lane->id, p->info.device, p->info.frame_size);
    return -EMSGSIZE;
  }
  uint8_t *copy = malloc(p->info.frame_size ? p->info.frame_size : 1);
  if (!copy)
    return -ENOMEM;
  uint32_t off = 0;
  for (uint32_t i = 0; i < p->n_blocks; i++) {
    const struct sbr_block_info *bi = &p->blocks[i]->info;
    memcpy(copy + off, bi->payload, bi->payload_len);
    off += bi->payload_len;
  }
  for (uint32_t i = 0; i < p->n_blocks; i++)
    sbr_block_release(p->blocks[i]);
  p->n_blocks = 0;
  p->copy = copy;
  pthread_mutex_lock(&lane->rx->stats_lock);
  lane->rx->stats.frames_copied++;
  pthread_mutex_unlock(&lane->rx->stats_lock);
  return 0;
}

/* Adds fragment b to partial frame p (zero copy or into the copy). */
static int partial_append(struct sbr__lane *lane, struct sbr_frame *p,
                          struct sbr_block *b)
{
  const struct sbr_block_info *bi = &b->info;
  if (!p->copy && must_copy(lane, p)) {
    int ret = partial_to_copy(lane, p);
    if (ret < 0)
      return ret;
  }
  if (p->copy) {
    memcpy(p->copy + bi->frame_offset, bi->payload, bi->payload_len);
    sbr_block_release(b);
  } else {
    p->blocks[p->n_blocks++] = b;
  }
  p->size += bi->payload_len;
  return 0;
}

int sbr_receiver_next_frame(sbr_receiver *r, int timeout_ms,
                            struct sbr_frame *out)
{
  uint64_t deadline = timeout_ms < 0
                          ? UINT64_MAX
                          : sbr__now_ns() + (uint64_t)timeout_ms * 1000000u;
  for (;;) {
    int left = -1;
    if (timeout_ms >= 0) {
      uint64_t now = sbr__now_ns();
      left = now >= deadline ? 0 : (int)((deadline - now) / 1000000u);
    }
    sbr_block *b;
    int ret = sbr_receiver_next(r, left, &b);
    if (ret < 0)
      return ret;
    struct sbr__lane *lane = b->lane;
    const struct sbr_block_info *bi = &b->info;
    struct sbr__device_track *t = &lane->dev[bi->device];

    bool first = bi->flags & SBR_FLAG_FIRST, last = bi->flags & SBR_FLAG_LAST;
    if (bi->kind != SBR_KIND_DATA || (first && last)) {
      sbr__lane_drop_partial(lane,
                             t); /* an unfinished frame can't continue now */
      frame_from_block(out, b);
      return 0;
    }
    if (first) {
      sbr__lane_drop_partial(lane, t);
      frame_from_block(&t->partial, b);
      t->partial_active = true;
      r->pace.assembling++;
      if (must_copy(lane, &t->partial) &&
          partial_to_copy(lane, &t->partial) < 0)
        sbr__lane_drop_partial(lane, t);
      continue;
    }
    if (!t->partial_active || bi->frame_offset != t->partial.size ||
        bi->frame_size != t->partial.info.frame_size) {
      /* A fragment without its beginning: the frame is lost, counted once
       * (by sbr__lane_drop_partial, or at its last fragment when nothing was
       * kept). */
      bool had_partial = t->partial_active;
      sbr__lane_drop_partial(lane, t);
      if (!had_partial && last)
        count_frame_drop(r, bi->device);
      sbr_block_release(b);
      continue;
    }
    if (partial_append(lane, &t->partial, b) < 0) {
      sbr__lane_drop_partial(lane, t);
      sbr_block_release(b);
      continue;
    }
    if (last) {
      *out = t->partial;
      if (out->copy) {
        out->info.payload = out->copy;
        out->info.payload_len = out->size;
      }
      out->info.flags |= SBR_FLAG_LAST;
      t->partial_active = false;
      r->pace.assembling--;
      memset(&t->partial, 0, sizeof t->partial);
      return 0;
    }
  }
}

void sbr_frame_release(struct sbr_frame *f)
{
  release_frame_blocks(f);
}
